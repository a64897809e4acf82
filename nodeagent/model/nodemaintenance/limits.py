"""Drain slots. With ``Inputs.max_draining`` set (``nodeMaintenance.maxDrainingNodes``), at most
that many nodes drain at once across the cluster (:mod:`nodeagent.model.drainslots`); the
inputs then hold every maintenance in Drain. A node over the limit waits: it takes no part in
the drainTargets resolution (no EvictionRequest for its pods), is cordoned only with
``cordon_while_waiting``, and its drainMessage (and so ``summary.blockedBy``) says what it waits
for. Admissions are returned (``Actions.admitted``) so the shell can count them while its cache
does not show them yet. A node agent's shutdown maintenance counts only while that shutdown may
be under way: once its node's kubelet reports another boot
(:func:`nodeagent.model.shutdown.shutdown_over`), it neither holds nor waits for a slot and
drains no more (its cordon stays until the agent completes it after the reboot)."""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Set as AbstractSet

from nodeagent.model.drainslots import Candidate, Slots, allot
from nodeagent.model.draintargets.pods import NodePods
from nodeagent.model.draintargets.results import NodeDrainStatus
from nodeagent.model.maintenance import (
    Stage,
)
from nodeagent.model.nodemaintenance.context import MaintenanceState
from nodeagent.model.nodemaintenance.inputs import Inputs
from nodeagent.model.nodemaintenance.pods import PodsOn
from nodeagent.model.nodemaintenance.selection import creation_key
from nodeagent.model.shutdown import shutdown_over


def booted_again(node: str) -> str:
    """The drainMessage of a shutdown maintenance's node that booted again since."""
    return f"Node {node} booted again since this shutdown: it drains no more and holds no slot"


def waiting_status(node: str, pods: NodePods, slots: Slots, booted: bool) -> NodeDrainStatus:
    """The drain status of a node that waits for a drain slot, or that ``booted`` again since
    its shutdown maintenance was made: nothing targeted."""
    return NodeDrainStatus(
        node=node,
        drain_targets=(),
        drain_message=booted_again(node) if booted else slots.waiting_message(node),
        targeted_pods=(),
        pods_pending_evacuation=len(pods.present) - pods.leaving,
        pods_evacuating=pods.leaving,
        drained=not pods.present,
    )


def shutdowns_over(inp: Inputs, others: Mapping[str, MaintenanceState]) -> frozenset[str]:
    """Under a limit, the shutdown maintenances in Drain whose node booted again since."""
    if inp.max_draining is None:
        return frozenset()
    return frozenset(
        o.name
        for o in others.values()
        if o.stage == Stage.DRAIN and shutdown_over(o.obj, inp.nodes)
    )


def drain_slots(
    inp: Inputs, others: Mapping[str, MaintenanceState], pods_on: PodsOn, over: AbstractSet[str]
) -> Slots | None:
    """Which nodes may drain now under the limit (None: no limit); the ``over`` maintenances
    neither hold nor wait for a slot."""
    if inp.max_draining is None:
        return None
    candidates: list[Candidate] = []
    for o in others.values():
        if o.stage != Stage.DRAIN or not o.validity.valid or o.name in over:
            continue
        order = creation_key(o.obj)
        for node in o.selected:
            candidates.append(
                Candidate(
                    node=node,
                    order=order,
                    admitted=bool(o.progress.get(node)) or node in inp.admitting,
                    busy=bool(pods_on(node).present),
                )
            )
    return allot(candidates, inp.max_draining)
