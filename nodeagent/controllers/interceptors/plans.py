"""The cluster-side interceptors' decisions, pure: what to do about one EvictionRequest given
its pod (and, for the DaemonSet interceptor, the maintenances and the node), as a plan the
controllers in `annotate.py` and `daemonset.py` carry out. No I/O and no clock here: the
controllers read the caches (and the API server where a cache may lag), write, and heartbeat.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nodeagent.controllers.evictionrequest.settings import AnnotateRule
from nodeagent.controllers.interceptors.common import WAITING
from nodeagent.model.interceptors import EvictionRequestView, pod_terminal

__all__ = [
    "AnnotatePlan",
    "annotate_rule",
    "plan_annotate",
    "plan_withdraw",
    "pod_annotations",
]


def pod_annotations(pod: Mapping[str, Any]) -> Mapping[str, object]:
    found = (pod.get("metadata") or {}).get("annotations")
    return found if isinstance(found, Mapping) else {}


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
        annotate=pod_annotations(pod).get(rule.annotation_key) != rule.annotation_value,
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
    if pod is None or (pod.get("metadata") or {}).get("uid") != view.target_uid:
        return []  # gone (a pod that was annotated is in the cache by now)
    withdraw = []
    for rule in rules.values():
        had_turn = rule.name == view.active or rule.name in view.processed
        if not had_turn or view.entry(rule.name).completion_time is not None:
            continue
        if pod_annotations(pod).get(rule.annotation_key) == rule.annotation_value:
            withdraw.append(rule)
    return withdraw
