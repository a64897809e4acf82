"""`status.summary`, the kubectl get columns: nodes and pods counted, the drain plan entry
named, and what blocks the maintenance."""

from __future__ import annotations

from nodeagent.controllers.nodemaintenance.signatures import progress_only
from tests.unit.controllers.nodemaintenance.world import (
    PDB_REFUSAL,
    PLAN_A,
    PLAN_B,
    World,
    entry,
    refused,
    summary,
)


def test_summary_counts_nodes_and_pods_and_names_the_entry() -> None:
    w = World()
    w.pod("web", "one")
    w.pod("db", "one", 2000)
    w.pod("cache", "two", 2000)
    w.maintenance("m", ["one", "two", "three"], stage="Idle", plan=[entry("Default", 1000)])
    w.settle()
    assert summary(w, "m") == {"nodes": "3 selected", "podsLeft": 3}
    w.set_stage("m", "Cordon")
    w.settle()
    assert summary(w, "m") == {"nodes": "3 cordoned", "podsLeft": 3}

    w.set_stage("m", "Drain")
    w.settle()
    # node two waits for node one's pods of the first entry
    assert summary(w, "m") == {
        "nodes": "1/3 drained",
        "podsLeft": 3,
        "entry": "Default<=1000 (1 of 13)",
        "blockedBy": "node two: Waiting for node one.",
    }
    w.remove_pod("web")
    w.settle()
    assert summary(w, "m") == {
        "nodes": "1/3 drained",
        "podsLeft": 2,
        "entry": "Default<=1000000000 (2 of 13)",
    }
    w.remove_pod("db")
    w.remove_pod("cache")
    w.settle()
    assert summary(w, "m") == {
        "nodes": "3/3 drained",
        "podsLeft": 0,
        "entry": "Static<=2147483647 (13 of 13)",  # a drained maintenance ends its plan
    }
    w.set_stage("m", "Complete")
    w.settle()
    assert summary(w, "m")["nodes"] == "3/3 drained"


def test_blocked_by_another_maintenance() -> None:
    w = World()
    for node, prios in {"one": [4000, 8000], "three": [9000, 14000]}.items():
        for p in prios:
            w.pod(f"{node}-{p}", node, p)
    w.maintenance("maintenance-a", ["one", "two"], plan=PLAN_A)
    w.maintenance("maintenance-b", ["one", "three"], plan=PLAN_B)
    w.settle()
    assert "blockedBy" not in summary(w, "maintenance-a")
    assert summary(w, "maintenance-b")["blockedBy"] == (
        "node one: Evacuating (limited by maintenance-a)"
    )
    assert summary(w, "maintenance-b")["entry"] == "Default<=10000 (1 of 15)"


def test_blocked_by_a_refused_eviction_names_the_pod_and_the_budget() -> None:
    w = World()
    w.pod("web-1", "one")
    w.pod("web-2", "one")
    w.maintenance("m", ["one"])
    w.settle()
    assert "blockedBy" not in summary(w, "m")
    refused(w, "web-2", 1, PDB_REFUSAL)
    w.settle()
    assert summary(w, "m")["blockedBy"] == (
        "pod default/web-2: eviction refused by PodDisruptionBudget web-pdb"
    )
    # every retry changes the request, not what the summary shows: nothing to write
    refused(w, "web-2", 2, PDB_REFUSAL.replace("has 2", "has 1"))
    assert w.decide("m").idle
    # the first refused pod by name; another cause is shown as the API server said it
    refused(w, "web-1", 1, "500 InternalError: etcd timeout")
    w.settle()
    assert summary(w, "m")["blockedBy"] == (
        "pod default/web-1: eviction refused by 500 InternalError: etcd timeout"
    )
    # the pods go: nothing holds the maintenance any more
    w.remove_pod("web-1")
    w.remove_pod("web-2")
    w.settle()
    assert summary(w, "m") == {
        "nodes": "1/1 drained",
        "podsLeft": 0,
        "entry": "Static<=2147483647 (12 of 12)",
    }


def test_complete_drops_blocked_by_and_invalid_says_why() -> None:
    w = World()
    w.pod("web", "one")
    w.maintenance("m", ["one"])
    w.settle()
    refused(w, "web", 1, PDB_REFUSAL)
    w.settle()
    assert "blockedBy" in summary(w, "m")
    w.nms["m"]["spec"]["drainPlan"] = [entry("Default", 5)]  # changed: immutable
    w.nms["m"]["metadata"]["generation"] += 1
    w.settle()
    blocked = summary(w, "m")["blockedBy"]
    assert blocked.startswith("InvalidDrainPlan: ") and "\n" not in blocked
    assert summary(w, "m")["podsLeft"] == 1  # the last drain status stays
    w.set_stage("m", "Complete")
    w.settle()
    assert "blockedBy" not in summary(w, "m")
    assert summary(w, "m")["nodes"] == "0/1 drained"


def test_only_pods_left_is_progress() -> None:
    old = {"summary": {"nodes": "0/1 drained", "podsLeft": 3, "blockedBy": "x"}}
    assert progress_only(old, {"summary": {**old["summary"], "podsLeft": 2}})
    assert not progress_only(old, {"summary": {**old["summary"], "nodes": "1/1 drained"}})
    assert not progress_only(old, {"summary": {"nodes": "0/1 drained", "podsLeft": 2}})


def test_blocked_by_a_terminating_pod_once_nothing_else_holds() -> None:
    """An evicted pod still stopping (or kept by a finalizer) is what the drain waits for."""
    w = World()
    w.pod("web-1", "one")
    w.pod("web-2", "one")
    w.maintenance("m", ["one"])
    w.settle()
    for uid, pod in list(w.pods.items()):
        if pod["metadata"]["name"] == "web-2":
            leaving = {**pod["metadata"], "deletionTimestamp": "2024-05-01T10:00:00Z"}
            w.pods[uid] = {**pod, "metadata": leaving}
    w.settle()
    assert summary(w, "m")["blockedBy"] == "pod default/web-2: terminating"
    w.remove_pod("web-2")
    w.settle()
    assert "blockedBy" not in summary(w, "m")
