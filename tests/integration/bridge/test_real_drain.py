"""The eviction bridge on the real control plane with the real `kubectl drain` (issue 28):
kube-apiserver calls the bridge's webhook (realbridge.py), the whole leader runs as the
controllers' ServiceAccount with its annotate-and-wait interceptors, and a test operator moves
the pod it is asked to move. The drain waits (429s, each printed by kubectl) until the pod has moved
under its name, then gets 404 for the pod it meant; a pod without interceptors is evicted at
once, untouched; a Strimzi-style rolling update (the operator deletes the pod, its StatefulSet
makes it again elsewhere) is waited for the same way; with the bridge down or hanging
(failurePolicy Ignore, timeoutSeconds 5) a drain goes through as if there were no bridge."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import pytest

from nodeagent.config import AnnotateInterceptor
from nodeagent.kube.resources import EVICTIONREQUESTS, NODES, PODS, STATEFULSETS, Obj, Resource
from nodeagent.model.names import BRIDGE_REQUESTER
from tests.conftest import Kubectl
from tests.integration.bridge.realbridge import (
    EVICTION,
    MOVER,
    ROLLER,
    RealBridge,
    hanging,
    register,
    served,
)
from tests.integration.upstream.common import pinned_pod
from tests.integration.upstream.drainenv import Env, env
from tests.simutil import running

__all__ = ["env"]  # the fixture, re-exported for pytest

pytestmark = [pytest.mark.backends("real"), pytest.mark.timeout(120)]

DRAIN = ("drain", "node-1", "--ignore-daemonsets", "--force", "--timeout=50s")


class Requests:
    """Every EvictionRequest the test's view saw, by pod UID (the garbage collector deletes
    them with their pods, so the end state says nothing of what was asked)."""

    def __init__(self, env: Env) -> None:
        self.seen: dict[str, Obj] = {}
        env.view.listen(self._seen)

    def _seen(self, _event: str, resource: Resource, obj: Obj) -> None:
        if resource == EVICTIONREQUESTS:
            self.seen[obj["spec"]["target"]["pod"]["uid"]] = obj


@pytest.fixture
async def bridge(env: Env, kubectl: Kubectl) -> AsyncIterator[RealBridge]:
    """The leader with the mover and the bridge, the webhook registered and called."""
    await env.lead("nodeagent", annotate=EVICTION.annotate_interceptors)
    probe = await pinned_pod(env.admin, "probe", "node-3", app="probe")
    async with served(env.backend, EVICTION) as b:
        await register(env.admin, kubectl, b, ("default", probe["metadata"]["name"]))
        yield b


async def cached(env: Env, bridge: RealBridge, pod: Obj) -> None:
    md = pod["metadata"]
    await env.until(lambda: bridge.cached("default", md["name"], md["uid"]))


async def db_on_node_1(env: Env, bridge: RealBridge) -> Obj:
    """A pod of the mover's app on node-1, once the bridge has it, and the bridge stopped: the
    webhook stays registered, nothing serves it."""
    db = await pinned_pod(env.admin, "db-0", "node-1", app="db")
    await cached(env, bridge, db)
    await bridge.stop()
    return db


async def operator(env: Env, name: str, to: str) -> str:
    """The db's operator: once asked (the annotation), it moves the pod to node ``to`` under
    the same name; the new pod's UID."""

    await env.until(lambda: annotated(env.view.get(PODS, name, "default"), MOVER), timeout=40)
    await env.admin.delete(PODS, name, "default", grace_period_seconds=0)
    await env.until(lambda: env.view.get(PODS, name, "default") is None)
    moved = await pinned_pod(env.admin, name, to, app="db")
    return str(moved["metadata"]["uid"])


async def drained(kubectl: Kubectl) -> None:
    """``kubectl drain node-1`` to its end."""
    result = await kubectl.run(*DRAIN, timeout=60)
    assert result.code == 0, result.err + result.out
    assert "node/node-1 drained" in result.out


async def test_kubectl_drain_waits_for_the_operator_to_move_the_pod(
    env: Env, bridge: RealBridge, kubectl: Kubectl
) -> None:
    requests = Requests(env)
    db = await pinned_pod(env.admin, "db-0", "node-1", app="db")
    web = await pinned_pod(env.admin, "web-0", "node-1", app="web")
    await cached(env, bridge, db)
    await cached(env, bridge, web)
    old = str(db["metadata"]["uid"])

    moving = asyncio.create_task(operator(env, "db-0", "node-2"))
    try:
        await drained(kubectl)
        # the drain ended only once the operator had moved the pod
        assert moving.done()
        new = moving.result()
    finally:
        moving.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await moving
    # kubectl's eviction was answered 429 (no Retry-After: kubectl prints it and retries at
    # its own pace, 5 s) while the bridge asked
    # for the eviction with an EvictionRequest and the mover had the operator move the pod;
    # then 404: the pod it meant is gone
    answered = bridge.server.bridge.metrics.answered()
    assert answered["waiting"] >= 1 and answered["gone"] == 1, answered
    assert requests.seen[old]["spec"]["requesters"] == [{"name": BRIDGE_REQUESTER}]

    def moved() -> Obj | None:
        return env.view.get(PODS, "db-0", "default")

    await env.until(lambda: (moved() or {}).get("metadata", {}).get("uid") == new)
    assert new != old and (moved() or {})["spec"]["nodeName"] == "node-2"
    # the pod without interceptors: evicted at once, no request
    await env.until(lambda: env.view.get(PODS, "web-0", "default") is None)
    assert str(web["metadata"]["uid"]) not in requests.seen
    assert bridge.server.bridge.metrics.answered()["no-interceptors"] >= 1


KAFKA: Obj = {
    "apiVersion": "apps/v1",
    "kind": "StatefulSet",
    "metadata": {"name": "kafka", "namespace": "default"},
    "spec": {
        "serviceName": "kafka",
        "replicas": 1,
        "selector": {"matchLabels": {"app": "kafka"}},
        "template": {
            "metadata": {
                "labels": {"app": "kafka"},
                "annotations": {"sim.nodeagent.io/exit-seconds": "1"},
            },
            "spec": {"containers": [{"name": "kafka", "image": "kafka"}]},
        },
    },
}


def annotated(pod: Obj | None, rule: AnnotateInterceptor) -> bool:
    annotations = (pod or {}).get("metadata", {}).get("annotations") or {}
    return annotations.get(rule.annotation_key) == rule.annotation_value


async def test_a_strimzi_style_rolling_update_moves_a_statefulset_pod(
    env: Env, bridge: RealBridge, kubectl: Kubectl
) -> None:
    """The Drain Cleaner's pattern with its annotation: the operator rolls the broker (deletes
    its pod) and the real StatefulSet controller makes kafka-0 again on another node."""
    for node in ("node-2", "node-3"):  # kafka-0 starts on node-1
        await kubectl.ok("cordon", node)
    await env.admin.create(STATEFULSETS, KAFKA)

    def kafka() -> Obj | None:
        return env.view.get(PODS, "kafka-0", "default")

    await env.until(lambda: running(kafka() or {}))
    first = kafka()
    assert first is not None and first["spec"]["nodeName"] == "node-1"
    await cached(env, bridge, first)
    for node in ("node-2", "node-3"):
        await kubectl.ok("uncordon", node)
    await env.until(lambda: not (env.view.get(NODES, "node-2") or {})["spec"].get("unschedulable"))

    async def operator() -> None:
        await env.until(lambda: annotated(kafka(), ROLLER), timeout=40)
        await env.admin.delete(PODS, "kafka-0", "default")  # the rolling update

    rolling = asyncio.create_task(operator())
    try:
        result = await kubectl.run("drain", "node-1", "--ignore-daemonsets", "--timeout=50s")
        assert result.code == 0, result.err + result.out
        assert rolling.done()  # the drain waited for the roll
    finally:
        rolling.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await rolling
    assert bridge.server.bridge.metrics.answered()["gone"] == 1
    # kafka-0 again, elsewhere
    await env.until(
        lambda: (
            running(kafka() or {})
            and (kafka() or {})["metadata"]["uid"] != first["metadata"]["uid"]
        )
    )
    assert (kafka() or {})["spec"]["nodeName"] != "node-1"


async def test_a_drain_goes_through_while_the_bridge_is_down(
    env: Env, bridge: RealBridge, kubectl: Kubectl
) -> None:
    requests = Requests(env)
    db = await db_on_node_1(env, bridge)  # its port closed
    await drained(kubectl)
    # failurePolicy Ignore: evicted at once, as without a bridge
    await env.until(lambda: env.view.get(PODS, "db-0", "default") is None)
    assert str(db["metadata"]["uid"]) not in requests.seen


async def test_a_bridge_that_hangs_costs_an_eviction_the_timeout_and_no_more(
    env: Env, bridge: RealBridge, kubectl: Kubectl
) -> None:
    requests = Requests(env)
    port = bridge.server.port
    assert port is not None
    db = await db_on_node_1(env, bridge)
    # on the bridge's port, a peer that takes connections and never answers (nor does TLS)
    async with hanging(port) as hang:
        started = time.monotonic()
        await drained(kubectl)
        took = time.monotonic() - started
    assert hang.calls >= 1  # the API server did call it
    # its timeoutSeconds (5) and failurePolicy Ignore: the eviction went ahead
    assert 4 < took < 30, took
    await env.until(lambda: env.view.get(PODS, "db-0", "default") is None)
    assert str(db["metadata"]["uid"]) not in requests.seen


async def test_kubectl_drain_keeps_its_timeout_and_prints_why_it_waits(
    env: Env, bridge: RealBridge, kubectl: Kubectl
) -> None:
    # nobody moves the pod: the drain must end at its own timeout, having said each time why
    db = await pinned_pod(env.admin, "db-0", "node-1", app="db")
    await cached(env, bridge, db)
    started = time.monotonic()
    result = await kubectl.run("drain", "node-1", "--ignore-daemonsets", "--force", "--timeout=12s")
    took = time.monotonic() - started
    assert result.code != 0 and "global timeout reached: 12s" in result.err, result.err
    # kubectl checks its timeout between retries 5 s apart: with a Retry-After in the 429,
    # client-go retried each eviction ten times by itself first (55 s, nothing printed)
    assert took < 25, took
    retries = [line for line in result.err.splitlines() if "will retry after 5s" in line]
    assert 2 <= len(retries) <= 4, result.err
    assert all(f"interceptor {MOVER.name}" in line for line in retries), result.err
    # the first attempt is only remembered; the second makes the request
    assert "once it is asked for again" in retries[0], result.err
    answered = bridge.server.bridge.metrics.answered()
    assert (answered["asked-once"], answered["waiting"]) == (1, len(retries) - 1), answered
