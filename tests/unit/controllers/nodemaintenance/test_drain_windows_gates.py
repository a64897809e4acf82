"""Reboot windows and gates in the decision (issue 35, items 2 and 3).

A reboot asked for (trigger reboot) is admitted to a drain slot only inside a window and while
every gate is open; outside, it waits, uncordoned, taking no place in line. A drain under way
when the windows close finishes (windowEnd Finish) or stops (Stop): its slot goes back, its
EvictionRequests are withdrawn, its node uncordoned, its drainTargets kept, and it resumes
where it stopped. Shutdowns under way and admins' maintenances are held by neither."""

from __future__ import annotations

import ast
import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nodeagent.model import shutdown as model
from nodeagent.model.drainplan import entries_from_dicts
from nodeagent.model.draintargets.tracks import targets_within
from nodeagent.model.gates import GateState, GateStatus
from nodeagent.model.names import REQUESTER
from nodeagent.model.nodemaintenance.actions import Actions
from nodeagent.model.nodemaintenance.inputs import Inputs
from nodeagent.model.shutdown_standing import IGNORED
from nodeagent.model.windows import FINISH, STOP, Schedule, parse_windows
from tests.unit.controllers.nodemaintenance.limited import LimitedWorld, message

BOOT = "11420bea-f724-4165-9bde-f219df708610"
NEXT_BOOT = "5d6c7b8a-9999-8888-7777-666655554444"
# the worlds start at 2024-05-01 10:00 UTC, a Wednesday: the window opens at noon
NOON = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
WINDOW = parse_windows(
    [{"days": ["Wed"], "start": "12:00", "end": "14:00", "timeZone": "UTC"}], "rebootWindows"
)
HIGH = 1_500_000_000  # a pod of the second default entry (Default <= 2000000000)
PROMETHEUS_DOWN = GateState(
    "prometheus",
    GateStatus.UNKNOWN,
    "cannot reach http://prometheus:9090/api/v1/alerts: connection refused",
)


class WindowWorld(LimitedWorld):
    def __init__(self, limit: int, *, end: str = FINISH, windows: Schedule = WINDOW) -> None:
        super().__init__(limit)
        self.windows = windows
        self.window_end = end
        self.gates: tuple[GateState, ...] = ()

    def inputs(self, name: str) -> Inputs:
        return dataclasses.replace(
            super().inputs(name),
            windows=self.windows,
            window_end=self.window_end,
            gates=self.gates,
        )


def made(w: LimitedWorld, node: str, trigger: str = model.TRIGGER_REBOOT) -> str:
    """`node`'s agent's maintenance of `trigger`, as it writes it."""
    body = model.shutdown_maintenance(node, BOOT, "reboot", trigger=trigger)
    name = str(body["metadata"]["name"])
    nm = w.maintenance(name, [node], selector=model.node_selector(node))
    nm["metadata"]["labels"] = body["metadata"]["labels"]
    return name


def targets(w: LimitedWorld, name: str, node: str) -> list[Any]:
    return list(w.status(name, node)["drainTargets"])


def never_backwards(w: LimitedWorld) -> None:
    """Every stored drainTargets of a node covers the ones stored before it (once any), but
    where its maintenance is ignored now (its node rebooted, or drained and never rebooted
    past its bound): it drains no more."""
    last: dict[tuple[str, str], Any] = {}
    for name, node, stored in w.history:
        now = entries_from_dicts([ast.literal_eval(e) for e in stored], "drainTargets")
        before = last.get((name, node))
        if not now and message(w, name, node).startswith(IGNORED):
            continue
        if before:
            assert targets_within(before, now), f"{name}/{node}: {before} -> {now}"
        last[(name, node)] = now


def test_a_reboot_outside_the_window_waits_uncordoned_and_is_decided_again_when_it_opens() -> None:
    w = WindowWorld(1)
    w.pod("one-web", "one")
    w.pod("two-web", "two")
    reboot = made(w, "one")
    w.maintenance("upgrade", ["two"])  # an admin's: the window does not hold it
    w.settle()
    assert message(w, reboot, "one") == "Waiting for the reboot window (next: 2024-05-01T12:00:00Z)"
    assert not w.cordoned("one")[0]
    assert w.open_requests() == {"two": {"two-web"}}  # it took no place in line
    assert w.decide(reboot).requeue_after == (NOON - w.clock).total_seconds()
    w.evict_requested()
    w.clock = NOON
    w.settle()
    assert w.open_requests() == {"one": {"one-web"}}
    assert w.cordoned("one")[0]


def test_finish_lets_a_drain_under_way_go_on_past_the_window() -> None:
    w = WindowWorld(1, end=FINISH)
    w.clock = NOON
    w.pod("one-web", "one")
    w.pod("one-db", "one", priority=HIGH)
    reboot = made(w, "one")
    w.settle()
    assert w.open_requests() == {"one": {"one-web"}}
    w.clock = NOON + timedelta(hours=3)
    w.settle()
    assert w.open_requests() == {"one": {"one-web"}}
    w.evict_requested()
    w.settle()
    assert w.open_requests() == {"one": {"one-db"}}
    assert not message(w, reboot, "one").startswith("Waiting")


def test_stop_gives_the_slot_back_withdraws_uncordons_and_resumes_where_it_stopped() -> None:
    w = WindowWorld(1, end=STOP)
    w.clock = NOON
    w.pod("one-web", "one")
    w.pod("one-db", "one", priority=HIGH)
    w.pod("two-web", "two")
    reboot = made(w, "one")
    w.settle()
    w.evict_requested()  # the first entry's pod goes: the second entry's is asked for
    w.settle()
    assert w.open_requests() == {"one": {"one-db"}}
    reached = targets(w, reboot, "one")
    upgrade = "upgrade"  # an admin's maintenance waits for one's slot
    w.maintenance(upgrade, ["two"])
    w.settle()
    assert message(w, upgrade, "two").startswith("Waiting for a drain slot")
    # the window closes: one stops, its slot goes to the admin's
    w.clock = NOON + timedelta(hours=2)
    w.settle()
    assert message(w, reboot, "one") == "Waiting for the reboot window (next: 2024-05-08T12:00:00Z)"
    assert not w.cordoned("one")[0]
    assert targets(w, reboot, "one") == reached  # kept
    assert w.open_requests() == {"two": {"two-web"}}
    (db,) = [er for er in w.ers.values() if er["spec"]["target"]["pod"]["name"] == "one-db"]
    assert {"name": REQUESTER} not in db["spec"]["requesters"]  # withdrawn
    assert "DrainStopped" in w.reasons(reboot)
    assert (w.condition(reboot, "Drained") or {}).get("status") != "True"
    # the next window: one resumes at the entry it had reached, the admin's drain done
    w.remove_pod("two-web")
    w.clock = NOON + timedelta(days=7)
    w.settle()
    assert w.open_requests() == {"one": {"one-db"}}
    assert targets(w, reboot, "one") == reached
    never_backwards(w)


def test_stop_leaves_a_drained_node_to_its_reboot() -> None:
    w = WindowWorld(1, end=STOP)
    w.clock = NOON
    w.pod("one-web", "one")
    reboot = made(w, "one")
    w.settle()
    w.evict_requested()
    w.settle()
    w.clock = NOON + timedelta(hours=2)
    w.settle()
    assert (w.condition(reboot, "Drained") or {}).get("status") == "True"
    assert w.cordoned("one")[0]


def test_a_shutdown_under_way_is_held_by_no_window() -> None:
    w = WindowWorld(1, end=STOP)
    w.pod("one-web", "one")
    shutdown = made(w, "one", model.TRIGGER_SHUTDOWN)
    w.settle()
    assert w.open_requests() == {"one": {"one-web"}}
    assert not message(w, shutdown, "one").startswith("Waiting")


def test_a_closed_gate_holds_the_next_reboot_but_no_drain_under_way() -> None:
    w = WindowWorld(2, windows=Schedule())
    w.pod("one-web", "one")
    w.pod("two-web", "two")
    first = made(w, "one")
    w.settle()
    assert w.open_requests() == {"one": {"one-web"}}
    w.gates = (GateState("podsReady", GateStatus.CLOSED, "1 pod not Ready: db/db-0"),)
    second = made(w, "two")
    w.settle()
    assert message(w, second, "two") == "Waiting for gate podsReady: 1 pod not Ready: db/db-0"
    assert w.open_requests() == {"one": {"one-web"}}  # the first drains on
    assert w.decide(second).gates_wanted and not w.decide(first).gates_wanted
    w.gates = (GateState("podsReady", GateStatus.OPEN, "every pod Ready"),)
    w.settle()
    assert w.open_requests() == {"one": {"one-web"}, "two": {"two-web"}}


def test_a_gate_that_cannot_be_evaluated_holds_and_warns_once() -> None:
    w = WindowWorld(1, windows=Schedule())
    w.pod("one-web", "one")
    w.gates = (PROMETHEUS_DOWN,)
    reboot = made(w, "one")
    w.settle()
    assert message(w, reboot, "one") == (
        "Waiting for gate prometheus: cannot reach http://prometheus:9090/api/v1/alerts: "
        "connection refused"
    )
    assert not w.open_requests() and not w.cordoned("one")[0]
    w.settle()
    assert w.reasons(reboot).count("GateUnavailable") == 1
    assert w.decide(reboot).gates_wanted  # the shell reads Prometheus again


def test_outside_the_window_the_gates_are_not_wanted() -> None:
    w = WindowWorld(1)
    w.gates = (PROMETHEUS_DOWN,)
    reboot = made(w, "one")
    w.settle()
    assert message(w, reboot, "one").startswith("Waiting for the reboot window")
    actions: Actions = w.decide(reboot)
    assert not actions.gates_wanted
    assert "GateUnavailable" not in w.reasons(reboot)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pods=st.lists(
        st.tuples(st.sampled_from(("one", "two", "three")), st.sampled_from((0, HIGH))),
        max_size=6,
    ),
    end=st.sampled_from((FINISH, STOP)),
    data=st.data(),
)
def test_windows_never_admit_past_the_limit_nor_move_targets_back(
    pods: list[tuple[str, int]], end: str, data: st.DataObject
) -> None:
    """Whatever the pods and the order of events, the window opening and closing: at most one
    reboot drains at a time, none is admitted outside the window, drainTargets never move
    backwards, and every reboot ends drained."""
    w = WindowWorld(1, end=end)
    for i, (node, priority) in enumerate(pods):
        w.pod(f"p{i}", node, priority=priority)
    names = {}
    for node in ("one", "two", "three"):
        w.edit_node(node).setdefault("status", {})["nodeInfo"] = {"bootID": BOOT}
        names[node] = made(w, node)
    admitted_before: set[str] = set()
    for _ in range(60):
        open_now = WINDOW.open_at(w.clock)
        admitted = admitted_nodes(w, names)
        assert len(admitted) <= 1, admitted
        if not open_now:
            assert admitted <= admitted_before, "admitted outside the window"
        admitted_before = admitted
        gone = [p["metadata"]["name"] for uid, p in w.pods.items() if uid in w.ers]
        choices: list[tuple[str, str]] = [("decide", n) for n in sorted(w.nms)]
        choices += [("evict", p) for p in gone] + [("time", "")]
        kind, what = data.draw(st.sampled_from(choices))
        if kind == "evict":
            w.remove_pod(what)
        elif kind == "time":
            w.clock += timedelta(hours=data.draw(st.sampled_from((1, 2, 24 * 7 - 2))))
            if end == STOP and not WINDOW.open_at(w.clock):
                w.settle()  # the decisions at the windows' edge: every drain with pods stops
                assert not admitted_nodes(w, names)
            admitted_before = admitted_nodes(w, names)
            continue
        else:
            a = w.decide(what)
            if not a.idle:
                w.apply(what, a)
    never_backwards(w)
    # then windows come and go until every node had its reboot, one after the other
    done: set[str] = set()
    for _ in range(20):
        w.clock = _next_window(w.clock)
        for _ in range(4):
            w.settle()
            w.evict_requested()
            w.settle()
            for node, name in names.items():
                if (
                    node not in done
                    and (w.condition(name, "Drained") or {}).get("status") == "True"
                ):
                    done.add(node)
                    w.edit_node(node).setdefault("status", {})["nodeInfo"] = {"bootID": NEXT_BOOT}
    assert done == set(names)
    never_backwards(w)


def admitted_nodes(w: LimitedWorld, names: dict[str, str]) -> set[str]:
    """The nodes whose reboot is admitted (drainTargets, not waiting) with pods left."""
    return {
        n
        for n, name in names.items()
        if "nodeStatuses" in w.nms[name].get("status", {})
        and w.status(name, n)["drainTargets"]
        and not message(w, name, n).startswith("Waiting")
        and any(p["spec"]["nodeName"] == n for p in w.pods.values())
    }


def _next_window(now: datetime) -> datetime:
    opening = WINDOW.next_opening(now + timedelta(hours=2))
    assert opening is not None
    return opening
