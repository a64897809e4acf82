"""Fleet reboots under a limit on nodes draining at once.

A reboot asked for (trigger reboot) holds its node's slot from its admission until the node is
back, drained or not: the next node drains only once the kubelet of the one before reports its
new boot (or its agent completed the request). It is not Drained before its turn even with no
pods, since its agent reboots the node once it is. A shutdown under way waits for a slot like
any drain but is cordoned at once (it goes down within its budget, slot or not)."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nodeagent.model import shutdown as model
from tests.unit.controllers.nodemaintenance.limited import (
    LimitedWorld,
    agents_maintenance,
    message,
    reports_boot,
)

BOOT = "11420bea-f724-4165-9bde-f219df708610"
NEXT_BOOT = "5d6c7b8a-9999-8888-7777-666655554444"


def made(w: LimitedWorld, node: str, trigger: str, boot: str = BOOT) -> str:
    return agents_maintenance(w, node, boot, trigger)


boots = reports_boot


def drained(w: LimitedWorld, name: str) -> bool:
    return (w.condition(name, "Drained") or {}).get("status") == "True"


def test_the_next_node_goes_only_once_the_one_before_is_back() -> None:
    w = LimitedWorld(1)
    for node in ("one", "two"):
        boots(w, node, BOOT)
        w.pod(f"{node}-web", node)
    first = made(w, "one", model.TRIGGER_REBOOT)
    second = made(w, "two", model.TRIGGER_REBOOT)
    w.settle()
    assert w.open_requests() == {"one": {"one-web"}}
    w.evict_requested()
    w.settle()
    # one is drained (its agent reboots it now) and still holds the slot
    assert drained(w, first)
    assert not drained(w, second)
    assert message(w, second, "two").startswith("Waiting for a drain slot")
    assert not w.open_requests()
    # one is back: its kubelet reports its new boot; two's turn
    boots(w, "one", NEXT_BOOT)
    w.settle()
    assert w.open_requests() == {"two": {"two-web"}}


def test_a_completed_request_gives_the_slot_on() -> None:
    w = LimitedWorld(1)
    w.pod("two-web", "two")
    first = made(w, "one", model.TRIGGER_REBOOT)
    second = made(w, "two", model.TRIGGER_REBOOT)
    w.settle()
    assert drained(w, first) and not drained(w, second)  # one had no pods: its turn, drained
    w.set_stage(first, "Complete")
    w.settle()
    assert w.open_requests() == {"two": {"two-web"}}


def test_a_request_without_pods_is_not_drained_before_its_turn() -> None:
    w = LimitedWorld(1)
    w.pod("one-web", "one")
    made(w, "one", model.TRIGGER_REBOOT)
    waiting = made(w, "two", model.TRIGGER_REBOOT)
    w.settle()
    assert not drained(w, waiting)
    assert message(w, waiting, "two").startswith("Waiting for a drain slot")


def test_a_drained_node_that_never_reboots_holds_the_slot_only_for_its_bound() -> None:
    w = LimitedWorld(1)
    w.pod("two-web", "two")
    first = made(w, "one", model.TRIGGER_REBOOT)
    made(w, "two", model.TRIGGER_REBOOT)
    w.settle()
    assert drained(w, first) and not w.open_requests()
    w.clock += timedelta(seconds=3600)
    w.settle()
    assert w.open_requests() == {"two": {"two-web"}}
    assert "drained and not rebooted by" in message(w, first, "one")


def test_a_shutdown_waiting_for_its_slot_is_cordoned_at_once() -> None:
    w = LimitedWorld(1)
    w.pod("one-web", "one")
    w.pod("two-web", "two")
    w.maintenance("upgrade", ["one"])
    w.clock += timedelta(seconds=1)
    shutdown = made(w, "two", model.TRIGGER_SHUTDOWN)
    w.settle()
    assert message(w, shutdown, "two").startswith("Waiting for a drain slot")
    assert w.cordoned("two")[0]
    assert "ShutdownWaitsForSlot" in w.reasons(shutdown)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pods=st.lists(st.sampled_from(("one", "two", "three")), max_size=6),
    order=st.permutations(("one", "two", "three")),
    data=st.data(),
)
def test_requested_reboots_go_one_node_at_a_time(
    pods: list[str], order: list[str], data: st.DataObject
) -> None:
    """Whatever the pods and the order of events: at most one node is in its reboot at a time
    (admitted and not back), and every node gets its turn."""
    w = LimitedWorld(1, nodes=("one", "two", "three"))
    for i, node in enumerate(pods):
        w.pod(f"p{i}", node)
    names = {}
    for node in order:
        boots(w, node, BOOT)
        names[node] = made(w, node, model.TRIGGER_REBOOT)
        w.clock += timedelta(seconds=1)
    back: set[str] = set()
    for _ in range(200):
        in_turn = {
            n
            for n, name in names.items()
            if n not in back
            and name in w.nms
            and "nodeStatuses" in w.nms[name].get("status", {})
            and not message(w, name, n).startswith("Waiting")
        }
        assert len(in_turn) <= 1, in_turn
        if len(back) == len(names):
            break
        gone = [p["metadata"]["name"] for uid, p in w.pods.items() if uid in w.ers]
        choices = [("decide", n) for n in sorted(w.nms)] + [("evict", p) for p in gone]
        choices += [("reboot", n) for n in sorted(in_turn) if drained(w, names[n])]
        kind, what = data.draw(st.sampled_from(choices))
        if kind == "evict":
            w.remove_pod(what)
        elif kind == "reboot":
            boots(w, what, NEXT_BOOT)
            back.add(what)
        else:
            a = w.decide(what)
            if not a.idle:
                w.apply(what, a)
    else:
        # the events drawn ran out: settle and finish every turn in order
        for _ in range(20):
            w.settle()
            w.evict_requested()
            w.settle()
            for n, name in names.items():
                if n not in back and drained(w, name):
                    boots(w, n, NEXT_BOOT)
                    back.add(n)
    assert back == set(names)


def test_at_most_one_node_per_zone_reboots_and_a_full_zone_holds_back_no_other() -> None:
    w = LimitedWorld(2, nodes=("a1", "a2", "b1"), zone_limit=1)
    for node in ("a1", "a2", "b1"):
        w.edit_node(node).setdefault("metadata", {}).setdefault("labels", {})[
            "topology.kubernetes.io/zone"
        ] = node[0]
        w.pod(f"{node}-web", node)
    names = {}
    for node in ("a1", "a2", "b1"):  # in line: a1, a2, b1
        names[node] = made(w, node, model.TRIGGER_REBOOT)
        w.clock += timedelta(seconds=1)
    w.settle()
    # a2 waits for its zone; b1, behind it in line, drains beside a1
    assert w.open_requests() == {"a1": {"a1-web"}, "b1": {"b1-web"}}
    assert message(w, names["a2"], "a2") == (
        "Waiting for a drain slot in zone a (1 of 1 nodes of the zone draining: a1)"
    )
    w.evict_requested()
    w.settle()
    boots(w, "a1", NEXT_BOOT)
    w.settle()
    assert w.open_requests() == {"a2": {"a2-web"}}
