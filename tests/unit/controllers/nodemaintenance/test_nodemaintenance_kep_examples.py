"""The KEP-4212 examples replayed through `decide`: pod selection and drain targets across
intersecting maintenances, and the progression through pod types and label selectors."""

from __future__ import annotations

from nodeagent.model.drainplan import INT32_MAX
from tests.unit.controllers.nodemaintenance.world import PLAN_A, PLAN_B, PLAN_C, World, entry


def test_kep_pod_selection_and_drain_targets_example() -> None:
    w = World()
    for node, prios in {
        "one": [4000, 8000, 14000],
        "two": [4000, 12000],
        "three": [9000, 14000],
        "four": [1000, 3000],
    }.items():
        for p in prios:
            w.pod(f"{node}-{p}", node, p)
    w.maintenance("maintenance-a", ["one", "two"], plan=PLAN_A)
    w.maintenance("maintenance-b", ["one", "three"], plan=PLAN_B)
    w.settle()
    d5, d10, d15 = entry("Default", 5000), entry("Default", 10000), entry("Default", 15000)
    assert w.view("maintenance-a", "one") == ("Evacuating", [d5])
    assert w.view("maintenance-a", "two") == ("Evacuating", [d5])
    assert w.view("maintenance-b", "one") == ("Evacuating (limited by maintenance-a)", [d5])
    assert w.view("maintenance-b", "three") == ("Evacuating", [d10])
    assert w.requested() == {"one-4000", "two-4000", "three-9000"}
    assert w.status("maintenance-a", "one")["podsEvacuating"] == 1
    assert w.status("maintenance-a", "one")["podsPendingEvacuation"] == 2

    # "If the node three is drained, then it has to wait for the node one"
    w.remove_pod("three-9000")
    w.settle()
    assert w.view("maintenance-b", "three") == ("Waiting for node one.", [d10])
    assert w.status("maintenance-b", "three")["podsEvacuating"] == 0

    # "If the node one is drained, we still have to wait for the maintenance-a to drain node two"
    w.remove_pod("one-4000")
    w.settle()
    assert w.view("maintenance-a", "one") == ("Waiting for node two.", [d5])
    assert w.view("maintenance-a", "two") == ("Evacuating", [d5])
    assert w.view("maintenance-b", "one") == ("Waiting for node two (maintenance-a).", [d5])
    assert w.view("maintenance-b", "three") == ("Waiting for node two (maintenance-a).", [d10])

    # "Once the node two drains, we can increment the drainTargets."
    w.remove_pod("two-4000")
    w.settle()
    assert w.view("maintenance-a", "one") == ("Evacuating (limited by maintenance-b)", [d10])
    assert w.view("maintenance-a", "two") == ("Evacuating", [d15])
    assert w.view("maintenance-b", "one") == ("Evacuating", [d10])
    assert w.view("maintenance-b", "three") == ("Waiting for node one.", [d10])
    assert w.requested() >= {"one-8000", "two-12000"}
    assert "one-14000" not in w.requested()
    assert [n for n, _, r, _ in w.events if r == "DrainPlanEntry"].count("maintenance-a") == 2

    # "If an intersecting maintenance-c is created, it will be fast-forwarded for node one"
    w.maintenance("maintenance-c", ["one", "four"], plan=PLAN_C)
    w.settle()
    assert w.view("maintenance-c", "one") == (
        "Evacuating (fast-forwarded by older maintenance-b)",
        [d10],
    )
    assert w.view("maintenance-c", "four") == ("Evacuating", [entry("Default", 2000)])
    ((kind, message),) = [(t, m) for n, t, r, m in w.events if r == "FastForwarded"]
    assert kind == "Warning"
    assert message == (
        "drainTargets of node one fast-forwarded to [Default<=10000] by older maintenance "
        "maintenance-b, ahead of this maintenance's drainPlan entry Default<=2000"
    )
    assert "four-3000" not in w.requested() and "four-1000" in w.requested()


def test_kep_pod_types_and_label_selectors_progression() -> None:
    w = World()
    postgres = {"matchLabels": {"app": "postgres"}}
    w.pod("web", "five", 500)
    w.pod("pg", "five", 1500, labels={"app": "postgres"})
    w.pod("batch", "five", 1500)
    w.pod("ds-low", "five", 900, kind="DaemonSet")
    w.pod("ds-high", "five", 2000001000, kind="DaemonSet")
    w.pod("etcd", "five", 2000001000, kind="Static")
    w.pod("agent", "five", 2000001000, kind="DaemonSet", skip=True)
    plan = [
        entry("Default", 1000),
        entry("Default", 2000, postgres),
        entry("Default", INT32_MAX),
        entry("DaemonSet", 1000),
        entry("DaemonSet", INT32_MAX),
        entry("Static", INT32_MAX),
    ]
    w.maintenance("m", ["five"], plan=plan)
    progression = []
    for pod in ("web", "pg", "batch", "ds-low", "ds-high", "etcd"):
        w.settle()
        progression.append((w.status("m", "five")["drainTargets"], sorted(w.requested())))
        w.remove_pod(pod)
    w.settle()
    d, pg = "Default", postgres
    assert progression == [
        ([entry(d, 1000), entry(d, 1000, pg)], ["web"]),
        ([entry(d, 1000), entry(d, 2000, pg)], ["pg", "web"]),
        # the KEP's default entries are merged in: 1000000000 comes before 2147483647
        ([entry(d, 1000000000), entry(d, 1000000000, pg)], ["batch", "pg", "web"]),
        (
            [entry(d, INT32_MAX), entry(d, INT32_MAX, pg), entry("DaemonSet", 1000)],
            ["batch", "ds-low", "pg", "web"],
        ),
        (
            [entry(d, INT32_MAX), entry(d, INT32_MAX, pg), entry("DaemonSet", 2000001000)],
            ["batch", "ds-high", "ds-low", "pg", "web"],
        ),
        (
            [
                entry(d, INT32_MAX),
                entry(d, INT32_MAX, pg),
                entry("DaemonSet", INT32_MAX),
                entry("Static", 2000001000),
            ],
            ["batch", "ds-high", "ds-low", "etcd", "pg", "web"],
        ),
    ]
    # the skipped pod is never targeted and does not keep the node from being drained
    assert (w.condition("m", "Drained") or {})["status"] == "True"
    assert "agent" not in w.requested()
    assert w.status("m", "five")["drainMessage"] == "Drained"
    assert w.status("m", "five")["podsPendingEvacuation"] == 0
