"""A NodeMaintenance drains a node through the upstream EvictionRequest API where the server
serves it (both backends serve it: the real control plane with the gate on, and the simulated
cluster; `eviction.api` auto), and through our CRD when told not to use it (`eviction.api:
nodeagent`, as on a server without the group). The whole leader runs, as the controllers'
ServiceAccount."""

from __future__ import annotations

from typing import Any

import pytest

from nodeagent.kube.resources import (
    EVICTIONREQUESTS,
    EVICTIONS,
    NODEMAINTENANCES,
    PODS,
    UPSTREAM_EVICTIONREQUESTS,
    Obj,
)
from nodeagent.model.bodies import condition
from nodeagent.model.names import UPSTREAM_REQUESTER
from tests.integration.upstream.common import budget, eviction_of
from tests.integration.upstream.drainenv import Env, env

# the simulated cluster serves lifecycle.k8s.io for these (the real control plane always does)
pytestmark = pytest.mark.lifecycle_api

__all__ = ["env"]  # the fixture, re-exported for pytest


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
    uid = pod["metadata"]["uid"]
    await budget(env.admin, "db", min_available=1)
    ended: list[str] = []  # the Eviction's Failed reasons, as each of its events showed them

    def watch(_event: str, resource: Any, obj: Obj) -> None:
        if resource == EVICTIONS and obj["spec"]["target"]["pod"]["uid"] == uid:
            ended.append(str((condition(obj.get("status") or {}, "Failed") or {}).get("reason")))

    env.view.listen(watch)
    await env.lead("auto")
    await env.maintenance("upgrade", "node-1")
    await env.until(lambda: eviction_of(env.view, uid).get("status", {}).get("targetResponders"))
    await env.admin.patch(NODEMAINTENANCES, "upgrade", {"spec": {"stage": "Complete"}})
    # withdrawn, the Eviction is canceled; seen canceled, our request goes, and the Eviction
    # with it (the garbage collector): the canceled state may last no longer than one event
    await env.until(lambda: "CanceledDueToNoRequesters" in ended)
    await env.until(lambda: env.ours(pod) is None)
    assert env.view.get(PODS, "db-0", "default") is not None  # the budget held it throughout


async def test_the_same_drain_through_our_crd_where_told(env: Env) -> None:
    pods = await env.pods_on("node-1", 2, "web")
    await env.lead("nodeagent")
    await env.maintenance("upgrade", "node-1")
    await env.until(lambda: env.drained("upgrade"))
    assert all(env.view.get(PODS, p["metadata"]["name"], "default") is None for p in pods)
    assert env.view.list(UPSTREAM_EVICTIONREQUESTS) == []
    assert env.view.list(EVICTIONS) == []
