"""The eviction bridge served over HTTPS on loopback, its caches and writes on a cluster
backend: the AdmissionReviews the API server would send are posted as it would post them, with
the CA the bridge keeps in its Secret."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import ssl
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import aiohttp
import pytest

from nodeagent.bridge.certs import service_names
from nodeagent.bridge.certstore import TLSPlace, ensure_bundle
from nodeagent.bridge.server import BridgeServer, BridgeServerClient, Listen
from nodeagent.bridge.webhook import PATH
from nodeagent.kube.errors import NotFound
from nodeagent.kube.resources import (
    EVICTIONREQUESTS,
    NODES,
    PDBS,
    PODS,
    SECRETS,
    Obj,
    Resource,
)
from nodeagent.model.bridge.decision import BridgeSettings
from nodeagent.model.interceptors.settings import AnnotateRule
from nodeagent.model.interceptors.targets import SelectorInterceptor
from nodeagent.model.names import BRIDGE_REQUESTER, IMPERATIVE_INTERCEPTOR, INTERCEPTORS_ANNOTATION
from nodeagent.model.selectors import label_selector_from_dict
from nodeagent.model.times import Clock, utcnow
from tests.integration.bridge.realbridge import served_certificate, until_serving
from tests.integration.controllers.evictionrequest_harness import Env, env, fast_settings
from tests.until import until

__all__ = ["env"]  # the fixture, re-exported for pytest

OWN = "system:serviceaccount:nodeagent-system:nodeagent-controllers"
MOVER = SelectorInterceptor(
    "mover.example.com", label_selector_from_dict({"matchLabels": {"app": "db"}})
)
SETTINGS = BridgeSettings(own_users=frozenset({OWN}), configured=(MOVER,))
NAMES = service_names("bridge", "default")
PLACE = TLSPlace("default", "bridge-tls", "bridge", NAMES, None)


@dataclass
class Served:
    server: BridgeServer
    session: aiohttp.ClientSession
    trust: ssl.SSLContext

    async def post(self, body: object) -> tuple[int, Any]:
        url = f"https://127.0.0.1:{self.server.port}{PATH}"
        async with self.session.post(
            url, json=body, ssl=self.trust, server_hostname=NAMES[2]
        ) as response:
            return response.status, await response.json()

    async def evict(self, name: str, **request: Any) -> Mapping[str, Any]:
        status, answer = await self.post(review(name, **request))
        assert status == 200, answer
        assert answer["response"]["uid"] == "r1"
        return dict(answer["response"])

    async def asked(self, name: str, **request: Any) -> Mapping[str, Any]:
        """The answer to an eviction asked for twice, as a caller that retries asks: the first
        attempt is answered 429 with nothing written (``held_until_asked_again``)."""
        once = await self.evict(name, **request)
        assert once["status"]["code"] == 429, once
        assert "once it is asked for again" in once["status"]["message"], once
        return await self.evict(name, **request)

    async def served_certificate(self) -> bytes:
        """The certificate a new connection is served (DER)."""
        assert self.server.port is not None
        return await served_certificate(self.server.port, self.trust, NAMES[2])

    def cached_uid(self, name: str) -> str | None:
        pod = self.server.bridge.pods.store.get(f"default/{name}")
        return None if pod is None else str(pod["metadata"]["uid"])


def review(name: str, *, user: str = "admin", **extra: Any) -> Obj:
    request: Obj = {
        "uid": "r1",
        "kind": {"group": "policy", "version": "v1", "kind": "Eviction"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "subResource": "eviction",
        "name": name,
        "namespace": "default",
        "operation": "CREATE",
        "userInfo": {"username": user},
        "object": {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": "default"},
        },
        "dryRun": False,
    }
    request.update(extra)
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


class MovableClock:
    """The wall clock, moved forward at will (the bridge's memory of pods gone expires)."""

    def __init__(self) -> None:
        self.ahead = timedelta(0)

    def __call__(self) -> datetime:
        return utcnow() + self.ahead


# The tests read the bridge's write right after its answer; on a loaded machine the API server
# can take longer than the product's 2 s bound (CI once saw it), so the bound is generous here
# and tested on its own with a client that hangs.
ROOMY_WRITE_TIMEOUT = 30.0


LOOPBACK = Listen("127.0.0.1", 0)


@contextlib.asynccontextmanager
async def serve(
    client: BridgeServerClient,
    write_timeout: float = ROOMY_WRITE_TIMEOUT,
    clock: Clock = utcnow,
    listen: Listen = LOOPBACK,
    client_ca: bytes | None = None,
) -> AsyncIterator[Served]:
    server = BridgeServer(
        client,
        SETTINGS,
        PLACE,
        listen,
        write_timeout=write_timeout,
        clock=clock,
        client_ca=client_ca,
    )
    task = asyncio.create_task(server.run())
    try:
        await until_serving(server, task)
        assert server.keeper.bundle is not None
        trust = ssl.create_default_context(cadata=server.keeper.bundle.trusted.decode())
        async with aiohttp.ClientSession() as session:
            yield Served(server, session, trust)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@pytest.fixture
async def bridge(env: Env) -> AsyncIterator[Served]:
    # the admin's client: the bridge's RBAC (secrets, evictionrequests) is not shipped yet
    async with serve(env.kube) as served:
        yield served


def pod(name: str, app: str) -> Obj:
    return {
        "metadata": {"name": name, "namespace": "default", "labels": {"app": app}},
        "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "busybox"}]},
    }


async def created(env: Env, served: Served, name: str, app: str) -> str:
    """A pod of ``app``, once the bridge's cache has it; its UID."""
    uid = str((await env.create(PODS, pod(name, app)))["metadata"]["uid"])
    await until(lambda: served.cached_uid(name) == uid)
    return uid


async def request_exists(env: Env, uid: str) -> bool:
    try:
        await env.kube.get(EVICTIONREQUESTS, uid, "default")
    except NotFound:
        return False
    return True


# --- allowed untouched ----------------------------------------------------------------------------


async def test_a_pod_without_interceptors_is_allowed_quickly_and_untouched(
    env: Env, bridge: Served
) -> None:
    uid = await created(env, bridge, "web-0", "web")
    started = time.perf_counter()
    for _ in range(20):
        assert (await bridge.evict("web-0"))["allowed"] is True
    each = (time.perf_counter() - started) / 20
    assert each < 0.5, f"{each * 1000:.1f} ms an answer"  # milliseconds on loopback
    assert not await request_exists(env, uid)


async def test_the_controllers_own_eviction_passes(env: Env, bridge: Served) -> None:
    uid = await created(env, bridge, "db-0", "db")
    assert (await bridge.evict("db-0", user=OWN))["allowed"] is True
    assert not await request_exists(env, uid)


# --- the way through an EvictionRequest -------------------------------------------------------


async def test_a_pod_with_an_interceptor_waits_for_its_turn(env: Env, bridge: Served) -> None:
    uid = await created(env, bridge, "db-0", "db")
    once = await bridge.evict("db-0")  # asked for once: a 429 and nothing written yet
    assert (once["allowed"], once["status"]["code"]) == (False, 429)
    assert not await request_exists(env, uid)
    first = await bridge.evict("db-0")  # asked again: the request is made
    assert first["allowed"] is False
    status = first["status"]
    assert (status["code"], status["reason"]) == (429, "TooManyRequests")
    assert "details" not in status  # no Retry-After: the caller sees each 429
    assert "mover.example.com" in status["message"]
    request = await env.kube.get(EVICTIONREQUESTS, uid, "default")
    assert request["spec"]["requesters"] == [{"name": BRIDGE_REQUESTER}]
    assert request["spec"]["target"]["pod"] == {"name": "db-0", "uid": uid}

    # the EvictionRequest controller's work, done by hand: the mover's turn, then the imperative
    def turn(active: str, processed: list[str]) -> Any:
        def change(obj: Obj) -> None:
            obj["status"] = {
                "targetInterceptors": [{"name": MOVER.name}, {"name": IMPERATIVE_INTERCEPTOR}],
                "activeInterceptors": [active],
                "processedInterceptors": processed,
                "interceptors": [
                    {"name": MOVER.name, "message": "moving db-0 to node-2"},
                    {"name": IMPERATIVE_INTERCEPTOR},
                ],
            }

        return change

    await env.update_status(EVICTIONREQUESTS, uid, turn(MOVER.name, []))
    await until(lambda: bridge.server.bridge.requests.store.get(f"default/{uid}") is not None)
    await until(lambda: _active(bridge, uid) == MOVER.name)
    waiting = await bridge.evict("db-0")
    assert waiting["allowed"] is False
    assert "interceptor mover.example.com is handling" in waiting["status"]["message"]
    assert "moving db-0 to node-2" in waiting["status"]["message"]

    await env.update_status(EVICTIONREQUESTS, uid, turn(IMPERATIVE_INTERCEPTOR, [MOVER.name]))
    await until(lambda: _active(bridge, uid) == IMPERATIVE_INTERCEPTOR)
    assert (await bridge.evict("db-0"))["allowed"] is True


def _active(served: Served, uid: str) -> str | None:
    obj = served.server.bridge.requests.store.get(f"default/{uid}") or {}
    active = (obj.get("status") or {}).get("activeInterceptors") or [None]
    return active[0]  # type: ignore[no-any-return]


async def asked_then_gone(env: Env, bridge: Served) -> str:
    """db-0 asked for (429, its request made), then deleted: its UID."""
    old = await created(env, bridge, "db-0", "db")
    assert (await bridge.asked("db-0"))["status"]["code"] == 429
    await until(lambda: bridge.server.bridge.requests.store.get(f"default/{old}") is not None)
    await env.delete(PODS, "db-0", grace_period_seconds=0)
    await until(lambda: bridge.cached_uid("db-0") is None)
    return old


async def test_a_pod_moved_under_its_name_is_gone_for_the_drain(env: Env, bridge: Served) -> None:
    old = await asked_then_gone(env, bridge)  # the operator moves it: same name, new UID
    new = await created(env, bridge, "db-0", "db")
    gone = await bridge.evict("db-0")  # kubectl drain asks by name only
    assert gone["allowed"] is False
    assert (gone["status"]["code"], gone["status"]["reason"]) == (404, "NotFound")
    assert old in gone["status"]["message"] and new in gone["status"]["message"]
    # an eviction that names the new pod's UID means the new pod: a request of its own
    preconditioned = {"deleteOptions": {"preconditions": {"uid": new}}}
    mine = await bridge.asked("db-0", object={"metadata": {"name": "db-0"}, **preconditioned})
    assert mine["status"]["code"] == 429
    assert await request_exists(env, new)


async def test_a_drain_of_the_replacements_node_is_a_new_drain(env: Env, bridge: Served) -> None:
    await asked_then_gone(env, bridge)
    # the operator moved it to a node that is being drained now (cordoned first, as kubectl
    # drain does): an eviction of the replacement by name is that drain's, not the old one's
    await env.create(NODES, {"metadata": {"name": "bridge-next"}, "spec": {"unschedulable": True}})
    try:
        moved = pod("db-0", "db")
        moved["spec"]["nodeName"] = "bridge-next"
        new = str((await env.create(PODS, moved))["metadata"]["uid"])
        await until(lambda: bridge.cached_uid("db-0") == new)
        await until(lambda: bridge.server.bridge.nodes.store.get("bridge-next") is not None)
        answer = await bridge.asked("db-0")
        assert answer["status"]["code"] == 429
        assert await request_exists(env, new)
        # uncordoned, the same eviction is the old drain's retry
        await env.patch(NODES, "bridge-next", {"spec": {"unschedulable": None}}, None)
        await until(lambda: not _cordoned(bridge, "bridge-next"))
        assert (await bridge.evict("db-0"))["status"]["code"] == 404
    finally:
        await env.delete(NODES, "bridge-next", None)


def _cordoned(served: Served, node: str) -> bool:
    obj = served.server.bridge.nodes.store.get(node) or {}
    return bool((obj.get("spec") or {}).get("unschedulable"))


async def test_the_memory_of_a_pod_gone_expires(env: Env) -> None:
    clock = MovableClock()
    async with serve(env.kube, clock=clock) as bridge:
        await asked_then_gone(env, bridge)
        assert (await bridge.evict("db-0"))["status"]["code"] == 404  # deleted outright
        new = await created(env, bridge, "db-0", "db")
        clock.ahead = SETTINGS.departed_for + timedelta(seconds=1)
        # a drain long after is one of the new pod: it waits for the mover like the first
        later = await bridge.asked("db-0")
        assert later["status"]["code"] == 429
        assert await request_exists(env, new)


async def test_a_dry_run_is_answered_alike_for_every_pod_and_writes_nothing(
    env: Env, bridge: Served
) -> None:
    # the answer says nothing of which pods have interceptors (anyone who reaches the port
    # may send a dry run): allowed, with the same warning for a pod with and one without
    uid = await created(env, bridge, "db-0", "db")
    await created(env, bridge, "web-0", "web")
    dry = {"deleteOptions": {"dryRun": ["All"]}}  # kubectl drain --dry-run=server
    answer = await bridge.evict("db-0", object={"metadata": {"name": "db-0"}, **dry})
    assert answer["allowed"] is True and "dry run" in answer["warnings"][0]
    assert await bridge.evict("db-0", dryRun=True) == answer
    assert await bridge.evict("web-0", dryRun=True) == answer
    assert await bridge.evict("nobody", dryRun=True) == answer
    assert not await request_exists(env, uid)


# --- never hang, never guess ----------------------------------------------------------------------


class _Stuck:
    """The admin's client, but creates never finish (an API server that does not answer)."""

    def __init__(self, client: BridgeServerClient) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    async def create(
        self, resource: Resource, body: Mapping[str, Any], namespace: str | None = None
    ) -> Obj:
        if resource == SECRETS:
            return await self._client.create(resource, body, namespace)
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


async def test_a_write_that_does_not_finish_still_gets_its_429_in_time(env: Env) -> None:
    stuck: Any = _Stuck(env.kube)
    async with serve(stuck, write_timeout=0.2) as bridge:
        await created(env, bridge, "db-0", "db")
        await bridge.evict("db-0")  # asked for once: nothing to write yet
        started = time.perf_counter()
        answer = await bridge.evict("db-0")
        assert time.perf_counter() - started < 2.0
        (failures,) = bridge.server.bridge.metrics.write_failures.collect()
        assert [(f.labels, f.value) for f in failures.samples if f.name.endswith("_total")] == [
            ({"reason": "timeout"}, 1)
        ]
    status = answer["status"]
    assert (status["code"], "details" in status) == (429, False)
    assert "not written within 0.2s" in status["message"]


async def test_what_is_no_eviction_review(env: Env, bridge: Served) -> None:
    status, answer = await bridge.post({"kind": "Pod"})
    assert status == 400 and "AdmissionReview" in answer["error"]
    status, answer = await bridge.post(review("db-0", subResource="status"))
    assert status == 200
    assert answer["response"]["allowed"] is True
    assert "pods/eviction CREATE only" in answer["response"]["warnings"][0]
    answered = bridge.server.bridge.metrics.answered()
    assert (answered["unreadable"], answered["unsupported"]) == (1, 1)


async def test_replicas_share_the_secret_and_serve_the_same_ca(env: Env, bridge: Served) -> None:
    async with serve(env.kube) as other:
        assert other.server.keeper.bundle == bridge.server.keeper.bundle
        # the first replica's CA verifies the second's certificate for the Service's name
        other.trust = bridge.trust
        assert (await other.evict("nobody"))["allowed"] is True
    secret = await env.kube.get(SECRETS, PLACE.secret, PLACE.namespace)
    assert set(secret["data"]) == {"tls.crt", "tls.key", "ca.crt", "ca.key"}


async def test_a_renewal_by_another_replica_is_served_at_once(env: Env, bridge: Served) -> None:
    before = bridge.server.keeper.bundle
    assert before is not None
    assert await bridge.served_certificate() == _der(before.cert)
    # another replica, configured with one name more, renews the serving certificate
    wider = dataclasses.replace(PLACE, names=(*NAMES, "bridge-alias.default.svc"))
    renewed = await ensure_bundle(env.kube, wider)
    assert renewed.cert != before.cert and renewed.ca == before.ca
    await until(lambda: bridge.server.keeper.bundle == renewed)
    assert await bridge.served_certificate() == _der(renewed.cert)


def _der(pem: bytes) -> bytes:
    return ssl.PEM_cert_to_DER_cert(pem.decode())


# --- with the EvictionRequest controller and the annotate-and-wait interceptor -----------------

MOVER_RULE = AnnotateRule(MOVER, "example.com/reschedule", "true")


async def test_a_drain_waits_for_the_operator_to_move_the_pod(env: Env, bridge: Served) -> None:
    await env.start(fast_settings(annotate=(MOVER_RULE,)), annotate=True)
    old = await created(env, bridge, "db-0", "db")
    assert (await bridge.asked("db-0"))["status"]["code"] == 429  # the drain's first attempts

    def asked_to_move() -> bool:
        pod = env.get(PODS, "db-0")
        annotations = (pod or {}).get("metadata", {}).get("annotations") or {}
        return annotations.get(MOVER_RULE.annotation_key) == "true"

    await env.until(asked_to_move)
    await until(lambda: _active(bridge, old) == MOVER.name)
    waiting = await bridge.evict("db-0")  # the drain retries
    assert waiting["status"]["code"] == 429
    assert f"interceptor {MOVER.name} is handling" in waiting["status"]["message"]
    # the operator moves it: the same name, a new UID; the drain's next attempt is done
    await env.delete(PODS, "db-0", grace_period_seconds=0)
    new = await created(env, bridge, "db-0", "db")
    assert new != old
    assert (await bridge.evict("db-0"))["status"]["code"] == 404


async def test_an_interceptor_that_never_reports_is_passed_over(env: Env, bridge: Served) -> None:
    # a budget that allows nothing keeps the pod through the imperative eviction's turn
    budget = {"selector": {"matchLabels": {"app": "ghost"}}, "maxUnavailable": 0}
    await env.create(PDBS, {"metadata": {"name": "ghost"}, "spec": budget})
    await env.start(fast_settings(deadline=1.0))
    ghost = pod("ghost-0", "ghost")
    ghost["metadata"]["annotations"] = {INTERCEPTORS_ANNOTATION: "ghost.example.com"}
    uid = str((await env.create(PODS, ghost))["metadata"]["uid"])
    await until(lambda: bridge.cached_uid("ghost-0") == uid)
    first = await bridge.asked("ghost-0")
    assert first["status"]["code"] == 429 and "ghost.example.com" in first["status"]["message"]
    # a heartbeat deadline later the controller gives the imperative eviction its turn: the
    # bridge lets the eviction through (and the API server's budget check refuses it)
    await until(lambda: _active(bridge, uid) == IMPERATIVE_INTERCEPTOR)
    answer = await bridge.evict("ghost-0")
    assert answer["allowed"] is True, answer


async def test_an_eviction_nobody_asks_for_again_leaves_nothing_behind(env: Env) -> None:
    # a one-off call (or a forged review) sets no interceptor to work: the bridge asks for the
    # eviction only when it is asked for again within the bound
    clock = MovableClock()
    async with serve(env.kube, clock=clock) as bridge:
        await env.start(fast_settings(annotate=(MOVER_RULE,)), annotate=True)
        uid = await created(env, bridge, "db-0", "db")
        once = await bridge.evict("db-0")
        assert once["status"]["code"] == 429
        assert "once it is asked for again within 60s" in once["status"]["message"]
        assert not await request_exists(env, uid)
        # a caller of its own, long after: a first attempt again, still nothing written
        clock.ahead = SETTINGS.asked_again_within + timedelta(seconds=1)
        assert await bridge.evict("db-0") == once
        assert not await request_exists(env, uid)
        # asked again in time: the request is made, and the mover's rule annotates the pod
        again = await bridge.evict("db-0")
        assert "interceptor mover.example.com goes first" in again["status"]["message"]
        assert await request_exists(env, uid)

        def asked_to_move() -> bool:
            annotations = (env.get(PODS, "db-0") or {}).get("metadata", {}).get("annotations")
            return (annotations or {}).get(MOVER_RULE.annotation_key) == "true"

        await env.until(asked_to_move)
