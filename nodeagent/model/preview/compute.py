""":func:`preview`: the entry at which each pod of the selected nodes would be asked to leave,
decided by the controller's own rules (see the package docstring)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from nodeagent.model.bodies import describe, mapping, name_of, spec_stage
from nodeagent.model.drainplan import DRAIN_SKIP, DrainPlanEntry, targets_cover_class
from nodeagent.model.draintargets.pods import PodInfo
from nodeagent.model.draintargets.tracks import plan_targets
from nodeagent.model.maintenance import selects, validate
from nodeagent.model.names import DRAIN_ANNOTATION
from nodeagent.model.podstate import pod_phase
from nodeagent.model.preview.refusals import Budget, budgets_by_namespace, refusals_of
from nodeagent.model.preview.results import (
    EntryPreview,
    NeverEvicted,
    NodePreview,
    PodPreview,
    Preview,
)

__all__ = ["InvalidMaintenance", "preview"]

_Pods = list[Mapping[str, Any]]
_Targets = Sequence[tuple[DrainPlanEntry, ...]]
_Budgets = Mapping[str, Sequence[Budget]]


class InvalidMaintenance(ValueError):
    """The maintenance's spec is invalid; the message names the object and the field, e.g.
    ``NodeMaintenance kernel: spec.drainPlan[2]: duplicate of spec.drainPlan[0]``."""


def preview(
    nm: Mapping[str, Any],
    nodes: Iterable[Mapping[str, Any]],
    pods: Iterable[Mapping[str, Any]],
    pdbs: Iterable[Mapping[str, Any]] = (),
) -> Preview:
    """The plan ``nm`` would follow on the nodes it selects among ``nodes``, for ``pods`` (those
    bound elsewhere are ignored) under the budgets ``pdbs``. Raises :class:`InvalidMaintenance`
    when the controller would find the spec invalid (``Valid=False``)."""
    plan = _valid_plan(nm)
    node_list = list(nodes)
    selected = sorted({name_of(n) for n in node_list if selects(nm, n)})
    by_node = _pods_by_node(pods, selected)
    targets = [plan_targets(plan, i) for i in range(len(plan))]
    budgets = budgets_by_namespace(pdbs)
    return Preview(
        maintenance=name_of(nm),
        stage=spec_stage(nm),
        plan=plan,
        nodes_seen=len(node_list),
        nodes=tuple(
            _node_preview(node, by_node[node], plan, targets, budgets) for node in selected
        ),
    )


def _valid_plan(nm: Mapping[str, Any]) -> tuple[DrainPlanEntry, ...]:
    """The effective plan, as the controller validates the spec."""
    validity = validate(nm)
    if not validity.valid:
        raise InvalidMaintenance(f"{describe(nm, 'NodeMaintenance')}: {validity.message}")
    return validity.plan


def _pods_by_node(pods: Iterable[Mapping[str, Any]], selected: Sequence[str]) -> dict[str, _Pods]:
    by_node: dict[str, _Pods] = {n: [] for n in selected}
    for pod in pods:
        node = mapping(pod, "spec").get("nodeName")
        if isinstance(node, str) and node in by_node:
            by_node[node].append(pod)
    return by_node


def _node_preview(
    node: str,
    pods: _Pods,
    plan: Sequence[DrainPlanEntry],
    targets: _Targets,
    budgets: _Budgets,
) -> NodePreview:
    per_entry: list[list[PodPreview]] = [[] for _ in plan]
    never: list[NeverEvicted] = []
    for pod in pods:
        info = PodInfo.from_pod(pod)
        shown = _pod_preview(info, budgets)
        index, reason = _first_entry(info, pod, targets)
        if index is None:
            never.append(NeverEvicted(shown, reason))
        else:
            per_entry[index].append(shown)
    return NodePreview(
        name=node,
        entries=tuple(
            EntryPreview(i, entry, tuple(sorted(per_entry[i], key=_pod_order)))
            for i, entry in enumerate(plan)
        ),
        never_evicted=tuple(sorted(never, key=lambda x: _pod_order(x.pod))),
    )


def _pod_preview(info: PodInfo, budgets: _Budgets) -> PodPreview:
    return PodPreview(
        namespace=info.namespace,
        name=info.name,
        priority=info.pod_class.priority,
        pod_type=info.pod_class.pod_type,
        refused_by=refusals_of(info, budgets),
        terminating=info.terminating,
    )


def _first_entry(
    info: PodInfo, pod: Mapping[str, Any], targets: _Targets
) -> tuple[int | None, str]:
    """The index of the first entry whose drainTargets target the pod, or None and why none
    does."""
    reason = _never_reason(info, pod)
    if reason is not None:
        return None, reason
    for i, t in enumerate(targets):
        if targets_cover_class(t, info.pod_class, info.labels):
            return i, ""
    return None, "no entry of the drain plan covers it"


def _never_reason(info: PodInfo, pod: Mapping[str, Any]) -> str | None:
    if info.pod_class.skip:
        return f"{DRAIN_ANNOTATION}: {DRAIN_SKIP}"
    if info.terminal:
        return f"completed ({pod_phase(pod)})"
    return None


def _pod_order(pod: PodPreview) -> tuple[str, str]:
    return (pod.namespace, pod.name)
