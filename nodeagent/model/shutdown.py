"""The shutdown maintenance: what the agent creates for its own node, and when it lets go.

Pure: objects in, objects and decisions out. The flow that talks to the API server and logind
is `nodeagent.node.shutdown`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from nodeagent.model.bodies import (
    condition_true,
    deleting,
    labels_of,
    mapping,
    metadata_of,
    name_of,
    spec_stage,
)
from nodeagent.model.names import (
    AGENT,
    ANNOTATION_SHUTDOWN_TYPE,
    LABEL_BOOT_ID,
    LABEL_MANAGED_BY,
    LABEL_TRIGGER,
    LABEL_USERSPACE_BOOT,
)
from nodeagent.model.names import NODE_LABEL as LABEL_NODE

TRIGGER_SHUTDOWN = "shutdown"
"""A shutdown under way: logind announced it, the agent holds it while the node drains."""
TRIGGER_REBOOT = "reboot"
"""A reboot asked for (`nodeagent reboot`, a reboot-required sentinel): the node drains first,
in its turn, and the agent reboots it once drained."""
TRIGGERS = (TRIGGER_SHUTDOWN, TRIGGER_REBOOT)

KERNEL_BOOT_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
"""/proc/sys/kernel/random/boot_id as the kernel writes it, which is what the kubelet reports
in status.nodeInfo.bootID: the only form label `nodeagent.io/boot-id` may take."""
USERSPACE_BOOT = re.compile(r"[0-9a-f]{1,16}")
"""PID 1's start time in clock ticks since the kernel booted, in hex (label
`nodeagent.io/userspace-boot`): tells a soft reboot, which keeps the kernel's id."""
_BOOT_ID = re.compile(rf"({KERNEL_BOOT_ID.pattern})(?:-({USERSPACE_BOOT.pattern}))?")


def boot_id(kernel: str, userspace: str | None = None) -> str:
    """A boot as the agent names it: the kernel's id, then `-<userspace>` when PID 1 is the
    system's init. Neither part holds a dash of its own after the kernel id's fixed ones, so
    a maintenance name reads back to one node and one boot alone."""
    return f"{kernel}-{userspace}" if userspace else kernel


def split_boot_id(boot: str) -> tuple[str, str | None] | None:
    """(kernel id, userspace part or None) of a boot id in the pinned form, else None."""
    m = _BOOT_ID.fullmatch(boot)
    return None if m is None else (m.group(1), m.group(2))


def maintenance_name(node: str, boot: str, trigger: str = TRIGGER_SHUTDOWN) -> str:
    """`nodeagent-<trigger>-<node>-<boot id>`: one per node, boot and trigger, so a second one
    of the same boot is a name conflict. The node agents' admission policy
    (packaging/kubernetes/admission-policy.yaml) builds the same name from the labels, each in
    its pinned form, so that no node's agent can take another node's name (`node-1` cannot
    name itself `node-1-a`'s boot). At most 19 + 63 + 1 + 36 + 17 characters: a valid name."""
    return f"nodeagent-{trigger}-{node}-{boot}"


def shutdown_selector(node: str, boot: str | None = None, trigger: str | None = None) -> str:
    """Label selector of the agent's maintenances for `node` (of `trigger`, else of both; and
    of the boot's kernel id: a soft reboot's are told apart by `boot_of`)."""
    which = f"={trigger}" if trigger else f" in ({','.join(TRIGGERS)})"
    sel = f"{LABEL_NODE}={node},{LABEL_TRIGGER}{which},{LABEL_MANAGED_BY}={AGENT}"
    parts = split_boot_id(boot) if boot else None
    return f"{sel},{LABEL_BOOT_ID}={parts[0]}" if parts else sel


def boot_labels(boot: str) -> dict[str, str]:
    """The labels that say which boot a shutdown maintenance is of."""
    parts = split_boot_id(boot)
    if parts is None:
        raise ValueError(f"not a boot id: {boot!r}")
    kernel, userspace = parts
    labels = {LABEL_BOOT_ID: kernel}
    if userspace:
        labels[LABEL_USERSPACE_BOOT] = userspace
    return labels


def shutdown_maintenance(
    node: str,
    boot: str,
    kind: str,
    drain_plan: Sequence[Mapping[str, Any]] = (),
    *,
    trigger: str = TRIGGER_SHUTDOWN,
    reason: str | None = None,
) -> dict[str, Any]:
    """The maintenance the agent makes for its node's shutdown (or, `trigger` reboot, for a
    reboot asked for; `reason` then says by what)."""
    nm: dict[str, Any] = {
        "apiVersion": "nodeagent.io/v1alpha1",
        "kind": "NodeMaintenance",
        "metadata": {
            "name": maintenance_name(node, boot, trigger),
            "labels": {
                LABEL_NODE: node,
                LABEL_TRIGGER: trigger,
                **boot_labels(boot),
                LABEL_MANAGED_BY: AGENT,
            },
            "annotations": {ANNOTATION_SHUTDOWN_TYPE: kind},
        },
        "spec": {
            "nodeSelector": node_selector(node),
            "stage": "Drain",
            "reason": reason or shutdown_reason(node, kind),
        },
    }
    if drain_plan:
        nm["spec"]["drainPlan"] = [dict(e) for e in drain_plan]
    return nm


def node_selector(node: str) -> dict[str, Any]:
    """What a shutdown maintenance selects: its node by name, nothing else."""
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    return {"nodeSelectorTerms": [term]}


def shutdown_node(nm: Mapping[str, Any], trigger: str = TRIGGER_SHUTDOWN) -> str | None:
    """The node whose shutdown maintenance `nm` is (of `trigger`: labelled as one, named after
    its node and boot, and selecting that node alone), or None. The labels are read first and
    once: a decision asks this of every maintenance, most of them no shutdown's."""
    meta = metadata_of(nm)
    labels = mapping(meta, "labels")
    node = labels.get(LABEL_NODE)
    if not isinstance(node, str) or labels.get(LABEL_TRIGGER) != trigger:
        return None
    boot = _boot_in(labels)
    if boot is None or labels.get(LABEL_MANAGED_BY) != AGENT:
        return None
    if meta.get("name") != maintenance_name(node, boot, trigger):
        return None
    return node if mapping(nm, "spec").get("nodeSelector") == node_selector(node) else None


def request_node(nm: Mapping[str, Any]) -> str | None:
    """The node whose reboot `nm` asks for (`shutdown_node` of trigger reboot), or None."""
    return shutdown_node(nm, TRIGGER_REBOOT)


def trigger_of(nm: Mapping[str, Any]) -> str | None:
    value = labels_of(nm).get(LABEL_TRIGGER)
    return value if value in TRIGGERS else None


def is_ours(nm: Mapping[str, Any], node: str) -> bool:
    """Created by nodeagent for the end of a boot of `node`, a shutdown under way or a reboot
    asked for (never touch any other)."""
    labels = labels_of(nm)
    return (
        labels.get(LABEL_NODE) == node
        and labels.get(LABEL_TRIGGER) in TRIGGERS
        and labels.get(LABEL_MANAGED_BY) == AGENT
    )


def boot_of(nm: Mapping[str, Any]) -> str | None:
    """The boot id (`boot_id`) the labels say, each part in its pinned form; else None."""
    return _boot_in(labels_of(nm))


def _boot_in(labels: Mapping[str, Any]) -> str | None:
    kernel, userspace = labels.get(LABEL_BOOT_ID), labels.get(LABEL_USERSPACE_BOOT)
    if not isinstance(kernel, str) or not KERNEL_BOOT_ID.fullmatch(kernel):
        return None
    if userspace is None:
        return kernel
    if not isinstance(userspace, str) or not USERSPACE_BOOT.fullmatch(userspace):
        return None
    return boot_id(kernel, userspace)


def kernel_boot_of(nm: Mapping[str, Any]) -> str | None:
    """The kernel boot id of the shutdown maintenance, as the kubelet reports one."""
    parts = split_boot_id(boot_of(nm) or "")
    return parts[0] if parts else None


def reported_boot(node: Mapping[str, Any]) -> str | None:
    """The boot id the node's kubelet reports (status.nodeInfo.bootID); None when it reports
    none (kwok's nodes, say)."""
    value = mapping(mapping(node, "status"), "nodeInfo").get("bootID")
    return value if isinstance(value, str) and value else None


def is_drained(nm: Mapping[str, Any]) -> bool:
    return condition_true(nm, "Drained")


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
    ours = [
        m
        for m in maintenances
        if is_ours(m, node) and trigger_of(m) == TRIGGER_SHUTDOWN and boot_of(m) == boot_id
    ]
    for m in ours:
        if spec_stage(m) != "Complete" and not deleting(m):
            return "adopt", name_of(m)
    for m in ours:
        if name_of(m) == name:
            return ("wait" if deleting(m) else "delete"), name
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
