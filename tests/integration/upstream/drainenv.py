"""The whole leader, as the controllers' ServiceAccount (the admin's on the simulated cluster),
with a view of the cluster: the upstream drain tests' environment."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from nodeagent.config import AnnotateInterceptor, Config, EvictionConfig
from nodeagent.controllers.cluster import ClusterControllers
from nodeagent.kube.client import KubeClient
from nodeagent.kube.resources import (
    DAEMONSETS,
    EVICTIONREQUESTS,
    EVICTIONS,
    NODEMAINTENANCES,
    NODES,
    PDBS,
    PODS,
    UPSTREAM_EVICTIONREQUESTS,
    Obj,
)
from nodeagent.model.bodies import condition
from nodeagent.model.lifecycle.mirror import upstream_name
from tests.clusters import CONTROLLERS_ACCOUNT, ClusterView, TestCluster
from tests.integration.upstream.common import pinned_pod
from tests.tasks import cancel_and_wait

__all__ = ["Env", "env"]

VIEWED = (
    PODS,
    PDBS,
    NODES,
    DAEMONSETS,
    NODEMAINTENANCES,
    EVICTIONREQUESTS,
    UPSTREAM_EVICTIONREQUESTS,
    EVICTIONS,
)


@dataclass
class Env:
    backend: TestCluster
    admin: KubeClient
    view: ClusterView
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    async def lead(self, api: str, annotate: tuple[AnnotateInterceptor, ...] = ()) -> None:
        account = await self.backend.service_account(CONTROLLERS_ACCOUNT)
        agent = self.backend.client(account, max_workers=8)
        eviction = EvictionConfig(
            api=api, backoff_base=0.2, backoff_cap=1.0, annotate_interceptors=annotate
        )
        config = Config(eviction=eviction)
        leader = ClusterControllers(agent, config, CollectorRegistry())
        self.tasks.append(asyncio.create_task(leader.run()))

    async def pods_on(self, node: str, count: int, app: str) -> list[Obj]:
        return [await pinned_pod(self.admin, f"{app}-{i}", node, app=app) for i in range(count)]

    async def maintenance(self, name: str, node: str) -> None:
        await self.admin.create(
            NODEMAINTENANCES,
            {
                "apiVersion": "nodeagent.io/v1alpha1",
                "kind": "NodeMaintenance",
                "metadata": {"name": name},
                "spec": {
                    "stage": "Drain",
                    "reason": "test",
                    "nodeSelector": {
                        "nodeSelectorTerms": [
                            {
                                "matchFields": [
                                    {"key": "metadata.name", "operator": "In", "values": [node]}
                                ]
                            }
                        ]
                    },
                },
            },
        )

    def drained(self, name: str) -> bool:
        nm = self.view.get(NODEMAINTENANCES, name) or {}
        c = condition(nm.get("status") or {}, "Drained")
        return c is not None and c.get("status") == "True"

    def ours(self, pod: Obj) -> Obj | None:
        md = pod["metadata"]
        return self.view.get(UPSTREAM_EVICTIONREQUESTS, upstream_name(md["uid"]), md["namespace"])

    async def until(self, cond: Callable[[], Any], timeout: float = 60) -> None:
        await self.view.until(lambda: bool(cond()), timeout)


@pytest.fixture
async def env(backend: TestCluster) -> AsyncIterator[Env]:
    await backend.install_crds()
    admin = backend.client(max_workers=8)
    view = ClusterView(admin, VIEWED)
    await view.start()
    e = Env(backend, admin, view)
    try:
        yield e
    finally:
        await cancel_and_wait(e.tasks)
        await view.stop()
