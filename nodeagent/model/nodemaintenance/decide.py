"""The NodeMaintenance decision put together: each step from its own module, in order."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from nodeagent.model.bodies import (
    deleting,
    mapping,
    metadata_of,
    name_of,
)
from nodeagent.model.maintenance import Stage, effective_stage, validate
from nodeagent.model.names import FINALIZER
from nodeagent.model.nodemaintenance.actions import Actions
from nodeagent.model.nodemaintenance.context import read_context
from nodeagent.model.nodemaintenance.cordon import cordon_actions
from nodeagent.model.nodemaintenance.deadline import deadline_requeue
from nodeagent.model.nodemaintenance.evictions import escalation, eviction_actions
from nodeagent.model.nodemaintenance.inputs import Inputs
from nodeagent.model.nodemaintenance.limits import (
    drain_slots,
    gates_wanted,
    held_requests,
    hold_events,
    ignored_shutdowns,
)
from nodeagent.model.nodemaintenance.status import maintenance_status, neighbour_statuses
from nodeagent.model.nodemaintenance.targets import resolve_drain
from nodeagent.model.shutdown import request_node
from nodeagent.model.shutdown_standing import next_change


def _has_finalizer(obj: Mapping[str, Any]) -> bool:
    return FINALIZER in (metadata_of(obj).get("finalizers") or ())


def _earliest(*delays: float | None) -> float | None:
    known = [d for d in delays if d is not None]
    return min(known) if known else None


def _window_requeue(inp: Inputs, nm: Mapping[str, Any], stage: Stage | None) -> float | None:
    """A reboot asked for in Drain is decided again at the next edge of the reboot windows
    (admitted when they open, stopped when they close): no polling."""
    if inp.max_draining is None or inp.windows.always or stage != Stage.DRAIN:
        return None
    if request_node(nm) is None:
        return None
    edge = inp.windows.next_edge(inp.now)
    return None if edge is None else max(0.0, (edge - inp.now).total_seconds())


def decide(inp: Inputs) -> Actions:
    """Decide what to do for ``inp.maintenance``."""
    nm = inp.maintenance
    me = name_of(nm)
    stage = effective_stage(nm)
    is_deleting = deleting(nm)
    validity = validate(nm)

    if is_deleting and not _has_finalizer(nm):
        # Idle (or never handled): nothing was touched, nothing to undo; the API server
        # removes the object once the other finalizers (if any) are gone.
        return Actions(stage=stage, validity=validity)

    ctx = read_context(inp, validity)
    over = ignored_shutdowns(inp, ctx.others)
    held = held_requests(inp, ctx.others, ctx.bound.pods, over) if ctx.acting else {}
    slots = drain_slots(inp, ctx.others, ctx.bound.pods, {**over, **held}) if ctx.acting else None
    cordon, uncordon, cordon_events = cordon_actions(
        ctx, slots, ctx.mine.selected if me in held else frozenset()
    )

    resolution = resolve_drain(ctx.others, ctx.bound.pods, slots, over, held)
    my_drain = resolution.maintenances.get(me) if resolution is not None and ctx.acting else None
    status, events = maintenance_status(ctx, cordon_events, my_drain)
    if status is not None:
        events = [*events, *hold_events(mapping(nm, "status"), status, inp.gates)]
    neighbours = [
        dataclasses.replace(
            u,
            events=(
                *u.events,
                *hold_events(mapping(ctx.others[u.name].obj, "status"), u.status, inp.gates),
            ),
        )
        for u in (
            neighbour_statuses(
                ctx.others, resolution, me, inp.now, ctx.requests, inp.drain_deadline
            )
            if resolution is not None and ctx.acting
            else []
        )
    ]
    evictions = eviction_actions(ctx, my_drain, resolution)
    add_finalizer = (
        ctx.acting
        and not is_deleting
        and stage is not None
        and stage != Stage.IDLE
        and not _has_finalizer(nm)
    )
    return Actions(
        stage=stage,
        validity=validity,
        add_finalizer=add_finalizer,
        cordon=tuple(cordon),
        status=status,
        events=tuple(events),
        neighbours=tuple(neighbours),
        delete_evictions=tuple(evictions.deletes),
        create_evictions=tuple(evictions.creates),
        requester_patches=tuple(evictions.requester_patches),
        uncordon=tuple(uncordon),
        remove_finalizer=is_deleting and _has_finalizer(nm),
        admitted=frozenset(slots.newly) if slots is not None else frozenset(),
        requeue_after=_earliest(
            deadline_requeue(ctx, status, my_drain),
            # an ignored shutdown maintenance frees its slot when its bound passes
            next_change((o.obj for o in ctx.others.values()), inp.now, inp.max_shutdown)
            if inp.max_draining is not None
            else None,
            _window_requeue(inp, nm, stage) if ctx.acting and validity.valid else None,
        ),
        delete_pods=tuple(escalation(ctx, status, my_drain)),
        gates_wanted=ctx.acting and gates_wanted(inp, ctx.others, me, held),
    )
