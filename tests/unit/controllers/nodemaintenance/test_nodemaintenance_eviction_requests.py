"""The EvictionRequests a NodeMaintenance makes: their shape, our requester on requests made by
others, and what becomes of requests whose pods are gone or going."""

from __future__ import annotations

import copy

from nodeagent.model.names import NODE_LABEL, REQUESTER
from tests.unit.controllers.nodemaintenance.world import Obj, World, entry


def test_eviction_request_shape() -> None:
    w = World()
    pod = w.pod("web", "one", labels={"app": "web", "tier": "front"}, namespace="shop")
    w.maintenance("m", ["one"])
    w.settle()
    uid = pod["metadata"]["uid"]
    assert w.ers[uid] == {
        "apiVersion": "nodeagent.io/v1alpha1",
        "kind": "EvictionRequest",
        "metadata": {
            "name": uid,
            "namespace": "shop",
            "labels": {"app": "web", "tier": "front", NODE_LABEL: "one"},
            # owned by its pod: the garbage collector deletes it with the pod
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "web", "uid": uid}],
            "resourceVersion": w.ers[uid]["metadata"]["resourceVersion"],
        },
        "spec": {
            "target": {"pod": {"name": "web", "uid": uid}},
            "requesters": [{"name": REQUESTER}],
        },
    }


def er_for(w: World, pod: Obj, requesters: list[str], **conditions: str) -> Obj:
    uid = pod["metadata"]["uid"]
    er: Obj = {
        "metadata": {
            "name": uid,
            "namespace": pod["metadata"]["namespace"],
            "uid": f"er-{uid}",
            "resourceVersion": w._rv(),
        },
        "spec": {
            "target": {"pod": {"name": pod["metadata"]["name"], "uid": uid}},
            "requesters": [{"name": r} for r in requesters],
        },
        "status": {
            "conditions": [{"type": t, "status": s} for t, s in conditions.items()],
        },
    }
    w.ers[uid] = er
    return er


def test_existing_requests_get_the_requester_and_keep_the_others() -> None:
    w = World()
    pod = w.pod("web", "one")
    er_for(w, pod, ["descheduler.example.com"])
    w.maintenance("m", ["one"])
    a = w.decide("m")
    assert not a.create_evictions
    assert [r.requesters for r in a.requester_patches] == [("descheduler.example.com", REQUESTER)]
    w.settle()
    w.set_stage("m", "Complete")
    w.settle()
    assert w.ers[pod["metadata"]["uid"]]["spec"]["requesters"] == [
        {"name": "descheduler.example.com"}
    ]


def test_a_canceled_request_for_a_targeted_pod_is_recreated() -> None:
    w = World()
    pod = w.pod("web", "one")
    er_for(w, pod, [], Canceled="True")
    w.maintenance("m", ["one"])
    a = w.decide("m")
    assert [(d.name, d.why) for d in a.delete_evictions] == [(pod["metadata"]["uid"], "recreate")]
    assert [c.body["metadata"]["name"] for c in a.create_evictions] == [pod["metadata"]["uid"]]


def test_finished_requests_of_gone_pods_are_deleted_when_only_we_asked() -> None:
    # ours are owned by their pods and go with them (garbage collection); one that is not
    # owned (made by an earlier version, say) is deleted when only we asked for it
    w = World()
    gone = w.pod("gone", "one")
    shared = w.pod("shared", "one")
    owned = w.pod("owned", "one")
    w.maintenance("m", ["one"])
    w.settle()
    for p in (gone, shared, owned):
        er = copy.deepcopy(w.ers[p["metadata"]["uid"]])  # new objects, as an informer makes
        er["status"] = {"conditions": [{"type": "Evicted", "status": "True"}]}
        if p is gone:
            del er["metadata"]["ownerReferences"]
        if p is shared:
            er["spec"]["requesters"].append({"name": "other.example.com"})
        w.ers[p["metadata"]["uid"]] = er
    for name in ("gone", "shared", "owned"):
        w.remove_pod(name)
    a = w.decide("m")
    assert [(d.name, d.why) for d in a.delete_evictions] == [(gone["metadata"]["uid"], "evicted")]
    assert not a.requester_patches


def test_requests_of_gone_pods_keep_the_requester_while_draining() -> None:
    w = World()
    w.pod("web", "one")
    w.pod("db", "one", 5000)
    w.maintenance("m", ["one"], plan=[entry("Default", 1000)])
    w.settle()
    w.remove_pod("web")
    w.settle()
    assert w.requested() == {"web", "db"}


def test_complete_keeps_the_requester_where_another_drain_targets_the_pod() -> None:
    w = World()
    w.pod("web", "one")
    w.pod("api", "two")
    w.maintenance("a", ["one", "two"])
    w.maintenance("b", ["two"])
    w.settle()
    assert w.requested() == {"web", "api"}
    w.set_stage("a", "Complete")
    w.settle()
    assert w.requested() == {"api"}
    assert w.cordoned("two") == (True, "b") and w.cordoned("one") == (False, None)


def test_a_terminating_pod_gets_no_new_request() -> None:
    # Its request went with it (owned, garbage-collected) while the pod informer still shows
    # it terminating: asking again would only make a request for a pod about to vanish.
    w = World()
    web = w.pod("web", "one")
    w.maintenance("m", ["one"])
    w.settle()
    uid = web["metadata"]["uid"]
    assert uid in w.ers
    web["metadata"]["deletionTimestamp"] = "2030-01-01T12:00:00Z"
    del w.ers[uid]
    a = w.decide("m")
    assert not a.create_evictions
