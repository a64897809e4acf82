"""A NodeMaintenance drains a node through the upstream EvictionRequest API where the server
serves it (real control plane, gate on, `eviction.api` auto), and through our CRD when told
not to use it (`eviction.api: nodeagent`, as on a server without the group: the simulated
cluster's tests cover that path). The whole leader runs, as the controllers' ServiceAccount."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from nodeagent.config import Config, EvictionConfig
from nodeagent.controllers.cluster import ClusterControllers
from nodeagent.kube.client import KubeClient
from nodeagent.kube.resources import (
    EVICTIONREQUESTS,
    EVICTIONS,
    NODEMAINTENANCES,
    PDBS,
    PODS,
    UPSTREAM_EVICTIONREQUESTS,
    Obj,
)
from nodeagent.model.bodies import condition
from nodeagent.model.lifecycle.mirror import upstream_name
from nodeagent.model.names import UPSTREAM_REQUESTER
from tests.clusters import CONTROLLERS_ACCOUNT, ClusterView, TestCluster
from tests.integration.upstream.common import budget, pinned_pod
from tests.tasks import cancel_and_wait

pytestmark = pytest.mark.backends("real")

VIEWED = (PODS, PDBS, NODEMAINTENANCES, EVICTIONREQUESTS, UPSTREAM_EVICTIONREQUESTS, EVICTIONS)


@dataclass
class Env:
    backend: TestCluster
    admin: KubeClient
    view: ClusterView
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    async def lead(self, api: str) -> None:
        account = await self.backend.service_account(CONTROLLERS_ACCOUNT)
        agent = self.backend.client(account, max_workers=8)
        config = Config(eviction=EvictionConfig(api=api, backoff_base=0.2, backoff_cap=1.0))
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


async def test_a_maintenance_drains_through_the_upstream_api(env: Env) -> None:
    pods = await env.pods_on("node-1", 3, "web")
    seen: dict[str, Obj] = {}  # pod UID -> our upstream request, as last seen

    def watch(_event: str, resource: Any, obj: Obj) -> None:
        if resource == UPSTREAM_EVICTIONREQUESTS:
            seen[obj["spec"]["target"]["pod"]["uid"]] = obj

    env.view.listen(watch)
    await env.lead("auto")
    await env.maintenance("upgrade", "node-1")
    await env.until(lambda: env.drained("upgrade"))
    for pod in pods:
        assert env.view.get(PODS, pod["metadata"]["name"], "default") is None
        request = seen[pod["metadata"]["uid"]]
        assert request["spec"]["requester"] == UPSTREAM_REQUESTER
        assert request["spec"]["intent"] == "Eviction"
        assert request["metadata"]["labels"]["app"] == "web"
    assert env.view.list(EVICTIONREQUESTS) == []  # no request of our CRD for these pods


async def test_completing_a_maintenance_withdraws_its_upstream_requests(env: Env) -> None:
    [pod] = await env.pods_on("node-1", 1, "db")
    await budget(env.admin, "db", min_available=1)
    await env.lead("auto")
    await env.maintenance("upgrade", "node-1")

    def eviction() -> Obj:
        return env.view.get(EVICTIONS, pod["metadata"]["uid"], "default") or {}

    def failed() -> Any:
        return condition(eviction().get("status") or {}, "Failed") or {}

    await env.until(lambda: (eviction().get("status") or {}).get("targetResponders"))
    await env.admin.patch(NODEMAINTENANCES, "upgrade", {"spec": {"stage": "Complete"}})
    await env.until(lambda: (env.ours(pod) or {}).get("spec", {}).get("intent") == "Withdrawn")
    await env.until(lambda: failed().get("reason") == "CanceledDueToNoRequesters")
    assert env.view.get(PODS, "db-0", "default") is not None  # the budget held it throughout


async def test_the_same_drain_through_our_crd_where_told(env: Env) -> None:
    pods = await env.pods_on("node-1", 2, "web")
    await env.lead("nodeagent")
    await env.maintenance("upgrade", "node-1")
    await env.until(lambda: env.drained("upgrade"))
    assert all(env.view.get(PODS, p["metadata"]["name"], "default") is None for p in pods)
    assert env.view.list(UPSTREAM_EVICTIONREQUESTS) == []
    assert env.view.list(EVICTIONS) == []
