"""The cluster-side interceptors on both cluster backends: annotate-and-wait (with the test
playing an operator that moves its pod) and daemonset.apps.k8s.io (taint, graceful delete, the
taint lifted when no maintenance covers the node any more)."""

from __future__ import annotations

from typing import Any

from nodeagent.controllers.evictionrequest import AnnotateRule
from nodeagent.kube.resources import (
    DAEMONSETS,
    EVICTIONREQUESTS,
    NODEMAINTENANCES,
    NODES,
    PODS,
    Obj,
    Resource,
)
from nodeagent.model.interceptors.targets import SelectorInterceptor
from nodeagent.model.names import DAEMONSET_INTERCEPTOR, IMPERATIVE_INTERCEPTOR, MAINTENANCE_TAINT
from nodeagent.model.selectors import label_selector_from_dict
from nodeagent.model.times import parse_time
from tests.integration.controllers.evictionrequest_harness import Env, env, fast_settings

__all__ = ["env"]  # the fixture, re-exported for pytest

MOVER = AnnotateRule(
    SelectorInterceptor(
        "mover.example.com", label_selector_from_dict({"matchLabels": {"app": "db"}})
    ),
    "example.com/reschedule",
    "true",
)


def uid_of(p: Obj | None) -> str | None:
    return None if p is None else str(p["metadata"]["uid"])


def running(p: Obj | None) -> bool:
    return (
        p is not None
        and (p.get("status") or {}).get("phase") == "Running"
        and not p["metadata"].get("deletionTimestamp")
    )


def db_pod(node: str) -> Obj:
    return {
        "metadata": {"name": "db-0", "namespace": "default", "labels": {"app": "db"}},
        "spec": {"nodeName": node, "containers": [{"name": "db", "image": "couchbase"}]},
    }


# --- annotate-and-wait -----------------------------------------------------------------------


async def test_annotate_and_wait_lets_the_operator_move_the_pod(env: Env) -> None:
    await env.create(PODS, db_pod("node-1"))
    await env.until(lambda: running(env.get(PODS, "db-0")))
    old = env.get(PODS, "db-0")
    assert old is not None
    uid = old["metadata"]["uid"]
    deadline = 2.0
    await env.start(fast_settings(deadline=deadline, annotate=(MOVER,)), annotate=True)
    await env.request_for(old)

    def asked_to_move() -> bool:
        """The operator moves db-0 once asked to, but only after it kept the interceptor
        waiting past one heartbeat deadline (which must not cost it its turn)."""
        entry = env.entry(uid, MOVER.name)
        start, beat = parse_time(entry.get("startTime")), parse_time(entry.get("heartbeatTime"))
        if start is None or beat is None or (beat - start).total_seconds() < 1.25 * deadline:
            return False
        pod = env.get(PODS, "db-0")
        annotations = (pod or {}).get("metadata", {}).get("annotations") or {}
        return pod is not None and annotations.get(MOVER.annotation_key) == "true"

    # the operator at work
    await env.until(asked_to_move, timeout=30)
    moving = env.get(PODS, "db-0")
    assert moving is not None
    moved = [moving["metadata"]["uid"]]
    await env.delete(PODS, "db-0", grace_period_seconds=0)
    await env.create(PODS, db_pod("node-2"))

    await env.until(lambda: env.evicted(uid), timeout=30)
    assert moved == [uid]
    # the replacement, once the pods' watch tells of it
    await env.until(lambda: uid_of(env.get(PODS, "db-0")) not in (None, uid))
    new = env.get(PODS, "db-0")
    assert new is not None and new["metadata"]["uid"] != uid
    assert new["spec"]["nodeName"] == "node-2"
    # the replacement is another pod: not asked to move
    assert MOVER.annotation_key not in (new["metadata"].get("annotations") or {})
    assert env.calls.evictions() == 0
    er = env.er(uid)
    assert IMPERATIVE_INTERCEPTOR not in er["status"]["processedInterceptors"]
    assert env.entry(uid, IMPERATIVE_INTERCEPTOR) == {"name": IMPERATIVE_INTERCEPTOR}
    # it kept its turn past the deadline by heartbeating, then reported completion
    await env.until(lambda: env.active(uid) == [])
    assert env.er(uid)["status"]["processedInterceptors"] == [MOVER.name]
    entry = env.entry(uid, MOVER.name)
    start, beat = parse_time(entry["startTime"]), parse_time(entry["heartbeatTime"])
    assert start is not None and beat is not None
    assert (beat - start).total_seconds() >= 1.25 * deadline
    assert entry["completionTime"]
    assert entry["message"] == (
        "Annotated the pod with example.com/reschedule=true so its operator moves it; "
        f"pod db-0 with UID {uid} is gone."
    )
    await env.until(lambda: any(e["reason"] == "PodAnnotated" for e in env.events_for(uid)))
    assert env.condition(uid, "Evicted")["reason"] in ("PodReplaced", "PodDeleted")


async def test_canceled_request_takes_the_annotation_back(env: Env) -> None:
    await env.create(PODS, db_pod("node-1"))
    await env.until(lambda: running(env.get(PODS, "db-0")))
    pod = env.get(PODS, "db-0")
    assert pod is not None
    uid = pod["metadata"]["uid"]
    await env.start(fast_settings(deadline=60, annotate=(MOVER,)), annotate=True)
    await env.request_for(pod)

    def annotated() -> bool:
        p = env.get(PODS, "db-0") or {"metadata": {}}
        return (p["metadata"].get("annotations") or {}).get(MOVER.annotation_key) == "true"

    await env.until(annotated)
    await env.patch(EVICTIONREQUESTS, uid, {"spec": {"requesters": []}})
    await env.until(lambda: env.canceled(uid) and not annotated())
    still = env.get(PODS, "db-0")
    assert still is not None and still["metadata"]["uid"] == uid and running(still)
    assert env.calls.evictions() == 0


# --- daemonset.apps.k8s.io --------------------------------------------------------------------


def daemonset(name: str, **pod_spec: Any) -> Obj:
    return {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": name, "image": "agent"}], **pod_spec},
            },
        },
    }


def maintenance(name: str, node: str) -> Obj:
    return {
        "apiVersion": "nodeagent.io/v1alpha1",
        "kind": "NodeMaintenance",
        "metadata": {"name": name},
        "spec": {
            "stage": "Drain",
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
                ]
            },
        },
    }


async def draining_daemonsets(env: Env, name: str, node: str) -> None:
    """What the NodeMaintenance controller (not running here) reports once the plan reaches the
    DaemonSet entries: drainTargets that cover DaemonSet pods of `node`."""
    targets = [
        {"podType": "Default", "podPriority": 2147483647},
        {"podType": "DaemonSet", "podPriority": 2147483647},
    ]
    status = {"nodeStatuses": [{"nodeRef": {"name": node}, "drainTargets": targets}]}
    await env.kube.patch_status(NODEMAINTENANCES, name, {"status": status})


def tainted(env: Env, node: str) -> bool:
    taints = (env.get(NODES, node, None) or {}).get("spec", {}).get("taints") or []
    return any(t.get("key") == MAINTENANCE_TAINT["key"] for t in taints)


def on_node(env: Env, app: str, node: str) -> list[Obj]:
    return [p for p in env.pods(app=app) if p["spec"].get("nodeName") == node]


def meant_for(pod: Obj) -> str | None:
    """The node a pod is on, or the one a DaemonSet made it for while it waits for the
    scheduler (a required node affinity on metadata.name, as the DaemonSet controller sets)."""
    spec = pod["spec"]
    if spec.get("nodeName"):
        return str(spec["nodeName"])
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    for term in required.get("nodeSelectorTerms") or []:
        for field in term.get("matchFields") or []:
            values = field.get("values") or []
            named = field.get("key") == "metadata.name" and field.get("operator") == "In"
            if named and len(values) == 1:
                return str(values[0])
    return None


async def test_daemonset_pods_stay_off_the_node_until_the_maintenance_completes(env: Env) -> None:
    await env.create(DAEMONSETS, daemonset("agent"))
    await env.until(lambda: sum(running(p) for p in env.pods(app="agent")) == 3)
    await env.create(NODEMAINTENANCES, maintenance("fix-node-1", "node-1"))
    await draining_daemonsets(env, "fix-node-1", "node-1")
    await env.start(fast_settings(), daemonset=True)
    [victim] = on_node(env, "agent", "node-1")
    uid = victim["metadata"]["uid"]

    created_on_node_1: list[str] = []

    def watch(event: str, resource: Resource, obj: Obj) -> None:
        if resource == PODS and event == "ADDED" and meant_for(obj) == "node-1":
            created_on_node_1.append(obj["metadata"]["name"])

    env.view.listen(watch)
    await env.request_for(victim)
    await env.until(lambda: env.evicted(uid))
    assert tainted(env, "node-1")
    assert not on_node(env, "agent", "node-1")
    # the interceptor reports its completion, and its turn ends
    await env.until(lambda: env.active(uid) == [])
    entry = env.entry(uid, DAEMONSET_INTERCEPTOR)
    assert entry["message"] == (
        "Tainted node node-1 with nodeagent.io/maintenance:NoSchedule; deleted the pod "
        f"gracefully; pod {victim['metadata']['name']} with UID {uid} is gone."
    )
    assert entry["completionTime"] and entry["startTime"]
    assert env.er(uid)["status"]["processedInterceptors"] == [DAEMONSET_INTERCEPTOR]
    assert env.calls.evictions() == 0  # deleted, not evicted
    # The other nodes keep theirs, and nothing comes back to node-1 while the maintenance
    # lasts, even when the DaemonSet controller looks again.
    await env.patch(DAEMONSETS, "agent", {"metadata": {"labels": {"nudge": "1"}}})
    await env.until(
        lambda: (
            (env.get(DAEMONSETS, "agent") or {}).get("status", {}).get("desiredNumberScheduled")
            == 2
        )
    )
    assert created_on_node_1 == []
    assert len(on_node(env, "agent", "node-2")) == len(on_node(env, "agent", "node-3")) == 1

    await env.patch(NODEMAINTENANCES, "fix-node-1", {"spec": {"stage": "Complete"}}, None)
    await env.until(lambda: not tainted(env, "node-1"))
    await env.until(lambda: any(running(p) for p in on_node(env, "agent", "node-1")))
    assert len(created_on_node_1) == 1


async def test_taint_goes_when_the_maintenance_is_deleted(env: Env) -> None:
    await env.create(DAEMONSETS, daemonset("agent"))
    await env.until(lambda: sum(running(p) for p in env.pods(app="agent")) == 3)
    await env.create(NODEMAINTENANCES, maintenance("fix-node-2", "node-2"))
    await draining_daemonsets(env, "fix-node-2", "node-2")
    await env.start(fast_settings(), daemonset=True)
    [victim] = on_node(env, "agent", "node-2")
    await env.request_for(victim)
    await env.until(lambda: env.evicted(victim["metadata"]["uid"]))
    assert tainted(env, "node-2")
    await env.delete(NODEMAINTENANCES, "fix-node-2", None)
    await env.until(lambda: not tainted(env, "node-2"))
    await env.until(lambda: any(running(p) for p in on_node(env, "agent", "node-2")))


async def test_daemonset_pod_that_tolerates_the_taint_is_reported(env: Env) -> None:
    await env.create(DAEMONSETS, daemonset("stubborn", tolerations=[{"operator": "Exists"}]))
    await env.until(lambda: sum(running(p) for p in env.pods(app="stubborn")) == 3)
    await env.create(NODEMAINTENANCES, maintenance("fix-node-3", "node-3"))
    await draining_daemonsets(env, "fix-node-3", "node-3")
    await env.start(fast_settings(), daemonset=True)
    [victim] = on_node(env, "stubborn", "node-3")
    uid = victim["metadata"]["uid"]
    await env.request_for(victim)
    await env.until(lambda: env.evicted(uid) and env.active(uid) == [])
    message = env.entry(uid, DAEMONSET_INTERCEPTOR).get("message", "")
    assert "The pod tolerates nodeagent.io/maintenance:NoSchedule" in message, message
    # as warned: its DaemonSet puts it back on the tainted node
    await env.until(lambda: any(running(p) for p in on_node(env, "stubborn", "node-3")))


async def test_daemonset_pod_outside_any_maintenance_is_declined(env: Env) -> None:
    """An EvictionRequest for a DaemonSet pod that no maintenance drains (a descheduler's, say):
    KEP-4212's DaemonSet interceptor does not act, nothing is tainted or deleted."""
    await env.create(DAEMONSETS, daemonset("agent"))
    await env.until(lambda: sum(running(p) for p in env.pods(app="agent")) == 3)
    await env.create(NODEMAINTENANCES, maintenance("idle", "node-1"))  # drains nothing yet
    await env.start(fast_settings(), daemonset=True)
    [victim] = on_node(env, "agent", "node-1")
    uid = victim["metadata"]["uid"]
    await env.request_for(victim)
    await env.until(lambda: env.entry(uid, DAEMONSET_INTERCEPTOR).get("completionTime"))
    assert env.entry(uid, DAEMONSET_INTERCEPTOR)["message"].startswith(
        "Declined: no NodeMaintenance drains the DaemonSet pods of node node-1 now"
    )
    assert not tainted(env, "node-1")
    pod = env.get(PODS, victim["metadata"]["name"])
    assert pod is not None and not pod["metadata"].get("deletionTimestamp")
