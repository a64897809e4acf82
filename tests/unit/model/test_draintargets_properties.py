"""drainTargets resolution: properties over random clusters, plans and removals (targets never
move backwards, evicting what is targeted drains everything, a late maintenance is
fast-forwarded, never pulled back)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nodeagent.model.drainplan import (
    INT32_MAX,
    DrainPlanEntry,
    PodType,
    effective_plan,
    targets_cover_class,
)
from nodeagent.model.draintargets.results import Resolution
from nodeagent.model.draintargets.tracks import plan_targets, targets_within
from nodeagent.model.draintargets.views import MaintenanceView
from tests.unit.model.test_draintargets import T0, T1, Cluster, S, d

NODES = ["n1", "n2", "n3", "n4"]
LABELS: list[dict[str, str]] = [{}, {"app": "db"}, {"app": "web"}, {"tier": "x"}]
SELECTORS: list[dict[str, Any]] = [
    {"matchLabels": {"app": "db"}},
    {"matchLabels": {"app": "web"}},
    {"matchExpressions": [{"key": "tier", "operator": "Exists"}]},
]
PRIORITIES = st.sampled_from([-10, 0, 50, 100, 1000, 1000000000, 2000000000, 2000001000, INT32_MAX])


@st.composite
def plans(draw: st.DrawFn) -> tuple[DrainPlanEntry, ...]:
    raw = draw(
        st.lists(
            st.tuples(
                st.sampled_from(list(PodType)),
                PRIORITIES,
                st.one_of(st.none(), st.sampled_from(SELECTORS)),
            ),
            max_size=6,
        )
    )
    entries = {DrainPlanEntry.from_dict(d(t.value, p, s), "x"): d(t.value, p, s) for t, p, s in raw}
    return tuple(effective_plan([entries[k] for k in sorted(entries)]))


@st.composite
def clusters(draw: st.DrawFn, keep_entry_index: bool = True) -> Cluster:
    c = Cluster(keep_entry_index=keep_entry_index)
    for i in range(draw(st.integers(1, 4))):
        nodes = draw(st.sets(st.sampled_from(NODES), min_size=1, max_size=3))
        name = f"m{i}"
        created = draw(st.sampled_from([T0, T1]))
        c.views[name] = MaintenanceView(
            name, (created, name), "Drain", draw(plans()), frozenset(nodes)
        )
    for node in NODES:
        for pod_type, priority, labels, skip in draw(
            st.lists(
                st.tuples(
                    st.sampled_from(list(PodType)),
                    PRIORITIES,
                    st.sampled_from(range(len(LABELS))),
                    st.sampled_from([False, False, False, False, True]),
                ),
                max_size=6,
            )
        ):
            c.add_pods(node, 1, priority, pod_type, LABELS[labels], skip)
    return c


def targets_of(res: Resolution) -> dict[tuple[str, str], tuple[DrainPlanEntry, ...]]:
    return {(m.name, s.node): s.drain_targets for m in res.maintenances.values() for s in m.nodes}


def check_invariants(c: Cluster, res: Resolution, before: Mapping[tuple[str, str], Any]) -> None:
    by_node: dict[str, set[tuple[DrainPlanEntry, ...]]] = {}
    for m in res.maintenances.values():
        want = plan_targets(c.views[m.name].plan, m.entry_index)
        for s in m.nodes:
            by_node.setdefault(s.node, set()).add(s.drain_targets)
            # Never backwards.
            if (m.name, s.node) in before:
                assert targets_within(before[(m.name, s.node)], s.drain_targets)
            # Never beyond the current entry of any maintenance on the node.
            if c.keep_entry_index:
                assert targets_within(s.drain_targets, want), (m.name, s.node)
            # Static only once no Default or DaemonSet pod is left on the node.
            if any(t.pod_type == S for t in s.drain_targets):
                assert not [
                    p for p in c.pods.get(s.node, []) if p.present and p.pod_class.pod_type != S
                ]
            # Targeted pods are exactly the present pods the targets cover.
            covered = {
                p.ref
                for p in c.pods.get(s.node, [])
                if not p.terminal and targets_cover_class(s.drain_targets, p.pod_class, p.labels)
            }
            assert set(s.targeted_pods) == covered
            assert not any(p.pod_class.skip for p in c.pods.get(s.node, []) if p.ref in covered)
    # Every maintenance on a node sees the same targets.
    assert all(len(v) == 1 for v in by_node.values())


PROPERTY_SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@PROPERTY_SETTINGS
@given(clusters(), st.data())
def test_random_removals_never_move_targets_backwards(c: Cluster, data: st.DataObject) -> None:
    before: dict[tuple[str, str], Any] = {}
    for _ in range(12):
        res = c.step()
        check_invariants(c, res, before)
        assert c.step() == res  # idempotent when nothing changed
        before = targets_of(res)
        # Remove any pods at all: targeted or not, to shake the barrier.
        for node in NODES:
            pods = c.pods.get(node, [])
            if pods:
                keep = data.draw(st.lists(st.booleans(), min_size=len(pods), max_size=len(pods)))
                c.pods[node] = [p for p, k in zip(pods, keep, strict=True) if k]


@PROPERTY_SETTINGS
@given(clusters())
def test_evicting_targeted_pods_always_drains_everything(c: Cluster) -> None:
    bound = sum(len(v.plan) for v in c.views.values()) + 2
    before: dict[tuple[str, str], Any] = {}
    for _ in range(bound):
        res = c.step()
        check_invariants(c, res, before)
        before = targets_of(res)
        if all(m.drained for m in res.maintenances.values()):
            break
        assert c.remove_targeted(res) > 0
    else:
        pytest.fail("no progress")
    for m in res.maintenances.values():
        assert m.entry_index == len(c.views[m.name].plan) - 1
        assert {s.drain_message for s in m.nodes} == {"Drained"}


@PROPERTY_SETTINGS
@given(clusters(keep_entry_index=False), st.data())
def test_without_a_stored_entry_index_targets_still_never_move_backwards(
    c: Cluster, data: st.DataObject
) -> None:
    before: dict[tuple[str, str], Any] = {}
    bound = sum(len(v.plan) for v in c.views.values()) + 2
    for _ in range(bound):
        res = c.step()
        check_invariants(c, res, before)
        before = targets_of(res)
        if all(m.drained for m in res.maintenances.values()):
            break
        c.remove_targeted(res)
    else:
        pytest.fail("no progress")


@PROPERTY_SETTINGS
@given(clusters(), st.data())
def test_a_late_maintenance_is_fast_forwarded_never_pulled_back(
    c: Cluster, data: st.DataObject
) -> None:
    for _ in range(data.draw(st.integers(0, 6))):
        c.remove_targeted(c.step())
    res = c.step()
    before = targets_of(res)
    nodes = data.draw(st.sets(st.sampled_from(NODES), min_size=1, max_size=3))
    plan = data.draw(plans())
    c.views["late"] = MaintenanceView(
        "late", ("2030-01-01T00:00:00Z", "late"), "Drain", plan, frozenset(nodes)
    )
    res = c.step()
    after = targets_of(res)
    for (name, node), targets in before.items():
        assert targets_within(targets, after[(name, node)])
    late = res["late"]
    want = plan_targets(plan, late.entry_index)
    for s in late.nodes:
        older = [t for (name, node), t in before.items() if node == s.node]
        if any(not targets_within(t, want) for t in older):
            assert "fast-forwarded by older" in s.drain_message or not s.targeted_pods
            assert any(ff.node == s.node for ff in late.fast_forwards)
        else:
            assert not any(ff.node == s.node for ff in late.fast_forwards)
