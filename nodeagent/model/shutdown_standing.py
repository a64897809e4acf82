"""Which shutdown maintenances count for a drain slot and a final phase.

A node's agent makes its shutdown maintenance and may write nothing the controllers could use to
check it (its Node's status beyond the lifecycle conditions is the kubelet's). So a shutdown
maintenance counts only while what it claims holds against what the agent cannot write:

- its boot is the boot the node's kubelet reports (``status.nodeInfo.bootID``; a Node that
  reports none, as kwok's, cannot be checked and is taken at its word);
- it is within its shutdown's bound: the release deadline it states (annotation
  ``nodeagent.io/final-phase``: the agent lets its node go by then), and never later than
  ``max_shutdown`` seconds after the creation (the server's ``creationTimestamp``) of the first
  shutdown maintenance of that node and kernel boot still stored, whatever it states: one made
  again under another userspace boot suffix starts no new bound while an earlier one is kept;
- it is the one live shutdown maintenance of its node that counts: the oldest (creation, then
  name); the others are reported.

A reboot asked for (trigger reboot: ``nodeagent reboot``, a sentinel) holds its node's slot
from its admission until the node is back, so that the next node goes only then; it counts
while its boot is the one the kubelet reports (once the node booted again it is done) and for
``max_shutdown`` at most once drained (its agent reboots the node then; counted from the first
request of that node and kernel boot found drained), one per node.

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
"""``nodeMaintenance.maxShutdown``: longer than any shutdown budget a node is given."""

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
    stored = list(maintenances)
    starts = _starts(stored)
    out: dict[str, str] = {}
    live: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for nm in stored:
        claim = _claim(nm)
        if claim is None:
            continue
        node, trigger = claim
        why = _why_not(nm, trigger, nodes.get(node), now, max_shutdown, starts)
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
    stored = list(maintenances)
    starts = _starts(stored)
    times = [
        (b - now).total_seconds()
        for nm in stored
        if (claim := _claim(nm)) is not None
        and (b := _bound(nm, claim[1], max_shutdown, starts)) is not None
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


_Boot = tuple[str, str, str | None]
"""(node, trigger, kernel boot id): the shutdowns (or reboot requests) of one node's boot."""


def _boot(nm: Mapping[str, Any]) -> _Boot | None:
    """Whose boot's shutdown maintenance or reboot request `nm` is, in any stage."""
    for trigger in (TRIGGER_SHUTDOWN, TRIGGER_REBOOT):
        if (node := shutdown_node(nm, trigger)) is not None:
            return node, trigger, kernel_boot_of(nm)
    return None


def _start(nm: Mapping[str, Any], trigger: str) -> datetime | None:
    """Where the bound counts from: a shutdown's creation; a reboot request's Drained=True."""
    if trigger == TRIGGER_SHUTDOWN:
        return parse_time(metadata_of(nm).get("creationTimestamp"))
    drained = condition(mapping(nm, "status"), "Drained")
    if drained is None or drained.get("status") != "True":
        return None
    return parse_time(drained.get("lastTransitionTime"))


def _starts(maintenances: Iterable[Mapping[str, Any]]) -> dict[_Boot, datetime]:
    """The earliest start of each boot's stored shutdown maintenances (or reboot requests),
    whatever their stage: the agent names a new one after its userspace boot, and may make
    another under a suffix of its choice; it must not get a new bound by it."""
    out: dict[_Boot, datetime] = {}
    for nm in maintenances:
        if (boot := _boot(nm)) is None or (start := _start(nm, boot[1])) is None:
            continue
        out[boot] = min(start, out.get(boot, start))
    return out


def _bound(
    nm: Mapping[str, Any], trigger: str, max_shutdown: float, starts: Mapping[_Boot, datetime]
) -> datetime | None:
    """A shutdown's bound: `bound`, counted from its boot's first shutdown maintenance; a
    reboot request's: ``max_shutdown`` after its boot's first request was found drained (its
    agent reboots the node then), none before."""
    boot = _boot(nm)
    start = starts.get(boot) if boot is not None else None
    if trigger == TRIGGER_SHUTDOWN:
        own = bound(nm, max_shutdown)
        if own is None or start is None:
            return own
        return min(own, start + timedelta(seconds=max_shutdown))
    return None if start is None else start + timedelta(seconds=max_shutdown)


def _why_not(
    nm: Mapping[str, Any],
    trigger: str,
    node_obj: Mapping[str, Any] | None,
    now: datetime,
    max_shutdown: float,
    starts: Mapping[_Boot, datetime],
) -> str | None:
    kernel = kernel_boot_of(nm)
    reported = reported_boot(node_obj) if node_obj is not None else None
    if reported is not None and reported != kernel:
        return f"the kubelet reports another boot ({reported})"
    until = _bound(nm, trigger, max_shutdown, starts)
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
