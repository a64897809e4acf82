"""The ``daemonset.apps.k8s.io`` interceptor (DESIGN 2.3), leader only; it stands in for
KEP-4212's NodeMaintenanceAwareDaemonSet.

When it is the active interceptor of an EvictionRequest for a DaemonSet pod, it taints the pod's
node ``nodeagent.io/maintenance:NoSchedule`` (so the DaemonSet controller does not put the pod
back), deletes the pod gracefully (with its UID as precondition), heartbeats while the pod
terminates and sets ``completionTime`` once it is gone. A pod that tolerates the taint is named
in the message: its DaemonSet may recreate it on the node.

The taint stays while a NodeMaintenance holds the node's evicted pods off it
(:func:`nodeagent.model.maintenance.holds_pods_off`: in Drain, not being deleted, covering the
node - the same rule as the static pods'); when none does any more, it is removed and the
DaemonSet pods come back.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from nodeagent.controllers.evictionrequest.controller import EventSink
from nodeagent.controllers.evictionrequest.settings import EvictionSettings
from nodeagent.controllers.interceptors.common import (
    WAITING,
    Clock,
    InterceptorClient,
    complete,
    progress,
    report,
    request_key_for_pod,
    target_pod,
    utcnow,
)
from nodeagent.kube.controller import Controller, SharedInformers
from nodeagent.kube.errors import Conflict, NotFound
from nodeagent.kube.ratelimit import RateLimiter
from nodeagent.kube.resources import EVICTIONREQUESTS, NODEMAINTENANCES, NODES, PODS, Obj
from nodeagent.kube.store import key_of
from nodeagent.kube.workqueue import WorkQueueMetrics
from nodeagent.model.drainplan import (
    InvalidPlan,
    PodType,
    classify,
    entries_from_dicts,
    targets_cover,
)
from nodeagent.model.interceptors import (
    DAEMONSET_INTERCEPTOR,
    EvictionRequestView,
    next_heartbeat_in,
    pod_terminal,
    pod_terminating,
)
from nodeagent.model.maintenance import Stage, effective_stage, holds_pods_off
from nodeagent.model.selectors import tolerates

__all__ = [
    "MAINTENANCE_TAINT",
    "DaemonSetInterceptor",
    "draining_maintenance",
]

log = logging.getLogger(__name__)

MAINTENANCE_TAINT: Mapping[str, str] = {"key": "nodeagent.io/maintenance", "effect": "NoSchedule"}
_TAINT_TEXT = "nodeagent.io/maintenance:NoSchedule"
_REQUEST = "request/"
_NODE = "node/"


def _is_ours(taint: object) -> bool:
    return (
        isinstance(taint, Mapping)
        and taint.get("key") == MAINTENANCE_TAINT["key"]
        and taint.get("effect") == MAINTENANCE_TAINT["effect"]
    )


def _taints(node: Obj) -> list[Any]:
    taints = (node.get("spec") or {}).get("taints")
    return list(taints) if isinstance(taints, list) else []


def has_taint(node: Obj) -> bool:
    return any(_is_ours(t) for t in _taints(node))


def draining_maintenance(
    maintenances: Iterable[Mapping[str, Any]], node_name: str, pod: Mapping[str, Any]
) -> Mapping[str, Any] | None:
    """The NodeMaintenance, if any, whose drainTargets for ``node_name`` target ``pod`` now
    (stage Drain, not being deleted). KEP-4212: the DaemonSet interceptor acts only then; an
    EvictionRequest from anyone else (a descheduler, say) is declined."""
    for nm in maintenances:
        if effective_stage(nm) != Stage.DRAIN:
            continue
        for ns in (nm.get("status") or {}).get("nodeStatuses") or ():
            if not isinstance(ns, Mapping) or (ns.get("nodeRef") or {}).get("name") != node_name:
                continue
            try:
                targets = entries_from_dicts(ns.get("drainTargets"), "drainTargets")
            except InvalidPlan:
                continue
            if targets_cover(targets, pod):
                return nm
    return None


class DaemonSetInterceptor(Controller):
    """Keys: ``request/<namespace>/<name>`` for EvictionRequests, ``node/<name>`` for the taint."""

    def __init__(
        self,
        client: InterceptorClient,
        informers: SharedInformers,
        settings: EvictionSettings,
        *,
        events: EventSink | None = None,
        queue_metrics: WorkQueueMetrics | None = None,
        clock: Clock = utcnow,
        workers: int = 2,
        rate_limiter: RateLimiter | None = None,
        name: str = "daemonset-interceptor",
    ) -> None:
        self.requests = informers.informer(EVICTIONREQUESTS)
        self.pods = informers.informer(PODS)
        self.nodes = informers.informer(NODES)
        self.maintenances = informers.informer(NODEMAINTENANCES)
        super().__init__(
            name,
            informers=[self.requests, self.pods, self.nodes, self.maintenances],
            workers=workers,
            rate_limiter=rate_limiter,
            metrics=queue_metrics,
        )
        self._client = client
        self._deadline = settings.heartbeat_deadline
        self._min_interval = settings.heartbeat_min_interval
        self._events = events
        self._clock = clock
        pod_keys = request_key_for_pod(self.requests.store)
        self.enqueue_on(self.requests, lambda er: [_REQUEST + key_of(er)])
        self.enqueue_on(self.pods, lambda pod: [_REQUEST + k for k in pod_keys(pod)])
        self.enqueue_on(self.nodes, lambda n: [_NODE + key_of(n)] if has_taint(n) else [])
        self.enqueue_on(self.maintenances, lambda _: self._tainted_nodes())

    def _tainted_nodes(self) -> Iterable[str]:
        return [_NODE + key_of(n) for n in self.nodes.store.list() if has_taint(n)]

    async def reconcile(self, key: str) -> None:
        if key.startswith(_REQUEST):
            await self._request(key.removeprefix(_REQUEST))
        elif key.startswith(_NODE):
            await self._node(key.removeprefix(_NODE))

    # -- the interceptor ------------------------------------------------------------------------

    async def _request(self, key: str) -> None:
        request = self.requests.store.get(key)
        if request is None:
            return
        view = EvictionRequestView.from_obj(request)
        if view.canceled or view.active != DAEMONSET_INTERCEPTOR:
            return
        entry = view.entry(DAEMONSET_INTERCEPTOR)
        if entry.completion_time is not None:
            return
        now = self._clock()
        pod = await target_pod(self._client, self.pods.store, view)
        if pod is None or pod_terminal(pod):
            await complete(self._client, request, DAEMONSET_INTERCEPTOR, now)
            return
        if classify(pod).pod_type is not PodType.DAEMONSET:
            message = "The pod is not owned by a DaemonSet; nothing for this interceptor to do."
            await report(
                self._client, request, DAEMONSET_INTERCEPTOR, lambda e: e.complete(now, message)
            )
            return
        node_name = (pod.get("spec") or {}).get("nodeName")
        if not isinstance(node_name, str) or not node_name:
            node_name = ""
        if await self._maintenance_for(node_name, pod) is None:
            message = (
                f"Declined: no NodeMaintenance drains the DaemonSet pods of node "
                f"{node_name or '(unscheduled)'} now (the pod is in no drainTargets); nothing "
                "was tainted or deleted."
            )
            await report(
                self._client, request, DAEMONSET_INTERCEPTOR, lambda e: e.complete(now, message)
            )
            return
        message = ""
        if node_name:
            await self._taint(node_name)
            message = f"Tainted node {node_name} with {_TAINT_TEXT}; "
        await self._delete(pod)
        message += f"deleted the pod gracefully; {WAITING}"
        message = message[0].upper() + message[1:]
        tolerations = (pod.get("spec") or {}).get("tolerations")
        if isinstance(tolerations, list) and tolerates(tolerations, MAINTENANCE_TAINT):
            message += (
                f" The pod tolerates {_TAINT_TEXT}, so its DaemonSet may recreate it on the node."
            )
        stored = await progress(
            self._client,
            request,
            DAEMONSET_INTERCEPTOR,
            message,
            now,
            self._deadline,
            self._min_interval,
        )
        if stored is not None:
            self.enqueue_after(
                _REQUEST + key, next_heartbeat_in(stored, now, self._deadline, self._min_interval)
            )

    async def _maintenance_for(self, node_name: str, pod: Obj) -> Mapping[str, Any] | None:
        found = draining_maintenance(self.maintenances.store.list(), node_name, pod)
        if found is None:
            # the cache may lag behind the maintenance that asked for this eviction
            listed = await self._client.list(NODEMAINTENANCES)
            found = draining_maintenance(listed.get("items") or [], node_name, pod)
        return found

    async def _taint(self, node_name: str) -> None:
        node = self.nodes.store.get(node_name)
        if node is None or has_taint(node):
            return
        taints = [*_taints(node), dict(MAINTENANCE_TAINT)]
        patch = {
            "metadata": {"resourceVersion": (node.get("metadata") or {}).get("resourceVersion")},
            "spec": {"taints": taints},
        }
        # Conflict propagates: retried once the cache has the node's new version.
        await self._client.patch(NODES, node_name, patch)
        log.info("tainted node %s with %s for DaemonSet pod eviction", node_name, _TAINT_TEXT)
        if self._events is not None:
            await self._events.record(
                node, "Normal", "MaintenanceTaint", f"Tainted with {_TAINT_TEXT} by nodeagent"
            )

    async def _delete(self, pod: Obj) -> None:
        """Delete the pod gracefully unless it is already terminating."""
        if pod_terminating(pod):
            return
        md = pod.get("metadata") or {}
        try:
            await self._client.delete(
                PODS, str(md.get("name")), md.get("namespace"), uid=md.get("uid")
            )
        except (NotFound, Conflict):
            return  # gone or replaced: the next reconcile completes
        log.info("deleted DaemonSet pod %s/%s", md.get("namespace"), md.get("name"))

    # -- the taint ----------------------------------------------------------------------------

    async def _node(self, name: str) -> None:
        node = self.nodes.store.get(name)
        if node is None or not has_taint(node):
            return
        if any(holds_pods_off(nm, name, node) for nm in self.maintenances.store.list()):
            return
        taints = [t for t in _taints(node) if not _is_ours(t)]
        patch = {
            "metadata": {"resourceVersion": (node.get("metadata") or {}).get("resourceVersion")},
            "spec": {"taints": taints or None},
        }
        await self._client.patch(NODES, name, patch)
        log.info("removed %s from node %s: no maintenance covers it", _TAINT_TEXT, name)
        if self._events is not None:
            await self._events.record(
                node, "Normal", "MaintenanceTaintRemoved", f"Removed {_TAINT_TEXT}: no maintenance"
            )
