"""Whether a pod may run on a node: the scheduler filters the simulated actors need."""

from __future__ import annotations

from typing import Any

from nodeagent_testbed.sim.actors.base import node_ready, terminating
from nodeagent_testbed.sim.actors.predicates import any_tolerates, node_matches_terms
from nodeagent_testbed.sim.store import Obj

UNSCHEDULABLE_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}


def matches_node_affinity(spec: dict[str, Any], node: Obj) -> bool:
    """spec.nodeSelector and the required node affinity (the NodeAffinity filter)."""
    labels = node["metadata"].get("labels") or {}
    if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    return required is None or node_matches_terms(required, node)


def untolerated_taint(
    spec: dict[str, Any], node: Obj, effects: tuple[str, ...] = ("NoSchedule", "NoExecute")
) -> dict[str, Any] | None:
    """The first taint of `node` with one of `effects` the pod does not tolerate."""
    tolerations = spec.get("tolerations") or []
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") in effects and not any_tolerates(tolerations, taint):
            return dict(taint)
    return None


def unfit_reason(spec: dict[str, Any], node: Obj) -> str | None:
    """Why the scheduler would not put a pod with `spec` on `node`, in its wording; None if fit."""
    if terminating(node) or not node_ready(node):
        return "node(s) were not ready"
    if (node.get("spec") or {}).get("unschedulable") and not any_tolerates(
        spec.get("tolerations") or [], UNSCHEDULABLE_TAINT
    ):
        return "node(s) were unschedulable"
    if not matches_node_affinity(spec, node):
        return "node(s) didn't match Pod's node affinity/selector"
    taint = untolerated_taint(spec, node)
    if taint is not None:
        return f"node(s) had untolerated taint {{{taint.get('key')}: {taint.get('value', '')}}}"
    return None
