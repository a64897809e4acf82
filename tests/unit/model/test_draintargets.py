"""drainTargets resolution: the KEP-4212 examples replayed step by step, and smaller behaviours
(properties: test_draintargets_properties)."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import pytest

from nodeagent.model.drainplan import INT32_MAX, DrainPlanEntry, PodClass, PodType, effective_plan
from nodeagent.model.draintargets.pods import PodInfo
from nodeagent.model.draintargets.resolution import resolve
from nodeagent.model.draintargets.results import NodeDrainStatus, Resolution
from nodeagent.model.draintargets.tracks import plan_targets, targets_within
from nodeagent.model.draintargets.views import MaintenanceView
from nodeagent.model.selectors import label_selector_from_dict

D, DS, S = PodType.DEFAULT, PodType.DAEMONSET, PodType.STATIC
POSTGRES = {"matchLabels": {"app": "postgres"}}
T0, T1 = "2024-05-01T10:00:00Z", "2024-05-01T11:00:00Z"


def e(pod_type: PodType, priority: int, selector: dict[str, Any] | None = None) -> DrainPlanEntry:
    sel = label_selector_from_dict(selector) if selector is not None else None
    return DrainPlanEntry(sel, priority, pod_type)


def d(pod_type: str, priority: int, selector: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"podPriority": priority, "podType": pod_type}
    if selector is not None:
        out["podSelector"] = selector
    return out


class Cluster:
    """Maintenances and pods; ``step()`` resolves and stores the result the way the controller
    does (drainTargets into status, the entry index kept alongside)."""

    def __init__(self, *, keep_entry_index: bool = True) -> None:
        self.views: dict[str, MaintenanceView] = {}
        self.pods: dict[str, list[PodInfo]] = {}
        self.keep_entry_index = keep_entry_index
        self._uid = itertools.count()

    def maintenance(
        self,
        name: str,
        nodes: Iterable[str],
        plan: list[dict[str, Any]] | None,
        created: str = T0,
        stage: str = "Drain",
    ) -> None:
        self.views[name] = MaintenanceView(
            name=name,
            creation_key=(created, name),
            stage=stage,
            plan=tuple(effective_plan(plan)),
            nodes=frozenset(nodes),
        )

    def add_pods(
        self,
        node: str,
        count: int,
        priority: int,
        pod_type: PodType = D,
        labels: Mapping[str, str] | None = None,
        skip: bool = False,
    ) -> None:
        for _ in range(count):
            n = next(self._uid)
            self.pods.setdefault(node, []).append(
                PodInfo(
                    "ns", f"pod-{n}", f"uid-{n}", PodClass(pod_type, priority, skip), labels or {}
                )
            )

    def remove(self, node: str, count: int | None = None, max_priority: int = INT32_MAX) -> None:
        """Remove ``count`` (default: all) pods of ``node`` with priority <= max_priority."""
        kept, removed = [], 0
        for p in self.pods.get(node, []):
            if p.pod_class.priority <= max_priority and (count is None or removed < count):
                removed += 1
            else:
                kept.append(p)
        assert count is None or removed == count
        self.pods[node] = kept

    def remove_targeted(self, res: Resolution) -> int:
        targeted = {
            ref for m in res.maintenances.values() for s in m.nodes for ref in s.targeted_pods
        }
        for node, pods in self.pods.items():
            self.pods[node] = [p for p in pods if p.ref not in targeted]
        return len(targeted)

    def step(self) -> Resolution:
        res = resolve(self.views.values(), self.pods)
        for name, m in res.maintenances.items():
            self.views[name] = replace(
                self.views[name],
                progress={s.node: s.drain_targets for s in m.nodes},
                entry_index=m.entry_index if self.keep_entry_index else None,
            )
        return res


def status(res: Resolution, name: str, node: str) -> NodeDrainStatus:
    return res[name].node(node)


def check(
    res: Resolution,
    name: str,
    node: str,
    targets: Sequence[DrainPlanEntry],
    message: str,
    pending: int | None = None,
    evacuating: int | None = None,
) -> None:
    s = status(res, name, node)
    assert (s.drain_targets, s.drain_message) == (tuple(targets), message), (name, node)
    if pending is not None:
        assert (s.pods_pending_evacuation, s.pods_evacuating) == (pending, evacuating), (name, node)


# --- KEP "Pod Selection and DrainTargets Example" ----------------------------------------------

PLAN_A = [d("Default", 5000), d("Default", 15000), d("DaemonSet", 3000)]
PLAN_B = [d("Default", 10000), d("Default", 15000), d("DaemonSet", 4000)]
PLAN_C = [d("Default", 2000), d("Default", 15000)]


def kep_cluster() -> Cluster:
    c = Cluster()
    # "If two Node Maintenances are created at the same time for the same node"
    c.maintenance("maintenance-a", ["one", "two"], PLAN_A, T0)
    c.maintenance("maintenance-b", ["one", "three"], PLAN_B, T0)
    # Pod counts chosen to reproduce the podsPendingEvacuation / podsEvacuating of the example.
    c.add_pods("one", 10, 5000)
    c.add_pods("one", 30, 10000)
    c.add_pods("one", 70, 20000)
    c.add_pods("two", 7, 4000)
    c.add_pods("two", 9, 15000)
    c.add_pods("two", 21, 20000)
    c.add_pods("three", 25, 10000)
    c.add_pods("three", 45, 20000)
    c.add_pods("four", 5, 2000)
    c.add_pods("four", 20, 20000)
    return c


def test_kep_drain_targets_example_step_by_step() -> None:
    c = kep_cluster()
    d5, d10, d15 = [e(D, 5000)], [e(D, 10000)], [e(D, 15000)]

    # The lowest entry among the intersecting maintenances wins on node one.
    res = c.step()
    check(res, "maintenance-a", "one", d5, "Evacuating", 100, 10)
    check(res, "maintenance-a", "two", d5, "Evacuating", 30, 7)
    check(res, "maintenance-b", "one", d5, "Evacuating (limited by maintenance-a)", 100, 10)
    check(res, "maintenance-b", "three", d10, "Evacuating", 45, 25)
    assert (res["maintenance-a"].entry_index, res["maintenance-b"].entry_index) == (0, 0)

    # "If the node three is drained, then it has to wait for the node one".
    c.remove("three", max_priority=10000)
    c.remove("one", 5, max_priority=5000)
    res = c.step()
    check(res, "maintenance-b", "one", d5, "Evacuating (limited by maintenance-a)", 100, 5)
    check(res, "maintenance-b", "three", d10, "Waiting for node one.", 45, 0)

    # "If the node one is drained, we still have to wait for the maintenance-a to drain node two."
    c.remove("one", max_priority=5000)
    c.remove("two", 5, max_priority=5000)
    res = c.step()
    check(res, "maintenance-a", "one", d5, "Waiting for node two.", 100, 0)
    check(res, "maintenance-a", "two", d5, "Evacuating", 30, 2)
    check(res, "maintenance-b", "one", d5, "Waiting for node two (maintenance-a).", 100, 0)
    check(res, "maintenance-b", "three", d10, "Waiting for node two (maintenance-a).", 45, 0)
    assert res["maintenance-a"].entry_index == 0

    # "Once the node two drains, we can increment the drainTargets."
    c.remove("two", max_priority=5000)
    res = c.step()
    check(res, "maintenance-a", "one", d10, "Evacuating (limited by maintenance-b)", 70, 30)
    check(res, "maintenance-a", "two", d15, "Evacuating", 21, 9)
    check(res, "maintenance-b", "one", d10, "Evacuating", 70, 30)
    check(res, "maintenance-b", "three", d10, "Waiting for node one.", 45, 0)
    assert (res["maintenance-a"].entry_index, res["maintenance-b"].entry_index) == (1, 0)
    assert not res.fast_forwards
    assert res == c.step()  # stable while nothing changes

    # "If an intersecting maintenance-c is created, it will be fast-forwarded for node one
    # regardless of its drainPlan."
    c.maintenance("maintenance-c", ["one", "four"], PLAN_C, T1)
    res = c.step()
    check(
        res,
        "maintenance-c",
        "one",
        d10,
        "Evacuating (fast-forwarded by older maintenance-b)",
        70,
        30,
    )
    check(res, "maintenance-c", "four", [e(D, 2000)], "Evacuating", 20, 5)
    check(res, "maintenance-a", "one", d10, "Evacuating (limited by maintenance-b)", 70, 30)
    check(res, "maintenance-b", "one", d10, "Evacuating", 70, 30)
    (ff,) = res.fast_forwards
    assert (ff.maintenance, ff.node, ff.by, ff.by_older) == (
        "maintenance-c",
        "one",
        "maintenance-b",
        True,
    )
    assert ff.targets == tuple(d10)
    assert ff.entry == e(D, 2000)
    assert ff.message == (
        "drainTargets of node one fast-forwarded to [Default<=10000] by older maintenance "
        "maintenance-b, ahead of this maintenance's drainPlan entry Default<=2000"
    )
    # Reported once; the drainMessage keeps saying it.
    res = c.step()
    assert not res.fast_forwards
    check(res, "maintenance-c", "one", d10, "Evacuating (fast-forwarded by older maintenance-b)")


def test_kep_example_runs_to_the_end_in_plan_order() -> None:
    c = kep_cluster()
    c.step()
    c.maintenance("maintenance-c", ["one", "four"], PLAN_C, T1)
    c.add_pods("two", 3, 2000, DS)
    c.add_pods("one", 1, 2000001000, S)
    for _ in range(100):
        res = c.step()
        if all(m.drained for m in res.maintenances.values()):
            break
        # Static pods are only reached once every Default and DaemonSet pod of the node is gone.
        for m in res.maintenances.values():
            for s in m.nodes:
                if any(t.pod_type == S for t in s.drain_targets):
                    assert all(p.pod_class.pod_type == S for p in c.pods[s.node])
        assert c.remove_targeted(res) > 0
    else:
        pytest.fail("did not drain")
    final = [e(D, INT32_MAX), e(DS, INT32_MAX), e(S, INT32_MAX)]
    for m in res.maintenances.values():
        assert m.current_entry == e(S, INT32_MAX)
        for s in m.nodes:
            assert (s.drain_targets, s.drain_message) == (tuple(final), "Drained")
            assert (s.pods_pending_evacuation, s.pods_evacuating, s.drained) == (0, 0, True)


# --- KEP "PodTypes and Label Selectors Progression" --------------------------------------------


def test_kep_pod_types_and_label_selectors_progression() -> None:
    c = Cluster()
    c.maintenance(
        "m",
        ["five"],
        [
            d("Default", 1000),
            d("Default", 2000, POSTGRES),
            d("Default", 2147483647),
            d("DaemonSet", 1000),
            d("DaemonSet", 2147483647),
            d("Static", 2147483647),
        ],
    )
    pg = {"app": "postgres"}
    c.add_pods("five", 1, 500)
    c.add_pods("five", 1, 1500, labels=pg)
    c.add_pods("five", 1, 1500)  # not postgres: waits for the plain Default entries
    c.add_pods("five", 1, 2100000000)
    c.add_pods("five", 1, 500, DS)
    c.add_pods("five", 1, 2100000000, DS)
    c.add_pods("five", 1, 2100000000, S)
    c.add_pods("five", 1, 0, DS, skip=True)  # the agent's own pod: never targeted
    expected = [
        [e(D, 1000), e(D, 1000, POSTGRES)],
        [e(D, 1000), e(D, 2000, POSTGRES)],
        # the default entries up to 1000000000 target the 1500 non-postgres pod first
        [e(D, 1000000000), e(D, 1000000000, POSTGRES)],
        [e(D, INT32_MAX), e(D, INT32_MAX, POSTGRES)],
        [e(D, INT32_MAX), e(D, INT32_MAX, POSTGRES), e(DS, 1000)],
        [e(D, INT32_MAX), e(D, INT32_MAX, POSTGRES), e(DS, INT32_MAX)],
        [e(D, INT32_MAX), e(D, INT32_MAX, POSTGRES), e(DS, INT32_MAX), e(S, INT32_MAX)],
    ]
    for targets in expected:
        res = c.step()
        s = res["m"].node("five")
        assert s.drain_targets == tuple(targets)
        assert s.drain_message == "Evacuating"
        assert len(s.targeted_pods) == 1
        assert [x.to_dict() for x in s.drain_targets] == [x.to_dict() for x in targets]
        c.remove_targeted(res)
    res = c.step()
    assert res["m"].drained
    assert res["m"].node("five").drain_message == "Drained"
    assert [p.pod_class.skip for p in c.pods["five"]] == [True]


def test_to_status_is_the_kep_node_status_shape() -> None:
    c = Cluster()
    c.maintenance("m", ["five"], [d("Default", 1000), d("Default", 2000, POSTGRES)])
    c.add_pods("five", 2, 500)
    c.add_pods("five", 1, 5000)
    assert c.step()["m"].node("five").to_status() == {
        "nodeRef": {"name": "five"},
        "drainTargets": [d("Default", 1000), d("Default", 1000, POSTGRES)],
        "drainMessage": "Evacuating",
        "podsPendingEvacuation": 1,
        "podsEvacuating": 2,
    }


# --- smaller behaviours ------------------------------------------------------------------------


def test_only_drain_stage_takes_part() -> None:
    c = Cluster()
    c.maintenance("idle", ["one"], [d("Default", 1)], stage="Idle")
    c.maintenance("cordon", ["one"], [d("Default", 1)], stage="Cordon")
    c.maintenance("drain", ["one"], [d("Default", 5000)])
    c.add_pods("one", 1, 4000)
    res = c.step()
    assert set(res.maintenances) == {"drain"}
    check(res, "drain", "one", [e(D, 5000)], "Evacuating")


def test_empty_nodes_pass_the_whole_plan_at_once() -> None:
    c = Cluster()
    c.maintenance("m", ["one", "two"], None)
    res = c.step()
    assert res["m"].drained
    assert res["m"].entry_index == 11
    for s in res["m"].nodes:
        assert s.drain_message == "Drained"
        assert s.drain_targets == (e(D, INT32_MAX), e(DS, INT32_MAX), e(S, INT32_MAX))


def test_terminal_pods_are_gone_terminating_pods_block_and_count_as_evacuating() -> None:
    c = Cluster()
    c.maintenance("m", ["one"], None)
    c.add_pods("one", 1, 0)
    c.add_pods("one", 1, 0)
    c.add_pods("one", 1, 2000001000, DS)
    done, leaving, ds = c.pods["one"]
    c.pods["one"] = [replace(done, terminal=True), replace(leaving, terminating=True), ds]
    res = c.step()
    s = res["m"].node("one")
    assert s.targeted_pods == (leaving.ref,)
    assert (s.pods_pending_evacuation, s.pods_evacuating, s.drained) == (1, 1, False)
    assert s.drain_targets == (e(D, 1000000000),)


def test_a_new_pod_under_earlier_targets_is_targeted_and_blocks() -> None:
    c = Cluster()
    c.maintenance("m", ["one"], [d("Default", 100), d("Default", 200)])
    c.add_pods("one", 1, 150)
    c.add_pods("one", 1, 2000001000)
    assert c.step()["m"].node("one").drain_targets == (e(D, 200),)
    c.remove("one", max_priority=200)
    assert c.step()["m"].node("one").drain_targets == (e(D, 2000001000),)
    c.add_pods("one", 1, 50)  # e.g. recreated despite the cordon
    s = c.step()["m"].node("one")
    assert len(s.targeted_pods) == 2
    assert s.drain_targets == (e(D, 2000001000),)


def test_waiting_message_names_several_nodes_and_owners() -> None:
    c = Cluster()
    c.maintenance("a", ["one", "two", "three"], [d("Default", 10)], T0)
    c.maintenance("b", ["three", "four", "five"], [d("Default", 10)], T1)
    c.maintenance("z", ["one", "six"], [d("Default", 10)], T1)
    for node in ("one", "two", "three", "four", "five", "six"):
        c.add_pods(node, 1, 5)
        c.add_pods(node, 1, 50)
    for node in ("one", "three"):
        c.remove(node, max_priority=5)
    res = c.step()
    assert status(res, "a", "one").drain_message == "Waiting for node two."
    assert status(res, "a", "three").drain_message == "Waiting for node two."
    assert status(res, "b", "three").drain_message == "Waiting for nodes five, four."
    c.remove("two", max_priority=5)
    res = c.step()
    assert status(res, "a", "one").drain_message == (
        "Waiting for nodes five, four (b), node six (z)."
    )


def test_younger_maintenance_limits_on_shared_nodes_only() -> None:
    c = Cluster()
    c.maintenance("old", ["one", "two"], [d("Default", 9000)], T0)
    c.maintenance("new", ["two"], [d("Default", 100)], T1)
    c.add_pods("one", 1, 50)
    c.add_pods("two", 1, 50)
    c.add_pods("two", 1, 5000)
    res = c.step()
    check(res, "old", "one", [e(D, 9000)], "Evacuating")
    check(res, "old", "two", [e(D, 100)], "Evacuating (limited by new)")
    check(res, "new", "two", [e(D, 100)], "Evacuating")


def test_progress_is_recovered_without_a_stored_entry_index() -> None:
    c = kep_cluster()
    c.keep_entry_index = False
    c.step()
    for node in ("one", "two"):
        c.remove(node, max_priority=5000)
    c.remove("three", max_priority=10000)
    res = c.step()
    check(res, "maintenance-a", "two", [e(D, 15000)], "Evacuating")
    check(res, "maintenance-a", "one", [e(D, 10000)], "Evacuating (limited by maintenance-b)")
    # Next time round the position comes back from node two's stored targets (node one is
    # behind because maintenance-b limits it), so the status does not change.
    for _ in range(2):
        again = c.step()
        assert again == res
        assert again["maintenance-a"].entry_index == 1


def test_incomparable_selector_plans_do_not_deadlock() -> None:
    x = {"matchLabels": {"x": "1"}}
    c = Cluster()
    c.maintenance("m1", ["one"], [d("Default", 1000), d("Default", 5000, x)], T0)
    c.maintenance("m2", ["one"], [d("Default", 3000)], T1)
    c.add_pods("one", 1, 4000, labels={"x": "1"})
    c.add_pods("one", 1, 2000)
    c.add_pods("one", 1, 2000, labels={"x": "1"})
    c.add_pods("one", 1, 2000000000)
    for _ in range(40):
        res = c.step()
        for name in ("m1", "m2"):
            want = plan_targets(c.views[name].plan, res[name].entry_index)
            assert targets_within(res[name].node("one").drain_targets, want)
        if res["m1"].drained:
            break
        c.remove_targeted(res)
    else:
        pytest.fail("deadlocked")


def test_resolution_does_not_depend_on_input_order() -> None:
    c = kep_cluster()
    c.maintenance("maintenance-c", ["one", "four"], PLAN_C, T1)
    views = list(c.views.values())
    pods = {node: list(reversed(p)) for node, p in reversed(list(c.pods.items()))}
    assert resolve(views, c.pods) == resolve(list(reversed(views)), pods)


def test_duplicate_names_are_rejected() -> None:
    c = Cluster()
    c.maintenance("m", ["one"], None)
    with pytest.raises(ValueError, match="unique"):
        resolve([*c.views.values(), *c.views.values()], {})
