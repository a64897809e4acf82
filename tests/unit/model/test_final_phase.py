from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodeagent.model.final_phase import FinalPhase, InvalidFinalPhase, annotation, plan, requested
from nodeagent.model.names import FINAL_PHASE_ANNOTATION, SYSTEM_CRITICAL_PRIORITY

Obj = dict[str, Any]
NODE = "node-1"
PHASE = FinalPhase(deadline=1000.0, grace_period=30.0, critical_grace_period=10.0)


def pod(
    name: str,
    priority: int = 0,
    tgps: int | None = 60,
    *,
    node: str = NODE,
    mirror: bool = False,
    skip: bool = False,
    terminating: bool = False,
    phase: str = "Running",
) -> Obj:
    annotations: dict[str, str] = {}
    if mirror:
        annotations["kubernetes.io/config.mirror"] = "x"
    if skip:
        annotations["nodeagent.io/drain"] = "skip"
    md: Obj = {"name": name, "namespace": "ns", "uid": f"uid-{name}", "annotations": annotations}
    if terminating:
        md["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    spec: Obj = {"nodeName": node, "priority": priority}
    if tgps is not None:
        spec["terminationGracePeriodSeconds"] = tgps
    return {"metadata": md, "spec": spec, "status": {"phase": phase}}


def test_waits_until_the_phase_starts() -> None:
    step = plan([pod("a")], NODE, PHASE, now=900.0)
    assert step.deletions == () and step.next_at == 970.0


def test_others_first_with_capped_grace_then_critical() -> None:
    pods = [pod("a", tgps=60), pod("b", tgps=5), pod("c", tgps=None), pod("crit", 2000001000)]
    step = plan(pods, NODE, PHASE, now=970.0)
    assert {d.name: d.grace for d in step.deletions} == {"a": 20, "b": 5, "c": 20}
    assert step.next_at == 990.0  # the critical group's time
    # the others are terminating: the critical ones wait for them to go...
    terminating = [pod(n, terminating=True) for n in "abc"] + [pod("crit", 2000001000)]
    assert plan(terminating, NODE, PHASE, now=975.0).deletions == ()
    # ...or for their time
    late = plan(terminating, NODE, PHASE, now=990.0)
    assert [(d.name, d.grace, d.critical) for d in late.deletions] == [("crit", 10, True)]
    # gone: at once
    gone = plan([pod("crit", 2000001000, tgps=3)], NODE, PHASE, now=975.0)
    assert [(d.name, d.grace) for d in gone.deletions] == [("crit", 3)]


def test_never_mirror_skip_terminal_terminating_or_other_nodes() -> None:
    pods = [
        pod("m", mirror=True),
        pod("s", skip=True),
        pod("t", terminating=True),
        pod("done", phase="Succeeded"),
        pod("failed", phase="Failed"),
        pod("elsewhere", node="node-2"),
    ]
    for now in (970.0, 995.0):
        assert plan(pods, NODE, PHASE, now).deletions == ()


def test_off_and_after_the_deadline() -> None:
    off = FinalPhase(1000.0, 0.0, 0.0)
    assert plan([pod("a")], NODE, off, 999.0).next_at is None
    assert plan([pod("a")], NODE, PHASE, 1000.0).next_at is None
    assert plan([], NODE, PHASE, 980.0).next_at is None  # nothing left: done


def test_asked_pods_are_not_asked_again() -> None:
    step = plan([pod("a"), pod("b")], NODE, PHASE, 975.0, frozenset({"uid-a"}))
    assert [d.name for d in step.deletions] == ["b"]


pods_st = st.lists(
    st.builds(
        pod,
        name=st.text("abcdefgh", min_size=1, max_size=4),
        priority=st.sampled_from([0, 1000, SYSTEM_CRITICAL_PRIORITY - 1, SYSTEM_CRITICAL_PRIORITY,
                                  2000001000]),
        tgps=st.none() | st.integers(0, 3600),
        node=st.sampled_from([NODE, "node-2"]),
        mirror=st.booleans(),
        skip=st.booleans(),
        terminating=st.booleans(),
        phase=st.sampled_from(["Running", "Pending", "Succeeded", "Failed"]),
    ),
    max_size=12,
    unique_by=lambda p: p["metadata"]["name"],
)  # fmt: skip


@given(
    pods=pods_st,
    grace=st.floats(0, 120),
    critical_share=st.floats(0, 1),
    now=st.floats(800, 1100),
)
def test_properties(pods: list[Obj], grace: float, critical_share: float, now: float) -> None:
    phase = FinalPhase(1000.0, grace, grace * critical_share)
    step = plan(pods, NODE, phase, now)
    by_name = {p["metadata"]["name"]: p for p in pods}
    if now < phase.start or now >= phase.deadline or grace <= 0:
        assert step.deletions == ()
    for d in step.deletions:
        p = by_name[d.name]
        md, spec = p["metadata"], p["spec"]
        # never a mirror, skip, terminating, terminal or other node's pod
        assert "kubernetes.io/config.mirror" not in md["annotations"]
        assert "nodeagent.io/drain" not in md["annotations"]
        assert "deletionTimestamp" not in md
        assert p["status"]["phase"] in ("Running", "Pending")
        assert spec["nodeName"] == NODE
        # grace: at most the pod's own, its group's cap and the time left (at least 1 s)
        cap = phase.critical_grace_period if d.critical else grace - phase.critical_grace_period
        tgps = spec.get("terminationGracePeriodSeconds")
        assert 1 <= d.grace <= max(1, min(30 if tgps is None else tgps, cap, 1000.0 - now))
        assert d.critical == (spec["priority"] >= SYSTEM_CRITICAL_PRIORITY)
    # one group at a time; the critical one only once the others are gone or time is up
    groups = {d.critical for d in step.deletions}
    assert len(groups) <= 1
    if True in groups and now < phase.critical_start:
        assert not any(
            by_name[n]["spec"]["priority"] < SYSTEM_CRITICAL_PRIORITY
            for n in by_name
            if by_name[n]["spec"]["nodeName"] == NODE
            and not by_name[n]["metadata"]["annotations"]
            and by_name[n]["status"]["phase"] in ("Running", "Pending")
        )
    if step.next_at is not None:
        assert now <= step.next_at <= phase.deadline or step.next_at == phase.start


def test_a_short_budget_gives_the_phase_half_of_it() -> None:
    assert FinalPhase.fitted(100.0, 590.0, 30.0, 10.0) == FinalPhase(100.0, 30.0, 10.0)
    short = FinalPhase.fitted(100.0, 20.0, 30.0, 10.0)
    assert short.grace_period == 10.0
    assert short.critical_grace_period == pytest.approx(10 / 3)
    assert FinalPhase.fitted(100.0, 20.0, 0.0, 0.0).grace_period == 0.0


# --- the request a shutdown maintenance carries ---------------------------------------------


def maintenance(value: object) -> Obj:
    return {"metadata": {"name": "nm", "annotations": {FINAL_PHASE_ANNOTATION: value}}}


@given(
    seconds=st.integers(0, 4_000_000_000),
    micros=st.integers(0, 999_999),
    grace=st.floats(0.5, 600),
    share=st.floats(0, 1),
)
def test_the_annotation_reads_back_as_written(
    seconds: int, micros: int, grace: float, share: float
) -> None:
    phase = FinalPhase(0.0, grace, grace * share)
    deadline = datetime.fromtimestamp(seconds, UTC) + timedelta(microseconds=micros)
    read = requested(maintenance(annotation(deadline, phase)))
    assert read == FinalPhase(deadline.timestamp(), grace, grace * share)


def test_no_annotation_or_a_phase_of_no_length_asks_nothing() -> None:
    assert requested({"metadata": {"name": "nm"}}) is None
    off = annotation(datetime(2030, 1, 1, tzinfo=UTC), FinalPhase(0.0, 0.0, 0.0))
    assert requested(maintenance(off)) is None


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("{", "not JSON"),
        ("[]", "must be a JSON object"),
        (42, "must be a JSON object"),
        ('{"gracePeriodSeconds":8,"criticalPodsGracePeriodSeconds":4}', "deadline must be"),
        ('{"deadline":"soon","gracePeriodSeconds":8,"criticalPodsGracePeriodSeconds":4}',
         "deadline must be"),
        ('{"deadline":"2030-01-01T00:00:00Z","criticalPodsGracePeriodSeconds":4}',
         "gracePeriodSeconds must be a number"),
        ('{"deadline":"2030-01-01T00:00:00Z","gracePeriodSeconds":true,'
         '"criticalPodsGracePeriodSeconds":4}', "gracePeriodSeconds must be a number"),
        ('{"deadline":"2030-01-01T00:00:00Z","gracePeriodSeconds":-1,'
         '"criticalPodsGracePeriodSeconds":0}', "gracePeriodSeconds must be >= 0"),
        ('{"deadline":"2030-01-01T00:00:00Z","gracePeriodSeconds":NaN,'
         '"criticalPodsGracePeriodSeconds":0}', "gracePeriodSeconds must be >= 0"),
        ('{"deadline":"2030-01-01T00:00:00Z","gracePeriodSeconds":4,'
         '"criticalPodsGracePeriodSeconds":8}', "must not exceed gracePeriodSeconds"),
    ],
)  # fmt: skip
def test_a_malformed_annotation_is_one_clear_error(value: object, says: str) -> None:
    with pytest.raises(InvalidFinalPhase) as e:
        requested(maintenance(value))
    assert str(e.value).startswith(f"NodeMaintenance nm: annotation {FINAL_PHASE_ANNOTATION}: ")
    assert says in str(e.value) and "\n" not in str(e.value)
