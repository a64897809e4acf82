"""The cluster-side interceptors' decisions, pure: what to do about one EvictionRequest given
its pod (and, for the DaemonSet interceptor, the maintenances and the node), as a plan the
controllers of :mod:`nodeagent.controllers.interceptors` carry out. No I/O and no clock here: the
controllers read the caches (and the API server where a cache may lag), write, and heartbeat.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from nodeagent.model.bodies import annotations_of, metadata_of, uid_of
from nodeagent.model.drainplan import (
    InvalidPlan,
    PodType,
    classify,
    targets_cover,
)
from nodeagent.model.interceptors.requests import EvictionRequestView
from nodeagent.model.interceptors.settings import AnnotateRule
from nodeagent.model.maintenance import Stage, effective_stage, holds_pods_off, node_drain_targets
from nodeagent.model.names import DAEMONSET_INTERCEPTOR, MAINTENANCE_TAINT, TAINT_TEXT
from nodeagent.model.podstate import pod_terminal, pod_terminating
from nodeagent.model.tolerations import tolerates

__all__ = [
    "WAITING",
    "AnnotatePlan",
    "DaemonSetPlan",
    "annotate_rule",
    "daemonset_turn",
    "draining_maintenance",
    "has_taint",
    "plan_annotate",
    "plan_daemonset",
    "plan_withdraw",
    "taint_patch",
    "untaint_patch",
]

WAITING = "waiting for the pod to go."
"""How the interceptors' progress messages end; `common.completion_message` replaces it."""


# -- annotate and wait --------------------------------------------------------------------------


@dataclass(frozen=True)
class AnnotatePlan:
    """``complete``: the pod is gone, set completionTime (nothing else). Otherwise ``annotate``
    says whether the pod still needs the annotation, and ``message`` is the progress to report
    (heartbeating while the pod goes)."""

    complete: bool = False
    annotate: bool = False
    message: str = ""


def annotate_rule(
    view: EvictionRequestView, rules: Mapping[str, AnnotateRule]
) -> AnnotateRule | None:
    """The configured interceptor whose turn it is and that has not completed, if any."""
    if view.canceled:
        return None
    rule = rules.get(view.active or "")
    if rule is None or view.entry(rule.name).completion_time is not None:
        return None
    return rule


def plan_annotate(rule: AnnotateRule, pod: Mapping[str, Any] | None) -> AnnotatePlan:
    """``pod``: the request's pod (its name and UID), None when it is gone."""
    if pod is None or pod_terminal(pod):
        return AnnotatePlan(complete=True)
    return AnnotatePlan(
        annotate=annotations_of(pod).get(rule.annotation_key) != rule.annotation_value,
        message=(
            f"Annotated the pod with {rule.annotation_key}={rule.annotation_value} so its "
            f"operator moves it; {WAITING}"
        ),
    )


def plan_withdraw(
    view: EvictionRequestView, pod: Mapping[str, Any] | None, rules: Mapping[str, AnnotateRule]
) -> list[AnnotateRule]:
    """A canceled request: the rules whose annotation comes off the pod again, those that had
    their turn (so may have set it), did not finish, and whose value the pod still has.
    ``pod``: the cached pod of the request's name, whatever its UID."""
    if pod is None or uid_of(pod) != view.target_uid:
        return []  # gone (a pod that was annotated is in the cache by now)
    withdraw = []
    for rule in rules.values():
        had_turn = rule.name == view.active or rule.name in view.processed
        if not had_turn or view.entry(rule.name).completion_time is not None:
            continue
        if annotations_of(pod).get(rule.annotation_key) == rule.annotation_value:
            withdraw.append(rule)
    return withdraw


# -- the DaemonSet interceptor ------------------------------------------------------------------


def _is_ours(taint: object) -> bool:
    return (
        isinstance(taint, Mapping)
        and taint.get("key") == MAINTENANCE_TAINT["key"]
        and taint.get("effect") == MAINTENANCE_TAINT["effect"]
    )


def _taints(node: Mapping[str, Any]) -> list[Any]:
    taints = (node.get("spec") or {}).get("taints")
    return list(taints) if isinstance(taints, list) else []


def has_taint(node: Mapping[str, Any]) -> bool:
    return any(_is_ours(t) for t in _taints(node))


def daemonset_turn(view: EvictionRequestView) -> bool:
    """Whether the DaemonSet interceptor is the active interceptor of a live request and has not
    completed."""
    return (
        not view.canceled
        and view.active == DAEMONSET_INTERCEPTOR
        and view.entry(DAEMONSET_INTERCEPTOR).completion_time is None
    )


def draining_maintenance(
    maintenances: Iterable[Mapping[str, Any]], node_name: str, pod: Mapping[str, Any]
) -> Mapping[str, Any] | None:
    """The NodeMaintenance, if any, whose drainTargets for ``node_name`` target ``pod`` now
    (stage Drain, not being deleted). KEP-4212: the DaemonSet interceptor acts only then; an
    EvictionRequest from anyone else (a descheduler, say) is declined."""
    for nm in maintenances:
        if effective_stage(nm) != Stage.DRAIN:
            continue
        try:
            targets = node_drain_targets(nm, node_name)
        except InvalidPlan:
            continue
        if targets_cover(targets, pod):
            return nm
    return None


@dataclass(frozen=True)
class DaemonSetPlan:
    """What to do about the request's pod, in this order:

    - ``complete``: the pod is gone, set completionTime (keeping what was done);
    - ``finish``: set completionTime with ``message`` (the pod is not a DaemonSet's);
    - ``decline``: the same, because no maintenance drains the pod now (the caller may look
      again with maintenances fresher than its cache);
    - ``evict``: taint node ``taint_node`` (when not empty), delete the pod gracefully when
      ``delete``, and report ``message`` (heartbeating while the pod goes)."""

    action: Literal["complete", "finish", "decline", "evict"]
    message: str = ""
    taint_node: str = ""
    delete: bool = False


def plan_daemonset(
    pod: Mapping[str, Any] | None, maintenances: Iterable[Mapping[str, Any]]
) -> DaemonSetPlan:
    """``pod``: the request's pod (its name and UID), None when it is gone."""
    if pod is None or pod_terminal(pod):
        return DaemonSetPlan("complete")
    if classify(pod).pod_type is not PodType.DAEMONSET:
        return DaemonSetPlan(
            "finish", "The pod is not owned by a DaemonSet; nothing for this interceptor to do."
        )
    spec = pod.get("spec") or {}
    node_name = spec.get("nodeName")
    if not isinstance(node_name, str) or not node_name:
        node_name = ""
    if draining_maintenance(maintenances, node_name, pod) is None:
        return DaemonSetPlan(
            "decline",
            f"Declined: no NodeMaintenance drains the DaemonSet pods of node "
            f"{node_name or '(unscheduled)'} now (the pod is in no drainTargets); nothing "
            "was tainted or deleted.",
        )
    message = f"Tainted node {node_name} with {TAINT_TEXT}; " if node_name else ""
    message += f"deleted the pod gracefully; {WAITING}"
    message = message[0].upper() + message[1:]
    tolerations = spec.get("tolerations")
    if isinstance(tolerations, list) and tolerates(tolerations, MAINTENANCE_TAINT):
        message += f" The pod tolerates {TAINT_TEXT}, so its DaemonSet may recreate it on the node."
    return DaemonSetPlan("evict", message, taint_node=node_name, delete=not pod_terminating(pod))


def _taints_patch(node: Mapping[str, Any], taints: list[Any] | None) -> dict[str, Any]:
    return {
        "metadata": {"resourceVersion": metadata_of(node).get("resourceVersion")},
        "spec": {"taints": taints},
    }


def taint_patch(node: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The patch that adds the maintenance taint to the cached ``node`` (guarded by its
    resourceVersion), None when it is not cached or has the taint already."""
    if node is None or has_taint(node):
        return None
    return _taints_patch(node, [*_taints(node), dict(MAINTENANCE_TAINT)])


def untaint_patch(
    node: Mapping[str, Any] | None, node_name: str, maintenances: Iterable[Mapping[str, Any]]
) -> dict[str, Any] | None:
    """The patch that takes the maintenance taint off the cached ``node`` once no maintenance
    holds the node's evicted pods off it (:func:`holds_pods_off`, the static pods' rule too);
    None when there is nothing to take off or the taint stays."""
    if node is None or not has_taint(node):
        return None
    if any(holds_pods_off(nm, node_name, node) for nm in maintenances):
        return None
    return _taints_patch(node, [t for t in _taints(node) if not _is_ours(t)] or None)
