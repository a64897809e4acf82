"""Interceptors: the pod's target list, whose turn it is, heartbeats and the eviction backoff."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodeagent.model.bodies import set_condition
from nodeagent.model.interceptors.heartbeats import (
    heartbeat_due,
    heartbeat_interval,
    next_heartbeat_in,
    report_progress,
)
from nodeagent.model.interceptors.imperative import (
    eviction_backoff,
    imperative_refusal_message,
    parse_retries,
)
from nodeagent.model.interceptors.requests import EvictionRequestView
from nodeagent.model.interceptors.status import InterceptorStatus, with_interceptor_status
from nodeagent.model.interceptors.targets import (
    MAX_INTERCEPTORS,
    InvalidInterceptors,
    SelectorInterceptor,
    parse_interceptor_list,
    target_interceptors,
    validate_interceptor_name,
)
from nodeagent.model.interceptors.turns import select_active
from nodeagent.model.names import (
    DAEMONSET_INTERCEPTOR,
    IMPERATIVE_INTERCEPTOR,
    INTERCEPTORS_ANNOTATION,
    KUBELET_INTERCEPTOR,
)
from nodeagent.model.selectors import label_selector_from_dict
from nodeagent.model.times import format_micro_time, parse_time

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
MIN = timedelta(minutes=1)
DEADLINE = timedelta(minutes=20)
DB = SelectorInterceptor(
    "mover.example.com", label_selector_from_dict({"matchLabels": {"app": "db"}})
)
ALL = SelectorInterceptor("audit.example.com", label_selector_from_dict({}))


def pod(
    *,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    owner: str | None = None,
) -> dict[str, Any]:
    md: dict[str, Any] = {"name": "p", "namespace": "ns", "uid": "u1"}
    if annotations is not None:
        md["annotations"] = annotations
    if labels is not None:
        md["labels"] = labels
    if owner is not None:
        md["ownerReferences"] = [{"kind": owner, "name": "o", "controller": True}]
    return {"metadata": md, "spec": {"nodeName": "node-1"}}


# --- names and target lists -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("mover.example.com", None),
        ("a", None),
        (KUBELET_INTERCEPTOR, None),
        ("", "must not be empty"),
        ("Mover.example.com", "lowercase DNS subdomain"),
        ("mover_example", "lowercase DNS subdomain"),
        ("-a.b", "lowercase DNS subdomain"),
        ("a" * 254, "no more than 253"),
        ("deployment.apps.k8s.io", "reserved"),
        ("k8s.io", "reserved"),
    ],
)
def test_interceptor_names(name: str, problem: str | None) -> None:
    why = validate_interceptor_name(name)
    if problem is None:
        assert why is None
    else:
        assert why is not None and problem in why


def test_annotation_list_in_order_with_whitespace() -> None:
    assert parse_interceptor_list(" b.example.com , a.example.com") == (
        "b.example.com",
        "a.example.com",
    )


def test_empty_annotation_means_no_interceptors() -> None:
    assert parse_interceptor_list("") == ()
    assert parse_interceptor_list("  ") == ()


def test_imperative_may_be_written_last_only() -> None:
    assert parse_interceptor_list(f"a.example.com,{IMPERATIVE_INTERCEPTOR}") == ("a.example.com",)
    with pytest.raises(InvalidInterceptors, match="can only be last"):
        parse_interceptor_list(f"{IMPERATIVE_INTERCEPTOR},a.example.com")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("a.example.com,,b.example.com", "item 2: must not be empty"),
        ("a.example.com,a.example.com", "item 2 ('a.example.com'): repeats item 1"),
        ("A.example.com", "item 1 ('A.example.com'): must be a lowercase DNS subdomain"),
        ("replicaset.apps.k8s.io", "k8s.io names are reserved"),
    ],
)
def test_bad_annotation_lists(value: str, message: str) -> None:
    with pytest.raises(InvalidInterceptors) as info:
        parse_interceptor_list(value)
    assert message in str(info.value)


def test_at_most_fifteen_with_the_imperative_one() -> None:
    names = [f"i{n}.example.com" for n in range(MAX_INTERCEPTORS - 1)]
    assert len(parse_interceptor_list(",".join(names))) == MAX_INTERCEPTORS - 1
    assert len(parse_interceptor_list(",".join([*names, IMPERATIVE_INTERCEPTOR]))) == 14
    with pytest.raises(InvalidInterceptors, match="at most 14 besides"):
        parse_interceptor_list(",".join([*names, "one-more.example.com"]))


def test_annotation_wins_over_defaults() -> None:
    p = pod(annotations={INTERCEPTORS_ANNOTATION: "x.example.com"}, owner="DaemonSet")
    assert target_interceptors(p, [ALL]) == ("x.example.com", IMPERATIVE_INTERCEPTOR)


def test_empty_annotation_opts_out_of_defaults() -> None:
    p = pod(annotations={INTERCEPTORS_ANNOTATION: ""}, owner="DaemonSet")
    assert target_interceptors(p, [ALL]) == (IMPERATIVE_INTERCEPTOR,)


def test_bad_annotation_names_the_annotation() -> None:
    p = pod(annotations={INTERCEPTORS_ANNOTATION: "x.example.com,x.example.com"})
    with pytest.raises(InvalidInterceptors, match=f"annotation {INTERCEPTORS_ANNOTATION}: item 2"):
        target_interceptors(p)


def test_defaults_by_pod_type() -> None:
    mirror = pod(annotations={"kubernetes.io/config.mirror": "abc"})
    assert target_interceptors(mirror) == (KUBELET_INTERCEPTOR, IMPERATIVE_INTERCEPTOR)
    daemon = pod(owner="DaemonSet")
    assert target_interceptors(daemon) == (DAEMONSET_INTERCEPTOR, IMPERATIVE_INTERCEPTOR)
    plain = pod(owner="ReplicaSet")
    assert target_interceptors(plain) == (IMPERATIVE_INTERCEPTOR,)


def test_configured_interceptors_by_selector_first_in_config_order() -> None:
    db = pod(labels={"app": "db"}, owner="DaemonSet")
    assert target_interceptors(db, [DB, ALL]) == (
        DB.name,
        ALL.name,
        DAEMONSET_INTERCEPTOR,
        IMPERATIVE_INTERCEPTOR,
    )
    web = pod(labels={"app": "web"})
    assert target_interceptors(web, [DB, ALL]) == (ALL.name, IMPERATIVE_INTERCEPTOR)


@given(st.lists(st.from_regex(r"[a-z][a-z0-9]{0,8}\.example\.com", fullmatch=True), max_size=20))
def test_target_list_invariants(names: list[str]) -> None:
    configured = [SelectorInterceptor(n, label_selector_from_dict({})) for n in names]
    got = target_interceptors(pod(), configured)
    assert got[-1] == IMPERATIVE_INTERCEPTOR
    assert len(got) <= MAX_INTERCEPTORS
    assert len(set(got)) == len(got)
    assert list(got[:-1]) == list(dict.fromkeys(names))[: MAX_INTERCEPTORS - 1]


# --- whose turn it is ------------------------------------------------------------------------


TARGETS = ("a.example.com", "b.example.com", IMPERATIVE_INTERCEPTOR)


def st_(name: str, **times: datetime) -> InterceptorStatus:
    return InterceptorStatus(name, **times)  # type: ignore[arg-type]


def test_first_interceptor_gets_the_first_turn() -> None:
    sel = select_active(TARGETS, None, (), {}, T0, DEADLINE)
    assert sel.active == "a.example.com"
    assert sel.activated
    assert sel.processed == ()
    assert sel.deadline == T0 + DEADLINE


def test_completion_hands_over_at_once() -> None:
    statuses = {"a.example.com": st_("a.example.com", completion_time=T0)}
    sel = select_active(TARGETS, "a.example.com", (), statuses, T0 + MIN, DEADLINE, T0)
    assert sel.active == "b.example.com"
    assert sel.processed == ("a.example.com",)
    assert [h.reason for h in sel.handovers] == ["Completed"]
    assert sel.activated
    assert sel.deadline == T0 + MIN + DEADLINE


def test_deadline_from_activation_when_silent() -> None:
    before = select_active(TARGETS, "a.example.com", (), {}, T0 + DEADLINE - MIN, DEADLINE, T0)
    assert before.active == "a.example.com" and not before.handovers
    assert before.deadline == T0 + DEADLINE
    after = select_active(TARGETS, "a.example.com", (), {}, T0 + DEADLINE, DEADLINE, T0)
    assert after.active == "b.example.com"
    assert after.handovers[0].reason == "HeartbeatDeadline"
    assert "did not report within 20m" in after.handovers[0].describe(DEADLINE)


def test_deadline_from_the_latest_of_start_and_heartbeat() -> None:
    beat = st_("a.example.com", start_time=T0, heartbeat_time=T0 + 10 * MIN)
    statuses = {"a.example.com": beat}
    now = T0 + 25 * MIN
    sel = select_active(TARGETS, "a.example.com", (), statuses, now, DEADLINE, T0)
    assert sel.active == "a.example.com"
    assert sel.deadline == T0 + 30 * MIN
    late = select_active(TARGETS, "a.example.com", (), statuses, T0 + 30 * MIN, DEADLINE, T0)
    assert late.active == "b.example.com"


def test_a_heartbeat_from_the_future_is_no_sign_of_life() -> None:
    """An interceptor writing a heartbeatTime far ahead stayed active past its deadline (still
    active after 21 s of a 6 s one); beyond clock skew, such a report does not count."""
    future = st_("a.example.com", start_time=T0, heartbeat_time=T0 + 1000 * MIN)
    statuses = {"a.example.com": future}
    sel = select_active(TARGETS, "a.example.com", (), statuses, T0 + DEADLINE, DEADLINE, T0)
    assert sel.active == "b.example.com"
    assert sel.handovers[0].reason == "HeartbeatDeadline"
    skewed = st_("a.example.com", start_time=T0, heartbeat_time=T0 + DEADLINE + MIN // 2)
    near = select_active(
        TARGETS, "a.example.com", (), {"a.example.com": skewed}, T0 + DEADLINE, DEADLINE, T0
    )
    assert near.active == "a.example.com"  # within a minute of skew it still counts


def test_a_stale_report_before_the_turn_does_not_count() -> None:
    # b reported long ago (before its turn); its deadline runs from its activation.
    statuses = {
        "a.example.com": st_("a.example.com", completion_time=T0 + 40 * MIN),
        "b.example.com": st_("b.example.com", start_time=T0, heartbeat_time=T0),
    }
    sel = select_active(TARGETS, "a.example.com", (), statuses, T0 + 40 * MIN, DEADLINE, T0)
    assert sel.active == "b.example.com"
    assert sel.deadline == T0 + 60 * MIN


def test_cascade_over_several_interceptors() -> None:
    statuses = {n: st_(n, completion_time=T0) for n in TARGETS[:2]}
    sel = select_active(TARGETS, None, (), statuses, T0, DEADLINE)
    assert sel.active == IMPERATIVE_INTERCEPTOR
    assert sel.processed == TARGETS[:2]
    assert len(sel.handovers) == 2


def test_last_interceptor_is_never_passed_over_for_silence() -> None:
    sel = select_active(
        TARGETS, IMPERATIVE_INTERCEPTOR, TARGETS[:2], {}, T0 + 10 * DEADLINE, DEADLINE, T0
    )
    assert sel.active == IMPERATIVE_INTERCEPTOR
    assert not sel.handovers
    assert sel.deadline is None


def test_last_interceptor_completing_leaves_nobody_active() -> None:
    statuses = {IMPERATIVE_INTERCEPTOR: st_(IMPERATIVE_INTERCEPTOR, completion_time=T0)}
    sel = select_active(TARGETS, IMPERATIVE_INTERCEPTOR, TARGETS[:2], statuses, T0, DEADLINE, T0)
    assert sel.active is None
    assert sel.processed == TARGETS
    assert sel.handovers[0].next is None


def test_resumes_after_the_last_processed_when_nobody_is_active() -> None:
    sel = select_active(TARGETS, None, ("a.example.com",), {}, T0, DEADLINE)
    assert sel.active == "b.example.com"


_events = st.lists(
    st.tuples(
        st.integers(min_value=0, max_value=2),  # which target reports
        st.sampled_from(["heartbeat", "complete"]),
        st.integers(min_value=0, max_value=30),  # minutes later
    ),
    max_size=25,
)


@given(_events)
def test_selection_walks_forward_only(events: list[tuple[int, str, int]]) -> None:
    """Whatever the interceptors report and whenever the controller looks: the turn only moves
    to higher indexes, processed grows, an interceptor that reported within the deadline keeps
    its turn, and the last one is never passed over for silence."""
    statuses: dict[str, InterceptorStatus] = {}
    now = T0
    active: str | None = None
    processed: tuple[str, ...] = ()
    activated_at: datetime | None = None
    for who, what, minutes in events:
        now += timedelta(minutes=minutes)
        name = TARGETS[who]
        old = statuses.get(name, InterceptorStatus(name))
        if what == "heartbeat":
            statuses[name] = old.heartbeat(now)
        else:
            statuses[name] = old.complete(now)
        sel = select_active(TARGETS, active, processed, statuses, now, DEADLINE, activated_at)
        assert sel.processed[: len(processed)] == processed
        if active is not None and sel.active is not None:
            assert TARGETS.index(sel.active) >= TARGETS.index(active)
        if sel.active is not None:
            assert sel.active not in sel.processed
        for h in sel.handovers:
            status = statuses.get(h.previous, InterceptorStatus(h.previous))
            if h.reason == "HeartbeatDeadline":
                assert h.next is not None
                assert status.completion_time is None
        if sel.active == active and active is not None and sel.deadline is not None:
            assert sel.deadline > now
        if sel.activated:
            activated_at = now
        active, processed = sel.active, sel.processed
    assert set(processed) | ({active} if active else set()) <= set(TARGETS)


# --- EvictionRequest status ------------------------------------------------------------------


def test_view_of_an_eviction_request() -> None:
    obj = {
        "metadata": {
            "name": "u1",
            "namespace": "ns",
            "uid": "r1",
            "generation": 3,
            "creationTimestamp": "2030-01-01T12:00:00Z",
        },
        "spec": {
            "target": {"pod": {"name": "p", "uid": "u1"}},
            "requesters": [{"name": "nodemaintenance.k8s.io"}],
        },
        "status": {
            "targetInterceptors": [{"name": n} for n in TARGETS],
            "activeInterceptors": ["b.example.com"],
            "processedInterceptors": ["a.example.com"],
            "interceptors": [
                {"name": "a.example.com", "completionTime": "2030-01-01T12:00:00Z"},
                {
                    "name": "b.example.com",
                    "startTime": "2030-01-01T12:00:00Z",  # its turn, as the controller records it
                    "heartbeatTime": "2030-01-01T12:01:00.5Z",
                },
            ],
            "conditions": [{"type": "Evicted", "status": "False"}],
        },
    }
    view = EvictionRequestView.from_obj(obj)
    assert view.target_name == "p" and view.target_uid == "u1"
    assert view.requesters == ("nodemaintenance.k8s.io",)
    assert view.target_interceptors == TARGETS
    assert view.active == "b.example.com"
    assert view.processed == ("a.example.com",)
    assert view.entry("b.example.com").heartbeat_time == T0 + MIN + timedelta(seconds=0.5)
    assert view.entry("nobody.example.com") == InterceptorStatus("nobody.example.com")
    assert view.activated_at() == T0
    assert not view.finished


def test_view_falls_back_to_creation_for_the_first_interceptor() -> None:
    obj = {
        "metadata": {"name": "u", "namespace": "n", "creationTimestamp": "2030-01-01T12:00:00Z"},
        "status": {
            "targetInterceptors": [{"name": "a.example.com"}],
            "activeInterceptors": ["a.example.com"],
        },
    }
    assert EvictionRequestView.from_obj(obj).activated_at() == T0


def test_view_of_garbage_does_not_raise() -> None:
    view = EvictionRequestView.from_obj({"metadata": "x", "spec": [], "status": 3})
    assert view.name == "" and view.target_interceptors is None and view.active is None


def test_interceptor_status_round_trip() -> None:
    s = InterceptorStatus("a.example.com", T0, T0, T0 + MIN, None, "working")
    assert InterceptorStatus.from_dict(s.to_dict()) == s
    assert "completionTime" not in s.to_dict()


def test_with_interceptor_status_replaces_by_name() -> None:
    entries = [{"name": "a.example.com"}, {"name": "b.example.com", "message": "x"}]
    got = with_interceptor_status(entries, InterceptorStatus("b.example.com", message="y"))
    assert got == [{"name": "a.example.com"}, {"name": "b.example.com", "message": "y"}]
    got = with_interceptor_status(entries, InterceptorStatus("c.example.com"))
    assert [e["name"] for e in got] == ["a.example.com", "b.example.com", "c.example.com"]


def test_set_condition_keeps_transition_time_while_status_holds() -> None:
    first = set_condition([], "Evicted", "True", "PodDeleted", "gone", T0, 2)
    assert first == [
        {
            "type": "Evicted",
            "status": "True",
            "reason": "PodDeleted",
            "message": "gone",
            "lastTransitionTime": "2030-01-01T12:00:00Z",
            "observedGeneration": 2,
        }
    ]
    again = set_condition(first, "Evicted", "True", "PodDeleted", "still gone", T0 + MIN)
    assert again[0]["lastTransitionTime"] == "2030-01-01T12:00:00Z"
    flipped = set_condition(first, "Evicted", "False", "Back", "", T0 + MIN)
    assert flipped[0]["lastTransitionTime"] == "2030-01-01T12:01:00Z"


def test_times() -> None:
    assert parse_time(format_micro_time(T0)) == T0
    assert parse_time("2030-01-01T12:00:00+02:00") == T0 - 2 * 60 * MIN
    assert parse_time("garbage") is None
    assert parse_time(None) is None


# --- heartbeats and backoff ------------------------------------------------------------------


def test_heartbeat_interval_is_a_quarter_of_the_deadline_from_one_to_three_minutes() -> None:
    assert heartbeat_interval(DEADLINE) == 3 * MIN
    assert heartbeat_interval(8 * MIN) == 2 * MIN
    # never closer than the 60 s the CRD allows, unless told (tests with short deadlines)
    assert heartbeat_interval(timedelta(seconds=2)) == MIN
    assert heartbeat_interval(timedelta(seconds=2), timedelta(0)) == timedelta(seconds=0.5)


@given(st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=2)))
def test_heartbeats_are_never_closer_than_60s_nor_rarer_than_3_minutes(
    deadline: timedelta,
) -> None:
    every = heartbeat_interval(deadline)
    assert MIN <= every <= 3 * MIN
    beat = InterceptorStatus("a.example.com").heartbeat(T0, "started")
    soon = T0 + MIN - timedelta(microseconds=1)
    assert not heartbeat_due(beat, soon, every)
    update = report_progress(beat, "still going", soon, every)
    assert update is not None and update.heartbeat_time == T0


def test_report_progress() -> None:
    every = heartbeat_interval(DEADLINE)
    fresh = InterceptorStatus("a.example.com")
    first = report_progress(fresh, "started", T0, every)
    assert first is not None and first.start_time == T0 and first.heartbeat_time == T0
    assert report_progress(first, "started", T0 + MIN, every) is None
    changed = report_progress(first, "half way", T0 + MIN, every)
    assert changed is not None and changed.heartbeat_time == T0 and changed.message == "half way"
    due = report_progress(first, "started", T0 + 3 * MIN, every)
    assert due is not None and due.heartbeat_time == T0 + 3 * MIN and due.start_time == T0
    assert heartbeat_due(first, T0 + 3 * MIN, every)
    assert next_heartbeat_in(first, T0 + MIN, every) == 120.0
    # a startTime alone (the controller's, at activation) is no heartbeat: one is due at once
    activated = InterceptorStatus("a.example.com", start_time=T0)
    assert heartbeat_due(activated, T0, every) and next_heartbeat_in(activated, T0, every) == 0.0


def test_complete_sets_completion_once() -> None:
    done = InterceptorStatus("a.example.com").complete(T0, "done")
    assert done.completion_time == T0 and done.start_time == T0
    assert done.complete(T0 + MIN).completion_time == T0


def test_backoff_doubles_up_to_the_cap() -> None:
    assert [eviction_backoff(n, 1.0, 900.0) for n in range(0, 5)] == [0.0, 1.0, 2.0, 4.0, 8.0]
    assert eviction_backoff(11, 1.0, 900.0) == 900.0
    assert eviction_backoff(10_000, 1.0, 900.0) == 900.0


@given(st.integers(min_value=0, max_value=500), st.floats(0.001, 60), st.floats(1, 3600))
def test_backoff_is_monotonic_and_bounded(retries: int, base: float, cap: float) -> None:
    delay = eviction_backoff(retries, base, cap)
    assert 0.0 <= delay <= max(cap, 0.0)
    assert eviction_backoff(retries + 1, base, cap) >= delay


@given(st.integers(min_value=0, max_value=10**6), st.text(max_size=50))
def test_retry_count_survives_in_the_message(retries: int, cause: str) -> None:
    message = imperative_refusal_message(retries, cause)
    assert f"number of retries: {retries}" in message
    assert parse_retries(message) == retries


def test_no_retries_in_other_messages() -> None:
    assert parse_retries("") == 0
    assert parse_retries("Evicted the pod") == 0
