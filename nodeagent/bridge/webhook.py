"""The eviction bridge's admission webhook: answers ``pods/eviction`` CREATE reviews from the
informers' caches (leader or not, every controllers replica answers), with the decision of
:mod:`nodeagent.model.bridge.decision`.

Every answer comes within a bound: the one write a decision may ask for (creating the
EvictionRequest, adding the bridge as requester) gets ``write_timeout`` seconds, well inside the
webhook's ``timeoutSeconds``; a write that does not finish in time, or fails, still gets the 429
the decision made, saying so (the client's next attempt reads the cache again). An eviction of a
pod without interceptors is answered from the caches alone.

What it cannot read at all (not JSON, no AdmissionReview, no ``request.uid``) is answered with
HTTP 400: the API server applies the webhook's failurePolicy (Ignore: the eviction goes ahead).
A review it can answer but is not an eviction it understands is allowed with a warning (the
same outcome, said to the client); see :mod:`nodeagent.model.bridge.review`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from dataclasses import replace
from typing import Protocol

from aiohttp import web
from prometheus_client import CollectorRegistry

from nodeagent.bridge.attempts import Attempts
from nodeagent.bridge.departures import Departures
from nodeagent.bridge.upstream import UpstreamRequests
from nodeagent.kube.controller import SharedInformers
from nodeagent.kube.errors import AlreadyExists, KubeError, NotFound
from nodeagent.kube.protocols import Creator, Deleter, Patcher
from nodeagent.kube.resources import EVICTIONREQUESTS, NAMESPACES, NODES, PODS, Obj
from nodeagent.model.bodies import metadata_of, uid_of
from nodeagent.model.bridge.decision import (
    BridgeSettings,
    EvictionAttempt,
    Verdict,
    decide,
    held_until_asked_again,
)
from nodeagent.model.bridge.review import (
    BadReview,
    Unsupported,
    allowed_review,
    read_review,
    review,
)
from nodeagent.model.bridge.upstream import upstream_write
from nodeagent.model.bridge.writes import (
    EnsureUpstreamRequest,
    EvictionRequestCreate,
    RecreateRequest,
    RequesterPatch,
    Write,
)
from nodeagent.model.interceptors.requests import EvictionRequestView
from nodeagent.model.lifecycle.ourresponders import ResponderNames, upstream_evicts
from nodeagent.model.memo import ObjectMemo
from nodeagent.model.times import Clock, utcnow
from nodeagent.observability.metrics import BridgeMetrics

__all__ = ["PATH", "WRITE_TIMEOUT", "BridgeClient", "EvictionBridge"]

log = logging.getLogger(__name__)

PATH = "/validate-eviction"
WRITE_TIMEOUT = 2.0
"""Seconds a write may take before the answer goes without it (the webhook's timeoutSeconds
is 5; the API server's own call to us counts against it too)."""
MAX_BODY = 256 * 1024  # an AdmissionReview of an Eviction is a few KB


class BridgeClient(Creator, Patcher, Deleter, Protocol):
    """The writes the bridge makes."""


class EvictionBridge:
    """Answers AdmissionReviews from shared informers of pods and EvictionRequests, and
    remembers for a while the pods it asked to evict that are gone (for the 404)."""

    def __init__(
        self,
        client: BridgeClient,
        informers: SharedInformers,
        settings: BridgeSettings,
        *,
        clock: Clock = utcnow,
        write_timeout: float = WRITE_TIMEOUT,
        metrics: BridgeMetrics | None = None,
    ) -> None:
        self._client = client
        self.settings = settings
        self.metrics = metrics if metrics is not None else BridgeMetrics(CollectorRegistry())
        self._clock = clock
        self._write_timeout = write_timeout
        self.pods = informers.informer(PODS)
        self.nodes = informers.informer(NODES)  # a drain of a replacement's node means it
        self.namespaces = informers.informer(NAMESPACES)  # those that opted out of the bridge
        self.requests = informers.informer(EVICTIONREQUESTS)
        self._view = ObjectMemo(EvictionRequestView.from_obj)
        self.departures = Departures(settings.departed_for, clock)
        self.attempts = Attempts(settings.asked_again_within, clock)
        self.requests.add_handler(on_delete=self._on_request_deleted)
        self.pods.add_handler(on_delete=self._on_pod_deleted)
        self._informers = informers
        self.upstream: UpstreamRequests | None = None

    def use_upstream(self, names: ResponderNames) -> None:
        """Ask for evictions on the upstream API (the server serves it), before the informers
        start: the pods' own responders are waited for too."""
        self.upstream = UpstreamRequests(self._informers, names)
        self.upstream.on_ours_deleted(self._on_view_deleted)
        self.settings = replace(self.settings, responders=names)

    async def wait_synced(self) -> None:
        await self.pods.wait_synced()
        await self.nodes.wait_synced()
        await self.namespaces.wait_synced()
        await self.requests.wait_synced()
        if self.upstream is not None:
            await self.upstream.wait_synced()

    def _asks_upstream(self, pod: Obj) -> bool:
        """Whether the bridge asks for ``pod``'s eviction on the upstream API: where it serves
        it, for pods whose interceptors all take turns there, as the maintenances do
        (:func:`~nodeagent.model.lifecycle.ourresponders.upstream_evicts`); a pod naming
        others' interceptors in ``nodeagent.io/eviction-interceptors`` stays on our CRD,
        where they get their turns."""
        return self.upstream is not None and upstream_evicts(pod, self.upstream.names)

    def _request_view(self, pod: Obj) -> EvictionRequestView | None:
        """The pod's request as the decision reads it, on the API the bridge asks on."""
        namespace, pod_uid = str(metadata_of(pod).get("namespace")), uid_of(pod)
        if self.upstream is not None and self._asks_upstream(pod):
            return self.upstream.view(namespace, pod_uid)
        request = self.requests.store.get(f"{namespace}/{pod_uid}")
        return self._view(request) if request is not None else None

    def _on_pod_deleted(self, pod: Obj) -> None:
        self.departures.pod_deleted(pod, self._request_view(pod))

    def _on_request_deleted(self, request: Obj) -> None:
        view = self._view(request)
        self._view.forget(request)
        self._on_view_deleted(view)

    def _on_view_deleted(self, view: EvictionRequestView) -> None:
        pod = self.pods.store.get(f"{view.namespace}/{view.target_name}")
        self.departures.request_deleted(view, pod)

    def decide(self, attempt: EvictionAttempt) -> Verdict:
        """The answer from the caches, before any write: an attempt that would write is
        remembered, and written for only once asked again (``held_until_asked_again``)."""
        pod = self.pods.store.get(f"{attempt.namespace}/{attempt.name}")
        view = self._request_view(pod) if pod is not None else None
        departed = self.departures.get(attempt.namespace, attempt.name)
        node_name = ((pod or {}).get("spec") or {}).get("nodeName")
        node = self.nodes.store.get(node_name) if isinstance(node_name, str) else None
        namespace = self.namespaces.store.get(attempt.namespace)
        now = self._clock()
        verdict = decide(attempt, pod, view, departed, self.settings, now, node, namespace)
        if verdict.write is not None and pod is not None:
            asked_at = self.attempts.first(attempt.namespace, uid_of(pod))
            verdict = held_until_asked_again(verdict, attempt, pod, asked_at, now, self.settings)
        if verdict.write is not None and pod is not None and self._asks_upstream(pod):
            verdict = replace(verdict, write=upstream_write(pod))
        return verdict

    async def answer(self, body: object) -> tuple[int, Obj]:
        """The HTTP status and the JSON answer to one request body."""
        try:
            uid, attempt = read_review(body)
        except BadReview as exc:
            self.metrics.answers.labels("unreadable").inc()
            return 400, {"error": f"not an AdmissionReview the bridge can answer: {exc}"}
        except Unsupported as exc:
            self.metrics.answers.labels("unsupported").inc()
            return 200, allowed_review(exc.uid, f"not handled ({exc}); allowed")
        verdict = self.decide(attempt)
        if verdict.write is not None:
            verdict = await self._write(verdict, verdict.write)
        self.metrics.answers.labels(verdict.why).inc()
        if not verdict.allowed:
            log.debug("eviction of %s/%s: %s", attempt.namespace, attempt.name, verdict.message)
        return 200, review(uid, verdict)

    async def _write(self, verdict: Verdict, write: Write) -> Verdict:
        """Apply ``write`` within the bound; the verdict's message says if it did not."""
        try:
            async with asyncio.timeout(self._write_timeout):
                await self._apply(write)
        except TimeoutError:
            self.metrics.write_failures.labels("timeout").inc()
            return _unsure(verdict, f"not written within {self._write_timeout:g}s")
        except KubeError as exc:
            log.warning("eviction bridge: %s", exc)
            self.metrics.write_failures.labels("error").inc()
            return _unsure(verdict, f"not written: {exc}")
        return verdict

    async def _apply(self, write: Write) -> None:
        c = self._client
        if isinstance(write, EnsureUpstreamRequest):
            await UpstreamRequests.ensure(c, write)
            return
        if isinstance(write, RequesterPatch):
            await c.patch(EVICTIONREQUESTS, write.name, write.to_patch(), write.namespace)
            return
        if isinstance(write, RecreateRequest):
            with contextlib.suppress(NotFound):
                await c.delete(
                    EVICTIONREQUESTS,
                    write.name,
                    write.namespace,
                    uid=write.uid,
                    resource_version=write.resource_version,
                )
        assert isinstance(write, EvictionRequestCreate | RecreateRequest)
        # AlreadyExists: another replica (or the client's previous attempt) was first
        with contextlib.suppress(AlreadyExists):
            await c.create(EVICTIONREQUESTS, write.body, write.namespace)

    def app(self) -> web.Application:
        """An aiohttp application serving :data:`PATH`."""
        app = web.Application(client_max_size=MAX_BODY)
        app.router.add_post(PATH, self._handle)
        return app

    async def _handle(self, request: web.Request) -> web.Response:
        try:
            body = json.loads(await request.read())
        except ValueError:
            body = None  # read_review says what is wrong
        status, answer = await self.answer(body)
        return web.json_response(answer, status=status)


def _unsure(verdict: Verdict, what: str) -> Verdict:
    """A 429 whose write did not go through: the client asks again anyway."""
    message = f"{verdict.message} (the EvictionRequest was {what}; the next attempt tries again)"
    return replace(verdict, message=message, write=None)
