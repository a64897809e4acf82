"""The eviction bridge on the upstream EvictionRequest API (real control plane, which serves
lifecycle.k8s.io; `eviction.api: auto`): the real `kubectl drain` waits while the bridge's own
upstream request (`eviction-bridge-<pod UID>`, requester nodeagent.io/eviction-bridge) has the
annotate-and-wait responder ask the operator to move the pod, and ends once it has."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import replace

import pytest

from nodeagent.kube.resources import (
    EVICTIONREQUESTS,
    EVICTIONS,
    UPSTREAM_EVICTIONREQUESTS,
    Obj,
    Resource,
)
from nodeagent.model.names import UPSTREAM_BRIDGE_REQUESTER
from tests.conftest import Kubectl
from tests.integration.bridge.realbridge import EVICTION, RealBridge, register, served
from tests.integration.bridge.test_real_drain import cached, drained, operator
from tests.integration.upstream.common import pinned_pod
from tests.integration.upstream.drainenv import Env, env

__all__ = ["env"]  # the fixture, re-exported for pytest

pytestmark = [pytest.mark.backends("real"), pytest.mark.timeout(120)]

MOVER_RESPONDER = "annotate.nodeagent.io/mover.example.com"


@pytest.fixture
async def bridge(env: Env, kubectl: Kubectl) -> AsyncIterator[RealBridge]:
    """The leader and the bridge as on a cluster that serves the upstream API."""
    auto = replace(EVICTION, api="auto")
    await env.lead("auto", annotate=auto.annotate_interceptors)
    probe = await pinned_pod(env.admin, "probe", "node-3", app="probe")
    async with served(env.backend, auto) as b:
        assert b.server.bridge.upstream is not None  # it asked the server, which serves it
        await register(env.admin, kubectl, b, ("default", probe["metadata"]["name"]))
        yield b


async def test_kubectl_drain_waits_for_the_upstream_responder(
    env: Env, bridge: RealBridge, kubectl: Kubectl
) -> None:
    requests: dict[str, Obj] = {}
    active: set[str] = set()

    def seen(_event: str, resource: Resource, obj: Obj) -> None:
        if resource == UPSTREAM_EVICTIONREQUESTS:
            requests[obj["metadata"]["name"]] = obj
        if resource == EVICTIONS:
            for t in (obj.get("status") or {}).get("targetResponders") or []:
                if t["state"] == "Active":
                    active.add(t["name"])

    env.view.listen(seen)
    db = await pinned_pod(env.admin, "db-0", "node-1", app="db")
    await cached(env, bridge, db)
    old = str(db["metadata"]["uid"])
    moving = asyncio.create_task(operator(env, "db-0", "node-2"))
    try:
        await drained(kubectl)
        assert moving.done()  # the drain ended only once the operator had moved the pod
        new = moving.result()
    finally:
        moving.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await moving
    answered = bridge.server.bridge.metrics.answered()
    assert answered["waiting"] >= 1 and answered["gone"] == 1, answered
    ours = requests[f"eviction-bridge-{old}"]
    assert ours["spec"]["requester"] == UPSTREAM_BRIDGE_REQUESTER
    assert ours["spec"]["intent"] == "Eviction"
    assert MOVER_RESPONDER in active
    assert env.view.list(EVICTIONREQUESTS) == []  # nothing on our CRD
    assert new != old
