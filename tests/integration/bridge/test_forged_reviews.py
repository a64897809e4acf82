"""A review is not a command (issue 34, finding 2), on the real control plane: an attacker who
reaches the bridge's port posts a forged AdmissionReview straight to it, unauthenticated, for
a pod of another namespace, of kube-system, of a namespace that opted out of the bridge. The
bridge may ask for the eviction (an EvictionRequest, the pod's interceptors take their turns,
as for a real eviction), but nodeagent's imperative evictor never carries out a request only
the bridge made, on either API: at its turn it says it waits for the caller's retried
eviction, and the real caller's retry is what goes through. Before the fix the leader evicted
the pod some 40 ms after the imperative turn came."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import aiohttp
import pytest

from nodeagent.bridge import listener
from nodeagent.bridge.webhook import PATH
from nodeagent.config import AnnotateInterceptor
from nodeagent.kube.errors import AlreadyExists, Conflict, NotFound, TooManyRequests
from nodeagent.kube.resources import EVICTIONREQUESTS, EVICTIONS, PODS, SERVICEACCOUNTS, Obj
from nodeagent.model.interceptors.imperative import CALLER_EVICTS
from nodeagent.model.names import (
    BRIDGE_REQUESTER,
    IMPERATIVE_INTERCEPTOR,
    IMPERATIVE_RESPONDER,
    INTERCEPTORS_ANNOTATION,
)
from nodeagent.model.times import format_time, utcnow
from tests.clusters import NAMESPACES, create_pod
from tests.conftest import Kubectl
from tests.integration.bridge.realbridge import EVICTION, MOVER, RealBridge, register, served
from tests.integration.observability.test_http_limits import closed_unanswered, held
from tests.integration.upstream.common import pinned_pod
from tests.integration.upstream.drainenv import Env, env

__all__ = ["env"]  # the fixture, re-exported for pytest

pytestmark = [pytest.mark.backends("real"), pytest.mark.timeout(120)]

HELPER = "helper.example.com"  # an interceptor the test acts as (it finishes at once)
HELPER_RESPONDER = "example.com/helper"
OPTED_OUT = {"nodeagent.io/eviction-bridge": "disabled"}
IDLE = 340  # the attack's idle connections


async def _bridge(
    env: Env, kubectl: Kubectl, api: str, annotate: tuple[AnnotateInterceptor, ...]
) -> AsyncIterator[RealBridge]:
    eviction = replace(EVICTION, api=api, annotate_interceptors=annotate)
    await env.lead(api, annotate=eviction.annotate_interceptors)
    probe = await pinned_pod(env.admin, "probe", "node-3", app="probe")
    async with served(env.backend, eviction) as b:
        # registered: the real caller's evictions come through kube-apiserver
        await register(env.admin, kubectl, b, ("default", probe["metadata"]["name"]))
        yield b


@pytest.fixture
async def bridge(env: Env, kubectl: Kubectl) -> AsyncIterator[RealBridge]:
    async for b in _bridge(env, kubectl, "nodeagent", EVICTION.annotate_interceptors):
        yield b


@pytest.fixture
async def upstream_bridge(env: Env, kubectl: Kubectl) -> AsyncIterator[RealBridge]:
    # drain-cleaner.strimzi.io is Strimzi's own interceptor here, none of nodeagent's
    async for b in _bridge(env, kubectl, "auto", (MOVER,)):
        assert b.server.bridge.upstream is not None
        yield b


def forged(namespace: str, name: str) -> Obj:
    """What the attacker posts: a review no API server sent, by a user no one authenticated."""
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "forged-1",
            "kind": {"group": "policy", "version": "v1", "kind": "Eviction"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "subResource": "eviction",
            "name": name,
            "namespace": namespace,
            "operation": "CREATE",
            "userInfo": {"username": "system:anonymous"},
            "object": {
                "apiVersion": "policy/v1",
                "kind": "Eviction",
                "metadata": {"name": name, "namespace": namespace},
            },
            "dryRun": False,
        },
    }


async def post_forged(bridge: RealBridge, namespace: str, name: str) -> Obj:
    """The forged review posted to the bridge's port: no client certificate, no trust in the
    bridge's (the attacker does not verify it)."""
    url = f"https://127.0.0.1:{bridge.server.port}{PATH}"
    async with (
        aiohttp.ClientSession() as session,
        session.post(url, json=forged(namespace, name), ssl=False) as response,
    ):
        assert response.status == 200, await response.text()
        answer: Obj = await response.json()
        return answer


async def forge_until_asked(bridge: RealBridge, namespace: str, name: str) -> None:
    """The forged review, again until the bridge has asked for the eviction (as the attacker
    can retry too): a second time (the first writes nothing), and again while the bridge's
    write did not make its 2 s bound (a loaded machine)."""
    async with asyncio.timeout(30):
        while True:
            answer = (await post_forged(bridge, namespace, name))["response"]
            assert answer["allowed"] is False, answer  # asked, as for a real eviction
            said = answer["status"]["message"]
            if "not written" not in said and "once it is asked for again" not in said:
                return


async def victim(
    env: Env,
    namespace: str,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    **spec: Any,
) -> Obj:
    """A pod of ``namespace`` (made, with ``labels`` on the namespace), by default naming the
    helper as its interceptor, on our CRD."""
    if namespace != "kube-system":
        body = {"metadata": {"name": namespace, "labels": labels or {}}}
        with contextlib.suppress(AlreadyExists):
            await env.admin.create(NAMESPACES, body)
        # the pod's ServiceAccount, which kube-controller-manager would make a little later
        with contextlib.suppress(AlreadyExists):
            await env.admin.create(
                SERVICEACCOUNTS, {"metadata": {"name": "default", "namespace": namespace}}
            )
    return await create_pod(
        env.admin,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "kafka-0",
                "namespace": namespace,
                "annotations": {INTERCEPTORS_ANNOTATION: HELPER}
                if annotations is None
                else annotations,
            },
            "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "kafka"}], **spec},
        },
    )


def _request(env: Env, pod: Obj) -> Obj | None:
    md = pod["metadata"]
    return env.view.get(EVICTIONREQUESTS, md["uid"], md["namespace"])


def _entry(obj: Obj | None, key: str, name: str) -> Obj:
    for e in ((obj or {}).get("status") or {}).get(key) or []:
        if e.get("name") == name:
            return dict(e)
    return {}


def _leaving(env: Env, pod: Obj) -> bool:
    """The pod evicted: terminating, or gone."""
    md = pod["metadata"]
    now = env.view.get(PODS, md["name"], md["namespace"])
    return (
        now is None or now["metadata"]["uid"] != md["uid"] or "deletionTimestamp" in now["metadata"]
    )


async def complete_helper(env: Env, pod: Obj) -> None:
    """As the helper interceptor: its turn done at once (at the version read, again on 409)."""
    md = pod["metadata"]
    await env.until(
        lambda: (_request(env, pod) or {}).get("status", {}).get("activeInterceptors") == [HELPER]
    )
    async with asyncio.timeout(10):
        while True:
            request = await env.admin.get(EVICTIONREQUESTS, md["uid"], md["namespace"])
            now = format_time(utcnow())
            for e in request["status"]["interceptors"]:
                if e["name"] == HELPER:
                    e.update(heartbeatTime=now, completionTime=now, message="done")
            with contextlib.suppress(Conflict):
                await env.admin.replace_status(EVICTIONREQUESTS, request)
                return


async def callers_retry_goes_through(env: Env, pod: Obj) -> None:
    """The real caller (the admin, through kube-apiserver and the registered webhook) evicts
    the pod at the imperative turn: allowed."""
    md = pod["metadata"]
    await env.admin.evict(md["namespace"], md["name"], uid=md["uid"])
    await env.until(lambda: _leaving(env, pod))


@pytest.mark.parametrize("namespace", ["team-b", "kube-system"])
async def test_a_forged_review_evicts_nothing_on_our_crd(
    env: Env, bridge: RealBridge, namespace: str
) -> None:
    pod = await victim(env, namespace)
    md = pod["metadata"]
    await env.until(lambda: bridge.cached(namespace, md["name"], md["uid"]))
    # one forged review writes nothing (the bridge writes before it answers)
    once = (await post_forged(bridge, namespace, md["name"]))["response"]
    assert "once it is asked for again" in once["status"]["message"], once
    with pytest.raises(NotFound):
        await env.admin.get(EVICTIONREQUESTS, md["uid"], namespace)
    # asked again, it is a drain's eviction like any other: what the leader then does matters
    await forge_until_asked(bridge, namespace, md["name"])
    request = await env.admin.get(EVICTIONREQUESTS, md["uid"], namespace)
    assert request["spec"]["requesters"] == [{"name": BRIDGE_REQUESTER}]
    await complete_helper(env, pod)

    def imperative_said() -> str:
        return str(
            _entry(_request(env, pod), "interceptors", IMPERATIVE_INTERCEPTOR).get("message", "")
        )

    # the imperative turn: it says it waits for the caller's retry, or (before the fix) the
    # leader evicts the pod
    await env.until(lambda: imperative_said() == CALLER_EVICTS or _leaving(env, pod))
    assert not _leaving(env, pod), "the leader evicted the pod of a forged review"
    assert imperative_said() == CALLER_EVICTS
    await callers_retry_goes_through(env, pod)


async def test_a_forged_review_in_an_opted_out_namespace_writes_nothing(
    env: Env, bridge: RealBridge
) -> None:
    # kube-apiserver never calls the bridge there; a forged review must not make it act either
    pod = await victim(env, "quiet", OPTED_OUT)
    md = pod["metadata"]
    await env.until(lambda: bridge.cached("quiet", md["name"], md["uid"]))
    answer = await post_forged(bridge, "quiet", md["name"])
    assert answer["response"]["allowed"] is True
    # the bridge writes before it answers: no request now is no request at all
    with pytest.raises(NotFound):
        await env.admin.get(EVICTIONREQUESTS, md["uid"], "quiet")


async def test_a_forged_review_evicts_nothing_upstream(
    env: Env, upstream_bridge: RealBridge
) -> None:
    # a pod whose responders all take turns upstream: the bridge asks there
    bridge = upstream_bridge
    # its own responder, which takes turns upstream (no interceptor of ours)
    responders = [{"name": HELPER_RESPONDER, "priority": 5000}]
    pod = await victim(env, "team-b", annotations={}, evictionResponders=responders)
    md = pod["metadata"]
    await env.until(lambda: bridge.cached("team-b", md["name"], md["uid"]))
    await forge_until_asked(bridge, "team-b", md["name"])

    def eviction() -> Obj | None:
        found = env.view.list(EVICTIONS, "team-b")
        assert len(found) <= 1, found
        return found[0] if found else None

    def state(name: str) -> str:
        return str(_entry(eviction(), "targetResponders", name).get("state", ""))

    await env.until(lambda: state(HELPER_RESPONDER) == "Active")
    found = eviction()
    assert found is not None
    async with asyncio.timeout(10):
        while True:
            current = await env.admin.get(EVICTIONS, found["metadata"]["name"], "team-b")
            now = format_time(utcnow())
            entries = [
                {**r, "heartbeatTime": now, "completionTime": now}
                if r["name"] == HELPER_RESPONDER
                else r
                for r in current["status"]["responders"]
            ]
            body = {
                "metadata": {"resourceVersion": current["metadata"]["resourceVersion"]},
                "status": {"responders": entries},
            }
            with contextlib.suppress(Conflict):
                await env.admin.patch_status(EVICTIONS, found["metadata"]["name"], body, "team-b")
                break

    def evictor_said() -> str:
        return str(_entry(eviction(), "responders", IMPERATIVE_RESPONDER).get("message", ""))

    await env.until(lambda: evictor_said() == CALLER_EVICTS or _leaving(env, pod))
    assert not _leaving(env, pod), "the leader evicted the pod of a forged review"
    assert state(IMPERATIVE_RESPONDER) == "Active"
    await callers_retry_goes_through(env, pod)


async def test_340_idle_connections_leave_kube_apiserver_its_real_answer(
    env: Env, bridge: RealBridge
) -> None:
    # the attacker holds connections from its own address; kube-apiserver calls from 127.0.0.1
    db = await pinned_pod(env.admin, "db-0", "node-1", app="db")  # the mover's: it waits
    md = db["metadata"]
    await env.until(lambda: bridge.cached("default", md["name"], md["uid"]))
    assert bridge.server.port is not None
    share = listener.MAX_CLIENT_CONNECTIONS
    async with held(bridge.server.port, ["127.0.0.2"], IDLE) as conns:
        async with asyncio.timeout(5):
            for conn in conns[share:]:
                assert await closed_unanswered(conn)
        # the eviction is answered by the bridge (429 while the mover works), not let through
        # by failurePolicy Ignore
        with pytest.raises(TooManyRequests) as refused:
            await env.admin.evict("default", "db-0")
        assert "pod default/db-0 waits for interceptor mover.example.com" in str(refused.value)


STRIMZI = "drain-cleaner.strimzi.io"


async def test_upstream_an_interceptor_the_pod_names_goes_first(
    env: Env, upstream_bridge: RealBridge
) -> None:
    # finding 4: on the upstream API the bridge asked there, where Strimzi's interceptor has
    # no turn, and the leader evicted the pod 109 ms later. As the maintenances do, the bridge
    # asks on our CRD for a pod naming interceptors that take no turn upstream.
    pod = await victim(env, "team-b", annotations={INTERCEPTORS_ANNOTATION: STRIMZI})
    md = pod["metadata"]
    await env.until(lambda: upstream_bridge.cached("team-b", md["name"], md["uid"]))
    # the real caller, through kube-apiserver and the registered webhook, asking twice
    with pytest.raises(TooManyRequests):
        await env.admin.evict("team-b", md["name"])
    with pytest.raises(TooManyRequests) as refused:
        await env.admin.evict("team-b", md["name"])
    assert f"interceptor {STRIMZI} goes first" in str(refused.value)

    def active() -> list[str]:
        request = _request(env, pod) or {}
        return list((request.get("status") or {}).get("activeInterceptors") or [])

    await env.until(lambda: active() == [STRIMZI] or _leaving(env, pod))
    assert not _leaving(env, pod), "the leader evicted the pod before its interceptor's turn"
    assert _request(env, pod)["spec"]["requesters"] == [{"name": BRIDGE_REQUESTER}]  # type: ignore[index]
    assert not env.view.list(EVICTIONS, "team-b")
