"""A maintenance's new status: observedGeneration, the Valid and Drained conditions,
stageStatuses, nodeStatuses and ``status.summary``; in Drain also the drain status of the other
maintenances of the same resolution (``Actions.neighbours``)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from nodeagent.model.bodies import (
    ConditionStatus,
    Event,
    as_map,
    condition,
    generation,
    items,
    mapping,
    set_condition,
    version_of,
)
from nodeagent.model.drainslots import WAITING_FOR_SLOT
from nodeagent.model.draintargets.results import MaintenanceDrain, Resolution
from nodeagent.model.maintenance import (
    Stage,
    drain_plan_hash,
)
from nodeagent.model.nodemaintenance.actions import StatusUpdate
from nodeagent.model.nodemaintenance.context import Context, MaintenanceState
from nodeagent.model.nodemaintenance.deadline import deadline_seconds, deadline_status
from nodeagent.model.nodemaintenance.requests import RequestReader
from nodeagent.model.nodemaintenance.selection import selects_every_node
from nodeagent.model.nodemaintenance.summary import (
    drain_summary,
    note_ignored_interceptors,
    one_line,
    undrained_node_statuses,
    undrained_summary,
)
from nodeagent.model.shutdown import shutdown_node
from nodeagent.model.shutdown_standing import IGNORED
from nodeagent.model.times import format_time


def drain_status(
    status: dict[str, Any],
    conditions: list[dict[str, Any]],
    drain: MaintenanceDrain,
    plan_length: int,
    now: datetime,
    observed: int | None,
    requests: RequestReader,
    deadline: float | None,
    *,
    shutdown: bool = False,
) -> list[Event]:
    """Write a drain resolution into ``status`` (and its ``conditions``); the events it is
    worth (``shutdown``: of a shutdown under way, whose node waiting for a slot is told)."""
    events: list[Event] = []
    old_index = status.get("drainPlanIndex")
    old_drained = next((c for c in conditions if c.get("type") == "Drained"), None)
    old_messages = {
        mapping(ns, "nodeRef").get("name"): as_map(ns).get("drainMessage")
        for ns in items(status, "nodeStatuses")
    }
    status["nodeStatuses"] = [ns.to_status() for ns in drain.nodes]
    events.extend(
        Event("Warning", "ShutdownIgnored", f"Node {ns.node}: {ns.drain_message}")
        for ns in drain.nodes
        if ns.drain_message.startswith(IGNORED) and old_messages.get(ns.node) != ns.drain_message
    )
    if shutdown:
        events.extend(
            Event("Warning", "ShutdownWaitsForSlot", waits_for_slot(ns.node, ns.drain_message))
            for ns in drain.nodes
            if ns.drain_message.startswith(WAITING_FOR_SLOT)
            and not str(old_messages.get(ns.node) or "").startswith(WAITING_FOR_SLOT)
        )
    status["drainPlanIndex"] = drain.entry_index
    status["summary"] = drain_summary(drain, plan_length, requests)
    entry = f"drain plan entry {drain.entry_index + 1} of {plan_length}: "
    entry += drain.current_entry.describe()
    if old_index != drain.entry_index:
        events.append(Event("Normal", "DrainPlanEntry", entry[0].upper() + entry[1:]))
    events.extend(Event("Warning", "FastForwarded", ff.message) for ff in drain.fast_forwards)
    if drain.drained:
        drained: tuple[ConditionStatus, str, str] = (
            "True",
            "Drained",
            f"All pods of {len(drain.nodes)} nodes are gone",
        )
        if old_drained is None or old_drained.get("status") != "True":
            events.append(Event("Normal", "Drained", drained[2]))
    else:
        left = sum(ns.pods_pending_evacuation + ns.pods_evacuating for ns in drain.nodes)
        busy = sum(1 for ns in drain.nodes if not ns.drained)
        drained = (
            "False",
            "Draining",
            f"{left} pods left on {busy} of {len(drain.nodes)} nodes; {entry}",
        )
    conditions[:] = set_condition(conditions, "Drained", *drained, now, observed)
    events.extend(
        deadline_status(status, conditions, drain, deadline, now, observed, requests.views)
    )
    return events


def waits_for_slot(node: str, message: str) -> str:
    """What a shutdown under way that waits for a drain slot is told: it goes down at its budget
    whatever, so the coordinated path is named."""
    return (
        f"Node {node} is shutting down and waits for a drain slot ({message}): it goes down "
        "when its shutdown budget runs out, drained or not. Reboots asked for with "
        "`nodeagent reboot` or a reboot-required sentinel wait for their turn before going down"
    )


def _copy_status(status: Mapping[str, Any]) -> dict[str, Any]:
    copied = json.loads(json.dumps(status)) if status else {}
    assert isinstance(copied, dict)
    return copied


def neighbour_statuses(
    others: Mapping[str, MaintenanceState],
    resolution: Resolution,
    me: str,
    now: datetime,
    requests: RequestReader,
    default_deadline: float | None,
) -> list[StatusUpdate]:
    """The drain resolution is one computation over all intersecting maintenances; store it
    for each of them at once, so that no maintenance's stored position lags behind the ones
    the others stored (a lagging one would look fast-forwarded, and wait on pods that the
    others' progress targets). Every maintenance in the resolution is valid and in Drain."""
    out: list[StatusUpdate] = []
    for name, drain in sorted(resolution.maintenances.items()):
        o = others.get(name)
        if name == me or o is None:
            continue
        old = mapping(o.obj, "status")
        status = _copy_status(old)
        conditions = [dict(c) for c in items(status, "conditions") if isinstance(c, Mapping)]
        events = drain_status(
            status,
            conditions,
            drain,
            len(o.validity.plan),
            now,
            generation(o.obj),
            requests,
            deadline_seconds(o.obj, default_deadline),
            shutdown=shutdown_node(o.obj) is not None,
        )
        status["conditions"] = conditions
        if status != dict(old):
            rv = version_of(o.obj)
            out.append(StatusUpdate(name, rv, status, tuple(events)))
    return out


def _validity_status(
    ctx: Context, conditions: list[dict[str, Any]], observed: int | None
) -> list[Event]:
    """Set the Valid condition; a warning when the maintenance turns (or stays, with another
    message) invalid."""
    validity = ctx.validity
    old_valid = condition(mapping(ctx.nm, "status"), "Valid")
    conditions[:] = set_condition(
        conditions,
        "Valid",
        "True" if validity.valid else "False",
        validity.reason,
        validity.message,
        ctx.inp.now,
        observed,
    )
    if not validity.valid and (
        old_valid is None
        or old_valid.get("status") != "False"
        or old_valid.get("message") != validity.message
    ):
        return [Event("Warning", validity.reason, validity.message)]
    return []


def _stage_started(ctx: Context, act_stage: Stage, status: dict[str, Any]) -> list[Event]:
    """Record ``act_stage`` in ``status.stageStatuses`` when it starts, and say so."""
    events: list[Event] = []
    now = format_time(ctx.inp.now)
    stage_statuses = [dict(s) for s in items(status, "stageStatuses") if isinstance(s, Mapping)]
    if act_stage.value not in {s.get("name") for s in stage_statuses}:
        stage_statuses.append({"name": act_stage.value, "startTimestamp": now})
        if act_stage != Stage.IDLE:
            why = " (the maintenance is being deleted)" if ctx.deleting else ""
            events.append(Event("Normal", "StageStarted", f"Stage {act_stage.value} started{why}"))
        if act_stage in (Stage.CORDON, Stage.DRAIN) and not ctx.deleting:
            everyone = selects_every_node(ctx.mine.selected, ctx.inp.nodes)
            if everyone is not None:
                events.append(Event("Warning", "SelectsEveryNode", everyone))
    status["stageStatuses"] = stage_statuses
    return events


def maintenance_status(
    ctx: Context, cordon_events: Sequence[Event], my_drain: MaintenanceDrain | None
) -> tuple[dict[str, Any] | None, list[Event]]:
    """The maintenance's new status (None when it does not change) and the events it is
    worth, cordon events included."""
    old_status = mapping(ctx.nm, "status")
    status = _copy_status(old_status)
    observed = generation(ctx.nm)
    if observed is not None:
        status["observedGeneration"] = observed
    conditions = [dict(c) for c in items(status, "conditions") if isinstance(c, Mapping)]
    events = _validity_status(ctx, conditions, observed)
    if ctx.validity.valid and "drainPlanHash" not in status:
        status["drainPlanHash"] = drain_plan_hash(ctx.nm)

    act_stage = ctx.act_stage
    if act_stage is not None:
        events.extend(_stage_started(ctx, act_stage, status))
        events.extend(cordon_events)
        if act_stage == Stage.DRAIN and my_drain is not None:
            plan_length = len(ctx.validity.plan)
            events.extend(
                drain_status(
                    status,
                    conditions,
                    my_drain,
                    plan_length,
                    ctx.inp.now,
                    observed,
                    ctx.requests,
                    deadline_seconds(ctx.nm, ctx.inp.drain_deadline),
                    shutdown=shutdown_node(ctx.nm) is not None,
                )
            )
            note_ignored_interceptors(status["nodeStatuses"], my_drain, ctx.bound.pods)
        elif act_stage in (Stage.IDLE, Stage.CORDON):
            status["nodeStatuses"] = undrained_node_statuses(ctx, act_stage)
            status["summary"] = undrained_summary(status["nodeStatuses"], act_stage)
            conditions[:] = set_condition(
                conditions,
                "Drained",
                "False",
                "DrainNotRequested",
                f"The stage is {act_stage.value}",
                ctx.inp.now,
                observed,
            )
        elif act_stage == Stage.COMPLETE and isinstance(status.get("summary"), dict):
            # The last drain status and the Drained condition stay as they were; nothing holds.
            status["summary"].pop("blockedBy", None)
    if not ctx.validity.valid and act_stage != Stage.COMPLETE:
        summary = as_map(status.get("summary"))
        blocked = f"{ctx.validity.reason}: {ctx.validity.message}"
        status["summary"] = {**summary, "blockedBy": one_line(blocked)}
    status["conditions"] = conditions
    return (status if status != dict(old_status) else None), events
