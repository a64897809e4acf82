"""The EvictionRequest controller and its imperative-eviction.k8s.io interceptor on both cluster
backends, through the real client: PDB-paced evictions, interceptor turns, cancellation and
validation."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest

from nodeagent.kube.errors import Invalid
from nodeagent.kube.resources import (
    DEPLOYMENTS,
    EVICTIONREQUESTS,
    NODES,
    PDBS,
    PODS,
    Obj,
    Resource,
)
from nodeagent.model.names import IMPERATIVE_INTERCEPTOR, INTERCEPTORS_ANNOTATION, NODE_LABEL
from nodeagent.model.times import parse_time
from nodeagent_testbed.sim.actors.kubelet import EXIT_SECONDS
from tests.integration.controllers.evictionrequest_harness import (
    REQUESTER,
    Env,
    env,
    fast_settings,
)

__all__ = ["env"]  # the fixture, re-exported for pytest


def deployment(name: str, replicas: int, exit_seconds: float = 0) -> Obj:
    return {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {
                    "labels": {"app": name},
                    "annotations": {EXIT_SECONDS: str(exit_seconds)},
                },
                "spec": {"containers": [{"name": name, "image": "nginx"}]},
            },
        },
    }


def pdb(name: str, **spec: Any) -> Obj:
    return {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": name}}, **spec},
    }


def bare_pod(name: str, annotations: dict[str, str] | None = None, **labels: str) -> Obj:
    md: dict[str, Any] = {"name": name, "namespace": "default", "labels": labels or {"app": name}}
    if annotations:
        md["annotations"] = annotations
    return {"metadata": md, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


def running_ready(p: Obj) -> bool:
    if p["metadata"].get("deletionTimestamp"):
        return False
    status = p.get("status") or {}
    ready = any(
        c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions") or []
    )
    return status.get("phase") == "Running" and ready


def budget(env: Env, name: str) -> dict[str, Any]:
    return dict((env.get(PDBS, name) or {}).get("status") or {})


async def running_pod(env: Env, name: str, annotations: dict[str, str] | None = None) -> Obj:
    await env.create(PODS, bare_pod(name, annotations))
    await env.until(lambda: running_ready(env.get(PODS, name) or {"metadata": {}}))
    pod = env.get(PODS, name)
    assert pod is not None
    return pod


# --- PodDisruptionBudgets pace the imperative evictions -----------------------------------


async def test_deployment_under_pdb_is_evicted_one_at_a_time(env: Env) -> None:
    # Pods take two seconds to stop, so an evicted pod and its replacement overlap.
    await env.create(DEPLOYMENTS, deployment("web", 4, exit_seconds=2))
    await env.until(lambda: sum(running_ready(p) for p in env.pods(app="web")) == 4)
    await env.create(PDBS, pdb("web", maxUnavailable=1))
    await env.until(lambda: budget(env, "web").get("disruptionsAllowed") == 1)
    originals = env.pods(app="web")

    worst = 0
    retry_counts: set[int] = set()

    def watch(_event: str, resource: Resource, obj: Obj) -> None:
        # every change the watches deliver, in order, with the view updated up to it
        nonlocal worst
        if resource == PODS:
            ready = sum(running_ready(p) for p in env.pods(app="web"))
            worst = max(worst, 4 - ready)
        elif resource == EVICTIONREQUESTS:
            for e in (obj.get("status") or {}).get("interceptors") or []:
                found = re.search(r"number of retries: (\d+)", e.get("message", ""))
                if e["name"] == IMPERATIVE_INTERCEPTOR and found:
                    retry_counts.add(int(found.group(1)))

    env.view.listen(watch)
    # The budget recovers as soon as a replacement is Ready, which is at once here: with the
    # nodes cordoned the replacements stay Pending, so the budget stays spent and refuses until
    # the nodes take pods again.
    for node in env.backend.node_names:
        await env.kube.patch(NODES, node, {"spec": {"unschedulable": True}})
    await env.start(fast_settings(), workers=4)
    for p in originals:
        await env.request_for(p)
    uids = [p["metadata"]["uid"] for p in originals]
    await env.until(lambda: min(retry_counts, default=0) == 1)
    for node in env.backend.node_names:
        await env.kube.patch(NODES, node, {"spec": {"unschedulable": False}})
    await env.until(lambda: all(env.evicted(uid) for uid in uids), timeout=60)
    # the pods' own watch may not have told us yet what the controller saw
    await env.until(lambda: not {p["metadata"]["uid"] for p in env.pods(app="web")} & set(uids))

    assert worst == 1, f"{worst} pods were unavailable at once"
    assert env.calls.evictions(429) > 0, env.calls.counts
    assert retry_counts and min(retry_counts) == 1, retry_counts
    assert env.calls.evictions(201) + env.calls.evictions(200) == 4
    left = {p["metadata"]["uid"] for p in env.pods(app="web")}
    assert not left & set(uids)
    for uid in uids:
        evicted = env.condition(uid, "Evicted")
        assert evicted["reason"] in ("PodDeleted", "PodReplaced"), evicted
        er = env.er(uid)
        assert er["status"]["processedInterceptors"] == [IMPERATIVE_INTERCEPTOR]
        assert er["status"]["observedGeneration"] == 1
        assert er["metadata"]["labels"]["app"] == "web"
        assert er["metadata"]["labels"][NODE_LABEL].startswith("node-")
    refused = sum(
        s.value
        for m in env.registry.collect()
        if m.name == "evictionrequest_controller_imperative_evictions"
        for s in m.samples
        if s.name.endswith("_total") and s.labels["result"] == "refused"
    )
    assert refused == env.calls.evictions(429)
    assert (env.metric("workqueue_adds_total", name="evictionrequests") or 0) > 0
    # a refusal is said once per pod, on the pod (kubectl describe pod shows it)
    refused_pods = {
        p["metadata"]["name"]
        for p in originals
        if any(e["reason"] == "EvictionRefused" for e in env.events_for(p["metadata"]["name"]))
    }
    assert refused_pods, "no EvictionRefused Event on a pod"
    for name in refused_pods:
        [event] = [e for e in env.events_for(name) if e["reason"] == "EvictionRefused"]
        assert event["involvedObject"]["kind"] == "Pod" and event["type"] == "Warning"
        assert (event.get("count") or 1) == 1 and "refused" in event["message"]


# --- interceptor turns -------------------------------------------------------------------------


async def test_silent_interceptor_is_passed_over_after_the_deadline(env: Env) -> None:
    pod = await running_pod(env, "quiet", {INTERCEPTORS_ANNOTATION: "silent.example.com"})
    uid = pod["metadata"]["uid"]
    await env.start(fast_settings(deadline=1.0))
    await env.request_for(pod)

    def activation(name: str) -> float | None:
        """When `name`'s turn started: its entry's startTime, which the controller records."""
        er = env.get(EVICTIONREQUESTS, uid) or {}
        for entry in (er.get("status") or {}).get("interceptors") or []:
            if entry.get("name") == name:
                when = parse_time(entry.get("startTime"))
                return when.timestamp() if when else None
        return None

    await env.until(lambda: activation("silent.example.com"))
    silent_since = activation("silent.example.com")
    await env.until(lambda: activation(IMPERATIVE_INTERCEPTOR))
    imperative_since = activation(IMPERATIVE_INTERCEPTOR)
    assert silent_since is not None and imperative_since is not None
    assert imperative_since - silent_since >= 1.0
    await env.until(lambda: any(e["reason"] == "InterceptorTimedOut" for e in env.events_for(uid)))
    [handed] = [e for e in env.events_for(uid) if e["reason"] == "InterceptorTimedOut"]
    assert handed["message"] == (
        "silent.example.com did not report within 1s; passed to imperative-eviction.k8s.io"
    )
    await env.until(lambda: env.evicted(uid))
    status = env.er(uid)["status"]
    assert status["processedInterceptors"] == ["silent.example.com", IMPERATIVE_INTERCEPTOR]
    # it never reported: its entry holds only the start of its turn, as the controller wrote it
    assert set(env.entry(uid, "silent.example.com")) == {"name", "startTime"}
    assert env.calls.evictions() == 1


async def test_completed_interceptor_hands_over_at_once(env: Env) -> None:
    pod = await running_pod(env, "helped", {INTERCEPTORS_ANNOTATION: "helper.example.com"})
    uid = pod["metadata"]["uid"]
    await env.start(fast_settings(deadline=3600.0))
    await env.request_for(pod)
    await env.until(lambda: env.active(uid) == ["helper.example.com"])
    start = time.monotonic()

    def complete(er: Obj) -> None:  # the helper interceptor reports and finishes
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        for e in er["status"]["interceptors"]:
            if e["name"] == "helper.example.com":
                e.update(startTime=now, heartbeatTime=now, completionTime=now, message="done")

    await env.update_status(EVICTIONREQUESTS, uid, complete)
    await env.until(lambda: env.evicted(uid))
    assert time.monotonic() - start < 30  # far from the hour-long deadline
    status = env.er(uid)["status"]
    assert status["processedInterceptors"] == ["helper.example.com", IMPERATIVE_INTERCEPTOR]
    await env.until(lambda: any(e["reason"] == "InterceptorCompleted" for e in env.events_for(uid)))
    completed = [e for e in env.events_for(uid) if e["reason"] == "InterceptorCompleted"]
    assert (
        "helper.example.com set completionTime; passed to imperative-eviction.k8s.io"
        in (completed[0]["message"])
    )


# --- cancellation -----------------------------------------------------------------------------


async def test_removing_the_last_requester_cancels_and_stops_all_action(env: Env) -> None:
    await env.create(DEPLOYMENTS, deployment("db", 1))
    await env.until(lambda: sum(running_ready(p) for p in env.pods(app="db")) == 1)
    await env.create(PDBS, pdb("db", maxUnavailable=0))
    await env.until(lambda: budget(env, "db").get("observedGeneration") == 1)
    [pod] = env.pods(app="db")
    uid = pod["metadata"]["uid"]
    await env.start(fast_settings(base=0.02, cap=0.1), workers=1)
    await env.request_for(pod, requesters=[REQUESTER, "descheduler.example.com"])

    # the budget allows nothing: the eviction is held back (no call) and the status says why
    await env.until(lambda: "Waiting for disruption budget db" in env.imperative_message(uid))
    labels = {
        "namespace": "default",
        "evictionrequest": uid,
        "pod": pod["metadata"]["name"],
    }
    # set right after the write its watch event shows (which may come first)
    await env.until(
        lambda: (
            env.metric(
                "evictionrequest_controller_active_interceptor",
                **labels,
                interceptor=IMPERATIVE_INTERCEPTOR,
            )
            == 1
        )
    )
    assert env.metric("evictionrequest_controller_active_requester", **labels, requester=REQUESTER)

    # one requester withdraws: nothing changes
    await env.patch(EVICTIONREQUESTS, uid, {"spec": {"requesters": [{"name": REQUESTER}]}})
    gone = {**labels, "requester": "descheduler.example.com"}
    await env.until(lambda: not env.metric("evictionrequest_controller_active_requester", **gone))
    assert not env.canceled(uid)
    # nothing let through (held back; asked anyway after a while, the budget refuses)
    assert env.calls.evictions(200) + env.calls.evictions(201) == 0
    assert env.calls.evictions() == env.calls.evictions(429)
    # the last one withdraws: canceled
    await env.patch(EVICTIONREQUESTS, uid, {"spec": {"requesters": []}})
    await env.until(lambda: env.canceled(uid))
    canceled = env.condition(uid, "Canceled")
    assert canceled["reason"] == "NoRequesters"
    assert env.active(uid) == []
    assert env.er(uid)["status"]["processedInterceptors"] == [IMPERATIVE_INTERCEPTOR]
    # the metrics are updated before the Event is recorded
    await env.until(lambda: any(e["reason"] == "Canceled" for e in env.events_for(uid)))
    assert (
        env.metric(
            "evictionrequest_controller_active_interceptor",
            **labels,
            interceptor=IMPERATIVE_INTERCEPTOR,
        )
        is None
    )
    tries = env.calls.evictions()

    # Now an eviction would succeed; the controller must still leave the pod alone. Touch the
    # canceled request and the pod, then let a probe request go through the same single
    # worker after them: by the time the probe is evicted, the canceled one was looked at.
    await env.delete(PDBS, "db")
    await env.patch(EVICTIONREQUESTS, uid, {"metadata": {"labels": {"touched": "yes"}}})
    touched = {"metadata": {"annotations": {"touched": "yes"}}}
    await env.patch(PODS, pod["metadata"]["name"], touched)
    probe = await running_pod(env, "probe")
    await env.request_for(probe)
    await env.until(lambda: env.evicted(probe["metadata"]["uid"]))

    assert env.calls.evictions() == tries + 1  # only the probe's
    still = env.get(PODS, pod["metadata"]["name"])
    assert still is not None and still["metadata"]["uid"] == uid
    assert not still["metadata"].get("deletionTimestamp")
    assert env.canceled(uid) and not env.evicted(uid)


# --- validation -------------------------------------------------------------------------------


async def test_request_for_a_missing_pod_is_canceled_with_a_clear_message(env: Env) -> None:
    await env.start(fast_settings())
    ghost = {"metadata": {"name": "ghost", "namespace": "default", "uid": "0000-ghost"}}
    await env.request_for(ghost)
    await env.until(lambda: env.canceled("0000-ghost"))
    canceled = env.condition("0000-ghost", "Canceled")
    assert canceled["reason"] == "ValidationFailed"
    assert canceled["message"] == "Target Pod default/ghost was not found."
    await env.until(lambda: env.events_for("0000-ghost"))
    assert env.events_for("0000-ghost")[0]["type"] == "Warning"
    assert env.calls.evictions() == 0


async def test_request_not_named_after_the_pod_uid_is_refused(env: Env) -> None:
    """The API server refuses it with the CRD's CEL rule (the sim evaluates CEL too); the
    controller's own check for servers that do not is unit-tested."""
    pod = await running_pod(env, "named")
    await env.start(fast_settings())
    with pytest.raises(Invalid, match=r"metadata\.name must be the UID of the target pod"):
        await env.request_for(pod, name="named-eviction")
    assert env.calls.evictions() == 0


async def test_pod_created_together_with_its_request_is_not_mistaken_for_missing(
    env: Env,
) -> None:
    await env.start(fast_settings())
    # the pod and its request appear back to back; the pod informer may see the pod later
    created = await env.create(PODS, bare_pod("quick"))
    await env.request_for(created)
    uid = created["metadata"]["uid"]
    await env.until(lambda: env.evicted(uid) or env.canceled(uid))
    assert env.evicted(uid), env.condition(uid, "Canceled")


@pytest.mark.backends("sim")  # the 409 is injected: only the simulated server can be told to
async def test_a_conflict_from_the_eviction_api_is_retried_for_the_same_pod(env: Env) -> None:
    """kube-apiserver answers 409 for a replaced pod (UID precondition) and also for a conflict
    on its own side (updating the budget or the pod): the pod still there with its UID means
    the latter, so the eviction is tried again instead of the pod being taken for gone."""
    pod = await running_pod(env, "web")
    assert env.backend.sim is not None
    env.backend.sim.faults.error_burst(409, 1, verb="evict", resource="pods")
    await env.start(fast_settings())
    await env.request_for(pod)
    uid = pod["metadata"]["uid"]
    await env.until(lambda: env.evicted(uid) and env.get(PODS, "web") is None)
    assert env.calls.evictions(409) == 1 and env.calls.evictions() == 2
