"""nodeagent as the evictionrequest-controller and imperative evictor of `lifecycle.k8s.io`
on both backends (the real server v1.37 with the gate on, and the simulated cluster, which
serves the group as it does): the leader's term runs them where the API is served, as the
controllers' ServiceAccount (under RBAC on the real server); the tests act as admin, as
requesters and as the pods' own responders, and read what the server holds through watches."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from nodeagent.config import Config, EvictionConfig
from nodeagent.controllers.cluster import ClusterControllers
from nodeagent.kube.client import KubeClient
from nodeagent.kube.errors import Conflict
from nodeagent.kube.resources import (
    DAEMONSETS,
    EVICTIONS,
    PDBS,
    PODS,
    UPSTREAM_EVICTIONREQUESTS,
    Obj,
)
from nodeagent.model.bodies import condition
from nodeagent.model.names import IMPERATIVE_RESPONDER, INTERCEPTORS_ANNOTATION, NODE_LABEL
from nodeagent.model.times import format_time, utcnow
from tests.clusters import CONTROLLERS_ACCOUNT, ClusterView, TestCluster
from tests.integration.upstream.common import budget, eviction_of, evictions_of, pinned_pod
from tests.tasks import cancel_and_wait

# the simulated cluster serves lifecycle.k8s.io for these (the real control plane always does)
pytestmark = pytest.mark.lifecycle_api

MOVER, KEEPER = "acme.io/mover", "zeta.io/keeper"
REQUESTER = "acme.io/drainer"
VIEWED = (PODS, PDBS, DAEMONSETS, UPSTREAM_EVICTIONREQUESTS, EVICTIONS)


@dataclass
class Env:
    admin: KubeClient
    view: ClusterView
    leader: Callable[[], ClusterControllers]  # a new leader's controllers, for its term
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    async def pod(self, name: str, *responders: tuple[str, int], **labels: str) -> Obj:
        created = await pinned_pod(self.admin, name, "node-1", responders, **labels)
        await self.until(lambda: ready(self.view.get(PODS, name, "default")))
        return created

    async def request(
        self, pod: Obj, name: str, intent: str = "Eviction", requester: str = REQUESTER
    ) -> Obj:
        md = pod["metadata"]
        return await self.admin.create(
            UPSTREAM_EVICTIONREQUESTS,
            {
                "apiVersion": "lifecycle.k8s.io/v1alpha1",
                "kind": "EvictionRequest",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {
                    "target": {"pod": {"name": md["name"], "uid": md["uid"]}},
                    "requester": requester,
                    "intent": intent,
                },
            },
        )

    def eviction(self, pod: Obj) -> Obj:
        """The Eviction of `pod` its requests mirror, or {}."""
        return eviction_of(self.view, pod["metadata"]["uid"])

    def state(self, pod: Obj, responder: str) -> str | None:
        for t in (self.eviction(pod).get("status") or {}).get("targetResponders") or []:
            if t["name"] == responder:
                return str(t["state"])
        return None

    def reason(self, obj: Obj, type_: str) -> str | None:
        c = condition(obj.get("status") or {}, type_)
        return f"{c['status']}/{c['reason']}" if c else None

    async def respond(self, pod: Obj, responder: str, done: bool = False) -> None:
        """As `responder`: a heartbeat (and its completion) in its entry of the Eviction, at
        the version read (again if the controller wrote meanwhile)."""
        name = self.eviction(pod)["metadata"]["name"]
        async with asyncio.timeout(10):
            while True:
                eviction = await self.admin.get(EVICTIONS, name, "default")
                now = format_time(utcnow())
                entries = [
                    {**r, "heartbeatTime": now, **({"completionTime": now} if done else {})}
                    if r["name"] == responder
                    else r
                    for r in eviction["status"]["responders"]
                ]
                body = {
                    "metadata": {"resourceVersion": eviction["metadata"]["resourceVersion"]},
                    "status": {"responders": entries},
                }
                with contextlib.suppress(Conflict):
                    await self.admin.patch_status(EVICTIONS, name, body, "default")
                    return

    async def until(self, cond: Any, timeout: float = 30) -> None:
        await self.view.until(lambda: bool(cond()), timeout)


def ready(pod: Obj | None) -> bool:
    status = (pod or {}).get("status") or {}
    return status.get("phase") == "Running"


@pytest.fixture
async def env(backend: TestCluster) -> AsyncIterator[Env]:
    await backend.install_crds()
    admin = backend.client(max_workers=8)
    view = ClusterView(admin, VIEWED)
    await view.start()
    account = await backend.service_account(CONTROLLERS_ACCOUNT)
    agent = backend.client(account, max_workers=8)
    config = Config(eviction=EvictionConfig(api="upstream", backoff_base=0.5, backoff_cap=1.0))
    e = Env(admin, view, lambda: ClusterControllers(agent, config, CollectorRegistry()))
    e.tasks.append(asyncio.create_task(e.leader().run()))
    try:
        yield e
    finally:
        await cancel_and_wait(e.tasks)
        await view.stop()


async def test_a_pod_under_a_budget_is_evicted_once_the_budget_allows(env: Env) -> None:
    pod = await env.pod("web-0", app="web")
    await budget(env.admin, "web", min_available=1)
    await env.until(lambda: (env.view.get(PDBS, "web", "default") or {}).get("status"))
    await env.request(pod, "drain-web-0")
    await env.until(lambda: env.state(pod, IMPERATIVE_RESPONDER) == "Active")

    await env.until(lambda: "number of retries: 2" in evictor_message(env, pod))
    assert env.view.get(PODS, "web-0", "default") is not None  # the budget held it
    await env.admin.patch(PDBS, "web", {"spec": {"minAvailable": 0}}, "default")
    await env.until(lambda: env.reason(env.eviction(pod), "TargetEvicted") == "True/PodDeleted")
    assert env.view.get(PODS, "web-0", "default") is None
    eviction = env.eviction(pod)
    assert env.reason(eviction, "Failed") == "False/Succeeded"
    # seen gone before the evictor's completion was, the Eviction waits 5 s for it
    assert env.state(pod, IMPERATIVE_RESPONDER) == "Completed"
    assert eviction["metadata"]["labels"] == {
        REQUESTER: "requester",
        IMPERATIVE_RESPONDER: "responder",
        NODE_LABEL: "node-1",  # for the node's agent to watch
    }
    [owner] = eviction["metadata"]["ownerReferences"]
    assert owner["kind"] == "EvictionRequest" and owner["name"] == "drain-web-0"
    await env.until(
        lambda: (
            env.reason(
                env.view.get(UPSTREAM_EVICTIONREQUESTS, "drain-web-0", "default") or {},
                "TargetEvicted",
            )
            == "True/PodDeleted"
        )
    )


async def test_responders_take_their_turns_by_priority(env: Env) -> None:
    pod = await env.pod("db-0", (MOVER, 10000), (KEEPER, 20000))
    await env.request(pod, "drain-db-0")
    await env.until(lambda: env.state(pod, KEEPER) == "Active")
    assert env.state(pod, MOVER) == "Inactive"
    assert env.state(pod, IMPERATIVE_RESPONDER) == "Inactive"
    assert env.reason(env.eviction(pod), "TargetEvicted") == "False/AwaitingEviction"
    await env.respond(pod, KEEPER, done=True)
    await env.until(lambda: env.state(pod, MOVER) == "Active")
    assert env.state(pod, KEEPER) == "Completed"
    assert env.view.get(PODS, "db-0", "default") is not None  # only the evictor evicts
    await env.respond(pod, MOVER, done=True)
    await env.until(lambda: env.reason(env.eviction(pod), "TargetEvicted") == "True/PodDeleted")
    assert [env.state(pod, r) for r in (KEEPER, MOVER)] == ["Completed"] * 2
    assert env.state(pod, IMPERATIVE_RESPONDER) == "Completed"


async def test_a_responder_that_never_reports_the_pods_end_is_interrupted(env: Env) -> None:
    """Upstream's GracefulCompletionDelay: the pod deleted by someone else while the keeper is
    Active, the keeper says nothing: TargetEvicted once the delay is past, the keeper
    Interrupted (neither Completed nor Canceled), the next responders never started."""
    pod = await env.pod("db-0", (KEEPER, 20000))
    await env.request(pod, "drain-db-0")
    await env.until(lambda: env.state(pod, KEEPER) == "Active")
    await env.admin.delete(PODS, "db-0", "default", grace_period_seconds=0)
    await env.until(lambda: env.reason(env.eviction(pod), "TargetEvicted") == "True/PodDeleted")
    assert env.state(pod, KEEPER) == "Interrupted"
    assert env.state(pod, IMPERATIVE_RESPONDER) == "Inactive"
    assert env.reason(env.eviction(pod), "Failed") == "False/Succeeded"


async def test_withdrawal_cancels_and_a_new_intent_starts_over(env: Env) -> None:
    pod = await env.pod("cache-0", (MOVER, 10000))
    await env.request(pod, "drain-cache-0")
    await env.until(lambda: env.state(pod, MOVER) == "Active")
    first = env.eviction(pod)["metadata"]["uid"]
    withdraw = {"spec": {"intent": "Withdrawn"}}
    await env.admin.patch(UPSTREAM_EVICTIONREQUESTS, "drain-cache-0", withdraw, "default")
    await env.until(
        lambda: env.reason(env.eviction(pod), "Failed") == "True/CanceledDueToNoRequesters"
    )
    assert env.state(pod, MOVER) == "Canceled"
    assert env.state(pod, IMPERATIVE_RESPONDER) == "Inactive"
    assert (env.eviction(pod)["status"]["requesters"]) == [
        {"name": REQUESTER, "intent": "Withdrawn"}
    ]
    assert ready(env.view.get(PODS, "cache-0", "default"))
    again = {"spec": {"intent": "Eviction"}}
    await env.admin.patch(UPSTREAM_EVICTIONREQUESTS, "drain-cache-0", again, "default")
    await env.until(
        lambda: (
            env.eviction(pod).get("metadata", {}).get("uid") not in (None, first)
            and env.state(pod, MOVER) == "Active"
        )
    )


async def test_the_eviction_goes_with_its_last_request(env: Env) -> None:
    pod = await env.pod("tmp-0", (MOVER, 10000))
    await env.request(pod, "drain-tmp-0")
    await env.until(lambda: env.state(pod, MOVER) == "Active")
    await env.admin.delete(UPSTREAM_EVICTIONREQUESTS, "drain-tmp-0", "default")
    # the garbage collector removes it with its last owner
    await env.until(lambda: not env.eviction(pod), timeout=60)
    assert ready(env.view.get(PODS, "tmp-0", "default"))


async def test_a_new_leader_carries_on_where_the_last_stopped(env: Env) -> None:
    pod = await env.pod("web-0", app="web")
    await budget(env.admin, "web", min_available=1)
    await env.until(lambda: (env.view.get(PDBS, "web", "default") or {}).get("status"))
    await env.request(pod, "drain-web-0")
    await env.until(lambda: "number of retries: 2" in evictor_message(env, pod))
    await cancel_and_wait(env.tasks)  # the leader is gone mid-way (killed: nothing runs on)
    env.tasks.clear()
    env.tasks.append(asyncio.create_task(env.leader().run()))
    # the count goes on from the message the last one wrote
    await env.until(lambda: "number of retries: 3" in evictor_message(env, pod))
    await env.admin.patch(PDBS, "web", {"spec": {"minAvailable": 0}}, "default")
    await env.until(lambda: env.reason(env.eviction(pod), "TargetEvicted") == "True/PodDeleted")
    # the count went on (its last word: the completion, or the last refusal where the pod was
    # seen gone before the completion was written)
    said = evictor_message(env, pod)
    found = re.search(r"after (\d+) refused attempts|number of retries: (\d+)", said)
    assert found is not None and int(found.group(1) or found.group(2)) >= 3, said


async def test_a_request_for_a_pod_that_is_not_there_is_refused(env: Env) -> None:
    # as upstream's controller answers it: Failed=True/EvictionInvalid with
    # TargetEvicted=False/EvictionFailed on the request, and no Eviction (it once said the pod
    # was evicted: TargetEvicted=True/PodDeleted)
    pod = await env.pod("gone-0")
    await env.admin.delete(PODS, "gone-0", "default", grace_period_seconds=0)
    await env.until(lambda: env.view.get(PODS, "gone-0", "default") is None)
    await env.request(pod, "late")
    other = {"metadata": {"name": "web-0", "uid": "4a1d6c8e-0000-4000-8000-000000000000"}}
    await env.pod("web-0")
    await env.request(other, "wrong-uid")

    def request(name: str) -> Obj:
        return env.view.get(UPSTREAM_EVICTIONREQUESTS, name, "default") or {}

    for name, said in (
        ("late", "Target pod not found."),
        ("wrong-uid", "Target pod UID mismatch: expected 4a1d6c8e-0000-4000-8000-000000000000"),
    ):
        await env.until(lambda n=name: env.reason(request(n), "Failed") == "True/EvictionInvalid")
        assert env.reason(request(name), "TargetEvicted") == "False/EvictionFailed"
        failed = condition(request(name)["status"], "Failed") or {}
        assert str(failed.get("message", "")).startswith(said), failed
        assert request(name)["status"]["observedGeneration"] == 1
    assert env.view.list(EVICTIONS) == []
    web = env.view.get(PODS, "web-0", "default")
    assert web is not None and web["metadata"].get("deletionTimestamp") is None


def evictor_entry(env: Env, pod: Obj) -> Obj:
    for r in (env.eviction(pod).get("status") or {}).get("responders") or []:
        if r["name"] == IMPERATIVE_RESPONDER:
            return dict(r)
    return {}


def evictor_message(env: Env, pod: Obj) -> str:
    return str(evictor_entry(env, pod).get("message", ""))


HOLD = "test.nodeagent.io/hold"  # keeps an evicted pod Terminating until the test lets go


async def test_an_evicted_pod_is_not_said_held_by_its_budget_while_it_terminates(
    env: Env,
) -> None:
    """The budget held web-0 back, then let it go: for its whole termination (a finalizer
    keeps it) the evictor's entry says it evicted the pod, not that the budget holds it."""
    pod = await env.pod("web-0", app="web")
    await env.admin.patch(PODS, "web-0", {"metadata": {"finalizers": [HOLD]}}, "default")
    await budget(env.admin, "web", min_available=1)
    await env.until(lambda: (env.view.get(PDBS, "web", "default") or {}).get("status"))
    await env.request(pod, "drain-web-0")
    await env.until(lambda: "budget" in evictor_message(env, pod).lower())
    entries: list[Obj] = []  # the evictor's entry as each event of the Eviction showed it

    def seen(_event: str, resource: Any, obj: Obj) -> None:
        if resource == EVICTIONS and obj["spec"]["target"]["pod"]["uid"] == pod["metadata"]["uid"]:
            entries.extend(
                r
                for r in (obj.get("status") or {}).get("responders") or []
                if r["name"] == IMPERATIVE_RESPONDER and r not in entries[-1:]
            )

    env.view.listen(seen)
    await env.admin.patch(PDBS, "web", {"spec": {"minAvailable": 0}}, "default")
    try:
        await env.until(lambda: "Evicted the pod" in evictor_message(env, pod))
        # the pod comes through another watch than the Eviction: wait for it to show
        await env.until(
            lambda: ((env.view.get(PODS, "web-0", "default") or {}).get("metadata") or {}).get(
                "deletionTimestamp"
            )
        )
        assert "budget" not in evictor_message(env, pod).lower()

        # as upstream's evictor: the server's acceptance is not its end; Active while the pod
        # terminates (kwok keeps it Running while the finalizer holds it), it says so; where
        # the pod is terminal at once (the sim's kubelet) its completion is all it says
        def said_or_ended() -> bool:
            phase = ((env.view.get(PODS, "web-0", "default") or {}).get("status") or {}).get(
                "phase"
            )
            return "waiting for it to terminate" in evictor_message(env, pod) or phase in (
                "Succeeded",
                "Failed",
            )

        await env.until(said_or_ended)
    finally:
        await env.admin.patch(PODS, "web-0", {"metadata": {"finalizers": []}}, "default")
    await env.until(lambda: env.view.get(PODS, "web-0", "default") is None)
    await env.until(
        lambda: (env.reason(env.eviction(pod), "TargetEvicted") or "").startswith("True")
    )
    # the pod's end is the evictor's
    assert env.state(pod, IMPERATIVE_RESPONDER) == "Completed"
    said = [e.get("message", "") for e in entries]
    assert not [
        e
        for e in entries
        if "waiting for it to terminate" in e.get("message", "") and e.get("completionTime")
    ], said
    assert re.fullmatch(
        r"Evicted the pod through the Eviction API( after \d+ refused attempts)?; "
        r"(the pod is gone|the pod reached phase (Succeeded|Failed))\.",
        said[-1],
    ), said


def processed(pdb: Obj | None) -> bool:
    """The disruption controller has counted the budget's pods (the server evicts nothing
    through it before: "still being processed")."""
    status = (pdb or {}).get("status") or {}
    generation = (pdb or {}).get("metadata", {}).get("generation")
    return bool(status.get("currentHealthy")) and status.get("observedGeneration") == generation


async def test_the_evictors_words_ride_on_the_fewest_writes(env: Env) -> None:
    """Its first words (a budget holds it) come in the controller's write that makes it Active;
    after the call, nothing until the pod shows its end is coming, then one write saying when
    (or, the pod terminal at once, its completion): the Eviction API costs no extra write."""
    pod = await env.pod("web-0", app="web")
    await env.admin.patch(PODS, "web-0", {"metadata": {"finalizers": [HOLD]}}, "default")
    await budget(env.admin, "web", min_available=1)
    await env.until(lambda: processed(env.view.get(PDBS, "web", "default")))
    versions: list[Obj] = []  # every version of the pod's Eviction, as its watch showed them
    graces: list[object] = []  # the pod's deletionGracePeriodSeconds, version by version

    def seen(_event: str, resource: Any, obj: Obj) -> None:
        if resource == EVICTIONS and obj["spec"]["target"]["pod"]["uid"] == pod["metadata"]["uid"]:
            versions.append(obj)
        if resource == PODS and obj["metadata"]["uid"] == pod["metadata"]["uid"]:
            graces.append(obj["metadata"].get("deletionGracePeriodSeconds"))

    env.view.listen(seen)
    await env.request(pod, "drain-web-0")
    await env.until(lambda: "budget" in evictor_message(env, pod).lower())
    statuses = [v.get("status") or {} for v in versions]
    first = next(i for i, st in enumerate(statuses) if st.get("targetResponders"))
    words = [r for r in statuses[first]["responders"] if r["name"] == IMPERATIVE_RESPONDER]
    assert "budget" in words[0].get("message", "").lower(), statuses
    held = len(versions)
    await env.admin.patch(PDBS, "web", {"spec": {"minAvailable": 0}}, "default")
    try:
        await env.until(lambda: "Evicted the pod" in evictor_message(env, pod))
        said = next(
            r
            for v in versions[held:]
            for r in (v.get("status") or {}).get("responders") or []
            if r["name"] == IMPERATIVE_RESPONDER and "Evicted" in r.get("message", "")
        )
        # when: its grace period's end, unless kwok (the real backend's kubelet) cut the grace
        # to 0 before the evictor wrote (no expected time in the past: the server refuses one)
        cut = 0 in graces
        assert said.get("expectedCompletionTime") or said.get("completionTime") or cut, said
    finally:
        await env.admin.patch(PODS, "web-0", {"metadata": {"finalizers": []}}, "default")
    await env.until(lambda: env.view.get(PODS, "web-0", "default") is None)


async def test_a_second_eviction_of_the_target_is_refused_with_the_pair(env: Env) -> None:
    pod = await env.pod("web-0", (KEEPER, 10000))
    await env.request(pod, "drain")
    await env.until(lambda: env.state(pod, KEEPER) == "Active")
    md = pod["metadata"]
    await env.admin.create(
        EVICTIONS,
        {
            "apiVersion": "lifecycle.k8s.io/v1alpha1",
            "kind": "Eviction",
            "metadata": {"name": "by-hand", "namespace": "default"},
            "spec": {"target": {"pod": {"name": md["name"], "uid": md["uid"]}}},
        },
    )

    def by_hand() -> Obj:
        return env.view.get(EVICTIONS, "by-hand", "default") or {}

    await env.until(lambda: env.reason(by_hand(), "Failed") == "True/EvictionInvalid")
    # as upstream writes it: the pair and the generation seen
    assert env.reason(by_hand(), "TargetEvicted") == "False/EvictionFailed"
    assert by_hand()["status"]["observedGeneration"] == 1
    assert env.state(pod, KEEPER) == "Active"  # the first one goes on


async def test_after_no_responder_left_a_new_intent_makes_the_next_eviction(env: Env) -> None:
    """As upstream: an Eviction that no responder carried out stands while its requester still
    wants the pod gone; withdrawing and asking again, or a new requester, makes the next one
    (`pod-<N>-<pod name>`), the failed one kept beside it, the requests mirroring the new one.
    The imperative evictor does not evict a DaemonSet's pod (its DaemonSet would make it
    again): with no other responder, it completes and no responder is left."""
    template = {
        "metadata": {
            "labels": {"app": "agent"},
            # none of nodeagent's interceptors: the evictor alone
            "annotations": {INTERCEPTORS_ANNOTATION: "example.com/none"},
        },
        "spec": {"containers": [{"name": "agent", "image": "agent"}]},
    }
    await env.admin.create(
        DAEMONSETS,
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": "agent", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": template},
        },
    )
    await env.until(lambda: env.view.list(PODS, app="agent"))
    pod = env.view.list(PODS, app="agent")[0]
    name, uid = pod["metadata"]["name"], pod["metadata"]["uid"]

    def failed(n: int) -> bool:
        e = env.view.get(EVICTIONS, f"pod-{n}-{name}", "default") or {}
        return env.reason(e, "Failed") == "True/NoFurtherResponder"

    def mirrored(request: str) -> bool:
        r = env.view.get(UPSTREAM_EVICTIONREQUESTS, request, "default") or {}
        want = (env.eviction(pod).get("status") or {}).get("conditions")
        return bool(want) and (r.get("status") or {}).get("conditions") == want

    await env.request(pod, "drain")
    await env.until(lambda: failed(1))
    assert env.state(pod, IMPERATIVE_RESPONDER) == "Completed"
    await env.until(lambda: mirrored("drain"))

    withdraw, again = ({"spec": {"intent": i}} for i in ("Withdrawn", "Eviction"))
    await env.admin.patch(UPSTREAM_EVICTIONREQUESTS, "drain", withdraw, "default")
    await env.until(
        lambda: (
            env.eviction(pod)["status"]["requesters"]
            == [{"name": REQUESTER, "intent": "Withdrawn"}]
        )
    )
    assert [e["metadata"]["name"] for e in evictions_of(env.view, uid)] == [f"pod-1-{name}"]
    await env.admin.patch(UPSTREAM_EVICTIONREQUESTS, "drain", again, "default")
    await env.until(lambda: failed(2))
    await env.until(lambda: mirrored("drain"))
    assert env.eviction(pod)["metadata"]["name"] == f"pod-2-{name}"

    await env.request(pod, "rebalance", requester="zeta.io/balancer")
    await env.until(lambda: env.eviction(pod).get("metadata", {}).get("name") == f"pod-3-{name}")
    await env.until(lambda: mirrored("drain") and mirrored("rebalance"))
    # every one kept, the ended ones still failed; the pod untouched
    assert sorted(e["metadata"]["name"] for e in evictions_of(env.view, uid)) == [
        f"pod-{n}-{name}" for n in (1, 2, 3)
    ]
    assert failed(1) and failed(2)
    assert (env.view.get(PODS, name, "default") or {}).get("metadata", {}).get("uid") == uid
