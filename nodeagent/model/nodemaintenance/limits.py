"""Drain slots. With ``Inputs.max_draining`` set (``nodeMaintenance.maxDrainingNodes``), at most
that many nodes drain at once across the cluster (:mod:`nodeagent.model.drainslots`); the
inputs then hold every maintenance in Drain. A node over the limit waits: it takes no part in
the drainTargets resolution (no EvictionRequest for its pods), is cordoned only with
``cordon_while_waiting``, and its drainMessage (and so ``summary.blockedBy``) says what it waits
for. Admissions are returned (``Actions.admitted``) so the shell can count them while its cache
does not show them yet. A node agent's shutdown maintenance counts only while that shutdown may
be under way (:mod:`nodeagent.model.shutdown_standing`: the boot its node's kubelet reports,
within its bound, one per node); otherwise it neither holds nor waits for a slot and drains no
more (its cordon stays until the agent completes it after the reboot)."""

from __future__ import annotations

from collections.abc import Mapping

from nodeagent.model.bodies import labels_of
from nodeagent.model.drainslots import Candidate, Slots, allot
from nodeagent.model.draintargets.pods import NodePods
from nodeagent.model.draintargets.results import NodeDrainStatus
from nodeagent.model.maintenance import Stage
from nodeagent.model.nodemaintenance.context import MaintenanceState
from nodeagent.model.nodemaintenance.inputs import Inputs
from nodeagent.model.nodemaintenance.pods import PodsOn
from nodeagent.model.nodemaintenance.selection import creation_key
from nodeagent.model.shutdown import request_node
from nodeagent.model.shutdown_standing import IGNORED, ignored


def ignored_message(why: str) -> str:
    """The drainMessage of a node whose shutdown maintenance does not count, and why."""
    return f"{IGNORED}{why}: it drains no more and holds no slot"


def waiting_status(
    node: str, pods: NodePods, slots: Slots, ignored_why: str | None, *, reboot: bool = False
) -> NodeDrainStatus:
    """The drain status of a node that waits for a drain slot, or whose shutdown maintenance
    is ignored (``ignored_why``): nothing targeted. A node whose ``reboot`` was asked for is
    not drained before its turn, pods or not: its agent reboots it once drained."""
    return NodeDrainStatus(
        node=node,
        drain_targets=(),
        drain_message=(
            ignored_message(ignored_why) if ignored_why else slots.waiting_message(node)
        ),
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
    (ignored shutdown maintenances) neither hold nor wait for a slot."""
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
                    admitted=bool(o.progress.get(node)) or node in inp.admitting,
                    busy=bool(pods_on(node).present) or node == rebooting,
                    zone=_zone(inp, node),
                )
            )
    return allot(candidates, inp.max_draining, inp.zone_limit)


def _zone(inp: Inputs, node: str) -> str | None:
    value = labels_of(inp.nodes.get(node) or {}).get(inp.zone_label)
    return value if isinstance(value, str) and value else None
