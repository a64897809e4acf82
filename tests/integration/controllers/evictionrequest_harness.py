"""Shared set-up for the EvictionRequest controller and interceptor tests (no tests here).

The cluster (simulated or real, the `backend` fixture) gets the CRDs; the controllers run through
the real client over HTTP with their own shared informers, as the agent's ServiceAccount (so RBAC
holds them on the real server). The tests act through the API as admin and read what the API
server holds through watches (`ClusterView`), waiting on its changes (`until`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from nodeagent.controllers.evictionrequest import EvictionRequestController, EvictionSettings
from nodeagent.controllers.interceptors import AnnotateInterceptors, DaemonSetInterceptor
from nodeagent.kube.client import KubeClient
from nodeagent.kube.controller import Controller, SharedInformers
from nodeagent.kube.errors import Conflict
from nodeagent.kube.events import EventRecorder
from nodeagent.kube.resources import (
    DAEMONSETS,
    EVENTS,
    EVICTIONREQUESTS,
    NODEMAINTENANCES,
    NODES,
    PDBS,
    PODS,
    Obj,
    Resource,
)
from nodeagent.model.backoff import JitteredBackoff
from nodeagent.model.interceptors.requests import CANCELED, EVICTED
from nodeagent.model.names import IMPERATIVE_INTERCEPTOR
from nodeagent.observability.metrics import EvictionRequestMetrics, WorkQueueMetricsFactory
from tests.clusters import CONTROLLERS_ACCOUNT, ClusterView, TestCluster
from tests.requestcount import RequestCounter

__all__ = ["REQUESTER", "Env", "env", "fast_settings", "shipped_env"]

REQUESTER = "nodemaintenance.k8s.io"

# what the tests look at, kept current by watches
VIEWED = (PODS, NODES, DAEMONSETS, PDBS, EVICTIONREQUESTS, NODEMAINTENANCES, EVENTS)


def fast_settings(
    deadline: float = 60.0, base: float = 0.05, cap: float = 0.4, **extra: Any
) -> EvictionSettings:
    """Deadlines of seconds, so heartbeats a quarter of that apart: the `env` fixture's CRD
    allows that (the shipped one asks 60 s)."""
    return EvictionSettings(
        heartbeat_deadline=timedelta(seconds=deadline),
        heartbeat_min_interval=timedelta(0),
        backoff_base=base,
        backoff_cap=cap,
        **extra,
    )


class Calls(RequestCounter):
    """The controllers' request hook: (verb, plural, status) counts."""

    def refused(self, plural: str, status: int = 422) -> int:
        """Requests about ``plural`` answered with ``status`` (422: a write failed validation)."""
        return sum(n for (_, p, code), n in self.counts.items() if p == plural and code == status)

    def evictions(self, status: int | None = None) -> int:
        return sum(
            n
            for (verb, _, code), n in self.counts.items()
            if verb == "evict" and (status is None or code == status)
        )


def _namespace(resource: Resource, namespace: str | None) -> str | None:
    return namespace if resource.namespaced else None


@dataclass
class Env:
    backend: TestCluster
    kube: KubeClient  # the admin's: what the tests do
    agent: KubeClient  # the agent's ServiceAccount: what the controllers do
    calls: Calls  # the agent client's requests
    view: ClusterView
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)
    controllers: list[Controller] = field(default_factory=list)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    # -- what the API server holds, as its watches tell -----------------------------------------

    def get(self, resource: Resource, name: str, namespace: str | None = "default") -> Obj | None:
        return self.view.get(resource, name, _namespace(resource, namespace))

    def pods(self, namespace: str = "default", **labels: str) -> list[Obj]:
        return self.view.list(PODS, namespace, **labels)

    def er(self, name: str, namespace: str = "default") -> Obj:
        obj = self.get(EVICTIONREQUESTS, name, namespace)
        assert obj is not None, f"no EvictionRequest {namespace}/{name}"
        return obj

    def _status(self, name: str, namespace: str) -> dict[str, Any]:
        # not seen yet (the watch may lag the create): no status yet
        return dict((self.get(EVICTIONREQUESTS, name, namespace) or {}).get("status") or {})

    def condition(self, name: str, type_: str, namespace: str = "default") -> dict[str, Any]:
        for c in self._status(name, namespace).get("conditions") or []:
            if c["type"] == type_:
                return dict(c)
        return {}

    def is_true(self, name: str, type_: str, namespace: str = "default") -> bool:
        return self.condition(name, type_, namespace).get("status") == "True"

    def evicted(self, name: str, namespace: str = "default") -> bool:
        return self.is_true(name, EVICTED, namespace)

    def canceled(self, name: str, namespace: str = "default") -> bool:
        return self.is_true(name, CANCELED, namespace)

    def active(self, name: str, namespace: str = "default") -> list[str]:
        return list(self._status(name, namespace).get("activeInterceptors") or [])

    def entry(self, name: str, interceptor: str, namespace: str = "default") -> dict[str, Any]:
        for e in self._status(name, namespace).get("interceptors") or []:
            if e["name"] == interceptor:
                return dict(e)
        return {}

    def imperative_message(self, name: str, namespace: str = "default") -> str:
        return str(self.entry(name, IMPERATIVE_INTERCEPTOR, namespace).get("message", ""))

    def events_for(self, name: str, namespace: str = "default") -> list[Obj]:
        return [
            e for e in self.view.list(EVENTS, namespace) if e["involvedObject"].get("name") == name
        ]

    async def until(self, cond: Callable[[], Any], timeout: float = 20) -> None:
        await self.view.until(lambda: bool(cond()), timeout)

    # -- acting through the API, as admin -------------------------------------------------------

    async def create(self, resource: Resource, body: Obj) -> Obj:
        if resource.namespaced:
            body["metadata"].setdefault("namespace", "default")
        return await self.kube.create(resource, body)

    async def patch(
        self, resource: Resource, name: str, patch: Obj, namespace: str | None = "default"
    ) -> Obj:
        return await self.kube.patch(resource, name, patch, _namespace(resource, namespace))

    async def delete(
        self, resource: Resource, name: str, namespace: str | None = "default", **kw: Any
    ) -> None:
        await self.kube.delete(resource, name, _namespace(resource, namespace), **kw)

    async def update_status(
        self, resource: Resource, name: str, fn: Callable[[Obj], None], namespace: str = "default"
    ) -> Obj:
        """Read, change and write back the status, again if someone else wrote meanwhile."""
        async with asyncio.timeout(10):
            while True:
                obj = await self.kube.get(resource, name, _namespace(resource, namespace))
                fn(obj)
                with contextlib.suppress(Conflict):
                    return await self.kube.replace_status(resource, obj)

    async def request_for(
        self,
        pod: Obj,
        *,
        name: str | None = None,
        requesters: Iterable[str] = (REQUESTER,),
    ) -> Obj:
        """Create the EvictionRequest for `pod` (named after its UID unless `name` is given)."""
        md = pod["metadata"]
        return await self.create(
            EVICTIONREQUESTS,
            {
                "metadata": {"name": name or md["uid"], "namespace": md["namespace"]},
                "spec": {
                    "target": {"pod": {"name": md["name"], "uid": md["uid"]}},
                    "requesters": [{"name": r} for r in requesters],
                },
            },
        )

    # -- the controllers ------------------------------------------------------------------------

    async def start(
        self,
        settings: EvictionSettings,
        *,
        workers: int = 2,
        annotate: bool = False,
        daemonset: bool = False,
    ) -> EvictionRequestController:
        """Run the EvictionRequest controller (and the chosen interceptors) until the test ends."""
        informers = SharedInformers(self.agent, backoff=lambda: JitteredBackoff(base=0.05, cap=0.5))
        queues = WorkQueueMetricsFactory(self.registry)
        events = EventRecorder(self.agent, "nodeagent")
        controller = EvictionRequestController(
            self.agent,
            informers,
            settings,
            metrics=EvictionRequestMetrics(self.registry),
            queue_metrics=queues.for_queue("evictionrequests"),
            events=events,
            workers=workers,
        )
        self.controllers.append(controller)
        if annotate:
            self.controllers.append(
                AnnotateInterceptors(
                    self.agent,
                    informers,
                    settings,
                    events=events,
                    queue_metrics=queues.for_queue("annotate-interceptors"),
                )
            )
        if daemonset:
            self.controllers.append(
                DaemonSetInterceptor(
                    self.agent,
                    informers,
                    settings,
                    events=events,
                    queue_metrics=queues.for_queue("daemonset-interceptor"),
                )
            )
        self._tasks.append(asyncio.create_task(informers.run()))
        for c in self.controllers:
            self._tasks.append(asyncio.create_task(c.run()))
        async with asyncio.timeout(10):
            for c in self.controllers:
                await c.wait_synced()
        return controller

    def metric(self, sample: str, /, **labels: str) -> float | None:
        return self.registry.get_sample_value(sample, labels)

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t
        self._tasks.clear()


@pytest.fixture
async def env(backend: TestCluster) -> AsyncIterator[Env]:
    """The CRDs allow heartbeats any distance apart (see `fast_settings`)."""
    async with _env(backend, heartbeat_spacing=0) as e:
        yield e


@pytest.fixture
async def shipped_env(backend: TestCluster) -> AsyncIterator[Env]:
    """The CRDs as shipped: the real API server refuses heartbeats closer than 60 s."""
    async with _env(backend, heartbeat_spacing=None) as e:
        yield e


@contextlib.asynccontextmanager
async def _env(backend: TestCluster, heartbeat_spacing: int | None) -> AsyncIterator[Env]:
    await backend.install_crds(heartbeat_spacing=heartbeat_spacing)
    kube = backend.client(max_workers=8)
    view = ClusterView(kube, VIEWED)
    await view.start()
    calls = Calls()
    # the controllers as the agent's ServiceAccount: RBAC holds them on the real server
    account = await backend.service_account(CONTROLLERS_ACCOUNT)
    agent = backend.client(account, max_workers=8, on_request=calls)
    e = Env(backend, kube, agent, calls, view)
    try:
        yield e
    finally:
        await e.stop()
        await view.stop()
