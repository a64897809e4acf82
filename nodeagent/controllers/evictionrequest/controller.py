"""The eviction request controller (leader only): applies :func:`plan_request` to every
EvictionRequest, including the ``imperative-eviction.k8s.io`` interceptor's Eviction API calls."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable
from datetime import datetime
from typing import Protocol

from nodeagent.kube.caswrite import CasWriter
from nodeagent.kube.controller import Controller, Result, SharedInformers
from nodeagent.kube.errors import NotFound
from nodeagent.kube.events import EventSink
from nodeagent.kube.evict import evict_pod
from nodeagent.kube.protocols import Evicter, Getter, Patcher, StatusPatcher
from nodeagent.kube.ratelimit import RateLimiter
from nodeagent.kube.resources import EVICTIONREQUESTS, PDBS, PODS, Obj
from nodeagent.kube.store import key_of, namespace_index, split_key, version_of
from nodeagent.kube.workqueue import WorkQueueMetrics
from nodeagent.model.bodies import mapping, metadata_of, uid_of
from nodeagent.model.budgets import BudgetGate, BudgetLedger, to_wake
from nodeagent.model.evictionrequest.plan import Plan
from nodeagent.model.evictionrequest.reconcile import plan_request
from nodeagent.model.interceptors.imperative import EvictionOutcome, ImperativeState
from nodeagent.model.interceptors.requests import EvictionRequestView
from nodeagent.model.interceptors.settings import EvictionSettings
from nodeagent.model.memo import ObjectMemo
from nodeagent.model.times import Clock, utcnow
from nodeagent.observability.metrics import EvictionRequestMetrics

__all__ = ["Clock", "EventSink", "EvictionClient", "EvictionRequestController"]

log = logging.getLogger(__name__)


class EvictionClient(Getter, Patcher, StatusPatcher, Evicter, Protocol):
    """The part of `KubeClient` the controller and the interceptors need."""


def _pod_key(obj: Obj) -> str | None:
    md = metadata_of(obj)
    namespace, uid = md.get("namespace"), md.get("uid")
    return f"{namespace}/{uid}" if namespace and uid else None


class EvictionRequestController(Controller):
    """Reconciles EvictionRequests (keys ``namespace/name``) from shared informers of
    EvictionRequests and pods. Run it on the leader only."""

    def __init__(
        self,
        client: EvictionClient,
        informers: SharedInformers,
        settings: EvictionSettings,
        *,
        metrics: EvictionRequestMetrics | None = None,
        queue_metrics: WorkQueueMetrics | None = None,
        events: EventSink | None = None,
        clock: Clock = utcnow,
        workers: int = 4,
        rate_limiter: RateLimiter | None = None,
        name: str = "evictionrequests",
    ) -> None:
        self.requests = informers.informer(EVICTIONREQUESTS)
        self.pods = informers.informer(PODS)
        self.budgets = informers.informer(PDBS, indexers={"namespace": namespace_index})
        super().__init__(
            name,
            informers=[self.requests, self.pods, self.budgets],
            workers=workers,
            rate_limiter=rate_limiter,
            metrics=queue_metrics,
        )
        self._client = client
        self._settings = settings
        self._metrics = metrics
        self._events = events
        self._clock = clock
        self._imperative: dict[str, tuple[str, ImperativeState]] = {}
        # key -> (request UID, interceptor, when it got its turn), as last written
        self._activations: dict[str, tuple[str, str, datetime]] = {}
        # keys of requests whose target pod (that UID) the pod informer saw deleted
        self._pod_deleted: set[str] = set()
        self._budgets = BudgetLedger()
        # keys whose Eviction API call is in flight (a budget's wake-up goes to others)
        self._evicting: set[str] = set()
        # A request we wrote is decided on again only once the informer shows our write (or
        # anything after it): decided on the version our write replaced, the next write is
        # refused (409) and the request decided again anyway. With many workers a request's
        # next turn (the pod's events, an immediate requeue) often came before the watch event.
        self._writes = CasWriter(client, EVICTIONREQUESTS, self.requests.store)
        # a request is read once per object the cache holds, not on every reconcile of it
        self._view = ObjectMemo(EvictionRequestView.from_obj)
        self.enqueue_on(self.requests, lambda obj: [key_of(obj)])
        self.requests.add_handler(
            self._on_request, lambda _, new: self._on_request(new), self._on_request_deleted
        )
        self.pods.add_handler(on_delete=self._on_pod_deleted)
        self.enqueue_on(self.pods, self._keys_for_pod)
        self.budgets.add_handler(
            self._on_budget,
            lambda _, new: self._on_budget(new),
            self._on_budget_deleted,
        )

    def _on_request(self, request: Obj) -> None:
        self._writes.seen(request)

    def _on_request_deleted(self, request: Obj) -> None:
        self._writes.gone(key_of(request))
        self._view.forget(request)

    def _on_pod_deleted(self, pod: Obj) -> None:
        key = _pod_key(pod)
        if key is not None and key in self.requests.store:
            self._pod_deleted.add(key)

    def _keys_for_pod(self, pod: Obj) -> Iterable[str]:
        # A request is named after its pod's UID, so the key follows from the pod.
        key = _pod_key(pod)
        return [key] if key is not None and key in self.requests.store else []

    def _on_budget_deleted(self, pdb: Obj) -> None:
        self._budgets.forget(pdb)

    def _on_budget(self, pdb: Obj) -> None:
        """A PodDisruptionBudget allows disruptions again: ask for that many of the evictions it
        held back or refused now rather than when their backoff runs out (kubectl drain polls
        every 5 s; the backoff doubles up to 15 minutes). Those waiting longest go first; one
        refused again falls back to its backoff until the budget's next change."""
        self._budgets.seen(pdb)
        waiting = []
        for key, (_, state) in self._imperative.items():
            if state.evicted or (state.next_attempt is None and state.held_since is None):
                continue
            target = mapping(mapping(self.requests.store.get(key) or {}, "spec"), "target")
            namespace, _ = split_key(key)
            pod = self.pods.store.get(f"{namespace}/{mapping(target, 'pod').get('name')}")
            waiting.append((key, state.retries, pod))
        for key in to_wake(pdb, waiting, self._evicting):
            uid, state = self._imperative[key]
            self._imperative[key] = (uid, dataclasses.replace(state, next_attempt=None))
            self.enqueue(key)

    # -- reconcile ----------------------------------------------------------------------------

    async def reconcile(self, key: str) -> Result | None:
        request = self.requests.store.get(key)
        if request is None:
            self._forget(key)
            return None
        if (left := self._writes.left(key)) is not None:
            return Result(requeue_after=left)  # its watch event brings us back sooner
        # Read here only, before any await: a request deleted meanwhile is not read again after
        # its delete event made the memo forget it.
        view = self._view(request)
        pod = await self._pod_for(view)
        remembered = self._imperative.get(key)
        state = remembered[1] if remembered and remembered[0] == view.uid else None
        gate = self._gate(pod) if pod is not None else None
        plan = self._plan(key, request, view, pod, state, None, gate)
        if plan.evict:
            self._budgets.let_through(gate)
            self._evicting.add(key)
            try:
                outcome = await self._evict(view, plan)
            finally:
                self._evicting.discard(key)
            if outcome.kind != "evicted":
                self._budgets.let_through(gate, -1)  # the server let nothing through
            plan = self._plan(key, request, view, pod, state, outcome, gate)
        return await self._apply(key, request, view, plan, pod)

    def _gate(self, pod: Obj) -> BudgetGate | None:
        namespace = metadata_of(pod).get("namespace")
        budgets = self.budgets.store.by_index("namespace", str(namespace))
        return self._budgets.gate(pod, budgets)

    def _plan(
        self,
        key: str,
        request: Obj,
        view: EvictionRequestView,
        pod: Obj | None,
        state: ImperativeState | None,
        outcome: EvictionOutcome | None,
        gate: BudgetGate | None,
    ) -> Plan:
        remembered = self._activations.get(key)
        activated_at = None
        if remembered is not None and remembered[:2] == (view.uid, view.active):
            activated_at = remembered[2]
        return plan_request(
            request,
            pod,
            self._clock(),
            self._settings,
            imperative=state,
            activated_at=activated_at,
            outcome=outcome,
            gate=gate,
        )

    async def _pod_for(self, view: EvictionRequestView) -> Obj | None:
        if not view.target_name or not view.namespace:
            return None
        pod = self.pods.store.get(f"{view.namespace}/{view.target_name}")
        matches = pod is not None and uid_of(pod) == view.target_uid
        seen_deleted = f"{view.namespace}/{view.target_uid}" in self._pod_deleted
        if matches or view.finished or seen_deleted:
            return pod
        # About to decide that the pod is missing or gone, for good (Canceled or Evicted). The
        # pod informer may lag behind the request's (a pod created just before its request),
        # so ask the API server first, unless the informer saw that very pod deleted.
        try:
            return await self._client.get(PODS, view.target_name, view.namespace)
        except NotFound:
            return None

    async def _evict(self, view: EvictionRequestView, plan: Plan) -> EvictionOutcome:
        result = await evict_pod(self._client, view.namespace, view.target_name, view.target_uid)
        log.info(
            "eviction of pod %s/%s for %s: %s %s",
            view.namespace,
            view.target_name,
            view.name,
            result.kind,
            result.detail,
        )
        if self._metrics is not None:
            self._metrics.eviction_attempt(view.namespace, view.name, view.target_name, result.kind)
        return result

    async def _apply(
        self, key: str, request: Obj, view: EvictionRequestView, plan: Plan, pod: Obj | None
    ) -> Result | None:
        if plan.imperative is not None:
            self._imperative[key] = (view.uid, plan.imperative)
        else:
            self._imperative.pop(key, None)
        # Metadata first, then status, each only onto the version the plan was made from (the
        # status write onto the version the metadata write produced). Interceptors wake up on the
        # status change and then see the final version, so their own writes do not collide
        # with ours. A Conflict (someone wrote meanwhile) propagates: the request is decided
        # again once the cache shows that write.
        current = request
        try:
            if plan.labels:
                body = {"metadata": {"labels": dict(plan.labels)}}
                current = await self._writes.patch(key, body, version_of(current))
            if plan.status is not None:
                body = {"status": plan.status}
                current = await self._writes.patch(key, body, version_of(current), status=True)
        except NotFound:
            self._forget(key)
            return None
        if plan.activation is not None:
            # Remembered only once written: a plan made from a stale cache must not move it.
            self._activations[key] = (view.uid, *plan.activation)
        self._observe(current, view if current is request else None, plan)
        for note in plan.events:
            subject = pod if note.on_pod and pod is not None else current
            if self._events is not None:
                await self._events.record(subject, note.type, note.reason, note.message)
        if plan.finished:
            return None
        return Result(requeue_after=plan.requeue_after)

    def _observe(self, request: Obj, view: EvictionRequestView | None, plan: Plan) -> None:
        """`view`: the request's, when known (not that of a version our write returned)."""
        if self._metrics is None:
            return
        if view is None:
            view = EvictionRequestView.from_obj(request)
        if plan.finished:
            self._metrics.forget(view.namespace, view.name, keep_evictions=True)
            return
        self._metrics.observe(
            view.namespace,
            view.name,
            view.target_name,
            active=[view.active] if view.active else [],
            processed=view.processed,
            requesters=view.requesters,
            interceptors=view.target_interceptors or (),
        )

    def _forget(self, key: str) -> None:
        self._writes.gone(key)
        self._pod_deleted.discard(key)
        self._imperative.pop(key, None)
        self._activations.pop(key, None)
        if self._metrics is not None:
            namespace, name = split_key(key)
            self._metrics.forget(namespace or "", name)
