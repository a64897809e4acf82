"""nodeagent's interceptors as responders of upstream Evictions, on both backends (the real
control plane with the gate on, and the simulated cluster): a maintenance drains a DaemonSet
pod (`nodeagent.io/daemonset`: taint, graceful delete) and a pod with an annotate-and-wait rule
(`annotate.nodeagent.io/<rule>`, the test playing the operator that moves it) through the
upstream API; a withdrawn request of someone else's takes the annotation back."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from nodeagent.config import AnnotateInterceptor
from nodeagent.kube.resources import (
    DAEMONSETS,
    EVICTIONREQUESTS,
    EVICTIONS,
    NODES,
    PODS,
    UPSTREAM_EVICTIONREQUESTS,
    Obj,
    Resource,
)
from nodeagent.model.bodies import condition
from nodeagent.model.names import (
    DAEMONSET_RESPONDER,
    IMPERATIVE_RESPONDER,
    MAINTENANCE_TAINT,
    UPSTREAM_REQUESTER,
)
from tests.integration.upstream.common import eviction_of, pinned_pod
from tests.integration.upstream.drainenv import Env, env

# the simulated cluster serves lifecycle.k8s.io for these (the real control plane always does)
pytestmark = pytest.mark.lifecycle_api

__all__ = ["env"]  # the fixture, re-exported for pytest

MOVER = AnnotateInterceptor(
    name="mover.example.com",
    pod_selector={"matchLabels": {"app": "db"}},
    annotation_key="example.com/reschedule",
)
MOVER_RESPONDER = "annotate.nodeagent.io/mover.example.com"


def daemonset(name: str) -> Obj:
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": name, "image": "agent"}]},
            },
        },
    }


def annotated(pod: Obj | None) -> bool:
    annotations = (pod or {}).get("metadata", {}).get("annotations") or {}
    return annotations.get(MOVER.annotation_key) == MOVER.annotation_value


def tainted(env: Env, node: str) -> bool:
    taints = (env.view.get(NODES, node) or {}).get("spec", {}).get("taints") or []
    return any(t.get("key") == MAINTENANCE_TAINT["key"] for t in taints)


def states(eviction: Obj) -> dict[str, str]:
    responders = (eviction.get("status") or {}).get("targetResponders") or []
    return {t["name"]: t["state"] for t in responders}


async def test_a_maintenance_drains_daemonset_and_annotated_pods_upstream(env: Env) -> None:
    await env.admin.create(DAEMONSETS, daemonset("agent"))
    await env.until(lambda: len(env.view.list(PODS, app="agent")) == 3)
    [agent] = [p for p in env.view.list(PODS, app="agent") if _meant_for(p) == "node-1"]
    db = await pinned_pod(env.admin, "db-0", "node-1", app="db")
    web = await pinned_pod(env.admin, "web-0", "node-1", app="web")
    # pod UID -> its Eviction, as last seen with its responders (a request made again as the
    # pod goes, before the maintenance's cache shows it gone, may get an Eviction that the
    # garbage collector deletes before it has any)
    evictions: dict[str, Obj] = {}

    def watch(_event: str, resource: Resource, obj: Obj) -> None:
        if resource == EVICTIONS and (obj.get("status") or {}).get("targetResponders"):
            evictions[obj["spec"]["target"]["pod"]["uid"]] = obj

    env.view.listen(watch)
    await env.lead("auto", annotate=(MOVER,))
    await env.maintenance("upgrade", "node-1")

    def asked() -> str:
        """The responder's report that it asked (before the pod goes: the Eviction may go
        with it)."""
        eviction = evictions.get(db["metadata"]["uid"]) or {}
        entries = (eviction.get("status") or {}).get("responders") or []
        return next(
            (str(r.get("message", "")) for r in entries if r["name"] == MOVER_RESPONDER), ""
        )

    # the operator at work: asked through the annotation, it moves db-0 (same name, new UID)
    await env.until(lambda: annotated(env.view.get(PODS, "db-0", "default")) and asked())
    assert asked().startswith("Annotated the pod with example.com/reschedule=true")
    await env.admin.delete(PODS, "db-0", "default", grace_period_seconds=0)
    replacement = await pinned_pod(env.admin, "db-0", "node-2", app="db")

    await env.until(lambda: env.drained("upgrade"), timeout=90)
    assert tainted(env, "node-1")
    assert env.view.get(PODS, "web-0", "default") is None
    # the replacement (read from the server: the view's watch may lag under load) is another
    # pod, not asked to move
    moved = await env.admin.get(PODS, "db-0", "default")
    assert moved["metadata"]["uid"] == replacement["metadata"]["uid"] and not annotated(moved)
    assert [p for p in env.view.list(PODS, app="agent") if _meant_for(p) == "node-1"] == []

    # every pod went through the upstream API, with our responders taking their turns. How an
    # Eviction was last seen depends on who came first once the pod was gone: the responder's
    # completion (Completed), the controller's TargetEvicted (Canceled), or the garbage
    # collector, which removes the pod's requests and with the last of them the Eviction
    # (Active)
    taken = ("Active", "Completed", "Canceled")
    db_eviction = evictions[db["metadata"]["uid"]]
    assert states(db_eviction)[MOVER_RESPONDER] in taken
    assert states(db_eviction)[IMPERATIVE_RESPONDER] == "Inactive"  # never evicted
    agent_eviction = evictions[agent["metadata"]["uid"]]
    assert states(agent_eviction)[DAEMONSET_RESPONDER] in taken
    # the evictor, which refuses DaemonSet pods, never had a turn: the taint (asserted above)
    # and the delete were the DaemonSet responder's (its message may come after the pod, and
    # with it the Eviction, is gone)
    assert states(agent_eviction)[IMPERATIVE_RESPONDER] == "Inactive"
    assert list(states(evictions[web["metadata"]["uid"]])) == [IMPERATIVE_RESPONDER]
    assert env.view.list(EVICTIONREQUESTS) == []  # none on our CRD


async def test_a_withdrawn_request_takes_the_annotation_back(env: Env) -> None:
    db = await pinned_pod(env.admin, "db-0", "node-1", app="db")
    await env.lead("auto", annotate=(MOVER,))
    request = {
        "apiVersion": "lifecycle.k8s.io/v1alpha1",
        "kind": "EvictionRequest",
        "metadata": {"name": "rebalance", "namespace": "default"},
        "spec": {
            "target": {"pod": {"name": "db-0", "uid": db["metadata"]["uid"]}},
            "requester": "acme.io/rebalancer",
            "intent": "Eviction",
        },
    }
    await env.admin.create(UPSTREAM_EVICTIONREQUESTS, request, "default")
    await env.until(lambda: annotated(env.view.get(PODS, "db-0", "default")))

    def eviction() -> Any:
        return eviction_of(env.view, db["metadata"]["uid"])

    # the Eviction and the pod come through two watches: wait for the view to show both
    await env.until(lambda: states(eviction()).get(MOVER_RESPONDER) == "Active")
    await env.admin.patch(
        UPSTREAM_EVICTIONREQUESTS, "rebalance", {"spec": {"intent": "Withdrawn"}}, "default"
    )
    await env.until(lambda: not annotated(env.view.get(PODS, "db-0", "default")))

    def failed() -> Mapping[str, Any]:
        return condition(eviction().get("status") or {}, "Failed") or {}

    await env.until(lambda: failed().get("status") == "True")
    assert failed().get("reason") == "CanceledDueToNoRequesters"
    kept = env.view.get(PODS, "db-0", "default")
    assert kept is not None and kept["metadata"]["uid"] == db["metadata"]["uid"]
    assert UPSTREAM_REQUESTER not in str(eviction()["status"]["requesters"])


def _meant_for(pod: Obj) -> str | None:
    """The node a DaemonSet pod is on, or the one it was made for (its node affinity)."""
    spec = pod["spec"]
    if spec.get("nodeName"):
        return str(spec["nodeName"])
    terms = (
        ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
        or {}
    ).get("nodeSelectorTerms") or []
    for term in terms:
        for f in term.get("matchFields") or []:
            if f.get("key") == "metadata.name" and len(f.get("values") or []) == 1:
                return str(f["values"][0])
    return None
