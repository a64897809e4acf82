"""Cordon and uncordon.

Ownership of cordons. A node nodeagent cordoned carries the annotation
``nodeagent.io/cordoned-by: <names>`` naming the maintenances (in Cordon or Drain) that hold
it. A node that was already unschedulable without that annotation was cordoned by someone else
and is never uncordoned. A node is uncordoned when the last holder lets go and no other
maintenance in Cordon or Drain selects it; otherwise the hold passes to those maintenances."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from nodeagent.model.bodies import (
    Event,
    mapping,
    version_of,
)
from nodeagent.model.drainslots import Slots
from nodeagent.model.maintenance import cordoned_by
from nodeagent.model.nodemaintenance.actions import NodePatch
from nodeagent.model.nodemaintenance.context import Context
from nodeagent.model.shutdown import shutdown_node


def unschedulable(node: Mapping[str, Any]) -> bool:
    return mapping(node, "spec").get("unschedulable") is True


def _cordon_value(names: Iterable[str]) -> str:
    return ",".join(sorted(set(names)))


def cordons(ctx: Context, waiting: frozenset[str]) -> tuple[list[NodePatch], list[Event]]:
    """Cordon the selected nodes (in Cordon and Drain) but ``waiting`` ones, naming every
    holder on each."""
    cordon: list[NodePatch] = []
    events: list[Event] = []
    for node_name in sorted(ctx.mine.selected - waiting):
        node = ctx.inp.nodes[node_name]
        annotation = cordoned_by(node)
        rv = version_of(node)
        holders = {o.name for o in ctx.others.values() if o.holds(node_name, annotation or ())}
        holders.add(ctx.me)
        if not unschedulable(node):
            cordon.append(NodePatch(node_name, rv, True, _cordon_value(holders)))
            events.append(Event("Normal", "Cordoned", f"Cordoned node {node_name}"))
        elif annotation is not None and _cordon_value(annotation) != _cordon_value(holders):
            cordon.append(NodePatch(node_name, rv, None, _cordon_value(holders)))
    return cordon, events


def uncordons(ctx: Context, keep: frozenset[str]) -> tuple[list[NodePatch], list[Event]]:
    """Let go of the cordons this maintenance holds outside ``keep``: the hold passes to the
    other holders, or the node is uncordoned when none is left."""
    uncordon: list[NodePatch] = []
    events: list[Event] = []
    for node_name in sorted(ctx.inp.nodes):
        node = ctx.inp.nodes[node_name]
        annotation = cordoned_by(node)
        if annotation is None or ctx.me not in annotation or node_name in keep:
            continue
        rv = version_of(node)
        remaining = {
            o.name
            for o in ctx.others.values()
            if o.name != ctx.me and o.holds(node_name, annotation)
        }
        if remaining:
            uncordon.append(NodePatch(node_name, rv, None, _cordon_value(remaining)))
        elif unschedulable(node):
            uncordon.append(NodePatch(node_name, rv, False, None))
            events.append(Event("Normal", "Uncordoned", f"Uncordoned node {node_name}"))
        else:
            uncordon.append(NodePatch(node_name, rv, None, None))
    return uncordon, events


def _held_by_others(ctx: Context, node_name: str) -> bool:
    node = ctx.inp.nodes.get(node_name)
    annotation = (cordoned_by(node) if node is not None else None) or ()
    return any(o.name != ctx.me and o.holds(node_name, annotation) for o in ctx.others.values())


def cordon_actions(
    ctx: Context, slots: Slots | None, held: frozenset[str] = frozenset()
) -> tuple[list[NodePatch], list[NodePatch], list[Event]]:
    """The cordons and uncordons of one decision, and their events: while the stage holds a
    cordon, cordon the selected nodes (those waiting for a drain slot only with
    ``cordon_while_waiting``, or of a shutdown under way; ``held`` ones, of a reboot the
    windows or gates hold, never) and let go of the others; otherwise let go of every node.
    A held node another maintenance keeps cordoned stays in this one's hold too, so that
    the hold does not pass back and forth between them."""
    act_stage = ctx.act_stage
    holds_now = act_stage is not None and act_stage.holds_cordon
    waiting = frozenset(slots.waiting) if slots is not None else frozenset()
    # a node whose shutdown is under way goes down within its budget, slot or not: it takes
    # no more pods meanwhile (else its workloads' controllers put back what goes at the end)
    at_once = ctx.inp.cordon_while_waiting or shutdown_node(ctx.nm) is not None
    uncordoned = (frozenset() if at_once else waiting) | held
    cordon, events = cordons(ctx, uncordoned) if holds_now else ([], [])
    released = frozenset(n for n in held if not _held_by_others(ctx, n))
    uncordon: list[NodePatch] = []
    if ctx.acting:
        keep = ctx.mine.selected - released if holds_now else frozenset()
        uncordon, uncordon_events = uncordons(ctx, keep)
        events.extend(uncordon_events)
    return cordon, uncordon, events
