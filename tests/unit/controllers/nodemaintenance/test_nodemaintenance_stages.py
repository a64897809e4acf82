"""The NodeMaintenance stages: what each does and reports, the stage statuses and events, the
finalizer, and the messages on the drain status."""

from __future__ import annotations

import copy
from datetime import timedelta

from nodeagent.model.maintenance import Stage, effective_stage
from tests.unit.controllers.nodemaintenance.world import World


def test_idle_touches_nothing_but_reports_the_selected_nodes() -> None:
    w = World()
    w.pod("web", "one")
    w.maintenance("m", ["one", "two"], stage="Idle")
    a = w.decide("m")
    assert not (a.add_finalizer or a.cordon or a.uncordon or a.create_evictions or a.events)
    assert a.status is not None
    w.apply("m", a)
    assert [s["name"] for s in w.nms["m"]["status"]["stageStatuses"]] == ["Idle"]
    assert w.status("m", "one")["podsPendingEvacuation"] == 1
    assert w.cordoned("one") == (False, None)
    assert (w.condition("m", "Valid") or {})["status"] == "True"
    assert w.decide("m").idle  # settled: nothing changes on a second pass


def test_a_settled_maintenance_has_nothing_to_do_and_times_do_not_move() -> None:
    w = World()
    w.pod("web", "one")
    w.maintenance("m", ["one"])
    w.settle()
    before = copy.deepcopy(w.nms["m"]["status"])
    w.clock += timedelta(hours=1)
    assert w.decide("m").idle
    w.remove_pod("web")
    w.settle()
    after = w.nms["m"]["status"]
    valid = [c for c in after["conditions"] if c["type"] == "Valid"]
    assert valid == [c for c in before["conditions"] if c["type"] == "Valid"]
    drained = next(c for c in after["conditions"] if c["type"] == "Drained")
    assert drained["status"] == "True"
    assert drained["lastTransitionTime"] == "2024-05-01T11:00:01Z"
    assert after["stageStatuses"] == before["stageStatuses"]
    assert after["observedGeneration"] == 1


def test_stage_statuses_and_events_follow_the_stages() -> None:
    w = World()
    w.maintenance("m", ["one"], stage="Idle")
    w.settle()
    for stage in ("Cordon", "Drain", "Complete"):
        w.clock += timedelta(minutes=1)
        w.set_stage("m", stage)
        w.settle()
    stages = w.nms["m"]["status"]["stageStatuses"]
    assert [s["name"] for s in stages] == ["Idle", "Cordon", "Drain", "Complete"]
    assert len({s["startTimestamp"] for s in stages}) == 4
    assert [m for n, _, r, m in w.events if r == "StageStarted"] == [
        "Stage Cordon started",
        "Stage Drain started",
        "Stage Complete started",
    ]
    assert w.nms["m"]["status"]["observedGeneration"] == 4


def test_the_finalizer_is_added_when_the_maintenance_acts_and_removed_after_completion() -> None:
    w = World()
    w.pod("web", "one")
    w.maintenance("m", ["one"])
    a = w.decide("m")
    assert a.add_finalizer and not a.remove_finalizer
    w.settle()
    assert w.requested() == {"web"} and w.cordoned("one") == (True, "m")
    w.delete("m")
    a = w.decide("m")
    assert a.stage == Stage.COMPLETE and a.remove_finalizer
    assert [p.node for p in a.uncordon] == ["one"]
    assert [r.requesters for r in a.requester_patches] == [()]
    assert "Stage Complete started (the maintenance is being deleted)" in [
        e.message for e in a.events
    ]
    w.apply("m", a)
    assert "m" not in w.nms
    assert w.cordoned("one") == (False, None)
    assert w.requested() == set()


def test_deleting_without_our_finalizer_does_nothing() -> None:
    w = World()
    nm = w.maintenance("m", ["one"], stage="Idle")
    nm["metadata"]["deletionTimestamp"] = "2024-05-01T12:00:00Z"
    nm["metadata"]["finalizers"] = ["someone.else/keep"]
    assert w.decide("m").idle
    assert effective_stage(nm) == Stage.COMPLETE


def test_a_maintenance_of_every_node_warns_once_per_stage() -> None:
    w = World(nodes=("one", "two"))
    w.maintenance("all", ["one", "two"], stage="Cordon")
    w.maintenance("some", ["one"], stage="Cordon")
    w.settle()
    w.set_stage("all", "Drain")
    w.settle()
    warned = [(n, m) for n, t, r, m in w.events if r == "SelectsEveryNode"]
    assert [n for n, _ in warned] == ["all", "all"]
    assert warned[0][1].startswith("The maintenance selects every node of the cluster (2)")
    assert all(t == "Warning" for _, t, r, _ in w.events if r == "SelectsEveryNode")


def test_an_ignored_interceptor_annotation_is_named_on_the_drain_message() -> None:
    # The EvictionRequest controller ignores a malformed nodeagent.io/eviction-interceptors
    # annotation (the defaults take its place); the drain says so where it is watched.
    w = World()
    bad = w.pod("web", "one")
    bad["metadata"]["annotations"]["nodeagent.io/eviction-interceptors"] = ",".join(
        f"i{n}.example.com" for n in range(16)
    )
    w.pod("db", "one")
    w.maintenance("m", ["one"])
    w.settle()
    message = w.status("m", "one")["drainMessage"]
    assert message.startswith("Evacuating; pod default/web: annotation nodeagent.io/eviction-")
    assert message.endswith("; the default interceptors are used instead"), message
    assert "16 interceptors" in message and "db" not in message
    w.remove_pod("web")
    w.remove_pod("db")
    w.settle()
    assert w.status("m", "one")["drainMessage"] == "Drained"
