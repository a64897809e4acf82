"""Which shutdown maintenances count for a drain slot and a final phase.

A node's agent makes its shutdown maintenance and may write nothing the controllers could use to
check it (its Node's status beyond the lifecycle conditions is the kubelet's). So a shutdown
maintenance counts only while what it claims holds against what the agent cannot write:

- its boot is the boot the node's kubelet reports (``status.nodeInfo.bootID``; a Node that
  reports none, as kwok's, cannot be checked and is taken at its word);
- it is within its shutdown's bound: the release deadline it states (annotation
  ``nodeagent.io/final-phase``: the agent lets its node go by then), and never later than
  ``max_shutdown`` seconds after its creation (the server's ``creationTimestamp``), whatever it
  states;
- it is the one live shutdown maintenance of its node that counts: the oldest (creation, then
  name); the others are reported.

A reboot asked for (trigger reboot: ``nodeagent reboot``, a sentinel) holds its node's slot
from its admission until the node is back, so that the next node goes only then; it counts
while its boot is the one the kubelet reports (once the node booted again it is done) and for
``max_shutdown`` at most once drained (its agent reboots the node then), one per node.

One that does not count is ignored, with the reason: it neither holds nor waits for a slot, and
no final phase runs for it. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

from nodeagent.model import final_phase
from nodeagent.model.bodies import (
    condition,
    deleting,
    items,
    mapping,
    metadata_of,
    name_of,
    spec_stage,
)
from nodeagent.model.drainslots import WAITING_FOR_SLOT
from nodeagent.model.shutdown import (
    TRIGGER_REBOOT,
    TRIGGER_SHUTDOWN,
    kernel_boot_of,
    reported_boot,
    request_node,
    shutdown_node,
)
from nodeagent.model.times import format_time, parse_time

__all__ = [
    "DEFAULT_MAX_SHUTDOWN",
    "IGNORED",
    "bound",
    "ignored",
    "next_change",
    "shutdown_waits_for_slot",
]

DEFAULT_MAX_SHUTDOWN = 3600.0
"""``nodeMaintenance.maxShutdownSeconds``: longer than any shutdown budget a node is given."""

IGNORED = "Shutdown maintenance ignored: "
"""How a node's drainMessage starts while its shutdown maintenance does not count."""


def bound(nm: Mapping[str, Any], max_shutdown: float) -> datetime | None:
    """Until when the shutdown maintenance may count (None: no creation time to count from)."""
    created = parse_time(metadata_of(nm).get("creationTimestamp"))
    if created is None:
        return None
    latest = created + timedelta(seconds=max_shutdown)
    try:
        released = final_phase.release_deadline(nm)
    except final_phase.InvalidFinalPhase:
        released = None  # the final phase reports it
    return latest if released is None else min(latest, released)


def ignored(
    maintenances: Iterable[Mapping[str, Any]],
    nodes: Mapping[str, Mapping[str, Any]],
    now: datetime,
    max_shutdown: float,
) -> dict[str, str]:
    """Name -> why, for each shutdown maintenance and reboot request in Drain among
    ``maintenances`` that does not count (the module's docstring); maintenances of nodes
    missing from ``nodes`` are judged on their bound alone."""
    out: dict[str, str] = {}
    live: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for nm in maintenances:
        claim = _claim(nm)
        if claim is None:
            continue
        node, trigger = claim
        why = _why_not(nm, trigger, nodes.get(node), now, max_shutdown)
        if why is not None:
            out[name_of(nm)] = why
        else:
            live.setdefault(claim, []).append(nm)
    for claims in live.values():
        first, *rest = sorted(claims, key=_creation_key)
        for nm in rest:
            out[name_of(nm)] = f"one per node: {name_of(first)} counts"
    return out


def next_change(
    maintenances: Iterable[Mapping[str, Any]], now: datetime, max_shutdown: float
) -> float | None:
    """Seconds until the first counting shutdown maintenance or reboot request among
    ``maintenances`` passes its bound (None: none will)."""
    times = [
        (b - now).total_seconds()
        for nm in maintenances
        if (claim := _claim(nm)) is not None
        and (b := _bound(nm, claim[1], max_shutdown)) is not None
        and b > now
    ]
    return min(times) if times else None


def _claim(nm: Mapping[str, Any]) -> tuple[str, str] | None:
    """(node, trigger) of a live shutdown maintenance or reboot request in Drain."""
    if spec_stage(nm) != "Drain" or deleting(nm):
        return None
    if (node := shutdown_node(nm)) is not None:
        return node, TRIGGER_SHUTDOWN
    if (node := request_node(nm)) is not None:
        return node, TRIGGER_REBOOT
    return None


def _bound(nm: Mapping[str, Any], trigger: str, max_shutdown: float) -> datetime | None:
    """A shutdown's bound (`bound`); a reboot request's: ``max_shutdown`` after it was found
    drained (its agent reboots the node then), none before."""
    if trigger == TRIGGER_SHUTDOWN:
        return bound(nm, max_shutdown)
    drained = condition(mapping(nm, "status"), "Drained")
    if drained is None or drained.get("status") != "True":
        return None
    since = parse_time(drained.get("lastTransitionTime"))
    return None if since is None else since + timedelta(seconds=max_shutdown)


def _why_not(
    nm: Mapping[str, Any],
    trigger: str,
    node_obj: Mapping[str, Any] | None,
    now: datetime,
    max_shutdown: float,
) -> str | None:
    kernel = kernel_boot_of(nm)
    reported = reported_boot(node_obj) if node_obj is not None else None
    if reported is not None and reported != kernel:
        return f"the kubelet reports another boot ({reported})"
    until = _bound(nm, trigger, max_shutdown)
    if trigger == TRIGGER_REBOOT:
        if until is not None and now >= until:
            return f"drained and not rebooted by {format_time(until)}"
        return None
    if until is None or now >= until:
        when = "its creation time is unknown" if until is None else f"since {format_time(until)}"
        return f"past its shutdown's bound ({when})"
    return None


def _creation_key(nm: Mapping[str, Any]) -> tuple[str, str]:
    return (str(metadata_of(nm).get("creationTimestamp") or ""), name_of(nm))


def shutdown_waits_for_slot(nm: Mapping[str, Any]) -> bool:
    """A shutdown under way whose node waits for a drain slot (its status says so)."""
    if _claim(nm) is None or shutdown_node(nm) is None:
        return False
    return any(
        isinstance(ns, Mapping) and str(ns.get("drainMessage") or "").startswith(WAITING_FOR_SLOT)
        for ns in items(mapping(nm, "status"), "nodeStatuses")
    )
