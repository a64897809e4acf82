"""Drain slots. With ``Inputs.max_draining`` set (``nodeMaintenance.maxDrainingNodes``), at most
that many nodes drain at once across the cluster (:mod:`nodeagent.model.drainslots`); the
inputs then hold every maintenance in Drain. A node over the limit waits: it takes no part in
the drainTargets resolution (no EvictionRequest for its pods), is cordoned only with
``cordon_while_waiting``, and its drainMessage (and so ``summary.blockedBy``) says what it waits
for. Admissions are returned (``Actions.admitted``) so the shell can count them while its cache
does not show them yet. A node agent's shutdown maintenance counts only while that shutdown may
be under way (:mod:`nodeagent.model.shutdown_standing`: the boot its node's kubelet reports,
within its bound, one per node); otherwise it neither holds nor waits for a slot and drains no
more (its cordon stays until the agent completes it after the reboot).

Reboot windows and gates (``Inputs.windows``, ``Inputs.gates``) hold reboots asked for alone
(:func:`held_requests`): one not admitted waits outside the windows, or while a gate holds,
and takes no place in line; one admitted goes on when the windows close, unless
``window_end`` is STOP and pods are left: it then stops, gives its slot back (its requests
withdrawn, its node uncordoned) and keeps its drainTargets, so it resumes where it stopped
once admitted again. A node's stored drainTargets admit it only while its drainMessage does not
say it waits (:func:`admitted_in_status`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from nodeagent.model.bodies import Event, as_map, items, labels_of, mapping
from nodeagent.model.drainplan import DrainPlanEntry
from nodeagent.model.drainslots import WAITING_FOR_SLOT, Candidate, Slots, allot
from nodeagent.model.draintargets.pods import NodePods
from nodeagent.model.draintargets.results import NodeDrainStatus
from nodeagent.model.gates import WAITING_FOR_GATE, GateState, GateStatus, holding
from nodeagent.model.maintenance import Stage
from nodeagent.model.nodemaintenance.context import MaintenanceState
from nodeagent.model.nodemaintenance.inputs import Inputs
from nodeagent.model.nodemaintenance.pods import PodsOn
from nodeagent.model.nodemaintenance.selection import creation_key
from nodeagent.model.shutdown import request_node
from nodeagent.model.shutdown_standing import IGNORED, ignored
from nodeagent.model.windows import STOP, WAITING_FOR_WINDOW

_WAITS = (WAITING_FOR_SLOT, WAITING_FOR_WINDOW, WAITING_FOR_GATE)


def ignored_message(why: str) -> str:
    """The drainMessage of a node whose shutdown maintenance does not count, and why."""
    return f"{IGNORED}{why}: it drains no more and holds no slot"


def admitted_in_status(node_status: Mapping[str, Any]) -> bool:
    """Whether a stored ``nodeStatuses`` entry admits its node: drainTargets that are not kept
    while the node waits (a drain stopped when the reboot windows closed)."""
    message = str(node_status.get("drainMessage") or "")
    return bool(node_status.get("drainTargets")) and not message.startswith(_WAITS)


def _admitted(o: MaintenanceState, node: str, inp: Inputs) -> bool:
    if node in inp.admitting:
        return True
    if not o.progress.get(node):
        return False
    for ns in items(mapping(o.obj, "status"), "nodeStatuses"):
        if mapping(ns, "nodeRef").get("name") == node:
            return admitted_in_status(as_map(ns))
    return False


def held_requests(
    inp: Inputs, others: Mapping[str, MaintenanceState], pods_on: PodsOn, over: Mapping[str, str]
) -> dict[str, str]:
    """The reboots asked for that the windows or gates hold now (name -> drainMessage); under a
    limit only (the shell sets one with windows or gates)."""
    if inp.max_draining is None or (inp.windows.always and not inp.gates):
        return {}
    held: dict[str, str] = {}
    in_window: bool | None = None
    gate = holding(inp.gates)
    for o in others.values():
        if o.stage != Stage.DRAIN or not o.validity.valid or o.name in over:
            continue
        if request_node(o.obj) is None:
            continue
        if in_window is None:
            in_window = inp.windows.open_at(inp.now)
        for node in sorted(o.selected):
            if _admitted(o, node, inp):
                # a drain under way: only the windows' closing stops it, and only with pods
                # left (a drained node reboots now: stopping it would uncordon it meanwhile)
                if not in_window and inp.window_end == STOP and pods_on(node).present:
                    held[o.name] = inp.windows.waiting_message(inp.now)
            elif not in_window:
                held[o.name] = inp.windows.waiting_message(inp.now)
            elif gate is not None:
                held[o.name] = gate.message
    return held


def hold_events(
    old: Mapping[str, Any], new: Mapping[str, Any], gates: Sequence[GateState]
) -> list[Event]:
    """What a change of nodeStatuses from ``old`` to ``new`` (statuses) is worth telling, once:
    a gate that cannot be evaluated holds a reboot (Warning GateUnavailable), a drain stopped
    when the windows closed (DrainStopped)."""
    before = {mapping(ns, "nodeRef").get("name"): as_map(ns) for ns in items(old, "nodeStatuses")}
    unavailable = {g.message for g in gates if g.status is GateStatus.UNKNOWN}
    events: list[Event] = []
    for ns in items(new, "nodeStatuses"):
        node = mapping(ns, "nodeRef").get("name")
        message = str(as_map(ns).get("drainMessage") or "")
        was = before.get(node) or {}
        if message == was.get("drainMessage"):
            continue
        if message in unavailable:
            events.append(Event("Warning", "GateUnavailable", f"Node {node}: {message}"))
        elif message.startswith(WAITING_FOR_WINDOW) and admitted_in_status(was):
            events.append(
                Event(
                    "Normal",
                    "DrainStopped",
                    f"Node {node}: the reboot windows closed: its drain stopped, its slot "
                    f"given back, its node uncordoned; it resumes where it stopped ({message})",
                )
            )
    return events


def gates_wanted(
    inp: Inputs, others: Mapping[str, MaintenanceState], me: str, held: Mapping[str, str]
) -> bool:
    """Whether ``me`` is a reboot asked for that waits for its admission inside the windows
    (so the gates are worth reading)."""
    mine = others.get(me)
    if not inp.gates or mine is None or request_node(mine.obj) is None:
        return False
    if mine.stage != Stage.DRAIN or not mine.validity.valid:
        return False
    if held.get(me, "").startswith(WAITING_FOR_WINDOW):
        return False
    return not all(_admitted(mine, node, inp) for node in mine.selected)


def waiting_status(
    node: str,
    pods: NodePods,
    slots: Slots,
    ignored_why: str | None,
    *,
    reboot: bool = False,
    held: str | None = None,
    kept: Sequence[DrainPlanEntry] = (),
) -> NodeDrainStatus:
    """The drain status of a node that waits for a drain slot, whose shutdown maintenance is
    ignored (``ignored_why``), or whose reboot the windows or a gate hold (``held``, its
    message): nothing targeted, ``kept`` (the drainTargets of a drain stopped) kept. A node
    whose ``reboot`` was asked for is not drained before its turn, pods or not: its agent
    reboots it once drained."""
    if ignored_why:
        message = ignored_message(ignored_why)
    else:
        message = held if held is not None else slots.waiting_message(node)
    return NodeDrainStatus(
        node=node,
        drain_targets=tuple(kept) if not ignored_why else (),
        drain_message=message,
        targeted_pods=(),
        pods_pending_evacuation=len(pods.present) - pods.leaving,
        pods_evacuating=pods.leaving,
        drained=not pods.present and not (reboot and not ignored_why),
    )


def ignored_shutdowns(inp: Inputs, others: Mapping[str, MaintenanceState]) -> Mapping[str, str]:
    """Under a limit, the shutdown maintenances in Drain that do not count, and why."""
    if inp.max_draining is None:
        return {}
    return ignored((o.obj for o in others.values()), inp.nodes, inp.now, inp.max_shutdown)


def drain_slots(
    inp: Inputs,
    others: Mapping[str, MaintenanceState],
    pods_on: PodsOn,
    over: Mapping[str, str],
) -> Slots | None:
    """Which nodes may drain now under the limit (None: no limit); the ``over`` maintenances
    (ignored shutdown maintenances, reboots the windows or gates hold) neither hold nor wait
    for a slot."""
    if inp.max_draining is None:
        return None
    candidates: list[Candidate] = []
    for o in others.values():
        if o.stage != Stage.DRAIN or not o.validity.valid or o.name in over:
            continue
        order = creation_key(o.obj)
        # a reboot asked for holds the slot until its node is back, drained or not
        rebooting = request_node(o.obj)
        for node in o.selected:
            candidates.append(
                Candidate(
                    node=node,
                    order=order,
                    admitted=_admitted(o, node, inp),
                    busy=bool(pods_on(node).present) or node == rebooting,
                    zone=_zone(inp, node),
                )
            )
    return allot(candidates, inp.max_draining, inp.zone_limit)


def _zone(inp: Inputs, node: str) -> str | None:
    value = labels_of(inp.nodes.get(node) or {}).get(inp.zone_label)
    return value if isinstance(value, str) and value else None
