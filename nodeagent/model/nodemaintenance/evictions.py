"""EvictionRequests and the drain deadline's escalation.

All maintenances ask with the one requester name ``nodemaintenance.k8s.io``, so the requester is
removed from a pod's request only when no maintenance in Drain targets the pod any more.
Evicted requests that only we asked for, and canceled requests nobody asks for, are deleted
(KEP-4563: requesters may delete them once Evicted or Canceled).

Escalation: with ``spec.drainDeadlineEscalation`` (else ``Inputs.deadline_escalation``)
DeletePods and the drain deadline passed, the targeted Default pods still there are deleted
(``Actions.delete_pods``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from nodeagent.model.bodies import (
    condition_true,
    deleting,
    mapping,
)
from nodeagent.model.drainplan import (
    PodType,
    classify,
)
from nodeagent.model.draintargets.results import MaintenanceDrain, Resolution
from nodeagent.model.maintenance import DELETE_PODS, Stage, deadline_escalation, maintenance_nodes
from nodeagent.model.names import REQUESTER
from nodeagent.model.nodemaintenance.actions import (
    EvictionRequestCreate,
    EvictionRequestDelete,
    PodDelete,
    RequesterPatch,
)
from nodeagent.model.nodemaintenance.context import Context
from nodeagent.model.nodemaintenance.deadline import DEADLINE_CONDITION
from nodeagent.model.nodemaintenance.selection import selection


@dataclass
class EvictionActions:
    creates: list[EvictionRequestCreate] = field(default_factory=list)
    deletes: list[EvictionRequestDelete] = field(default_factory=list)
    requester_patches: list[RequesterPatch] = field(default_factory=list)
    targeted: set[str] = field(default_factory=set)
    """UIDs of the pods this maintenance targets now."""


def _ask_for_targeted(ctx: Context, my_drain: MaintenanceDrain, out: EvictionActions) -> None:
    """Ask for the eviction of every pod this maintenance targets (see node_requests)."""
    for ns in my_drain.nodes:
        asks = ctx.requests.on(ns)
        out.targeted |= asks.uids
        out.creates.extend(asks.creates)
        out.deletes.extend(asks.deletes)
        out.requester_patches.extend(asks.requester_patches)


def _withdraw(
    ctx: Context, scope: frozenset[str], resolution: Resolution | None, out: EvictionActions
) -> None:
    """The other requests on the nodes of ``scope``: delete Evicted ones only we asked for and
    canceled ones nobody asks for; withdraw our requester where no maintenance of the
    resolution targets the pod any more."""
    rest = sorted(ctx.inp.eviction_requests.keys() - out.targeted)
    if not rest:
        return
    all_targeted: frozenset[str] = frozenset().union(
        *(
            ctx.requests.on(ns).uids
            for m in (resolution.maintenances.values() if resolution is not None else ())
            for ns in m.nodes
        )
    )
    node_of_pod: dict[str, str] = {}  # pod UID -> its node, for the nodes of scope
    for node in scope:
        node_of_pod.update(dict.fromkeys(ctx.bound.on(node).by_uid, node))
    for uid in rest:
        er = ctx.requests.views[uid]
        if er.deleting:
            continue
        er_node = er.node if er.node is not None else node_of_pod.get(er.name)
        if er_node is None or er_node not in scope:
            continue
        requesters = er.requesters
        namespace = er.namespace or "default"
        er_rv, er_uid = er.resource_version, er.uid
        pod_here = uid in node_of_pod
        if er.evicted:
            gone_with_pod = not pod_here and er.owned_by_target
            if set(requesters) <= {REQUESTER} and not gone_with_pod:
                out.deletes.append(EvictionRequestDelete(namespace, uid, er_uid, er_rv, "evicted"))
            continue
        # While draining, a request whose pod is gone stays for the eviction request
        # controller to mark Evicted; on Complete every request is withdrawn.
        withdraw = ctx.act_stage != Stage.DRAIN or pod_here
        if REQUESTER in requesters and uid not in all_targeted and withdraw:
            kept = tuple(r for r in requesters if r != REQUESTER)
            out.requester_patches.append(RequesterPatch(namespace, uid, er_rv, kept))
        elif not requesters and er.canceled:
            out.deletes.append(EvictionRequestDelete(namespace, uid, er_uid, er_rv, "canceled"))


def eviction_actions(
    ctx: Context, my_drain: MaintenanceDrain | None, resolution: Resolution | None
) -> EvictionActions:
    """What to do with the EvictionRequests of the maintenance's nodes."""
    out = EvictionActions()
    if not ctx.acting:
        return out
    selected = selection(ctx.inp, ctx.recall, ctx.nm)
    scope = maintenance_nodes(ctx.nm, ctx.inp.nodes, selected) | ctx.mine.selected
    if my_drain is not None and ctx.act_stage == Stage.DRAIN:
        _ask_for_targeted(ctx, my_drain, out)
    _withdraw(ctx, scope, resolution, out)
    return out


def escalation(
    ctx: Context, status: Mapping[str, Any] | None, drain: MaintenanceDrain | None
) -> list[PodDelete]:
    """With escalation DeletePods and the drain deadline passed: the targeted Default pods still
    there and not leaving (DaemonSet and static pods have interceptors that remove them)."""
    if drain is None or ctx.act_stage != Stage.DRAIN:
        return []
    if deadline_escalation(ctx.nm, ctx.inp.deadline_escalation) != DELETE_PODS:
        return []
    current = status if status is not None else mapping(ctx.nm, "status")
    if not condition_true({"status": current}, DEADLINE_CONDITION):
        return []
    out: list[PodDelete] = []
    for ns in drain.nodes:
        on = ctx.bound.on(ns.node)
        for ref in ns.targeted_pods:
            pod = on.by_uid.get(ref.uid)
            if pod is None or deleting(pod):
                continue
            if classify(pod).pod_type is PodType.DEFAULT:
                out.append(PodDelete(ref.namespace, ref.name, ref.uid))
    return out
