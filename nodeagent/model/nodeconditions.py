"""The Node lifecycle conditions of KEP-5683 that a node's agent keeps on its own Node, and the
Events it records on the Node when they change. Pure: the NodeMaintenances, logind's shutdown
state and the Node in; the conditions to write and the Events out.

KEP-5683 (alpha in 1.37, gate ``NodeLifecycleConditions``) names the types and what True,
False and Unknown mean (the state "is currently observed", "is not", "the writer cannot
determine"); it leaves reasons and messages to the writer, and says clearing is setting False or
removing the condition. Here:

- ``MaintenancePlanned``: an Idle NodeMaintenance covers the node (it will act later).
- ``MaintenanceInProgress``: a NodeMaintenance in Cordon or Drain covers the node and the node is
  cordoned; it stays True after the maintenance ends until nodeagent's cordon is lifted.
- ``DrainInProgress``: as above, one of them is in Drain, and the node is not drained yet.
- ``Drained``: as above, and the pods of the node are gone (the maintenance reports no pod left
  on it, or ``Drained=True`` over all its nodes).
- ``GracefulNodeShutdownInProgress``: systemd-logind announced a shutdown (PrepareForShutdown);
  left alone when the agent has no shutdown guard or has not heard from logind yet.

A condition that is absent counts as False, so an agent whose node never saw a maintenance
writes nothing. The maintenance conditions follow one phase (none, cordoned, draining, drained)
that can be read back from the Node's conditions, so the Events on a change of phase
(``Cordoned``, ``Draining``, ``Drained``, ``Restored``) are recorded once, also across restarts
of the agent.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, cast

from nodeagent.model.bodies import (
    ConditionStatus,
    Event,
    as_map,
    condition_true,
    items,
    mapping,
    name_of,
)
from nodeagent.model.maintenance import Stage, cordoned_by, covers, effective_stage, validate
from nodeagent.model.nodemaintenance.cordon import unschedulable

__all__ = [
    "CONDITION_TYPES",
    "DRAINED",
    "DRAIN_IN_PROGRESS",
    "GRACEFUL_SHUTDOWN",
    "MAINTENANCE_IN_PROGRESS",
    "MAINTENANCE_PLANNED",
    "Decision",
    "NodeCondition",
    "Phase",
    "Shutdown",
    "decide",
    "node_conditions",
    "overlay",
    "status_patch",
]

MAINTENANCE_PLANNED = "MaintenancePlanned"
MAINTENANCE_IN_PROGRESS = "MaintenanceInProgress"
DRAIN_IN_PROGRESS = "DrainInProgress"
DRAINED = "Drained"
GRACEFUL_SHUTDOWN = "GracefulNodeShutdownInProgress"
CONDITION_TYPES = (
    MAINTENANCE_PLANNED,
    MAINTENANCE_IN_PROGRESS,
    DRAIN_IN_PROGRESS,
    DRAINED,
    GRACEFUL_SHUTDOWN,
)
"""The types this module writes; every other condition of the Node is someone else's."""

_NAMED = 3  # maintenances named in a message before "and N more"
_REASON_TEXT = 80  # of a maintenance's spec.reason, in a message


@dataclass(frozen=True)
class NodeCondition:
    type: str
    status: ConditionStatus
    reason: str
    message: str


@dataclass(frozen=True)
class Shutdown:
    """logind's state as the shutdown guard last learnt it."""

    in_progress: bool
    kind: str | None = None  # reboot, poweroff, ... when logind says


class Phase(Enum):
    NONE = "none"
    CORDONED = "cordoned"
    DRAINING = "draining"
    DRAINED = "drained"


@dataclass(frozen=True)
class Decision:
    phase: Phase
    conditions: tuple[NodeCondition, ...]
    """What the managed conditions should say (GracefulNodeShutdownInProgress only when the
    shutdown state is known)."""
    changed: tuple[NodeCondition, ...]
    """Those of `conditions` the Node does not already say (an absent one says False)."""
    events: tuple[Event, ...]


# --- reading the Node ----------------------------------------------------------------------------


def node_conditions(node: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """The Node's conditions of the managed types, by type."""
    out: dict[str, Mapping[str, Any]] = {}
    for raw in items(mapping(node, "status"), "conditions"):
        cond = as_map(raw)
        kind = cond.get("type")
        if kind in CONDITION_TYPES and kind not in out:
            out[str(kind)] = cond
    return out


def _says(have: Mapping[str, Any] | None, want: NodeCondition) -> bool:
    if have is None:
        return want.status == "False"
    return (have.get("status"), have.get("reason"), have.get("message")) == (
        want.status,
        want.reason,
        want.message,
    )


def _phase_of(node: Mapping[str, Any]) -> Phase:
    """The phase the Node's conditions record (what this module wrote last)."""
    if not condition_true(node, MAINTENANCE_IN_PROGRESS):
        return Phase.NONE
    if condition_true(node, DRAINED):
        return Phase.DRAINED
    if condition_true(node, DRAIN_IN_PROGRESS):
        return Phase.DRAINING
    return Phase.CORDONED


def _cordon_held(node: Mapping[str, Any]) -> bool:
    """Whether nodeagent's cordon is still on the node (the controller lifts it, annotation
    and all, once no maintenance holds it)."""
    return bool(cordoned_by(node))


# --- reading the maintenances --------------------------------------------------------------------


def _node_drained(nm: Mapping[str, Any], node_name: str) -> bool:
    """Whether the maintenance (in Drain) reports no pod left on the node."""
    for raw in items(mapping(nm, "status"), "nodeStatuses"):
        entry = as_map(raw)
        if mapping(entry, "nodeRef").get("name") != node_name:
            continue
        left = [entry.get("podsPendingEvacuation"), entry.get("podsEvacuating")]
        counts = [n for n in left if isinstance(n, int) and not isinstance(n, bool)]
        if len(counts) == len(left):
            return sum(counts) == 0
    return condition_true(nm, "Drained")


def _describe(nms: Sequence[Mapping[str, Any]]) -> str:
    """``NodeMaintenance a (Drain: kernel upgrade)``, several named, the rest counted."""
    parts = []
    for nm in nms[:_NAMED]:
        stage = effective_stage(nm)
        why = str(mapping(nm, "spec").get("reason") or "").strip()
        if len(why) > _REASON_TEXT:
            why = why[: _REASON_TEXT - 3] + "..."
        detail = (stage.value if stage else "?") + (f": {why}" if why else "")
        parts.append(f"{name_of(nm)} ({detail})")
    more = len(nms) - _NAMED
    text = ", ".join(parts) + (f" and {more} more" if more > 0 else "")
    return ("NodeMaintenances " if len(nms) > 1 else "NodeMaintenance ") + text


def _names(nms: Sequence[Mapping[str, Any]]) -> str:
    names = [name_of(nm) for nm in nms[:_NAMED]]
    more = len(nms) - _NAMED
    text = ", ".join(names) + (f" and {more} more" if more > 0 else "")
    return ("NodeMaintenances " if len(nms) > 1 else "NodeMaintenance ") + text


# --- the decision --------------------------------------------------------------------------------


def decide(
    maintenances: Iterable[Mapping[str, Any]],
    node_name: str,
    node: Mapping[str, Any],
    shutdown: Shutdown | None,
) -> Decision:
    """The managed conditions of Node ``node_name`` (its object ``node``, whose conditions are
    what was written before), those to write, and the Events of the change.

    ``maintenances``: every NodeMaintenance (those that do not cover the node are skipped);
    ``shutdown``: None when the agent cannot tell (no guard, logind not reached yet)."""
    covering = sorted(
        (nm for nm in maintenances if covers(nm, node_name, node) and validate(nm).valid),
        key=name_of,
    )
    planned = [nm for nm in covering if effective_stage(nm) == Stage.IDLE]
    active = [nm for nm in covering if effective_stage(nm) in (Stage.CORDON, Stage.DRAIN)]
    draining = [nm for nm in active if effective_stage(nm) == Stage.DRAIN]
    drained = [nm for nm in draining if _node_drained(nm, node_name)]
    ended = [nm for nm in covering if effective_stage(nm) == Stage.COMPLETE]

    before = _phase_of(node)
    cordoned = unschedulable(node)
    # over, but the controller has yet to lift its cordon: the Node keeps saying what it says
    held = not active and before != Phase.NONE and _cordon_held(node)
    if held:
        phase = before
    elif active and (before != Phase.NONE or cordoned) and not draining:
        phase = Phase.CORDONED
    elif active and (before != Phase.NONE or cordoned):
        phase = Phase.DRAINED if drained else Phase.DRAINING
    else:
        phase = Phase.NONE  # also: started, but the node is not cordoned yet

    conditions = [_planned(planned)]
    conditions += _kept(node) if held else _maintenance(phase, active, draining, drained)
    if shutdown is not None:
        conditions.append(_shutdown(shutdown))
    have = node_conditions(node)
    changed = tuple(c for c in conditions if not _says(have.get(c.type), c))
    events = _events(before, phase, active, draining, drained, ended, cordoned)
    return Decision(phase, tuple(conditions), changed, events)


def _planned(planned: Sequence[Mapping[str, Any]]) -> NodeCondition:
    if planned:
        return NodeCondition(
            MAINTENANCE_PLANNED,
            "True",
            "MaintenanceIdle",
            f"{_describe(planned)} will cordon and drain this node once it moves on from Idle",
        )
    return NodeCondition(
        MAINTENANCE_PLANNED,
        "False",
        "NoMaintenancePlanned",
        "No Idle NodeMaintenance covers this node",
    )


def _kept(node: Mapping[str, Any]) -> list[NodeCondition]:
    """The maintenance conditions as the Node says them (each missing or malformed one as
    phase none has it)."""
    have = node_conditions(node)
    out = []
    for default in _maintenance(Phase.NONE, (), (), ()):
        cond = have.get(default.type)
        status = cond.get("status") if cond is not None else None
        if cond is None or status not in ("True", "False", "Unknown"):
            out.append(default)
            continue
        reason, message = str(cond.get("reason") or ""), str(cond.get("message") or "")
        out.append(NodeCondition(default.type, cast(ConditionStatus, status), reason, message))
    # kept as the phase they record (`_phase_of`): drained is no longer draining, whoever
    # wrote both
    drained = any(c.type == DRAINED and c.status == "True" for c in out)
    return [
        NodeCondition(c.type, "False", "Drained", "The node is drained")
        if drained and c.type == DRAIN_IN_PROGRESS and c.status == "True"
        else c
        for c in out
    ]


def _maintenance(
    phase: Phase,
    active: Sequence[Mapping[str, Any]],
    draining: Sequence[Mapping[str, Any]],
    drained: Sequence[Mapping[str, Any]],
) -> list[NodeCondition]:
    if phase == Phase.NONE:
        return [
            NodeCondition(
                MAINTENANCE_IN_PROGRESS,
                "False",
                "NoMaintenance",
                "No NodeMaintenance in stage Cordon or Drain covers this node",
            ),
            NodeCondition(DRAIN_IN_PROGRESS, "False", "NotDraining", "This node is not drained"),
            NodeCondition(DRAINED, "False", "NotDrained", "No NodeMaintenance drains this node"),
        ]
    out = [
        NodeCondition(
            MAINTENANCE_IN_PROGRESS,
            "True",
            "NodeMaintenance",
            f"{_describe(active)}: the node is cordoned",
        )
    ]
    if phase == Phase.CORDONED:
        out.append(
            NodeCondition(
                DRAIN_IN_PROGRESS, "False", "NotDraining", "Cordoned, not drained (stage Cordon)"
            )
        )
        out.append(
            NodeCondition(DRAINED, "False", "NotDrained", "Cordoned, not drained (stage Cordon)")
        )
    elif phase == Phase.DRAINING:
        message = f"{_names(draining)} drains this node; kubectl get nm shows its progress"
        out.append(NodeCondition(DRAIN_IN_PROGRESS, "True", "Draining", message))
        out.append(NodeCondition(DRAINED, "False", "Draining", message))
    else:
        message = f"Every pod {_names(drained)} drains is gone from this node"
        out.append(NodeCondition(DRAIN_IN_PROGRESS, "False", "Drained", message))
        out.append(NodeCondition(DRAINED, "True", "Drained", message))
    return out


def _shutdown(shutdown: Shutdown) -> NodeCondition:
    if shutdown.in_progress:
        kind = shutdown.kind or "shutdown"
        return NodeCondition(
            GRACEFUL_SHUTDOWN,
            "True",
            "PrepareForShutdown",
            f"systemd-logind announced a {kind}; nodeagent delays it until the node is drained "
            "or its shutdown budget is spent",
        )
    return NodeCondition(
        GRACEFUL_SHUTDOWN, "False", "NoShutdown", "systemd-logind announces no shutdown"
    )


def _events(
    before: Phase,
    after: Phase,
    active: Sequence[Mapping[str, Any]],
    draining: Sequence[Mapping[str, Any]],
    drained: Sequence[Mapping[str, Any]],
    ended: Sequence[Mapping[str, Any]],
    unschedulable: bool,
) -> tuple[Event, ...]:
    if before == after:
        return ()
    out: list[Event] = []
    if before == Phase.NONE:
        out.append(Event("Normal", "Cordoned", f"Cordoned for {_describe(active)}"))
    if after == Phase.DRAINING:
        out.append(Event("Normal", "Draining", f"Draining for {_names(draining)}"))
    elif after == Phase.DRAINED:
        out.append(Event("Normal", "Drained", f"Every pod {_names(drained)} drains is gone"))
    elif after == Phase.NONE:
        over = f"{_names(ended)} completed" if ended else "No NodeMaintenance holds this node"
        if unschedulable:
            message = f"{over}; the node stays unschedulable (cordoned outside nodeagent)"
        else:
            message = f"{over}; the node is schedulable again"
        out.append(Event("Normal", "Restored", message))
    return tuple(out)


# --- writing -------------------------------------------------------------------------------------


def status_patch(
    changed: Iterable[NodeCondition], node: Mapping[str, Any], now: str
) -> dict[str, Any]:
    """A strategic merge patch of the Node's status setting ``changed`` (conditions merge by
    type, so the kubelet's are left alone). lastTransitionTime moves only when the status does;
    lastHeartbeatTime is the time of this write."""
    have = node_conditions(node)
    out = []
    for c in changed:
        old = have.get(c.type)
        old_status = old.get("status") if old is not None else "False"
        transition = old.get("lastTransitionTime") if old is not None else None
        if old_status != c.status or not isinstance(transition, str) or not transition:
            transition = now
        out.append(
            {
                "type": c.type,
                "status": c.status,
                "reason": c.reason,
                "message": c.message,
                "lastHeartbeatTime": now,
                "lastTransitionTime": transition,
            }
        )
    return {"status": {"conditions": out}}


def overlay(node: Mapping[str, Any], written: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``node`` with its conditions of the types in ``written`` replaced by those: what it says
    once a write this agent made (and the API server acknowledged) reaches the cache."""
    by_type = {str(c.get("type")): c for c in written}
    conditions = [
        c
        for c in items(mapping(node, "status"), "conditions")
        if as_map(c).get("type") not in by_type
    ]
    conditions += [dict(c) for c in written]
    return {**node, "status": {**mapping(node, "status"), "conditions": conditions}}
