"""Annotate-and-wait interceptors (DESIGN 2.3; the Eviction Reschedule Hook pattern), leader only.

For each configured interceptor: when it is the active interceptor of an EvictionRequest, set
the configured annotation on the pod (e.g. ``cao.couchbase.com/reschedule: "true"``), so the
pod's operator moves it, and heartbeat until the pod with that UID is gone (a pod recreated under
the same name is another pod: the old one is gone). Then set ``completionTime``. The
Eviction API is never called: the operator decides how the pod goes.

When the request is canceled before the pod went, the annotation is taken off the pod again
(only if it still has the configured value), so the operator does not move a pod nobody wants
moved any more.

The same on upstream Evictions where the server serves them (`apis`): a rule is the responder
``annotate.nodeagent.io/<rule name>`` there.

The decisions are `plans.plan_annotate` and `plans.plan_withdraw`; this module carries them out.
"""

from __future__ import annotations

import logging

from nodeagent.controllers.interceptors.apis import RequestApi, turn_sources
from nodeagent.controllers.interceptors.common import (
    Clock,
    InterceptorClient,
    complete,
    progress,
    target_pod,
    utcnow,
)
from nodeagent.kube.controller import Controller, Result, SharedInformers
from nodeagent.kube.errors import NotFound
from nodeagent.kube.events import EventSink
from nodeagent.kube.ratelimit import RateLimiter
from nodeagent.kube.resources import PODS, Obj
from nodeagent.kube.workqueue import WorkQueueMetrics
from nodeagent.model.bodies import metadata_of
from nodeagent.model.interceptors.plans import annotate_rule, plan_annotate, plan_withdraw
from nodeagent.model.interceptors.requests import EvictionRequestView
from nodeagent.model.interceptors.settings import AnnotateRule, EvictionSettings
from nodeagent.model.lifecycle.ourresponders import ResponderNames

__all__ = ["AnnotateInterceptors"]

log = logging.getLogger(__name__)


class AnnotateInterceptors(Controller):
    """All configured annotate-and-wait interceptors, over the keys of EvictionRequests (and of
    upstream Evictions, with `upstream`: the responder names there)."""

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
        name: str = "annotate-interceptors",
    ) -> None:
        self.sources = turn_sources(informers, upstream)
        self.pods = informers.informer(PODS)
        super().__init__(
            name,
            informers=[*(s.informer for s in self.sources), self.pods],
            workers=workers,
            rate_limiter=rate_limiter,
            metrics=queue_metrics,
        )
        self._client = client
        self._rules = {rule.name: rule for rule in settings.annotate}
        self._deadline = settings.heartbeat_deadline
        self._min_interval = settings.heartbeat_min_interval
        self._events = events
        self._clock = clock
        for source in self.sources:
            self.enqueue_on(source.informer, source.keys)
            self.enqueue_on(self.pods, source.keys_for_pod)

    async def reconcile(self, key: str) -> Result | None:
        for source in self.sources:
            if (request := source.get(key)) is not None:
                return await self._reconcile(request, source.view(request), source.api)
        return None

    async def _reconcile(
        self, request: Obj, view: EvictionRequestView, api: RequestApi
    ) -> Result | None:
        if view.canceled:
            await self._withdraw(view)
            return None
        rule = annotate_rule(view, self._rules)
        if rule is None:
            return None
        now = self._clock()
        pod = await target_pod(self._client, self.pods.store, view)
        plan = plan_annotate(rule, pod)
        if plan.complete or pod is None:
            done = await complete(self._client, request, rule.name, now, api)
            if done is not None and self._events is not None:
                await self._events.record(request, "Normal", "InterceptorCompleted", done.message)
            return None
        if plan.annotate:
            await self._annotate(pod, rule, rule.annotation_value)
            if self._events is not None:
                await self._events.record(
                    request,
                    "Normal",
                    "PodAnnotated",
                    f"{rule.name} annotated pod {view.target_name} with "
                    f"{rule.annotation_key}={rule.annotation_value} so its operator moves it.",
                )
        return await progress(
            self._client,
            request,
            rule.name,
            plan.message,
            now,
            self._deadline,
            self._min_interval,
            api,
        )

    async def _annotate(self, pod: Obj, rule: AnnotateRule, value: str | None) -> None:
        md = metadata_of(pod)
        # The resourceVersion (and UID) make sure a pod recreated under the same name is never
        # annotated by mistake: that one is not asked to move.
        patch = {
            "metadata": {
                "resourceVersion": md.get("resourceVersion"),
                "uid": md.get("uid"),
                "annotations": {rule.annotation_key: value},
            }
        }
        try:
            await self._client.patch(PODS, str(md.get("name")), patch, md.get("namespace"))
        except NotFound:
            return  # gone: the next reconcile completes
        # Conflict propagates: the pod changed meanwhile; retried once the cache caught up.

    async def _withdraw(self, view: EvictionRequestView) -> None:
        """Canceled: take the annotation off the pod if the interceptor had its turn (so it may
        have set it) and did not finish, and the pod still has the configured value."""
        pod = self.pods.store.get(f"{view.namespace}/{view.target_name}")
        for rule in plan_withdraw(view, pod, self._rules):
            assert pod is not None
            log.info(
                "request %s/%s canceled: removing %s from pod %s",
                view.namespace,
                view.name,
                rule.annotation_key,
                view.target_name,
            )
            await self._annotate(pod, rule, None)
