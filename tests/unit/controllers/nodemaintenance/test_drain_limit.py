"""The limit on nodes draining at once and the drain deadline, in the pure decision.

`LimitedWorld` (limited.py) is the reconcile tests' `World` with the limit's inputs.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nodeagent.model.drainplan import classify
from nodeagent.model.drainslots import Candidate, DrainLimit, InvalidLimit, allot
from nodeagent.model.nodemaintenance.actions import PodDelete
from nodeagent.model.nodemaintenance.deadline import DEADLINE_CONDITION
from nodeagent.model.nodemaintenance.decide import decide
from tests.unit.controllers.nodemaintenance.limited import LimitedWorld, message
from tests.unit.controllers.nodemaintenance.world import PDB_REFUSAL, entry, refused, summary

Obj = dict[str, Any]


# --- the limit as configured ---------------------------------------------------------------------


def test_the_limit_is_a_count_or_a_percentage_of_the_cluster() -> None:
    assert DrainLimit.parse(2).slots(100) == 2
    assert DrainLimit.parse("20%").slots(10) == 2
    assert DrainLimit.parse("20%").slots(9) == 1  # rounded down
    assert DrainLimit.parse("10%").slots(3) == 1  # but at least one node
    assert DrainLimit.parse(" 100% ").slots(7) == 7
    assert str(DrainLimit.parse("20%")) == "20%"
    for bad in (0, -1, True, "0%", "101%", "20", "a%", 1.5, None):
        with pytest.raises(InvalidLimit):
            DrainLimit.parse(bad)


# --- allotment -----------------------------------------------------------------------------------

candidates = st.lists(
    st.builds(
        Candidate,
        node=st.sampled_from([f"n{i}" for i in range(8)]),
        order=st.tuples(st.sampled_from(["t1", "t2", "t3"]), st.sampled_from(["a", "b", "c"])),
        admitted=st.booleans(),
        busy=st.booleans(),
        zone=st.sampled_from([None, "a", "b"]),
    ),
    max_size=12,
)


@settings(max_examples=300)
@given(cs=candidates, limit=st.integers(1, 4), data=st.data())
def test_allotment_never_admits_past_the_limit_and_goes_in_order(
    cs: list[Candidate], limit: int, data: st.DataObject
) -> None:
    cs = [dataclasses.replace(c, zone=None) for c in cs]  # no limit per zone here
    slots = allot(cs, limit)
    assert allot(data.draw(st.permutations(cs)), limit) == slots  # order of inputs is irrelevant
    busy = {c.node for c in cs if c.busy}
    before = {c.node for c in cs if c.admitted}
    holding = (slots.admitted & busy) - (before - set(slots.draining))
    # new admissions only into free slots; what already drains keeps its slot
    assert len(set(slots.newly)) <= max(0, limit - len(slots.draining))
    assert set(slots.draining) == busy & before
    assert holding == set(slots.draining) | set(slots.newly)
    # whoever waits comes after everyone admitted now, in the order of their oldest maintenance
    key = {n: min((c.order, c.node) for c in cs if c.node == n) for n in busy}
    for waiting in slots.waiting:
        assert all(key[n] < key[waiting] for n in slots.newly)
        assert waiting not in slots.admitted
    assert list(slots.waiting) == sorted(slots.waiting, key=key.__getitem__)
    # idle nodes (no pods) never wait
    assert not {c.node for c in cs if not c.busy and c.node not in busy} & set(slots.waiting)


@settings(max_examples=300)
@given(cs=candidates, limit=st.integers(1, 6), zone_limit=st.integers(1, 3), data=st.data())
def test_a_full_zone_waits_and_holds_back_no_other_zone(
    cs: list[Candidate], limit: int, zone_limit: int, data: st.DataObject
) -> None:
    # one zone per node, as a node has one label
    zone_of = {c.node: c.zone for c in reversed(cs)}
    cs = [dataclasses.replace(c, zone=zone_of[c.node]) for c in cs]
    slots = allot(cs, limit, zone_limit)
    assert allot(data.draw(st.permutations(cs)), limit, zone_limit) == slots
    busy = {c.node for c in cs if c.busy}
    draining = set(slots.draining)
    assert len(set(slots.newly)) <= max(0, limit - len(draining))
    for name in ("a", "b"):
        newly = {n for n in slots.newly if zone_of[n] == name}
        before = {n for n in draining if zone_of[n] == name}
        # new admissions only into a zone's free slots; what drains keeps its slot
        assert len(newly) <= max(0, zone_limit - len(before))
    key = {n: min((c.order, c.node) for c in cs if c.node == n) for n in busy}
    for waiting in slots.waiting:
        zone = zone_of.get(waiting)
        in_zone = {n for n in (*draining, *slots.newly) if zone is not None and zone_of[n] == zone}
        if zone is None or len(in_zone) < zone_limit:
            # not held by its zone: only by the limit across the cluster, in line
            assert len(draining) + len(slots.newly) >= limit
            assert all(key[n] < key[waiting] for n in slots.newly)
        else:
            assert (
                slots.waiting_message(waiting).startswith(
                    f"Waiting for a drain slot in zone {zone}"
                )
                or len(draining) + len(slots.newly) >= limit
            )


# --- the limit in the decision -------------------------------------------------------------------


def test_three_shutdowns_at_once_drain_one_node_at_a_time_in_order() -> None:
    w = LimitedWorld(1)
    for node in ("one", "two", "three"):
        w.pod(f"{node}-web", node)
        w.pod(f"{node}-agent", node, kind="DaemonSet")
    # created in one second: by name then
    for node in ("three", "one", "two"):
        w.maintenance(f"shutdown-{node}", [node])
        w.clock -= timedelta(seconds=1)
    w.settle()
    assert w.open_requests() == {"one": {"one-web"}}
    assert message(w, "shutdown-three", "three") == (
        "Waiting for a drain slot (1 of 1 nodes draining: one)"
    )
    assert message(w, "shutdown-two", "two") == (
        "Waiting for a drain slot (1 of 1 nodes draining: one), 1 node ahead in line"
    )
    assert summary(w, "shutdown-two")["blockedBy"] == (
        "node two: Waiting for a drain slot (1 of 1 nodes draining: one), 1 node ahead in line"
    )
    assert w.status("shutdown-two", "two")["drainTargets"] == []
    # waiting nodes are not cordoned (cordonWhileWaiting is off)
    assert w.cordoned("one") == (True, "shutdown-one")
    assert w.cordoned("three") == (False, None)
    order: list[str] = []
    for _ in range(10):
        w.evict_requested()
        w.settle()
        assert len(w.open_requests()) <= 1
        order += [n for n in w.open_requests() if n not in order]
    assert order == ["one", "three", "two"]
    for node in ("one", "two", "three"):
        assert (w.condition(f"shutdown-{node}", "Drained") or {})["status"] == "True"
        assert w.cordoned(node)[0]


def test_cordon_while_waiting_cordons_the_waiting_nodes() -> None:
    w = LimitedWorld(1, cordon_while_waiting=True)
    w.pod("a", "one")
    w.pod("b", "two")
    w.maintenance("m1", ["one"])
    w.maintenance("m2", ["two"])
    w.settle()
    assert w.open_requests() == {"one": {"a"}}
    assert w.cordoned("two") == (True, "m2")


def test_a_maintenance_of_many_nodes_drains_them_one_by_one_through_the_whole_plan() -> None:
    """Under a limit each node follows the plan by itself, so a node that waits cannot hold
    back the one that drains (which would never give its slot back)."""
    w = LimitedWorld(1)
    for node in ("one", "two", "three"):
        w.pod(f"{node}-web", node)
        w.pod(f"{node}-ds", node, kind="DaemonSet")
    w.maintenance("m", ["one", "two", "three"])
    w.settle()
    seen: list[dict[str, set[str]]] = []
    for _ in range(12):
        seen.append(w.open_requests())
        assert len(seen[-1]) <= 1
        w.evict_requested()
        w.settle()
    # Default pods before DaemonSet pods on each node, one node after the other (by name)
    assert [s for s in seen if s] == [
        {"one": {"one-web"}},
        {"one": {"one-ds"}},
        {"three": {"three-web"}},
        {"three": {"three-ds"}},
        {"two": {"two-web"}},
        {"two": {"two-ds"}},
    ]
    assert (w.condition("m", "Drained") or {})["status"] == "True"


def test_an_admission_in_flight_counts_before_the_cache_shows_it() -> None:
    w = LimitedWorld(1)
    w.pod("a", "one")
    w.pod("b", "two")
    w.maintenance("m-two", ["two"])
    w.maintenance("m-one", ["one"])
    w.nms["m-one"]["metadata"]["creationTimestamp"] = w.nms["m-two"]["metadata"][
        "creationTimestamp"
    ]
    # m-two is decided alone first (m-one is not in the cache yet): two is admitted
    stale = w.inputs("m-two")
    stale = dataclasses.replace(stale, maintenances=[stale.maintenance])
    first = decide(stale)
    assert first.admitted == {"two"}
    # m-one (older by name) is decided before m-two's status is in the cache
    without = decide(w.inputs("m-one"))
    assert without.admitted == {"one"}  # what the cache alone says: a second node would drain
    held = decide(dataclasses.replace(w.inputs("m-one"), admitting=frozenset({"two"})))
    assert held.admitted == frozenset() and not held.create_evictions


def test_without_a_limit_nothing_changes() -> None:
    w = LimitedWorld(None)
    for node in ("one", "two", "three"):
        w.pod(f"{node}-web", node)
        w.maintenance(f"m-{node}", [node])
    w.settle()
    assert set(w.open_requests()) == {"one", "two", "three"}


@st.composite
def limited_worlds(draw: st.DrawFn) -> LimitedWorld:
    nodes = ("one", "two", "three", "four")
    w = LimitedWorld(draw(st.integers(1, 3)), nodes=nodes)
    for i in range(draw(st.integers(1, 10))):
        w.pod(
            f"p{i}",
            draw(st.sampled_from(nodes)),
            draw(st.sampled_from((0, 1000, 2000000000))),
            draw(st.sampled_from(("Default", "DaemonSet", "Static"))),
        )
    for j in range(draw(st.integers(1, 4))):
        w.maintenance(
            f"m{j}",
            draw(st.sets(st.sampled_from(nodes), min_size=1, max_size=3)),
            plan=draw(st.sampled_from([None, [entry("Default", 1000)]])),
        )
        w.clock -= timedelta(seconds=draw(st.integers(0, 2)))
    return w


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(w=limited_worlds(), data=st.data())
def test_the_limit_holds_in_any_order_of_events_and_every_drain_finishes(
    w: LimitedWorld, data: st.DataObject
) -> None:
    assert w.limit is not None
    for _ in range(400):
        # one step: a maintenance decides, or a requested pod goes
        gone = sorted(p["metadata"]["name"] for uid, p in w.pods.items() if uid in w.ers)
        choices = [("decide", n) for n in sorted(w.nms)] + [("evict", p) for p in gone]
        kind, what = data.draw(st.sampled_from(choices))
        if kind == "evict":
            w.remove_pod(what)
        else:
            a = w.decide(what)
            if not a.idle:
                w.apply(what, a)
        assert len(w.open_requests()) <= w.limit, w.open_requests()
    # then everything the controller asks for is done: every maintenance drains
    for _ in range(60):
        w.settle()
        assert len(w.open_requests()) <= w.limit
        if not w.open_requests():
            break
        w.evict_requested()
    for name in w.nms:
        assert (w.condition(name, "Drained") or {}).get("status") == "True", name
    assert all(classify(p).skip or p["metadata"]["uid"] not in w.ers for p in w.pods.values())


# --- the drain deadline --------------------------------------------------------------------------


def test_a_passed_deadline_names_the_pod_and_the_budget_once() -> None:
    w = LimitedWorld(None)
    w.pod("web-1", "one")
    w.pod("web-2", "one")
    nm = w.maintenance("m", ["one"])
    nm["spec"]["drainDeadlineSeconds"] = 60
    w.settle()
    cond = w.condition("m", DEADLINE_CONDITION) or {}
    assert (cond["status"], cond["reason"]) == ("False", "WithinDeadline")
    assert "2024-05-01T10:01:01Z" in cond["message"]
    # the shell is asked to decide again when the deadline passes
    assert w.decide("m").requeue_after == pytest.approx(60)
    w.clock += timedelta(seconds=20)
    assert w.decide("m").requeue_after == pytest.approx(40)
    refused(w, "web-2", 3, PDB_REFUSAL)
    w.settle()
    w.clock += timedelta(seconds=40)
    w.settle()
    cond = w.condition("m", DEADLINE_CONDITION) or {}
    assert (cond["status"], cond["reason"]) == ("True", "DeadlineExceeded")
    assert cond["message"] == (
        "The drain deadline (60s) passed at 2024-05-01T10:01:01Z; still blocking: "
        "pod default/web-1; pod default/web-2 (eviction refused by PodDisruptionBudget web-pdb)"
    )
    warnings = [e for e in w.events if e[2] == DEADLINE_CONDITION]
    assert warnings == [("m", "Warning", DEADLINE_CONDITION, cond["message"])]
    assert w.decide("m").requeue_after is None
    # a pod goes: the message follows, no second event; nothing is escalated
    w.remove_pod("web-1")
    w.clock += timedelta(seconds=5)
    w.settle()
    cond = w.condition("m", DEADLINE_CONDITION) or {}
    assert cond["message"].endswith(
        "still blocking: pod default/web-2 (eviction refused by PodDisruptionBudget web-pdb)"
    )
    assert len([e for e in w.events if e[2] == DEADLINE_CONDITION]) == 1
    assert {p["metadata"]["name"] for p in w.pods.values()} == {"web-2"}
    # drained late: it stays exceeded
    w.remove_pod("web-2")
    w.settle()
    assert (w.condition("m", DEADLINE_CONDITION) or {})["status"] == "True"
    assert (w.condition("m", "Drained") or {})["status"] == "True"


def test_the_default_deadline_applies_and_drained_in_time_says_so() -> None:
    w = LimitedWorld(None, deadline=300)
    w.pod("web", "one")
    w.maintenance("m", ["one"])
    w.maintenance("idle", ["two"], stage="Idle")
    w.settle()
    assert w.decide("m").requeue_after == pytest.approx(300)
    w.remove_pod("web")
    w.settle()
    cond = w.condition("m", DEADLINE_CONDITION) or {}
    assert (cond["status"], cond["reason"]) == ("False", "Drained")
    assert w.decide("m").requeue_after is None
    assert w.condition("idle", DEADLINE_CONDITION) is None  # only a drain has a deadline


def test_no_deadline_no_condition_and_a_waiting_node_is_named() -> None:
    w = LimitedWorld(1)
    w.pod("a", "one")
    w.pod("b", "two")
    w.maintenance("first", ["one"])
    w.maintenance("second", ["two"])["spec"]["drainDeadlineSeconds"] = 10
    w.settle()
    assert w.condition("first", DEADLINE_CONDITION) is None
    w.clock += timedelta(seconds=30)
    w.settle()
    cond = w.condition("second", DEADLINE_CONDITION) or {}
    assert cond["status"] == "True"
    assert cond["message"].endswith(
        "still blocking: node two: Waiting for a drain slot (1 of 1 nodes draining: one)"
    )


def test_escalation_deletes_the_default_pods_left_once_the_deadline_passed() -> None:
    w = LimitedWorld(None)
    web = w.pod("web-1", "one")
    w.pod("logs-1", "one", kind="DaemonSet")
    nm = w.maintenance("m", ["one"])
    nm["spec"]["drainDeadlineSeconds"] = 60
    nm["spec"]["drainDeadlineEscalation"] = "DeletePods"
    w.settle()
    refused(w, "web-1", 3, PDB_REFUSAL)
    w.settle()
    assert w.decide("m").delete_pods == ()  # within the deadline: nothing forced
    w.clock += timedelta(seconds=61)
    a = w.decide("m")
    uid = web["metadata"]["uid"]
    assert a.delete_pods == (PodDelete("default", "web-1", uid),)  # not the DaemonSet pod
    w.settle()
    # leaving now: not deleted again
    assert w.pods[uid]["metadata"].get("deletionTimestamp")
    assert w.decide("m").delete_pods == ()


def test_without_escalation_nothing_is_deleted_past_the_deadline() -> None:
    for spec, default in ((None, "None"), ("None", "DeletePods")):
        w = LimitedWorld(None, deadline=60)
        w.escalation = default
        w.pod("web-1", "one")
        nm = w.maintenance("m", ["one"])
        if spec is not None:
            nm["spec"]["drainDeadlineEscalation"] = spec  # the maintenance's own word wins
        w.settle()
        w.clock += timedelta(seconds=61)
        w.settle()
        assert (w.condition("m", DEADLINE_CONDITION) or {})["status"] == "True"
        assert w.decide("m").delete_pods == ()
