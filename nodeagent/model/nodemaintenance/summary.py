"""``status.summary``, what ``kubectl get nm`` shows (printer columns cannot sum over
nodeStatuses), and the drainMessage notes.

``nodes`` (``2/5 drained``; ``5 cordoned`` or ``5 selected`` before Drain), ``podsLeft``, the
current drain plan ``entry`` (``Default<=1000000000 (1 of 3)``) and ``blockedBy``, one line on
what holds the maintenance now: the Valid=False reason, a targeted pod whose eviction the
imperative interceptor saw refused (named with the refusal's cause, without the retry count),
the first undrained node that waits for other nodes or is limited by another maintenance, or
else the first targeted pod that is terminating.
Only podsLeft changes with every pod that leaves (the shell writes such progress at a limited
rate); the other fields change when what they show changes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from nodeagent.model.draintargets.results import MaintenanceDrain
from nodeagent.model.maintenance import (
    Stage,
)
from nodeagent.model.nodemaintenance.context import Context
from nodeagent.model.nodemaintenance.pods import PodsOn
from nodeagent.model.nodemaintenance.requests import RequestReader
from nodeagent.model.shutdown_standing import IGNORED


def note_ignored_interceptors(
    node_statuses: list[dict[str, Any]], drain: MaintenanceDrain, pods_on: PodsOn
) -> None:
    """Say on a node's drainMessage which targeted pod has an interceptor annotation that the
    EvictionRequest controller ignores (it falls back to the defaults): the pod's owner learns
    why its interceptors were skipped where the drain is watched."""
    for ns, out in zip(drain.nodes, node_statuses, strict=True):
        ignored = pods_on(ns.node).ignored_interceptors
        if not ignored:
            continue
        targeted = {ref.uid for ref in ns.targeted_pods}
        bad = [
            f"pod {p.namespace}/{p.name}: {p.interceptors_error}"
            for p in ignored
            if p.uid in targeted
        ]
        if bad:
            more = f" (and {len(bad) - 1} more pods)" if len(bad) > 1 else ""
            out["drainMessage"] += f"; {min(bad)}{more}; the default interceptors are used instead"


_MAX_BLOCKED_BY = 160


def one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= _MAX_BLOCKED_BY else line[: _MAX_BLOCKED_BY - 3] + "..."


def _refused_pod(drain: MaintenanceDrain, requests: RequestReader) -> str | None:
    """The first targeted pod (by namespace and name) whose eviction the imperative interceptor
    reports refused, with the refusal's cause."""
    refused = [r for ns in drain.nodes if (r := requests.on(ns).refused) is not None]
    if not refused:
        return None
    namespace, name, _, cause = min(refused)
    return f"pod {namespace}/{name}: eviction refused by {cause}"


def _terminating_pod(drain: MaintenanceDrain, requests: RequestReader) -> str | None:
    """The first targeted pod (by namespace and name) that is terminating: evicted or deleted,
    its containers still stopping (or a finalizer keeping it)."""
    found = [t for ns in drain.nodes if (t := requests.on(ns).terminating) is not None]
    if not found:
        return None
    namespace, name = min(found)
    return f"pod {namespace}/{name}: terminating"


def _waiting_node(drain: MaintenanceDrain) -> str | None:
    """The first undrained node that waits for other nodes or another maintenance, or whose
    shutdown maintenance is ignored."""
    for ns in drain.nodes:
        if not ns.drained and (
            ns.drain_message.startswith("Waiting")
            or "(limited by " in ns.drain_message
            or ns.drain_message.startswith(IGNORED)
        ):
            return f"node {ns.node}: {ns.drain_message}"
    return None


def drain_summary(
    drain: MaintenanceDrain, plan_length: int, requests: RequestReader
) -> dict[str, Any]:
    """``status.summary`` in Drain (see the module's docstring)."""
    summary: dict[str, Any] = {
        "nodes": f"{sum(1 for ns in drain.nodes if ns.drained)}/{len(drain.nodes)} drained",
        "podsLeft": sum(ns.pods_pending_evacuation + ns.pods_evacuating for ns in drain.nodes),
        "entry": f"{drain.current_entry.describe()} ({drain.entry_index + 1} of {plan_length})",
    }
    if not drain.drained:
        blocked = (
            _refused_pod(drain, requests)
            or _waiting_node(drain)
            or _terminating_pod(drain, requests)
        )
        if blocked is not None:
            summary["blockedBy"] = one_line(blocked)
    return summary


def undrained_node_statuses(ctx: Context, act_stage: Stage) -> list[dict[str, Any]]:
    """The node statuses of Idle and Cordon: no drainTargets, the pods still there."""
    message = "Idle" if act_stage == Stage.IDLE else "Cordoned"
    node_statuses = []
    for node_name in sorted(ctx.mine.selected):
        pods = ctx.bound.pods(node_name)
        node_statuses.append(
            {
                "nodeRef": {"name": node_name},
                "drainTargets": [],
                "drainMessage": message,
                "podsPendingEvacuation": len(pods.present) - pods.leaving,
                "podsEvacuating": pods.leaving,
            }
        )
    return node_statuses


def undrained_summary(
    node_statuses: Sequence[Mapping[str, Any]], act_stage: Stage
) -> dict[str, Any]:
    """``status.summary`` in Idle and Cordon: the selected nodes and the pods on them."""
    done = "cordoned" if act_stage == Stage.CORDON else "selected"
    return {
        "nodes": f"{len(node_statuses)} {done}",
        "podsLeft": sum(
            int(ns["podsPendingEvacuation"]) + int(ns["podsEvacuating"]) for ns in node_statuses
        ),
    }
