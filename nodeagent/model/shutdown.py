"""The shutdown maintenance: what the agent creates for its own node, and when it lets go.

Pure: objects in, objects and decisions out. The flow that talks to the API server and logind
is `nodeagent.node.shutdown`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from nodeagent.model.bodies import condition_true, labels_of, spec_stage
from nodeagent.model.names import (
    AGENT,
    ANNOTATION_SHUTDOWN_TYPE,
    LABEL_BOOT_ID,
    LABEL_MANAGED_BY,
    LABEL_TRIGGER,
)
from nodeagent.model.names import NODE_LABEL as LABEL_NODE

TRIGGER_SHUTDOWN = "shutdown"


def maintenance_name(node: str, boot_id: str) -> str:
    """`nodeagent-shutdown-<node>-<boot id>`: one per node and boot, so a second one of the
    same boot is a name conflict. The node agents' admission policy
    (packaging/kubernetes/admission-policy.yaml) builds the same name from the labels; both
    are label values (at most 63 characters), so it stays a valid name of at most 146."""
    return f"nodeagent-shutdown-{node}-{boot_id}"


def shutdown_selector(node: str, boot_id: str | None = None) -> str:
    """Label selector of the agent's shutdown maintenances for `node` (and boot)."""
    sel = f"{LABEL_NODE}={node},{LABEL_TRIGGER}={TRIGGER_SHUTDOWN},{LABEL_MANAGED_BY}={AGENT}"
    return f"{sel},{LABEL_BOOT_ID}={boot_id}" if boot_id else sel


def shutdown_maintenance(
    node: str,
    boot_id: str,
    kind: str,
    drain_plan: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    nm: dict[str, Any] = {
        "apiVersion": "nodeagent.io/v1alpha1",
        "kind": "NodeMaintenance",
        "metadata": {
            "name": maintenance_name(node, boot_id),
            "labels": {
                LABEL_NODE: node,
                LABEL_TRIGGER: TRIGGER_SHUTDOWN,
                LABEL_BOOT_ID: boot_id,
                LABEL_MANAGED_BY: AGENT,
            },
            "annotations": {ANNOTATION_SHUTDOWN_TYPE: kind},
        },
        "spec": {
            "nodeSelector": node_selector(node),
            "stage": "Drain",
            "reason": shutdown_reason(node, kind),
        },
    }
    if drain_plan:
        nm["spec"]["drainPlan"] = [dict(e) for e in drain_plan]
    return nm


def node_selector(node: str) -> dict[str, Any]:
    """What a shutdown maintenance selects: its node by name, nothing else."""
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    return {"nodeSelectorTerms": [term]}


def shutdown_node(nm: Mapping[str, Any]) -> str | None:
    """The node whose shutdown maintenance `nm` is (labelled as one and selecting that node
    alone), or None."""
    node = ((nm.get("metadata") or {}).get("labels") or {}).get(LABEL_NODE)
    if not isinstance(node, str) or not is_ours(nm, node):
        return None
    return node if (nm.get("spec") or {}).get("nodeSelector") == node_selector(node) else None


def is_ours(nm: Mapping[str, Any], node: str) -> bool:
    """Created by nodeagent as the shutdown maintenance of `node` (never touch any other)."""
    labels = labels_of(nm)
    return (
        labels.get(LABEL_NODE) == node
        and labels.get(LABEL_TRIGGER) == TRIGGER_SHUTDOWN
        and labels.get(LABEL_MANAGED_BY) == AGENT
    )


def boot_of(nm: Mapping[str, Any]) -> str | None:
    labels = labels_of(nm)
    value = labels.get(LABEL_BOOT_ID)
    return value if isinstance(value, str) else None


def is_drained(nm: Mapping[str, Any]) -> bool:
    return condition_true(nm, "Drained")


def shutdown_over(nm: Mapping[str, Any], nodes: Mapping[str, Mapping[str, Any]]) -> bool:
    """`nm` is a shutdown maintenance whose node has booted again since it was made: the
    node's kubelet reports (status.nodeInfo.bootID) another boot than its boot-id label. Node
    agents cannot change that report (the admission policy keeps their Node writes to the
    lifecycle conditions), so what this says holds against them too. Not known (no such
    label, Node or report): not over."""
    node = shutdown_node(nm)
    boot = boot_of(nm)
    if node is None or not boot or node not in nodes:
        return False
    info = (nodes[node].get("status") or {}).get("nodeInfo") or {}
    reported = info.get("bootID") if isinstance(info, Mapping) else None
    return isinstance(reported, str) and reported != "" and reported != boot


Step = Literal["adopt", "create", "delete", "wait"]
"""What the shutdown does next about this boot's maintenance (`next_step`)."""


def next_step(
    maintenances: Sequence[Mapping[str, Any]], node: str, boot_id: str
) -> tuple[Step, str]:
    """The step and the maintenance's name: `adopt` this boot's live shutdown maintenance
    (one an earlier version named otherwise too); `create` it when there is none; `delete` it
    and then `wait` until it is gone when a cancelled shutdown of this boot left it Complete
    (its stage cannot go back, and its name is this boot's only one)."""
    name = maintenance_name(node, boot_id)
    ours = [m for m in maintenances if is_ours(m, node) and boot_of(m) == boot_id]
    for m in ours:
        meta = m.get("metadata") or {}
        if spec_stage(m) != "Complete" and not meta.get("deletionTimestamp"):
            return "adopt", str(meta.get("name"))
    for m in ours:
        meta = m.get("metadata") or {}
        if meta.get("name") == name:
            return ("wait" if meta.get("deletionTimestamp") else "delete"), name
    return "create", name


@dataclass
class ReleaseState:
    """What the release decision looks at; times are monotonic seconds."""

    deadline: float  # the shutdown budget minus the safety margin
    unreachable_bound: float
    unreachable_since: float | None = None
    drained: bool = False


def shutdown_reason(node: str, kind: str) -> str:
    """The maintenance's reason. logind before v255 sends no shutdown type, and during its delay
    nothing else tells (systemd queues the reboot or power-off job only once the delay ends)."""
    if kind == "unknown":
        return (
            f"Shutdown or reboot of {node} requested through systemd-logind "
            "(logind did not say which)"
        )
    return f"Node {kind} requested through systemd-logind on {node}"


def usable_budget(granted: float, margin: float) -> float:
    """How long to hold a shutdown logind grants `granted` seconds: all but the safety margin;
    when the margin would take half or more, all but a fifth, so the maintenance is still
    created and the node cordoned before the lock goes."""
    if granted - margin >= granted / 2:
        return granted - margin
    return granted * 0.8


def release_reason(s: ReleaseState, now: float) -> str | None:
    """Why the lock may go now, or None to keep holding it. Never blocks a shutdown forever:
    the budget and the unreachable bound always end the wait."""
    if s.drained:
        return "the node is drained"
    if now >= s.deadline:
        return "the shutdown budget is nearly spent"
    # the same sum as in next_decision, so waking at that time always decides
    if s.unreachable_since is not None and now >= s.unreachable_since + s.unreachable_bound:
        return "the API server could not be reached"
    return None


def next_decision(s: ReleaseState, now: float) -> float:
    """Seconds until `release_reason` can change without new information."""
    times = [s.deadline]
    if s.unreachable_since is not None:
        times.append(s.unreachable_since + s.unreachable_bound)
    at = min(times)
    wait = max(0.0, at - now)
    while now + wait < at:  # float rounding: waking a hair early would decide nothing
        wait = math.nextafter(wait, math.inf)
    return wait
