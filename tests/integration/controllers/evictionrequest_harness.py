"""Shared set-up for the EvictionRequest controller and interceptor tests (no tests here).

The simulated cluster gets the CRDs; the controllers run through the real client over HTTP with
their own shared informers; the tests write objects straight into the simulated cluster's storage
and wait on its changes (`until`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from nodeagent.controllers.evictionrequest import EvictionRequestController, EvictionSettings
from nodeagent.controllers.interceptors import AnnotateInterceptors, DaemonSetInterceptor
from nodeagent.controllers.runtime import Controller, SharedInformers
from nodeagent.kube.client import KubeClient, load_api_client
from nodeagent.kube.events import EventRecorder
from nodeagent.kube.ratelimit import JitteredBackoff
from nodeagent.kube.resources import Resource
from nodeagent.manifests import crd_documents
from nodeagent.model.interceptors import CANCELED, EVICTED, IMPERATIVE_INTERCEPTOR
from nodeagent.observability.metrics import EvictionRequestMetrics, WorkQueueMetricsFactory
from nodeagent.sim.cluster import SimCluster
from nodeagent.sim.resources import ResourceType
from nodeagent.sim.store import Obj
from tests.simutil import until

__all__ = ["REQUESTER", "Env", "env", "fast_settings"]

REQUESTER = "nodemaintenance.k8s.io"


def fast_settings(
    deadline: float = 60.0, base: float = 0.05, cap: float = 0.4, **extra: Any
) -> EvictionSettings:
    return EvictionSettings(
        heartbeat_deadline=timedelta(seconds=deadline),
        backoff_base=base,
        backoff_cap=cap,
        **extra,
    )


class Calls:
    """The client's request hook: (verb, plural, status) counts."""

    def __init__(self) -> None:
        self.counts: Counter[tuple[str, str, int]] = Counter()

    def __call__(self, verb: str, resource: Resource, status: int) -> None:
        self.counts[(verb, resource.plural, status)] += 1

    def evictions(self, status: int | None = None) -> int:
        return sum(
            n
            for (verb, _, code), n in self.counts.items()
            if verb == "evict" and (status is None or code == status)
        )


@dataclass
class Env:
    sim: SimCluster
    kube: KubeClient
    calls: Calls
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)
    controllers: list[Controller] = field(default_factory=list)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    # -- the simulated cluster's storage --------------------------------------------------------

    def rt(self, plural: str) -> ResourceType:
        groups = {
            "pods": ("", "v1"),
            "nodes": ("", "v1"),
            "deployments": ("apps", "v1"),
            "daemonsets": ("apps", "v1"),
            "poddisruptionbudgets": ("policy", "v1"),
            "evictionrequests": ("nodeagent.io", "v1alpha1"),
            "nodemaintenances": ("nodeagent.io", "v1alpha1"),
            "events": ("", "v1"),
        }
        group, version = groups[plural]
        return self.sim.store.resource(group, version, plural)

    def create(self, plural: str, obj: Obj) -> Obj:
        rt = self.rt(plural)
        namespace = obj["metadata"].get("namespace", "default") if rt.namespaced else None
        if rt.namespaced:
            obj["metadata"]["namespace"] = namespace
        return self.sim.store.create(rt, namespace, obj)

    def get(self, plural: str, name: str, namespace: str | None = "default") -> Obj | None:
        rt = self.rt(plural)
        return self.sim.store.find(rt, namespace if rt.namespaced else None, name)

    def mutate(
        self,
        plural: str,
        name: str,
        fn: Callable[[Obj], None],
        namespace: str | None = "default",
        sub: str | None = None,
    ) -> Obj:
        rt = self.rt(plural)
        return self.sim.store.mutate(rt, namespace if rt.namespaced else None, name, fn, sub)

    def delete(self, plural: str, name: str, namespace: str | None = "default", **kw: Any) -> None:
        rt = self.rt(plural)
        self.sim.store.delete(rt, namespace if rt.namespaced else None, name, **kw)

    def pods(self, namespace: str = "default", **labels: str) -> list[Obj]:
        out = []
        for p in self.sim.store.list(self.rt("pods"), namespace):
            have = p["metadata"].get("labels") or {}
            if all(have.get(k) == v for k, v in labels.items()):
                out.append(p)
        return out

    def request_for(
        self,
        pod: Obj,
        *,
        name: str | None = None,
        requesters: Iterable[str] = (REQUESTER,),
    ) -> Obj:
        """Create the EvictionRequest for `pod` (named after its UID unless `name` is given)."""
        md = pod["metadata"]
        return self.create(
            "evictionrequests",
            {
                "apiVersion": "nodeagent.io/v1alpha1",
                "kind": "EvictionRequest",
                "metadata": {"name": name or md["uid"], "namespace": md["namespace"]},
                "spec": {
                    "target": {"pod": {"name": md["name"], "uid": md["uid"]}},
                    "requesters": [{"name": r} for r in requesters],
                },
            },
        )

    def er(self, name: str, namespace: str = "default") -> Obj:
        obj = self.get("evictionrequests", name, namespace)
        assert obj is not None, f"no EvictionRequest {namespace}/{name}"
        return obj

    def condition(self, name: str, type_: str, namespace: str = "default") -> dict[str, Any]:
        obj = self.get("evictionrequests", name, namespace)
        for c in ((obj or {}).get("status") or {}).get("conditions") or []:
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
        status = self.er(name, namespace).get("status") or {}
        return list(status.get("activeInterceptors") or [])

    def entry(self, name: str, interceptor: str, namespace: str = "default") -> dict[str, Any]:
        status = self.er(name, namespace).get("status") or {}
        for e in status.get("interceptors") or []:
            if e["name"] == interceptor:
                return dict(e)
        return {}

    def imperative_message(self, name: str, namespace: str = "default") -> str:
        return str(self.entry(name, IMPERATIVE_INTERCEPTOR, namespace).get("message", ""))

    def events_for(self, name: str, namespace: str = "default") -> list[Obj]:
        return [
            e
            for e in self.sim.store.list(self.rt("events"), namespace)
            if e["involvedObject"].get("name") == name
        ]

    async def until(self, cond: Callable[[], Any], timeout: float = 20) -> None:
        await until(self.sim, lambda: bool(cond()), timeout)

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
        informers = SharedInformers(self.kube, backoff=lambda: JitteredBackoff(base=0.05, cap=0.5))
        queues = WorkQueueMetricsFactory(self.registry)
        events = EventRecorder(self.kube, "nodeagent")
        controller = EvictionRequestController(
            self.kube,
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
                    self.kube,
                    informers,
                    settings,
                    events=events,
                    queue_metrics=queues.for_queue("annotate-interceptors"),
                )
            )
        if daemonset:
            self.controllers.append(
                DaemonSetInterceptor(
                    self.kube,
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
async def env(sim: SimCluster) -> AsyncIterator[Env]:
    crd_type = sim.store.resource("apiextensions.k8s.io", "v1", "customresourcedefinitions")
    for doc in crd_documents():
        sim.store.create(crd_type, None, doc)
    assert sim.kubeconfig is not None
    calls = Calls()
    client = KubeClient(load_api_client(str(sim.kubeconfig)), max_workers=8, on_request=calls)
    e = Env(sim, client, calls)
    try:
        yield e
    finally:
        await e.stop()
        await client.close()
