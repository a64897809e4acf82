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

On upstream Evictions, where the server serves them (`apis`), it is the responder
``nodeagent.io/daemonset`` and does the same.

The decisions are `plans.plan_daemonset`, `plans.taint_patch` and `plans.untaint_patch`; this
module reads the caches (and the API server where the cache may lag), writes and heartbeats.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from nodeagent.controllers.interceptors.apis import RequestApi, turn_sources
from nodeagent.controllers.interceptors.common import (
    Clock,
    InterceptorClient,
    complete,
    progress,
    report,
    target_pod,
    utcnow,
)
from nodeagent.kube.controller import Controller, Result, SharedInformers
from nodeagent.kube.errors import Conflict, NotFound
from nodeagent.kube.events import EventSink
from nodeagent.kube.ratelimit import RateLimiter
from nodeagent.kube.resources import NODEMAINTENANCES, NODES, PODS, Obj
from nodeagent.kube.store import key_of
from nodeagent.kube.workqueue import WorkQueueMetrics
from nodeagent.model.bodies import metadata_of
from nodeagent.model.interceptors.plans import (
    daemonset_turn,
    has_taint,
    plan_daemonset,
    taint_patch,
    untaint_patch,
)
from nodeagent.model.interceptors.requests import EvictionRequestView
from nodeagent.model.interceptors.settings import EvictionSettings
from nodeagent.model.lifecycle.ourresponders import ResponderNames
from nodeagent.model.names import DAEMONSET_INTERCEPTOR, TAINT_TEXT

__all__ = ["DaemonSetInterceptor"]

log = logging.getLogger(__name__)

_NODE = "node/"


class DaemonSetInterceptor(Controller):
    """Keys: ``request/<namespace>/<name>`` for EvictionRequests, ``eviction/<namespace>/<name>``
    for upstream Evictions (with `upstream`), ``node/<name>`` for the taint."""

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
        upstream: ResponderNames | None = None,
        name: str = "daemonset-interceptor",
    ) -> None:
        self.sources = turn_sources(informers, upstream)
        self.pods = informers.informer(PODS)
        self.nodes = informers.informer(NODES)
        self.maintenances = informers.informer(NODEMAINTENANCES)
        super().__init__(
            name,
            informers=[
                *(s.informer for s in self.sources),
                self.pods,
                self.nodes,
                self.maintenances,
            ],
            workers=workers,
            rate_limiter=rate_limiter,
            metrics=queue_metrics,
        )
        self._client = client
        self._deadline = settings.heartbeat_deadline
        self._min_interval = settings.heartbeat_min_interval
        self._events = events
        self._clock = clock
        for source in self.sources:
            self.enqueue_on(source.informer, source.keys)
            self.enqueue_on(self.pods, source.keys_for_pod)
        self.enqueue_on(self.nodes, lambda n: [_NODE + key_of(n)] if has_taint(n) else [])
        self.enqueue_on(self.maintenances, lambda _: self._tainted_nodes())

    def _tainted_nodes(self) -> Iterable[str]:
        return [_NODE + key_of(n) for n in self.nodes.store.list() if has_taint(n)]

    async def reconcile(self, key: str) -> Result | None:
        if key.startswith(_NODE):
            await self._node(key.removeprefix(_NODE))
            return None
        for source in self.sources:
            if (request := source.get(key)) is not None:
                # every request is looked at on each change of it or its pod, mostly to find
                # it is not this interceptor's turn: read once per object the cache holds
                # (before any await, as a request deleted since is forgotten)
                return await self._request(request, source.view(request), source.api)
        return None

    # -- the interceptor ------------------------------------------------------------------------

    async def _request(
        self, request: Obj, view: EvictionRequestView, api: RequestApi
    ) -> Result | None:
        if not daemonset_turn(view):
            return None
        now = self._clock()
        pod = await target_pod(self._client, self.pods.store, view)
        plan = plan_daemonset(pod, self.maintenances.store.list())
        if plan.action == "decline":
            # the cache may lag behind the maintenance that asked for this eviction
            listed = await self._client.list(NODEMAINTENANCES)
            plan = plan_daemonset(pod, listed.get("items") or [])
        if plan.action == "complete" or pod is None:
            await complete(self._client, request, DAEMONSET_INTERCEPTOR, now, api)
            return None
        if plan.action != "evict":
            message = plan.message
            await report(
                self._client,
                request,
                DAEMONSET_INTERCEPTOR,
                lambda e: e.complete(now, message),
                api,
            )
            return None
        if plan.taint_node:
            await self._taint(plan.taint_node)
        if plan.delete:
            await self._delete(pod)
        return await progress(
            self._client,
            request,
            DAEMONSET_INTERCEPTOR,
            plan.message,
            now,
            self._deadline,
            self._min_interval,
            api,
        )

    async def _taint(self, node_name: str) -> None:
        node = self.nodes.store.get(node_name)
        patch = taint_patch(node)
        if node is None or patch is None:
            return
        # Conflict propagates: retried once the cache has the node's new version.
        await self._client.patch(NODES, node_name, patch)
        log.info("tainted node %s with %s for DaemonSet pod eviction", node_name, TAINT_TEXT)
        if self._events is not None:
            await self._events.record(
                node, "Normal", "MaintenanceTaint", f"Tainted with {TAINT_TEXT} by nodeagent"
            )

    async def _delete(self, pod: Obj) -> None:
        """Delete the pod gracefully (with its UID as precondition)."""
        md = metadata_of(pod)
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
        patch = untaint_patch(node, name, self.maintenances.store.list())
        if node is None or patch is None:
            return
        await self._client.patch(NODES, name, patch)
        log.info("removed %s from node %s: no maintenance covers it", TAINT_TEXT, name)
        if self._events is not None:
            await self._events.record(
                node, "Normal", "MaintenanceTaintRemoved", f"Removed {TAINT_TEXT}: no maintenance"
            )
