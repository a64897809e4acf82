"""The eviction request controller's decisions, without any API server."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodeagent.config import AnnotateInterceptor, EvictionConfig
from nodeagent.config.eviction_settings import eviction_settings
from nodeagent.model.budgets import BudgetGate
from nodeagent.model.evictionrequest.plan import Plan
from nodeagent.model.evictionrequest.reconcile import plan_request
from nodeagent.model.interceptors.imperative import (
    CALLER_EVICTS,
    HELD_AT_MOST,
    EvictionOutcome,
    ImperativeState,
    imperative_refusal_cause,
)
from nodeagent.model.interceptors.requests import EvictionRequestView
from nodeagent.model.interceptors.settings import EvictionSettings
from nodeagent.model.names import (
    BRIDGE_REQUESTER,
    DAEMONSET_INTERCEPTOR,
    IMPERATIVE_INTERCEPTOR,
    INTERCEPTORS_ANNOTATION,
    NODE_LABEL,
)
from nodeagent.model.times import format_micro_time

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
SEC = timedelta(seconds=1)
SETTINGS = EvictionSettings(heartbeat_deadline=timedelta(minutes=20), backoff_base=1.0)


def make_pod(uid: str = "u1", **extra: Any) -> dict[str, Any]:
    p: dict[str, Any] = {
        "metadata": {
            "name": "web-1",
            "namespace": "ns",
            "uid": uid,
            "labels": {"app": "web"},
            "resourceVersion": "10",
        },
        "spec": {"nodeName": "node-2"},
        "status": {"phase": "Running"},
    }
    for key, value in extra.items():
        p["metadata"][key] = value
    return p


def make_request(
    name: str = "u1",
    *,
    requesters: tuple[str, ...] = ("nodemaintenance.k8s.io",),
    status: dict[str, Any] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    md: dict[str, Any] = {
        "name": name,
        "namespace": "ns",
        "uid": "r1",
        "generation": 1,
        "resourceVersion": "20",
        "creationTimestamp": "2030-01-01T12:00:00Z",
    }
    if annotations:
        md["annotations"] = annotations
    return {
        "apiVersion": "nodeagent.io/v1alpha1",
        "kind": "EvictionRequest",
        "metadata": md,
        "spec": {
            "target": {"pod": {"name": "web-1", "uid": "u1"}},
            "requesters": [{"name": r} for r in requesters],
        },
        "status": status or {},
    }


def applied(request: dict[str, Any], plan: Plan) -> dict[str, Any]:
    """The request after the controller wrote what the plan says."""
    out = copy.deepcopy(request)
    if plan.status is not None:
        out["status"] = copy.deepcopy(plan.status)
    md = out["metadata"]
    md.setdefault("labels", {}).update(plan.labels)
    return out


def condition(request_or_plan: dict[str, Any] | Plan, type_: str) -> dict[str, Any]:
    status = (
        request_or_plan.status
        if isinstance(request_or_plan, Plan)
        else request_or_plan.get("status")
    )
    assert status is not None
    for c in status.get("conditions") or []:
        if c["type"] == type_:
            return dict(c)
    raise AssertionError(f"no {type_} condition in {status}")


def at_imperative(
    pod: dict[str, Any] | None = None, *, message: str = ""
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A request whose turn came to imperative-eviction.k8s.io at T0 (its startTime)."""
    entry: dict[str, Any] = {"name": IMPERATIVE_INTERCEPTOR, "startTime": "2030-01-01T12:00:00Z"}
    if message:
        entry.update(message=message, heartbeatTime="2030-01-01T12:00:00Z")
    status = {
        "observedGeneration": 1,
        "targetInterceptors": [{"name": IMPERATIVE_INTERCEPTOR}],
        "activeInterceptors": [IMPERATIVE_INTERCEPTOR],
        "processedInterceptors": [],
        "interceptors": [entry],
    }
    return make_request(status=status), pod if pod is not None else make_pod()


# --- a new request ---------------------------------------------------------------------------


def test_new_request_gets_targets_first_turn_labels_and_generation() -> None:
    pod = make_pod(annotations={INTERCEPTORS_ANNOTATION: "mover.example.com"})
    plan = plan_request(make_request(), pod, T0, SETTINGS)
    assert plan.status is not None
    assert plan.status["targetInterceptors"] == [
        {"name": "mover.example.com"},
        {"name": IMPERATIVE_INTERCEPTOR},
    ]
    # the first one's turn starts now: its startTime, in this same write
    assert plan.status["interceptors"] == [
        {"name": "mover.example.com", "startTime": format_micro_time(T0)},
        {"name": IMPERATIVE_INTERCEPTOR},
    ]
    assert plan.status["activeInterceptors"] == ["mover.example.com"]
    assert plan.status["processedInterceptors"] == []
    assert plan.status["observedGeneration"] == 1
    assert plan.labels == {"app": "web", NODE_LABEL: "node-2"}
    assert plan.activation == ("mover.example.com", T0)
    assert plan.requeue_after == pytest.approx(20 * 60)
    assert not plan.evict and not plan.finished


def test_steady_state_writes_nothing() -> None:
    pod = make_pod(annotations={INTERCEPTORS_ANNOTATION: "mover.example.com"})
    request = make_request()
    request = applied(request, plan_request(request, pod, T0, SETTINGS))
    plan = plan_request(request, pod, T0 + 5 * SEC, SETTINGS)
    assert plan.status is None
    assert not plan.labels
    assert plan.requeue_after == pytest.approx(20 * 60 - 5)


def test_labels_follow_the_pod_and_win() -> None:
    request = make_request()
    request["metadata"]["labels"] = {"app": "old", "extra": "kept"}
    plan = plan_request(request, make_pod(), T0, SETTINGS)
    assert plan.labels == {"app": "web", NODE_LABEL: "node-2"}


def test_target_interceptors_are_set_once() -> None:
    pod = make_pod(annotations={INTERCEPTORS_ANNOTATION: "mover.example.com"})
    request = applied(make_request(), plan_request(make_request(), pod, T0, SETTINGS))
    changed = make_pod(annotations={INTERCEPTORS_ANNOTATION: "other.example.com"})
    plan = plan_request(request, changed, T0 + SEC, SETTINGS)
    assert plan.status is None  # the annotation changed, the targets did not


def test_configured_interceptor_is_a_default() -> None:
    settings = eviction_settings(
        EvictionConfig(
            annotate_interceptors=(
                AnnotateInterceptor(
                    "mover.example.com", {"matchLabels": {"app": "web"}}, "example.com/move"
                ),
            )
        )
    )
    plan = plan_request(make_request(), make_pod(), T0, settings)
    assert plan.status is not None
    assert plan.status["activeInterceptors"] == ["mover.example.com"]


# --- validation ------------------------------------------------------------------------------


def test_name_must_be_the_pod_uid() -> None:
    request = make_request(name="not-the-uid")
    plan = plan_request(request, make_pod(), T0, SETTINGS)
    canceled = condition(plan, "Canceled")
    assert canceled["status"] == "True"
    assert canceled["reason"] == "ValidationFailed"
    assert (
        "metadata.name 'not-the-uid' is not the UID of the target pod ns/web-1"
        in (canceled["message"])
    )
    assert plan.finished and not plan.evict and not plan.labels
    assert plan.events[0].type == "Warning"


def test_missing_pod_is_canceled_with_the_kep_message() -> None:
    plan = plan_request(make_request(), None, T0, SETTINGS)
    canceled = condition(plan, "Canceled")
    assert canceled["reason"] == "ValidationFailed"
    assert canceled["message"] == "Target Pod ns/web-1 was not found."
    assert plan.finished


def test_pod_of_that_name_with_another_uid_is_not_the_target() -> None:
    plan = plan_request(make_request(), make_pod(uid="u2"), T0, SETTINGS)
    message = condition(plan, "Canceled")["message"]
    assert "with UID u1 was not found (the pod of that name has UID u2)" in message


def test_bad_interceptor_annotation_falls_back_to_the_defaults_and_says_why() -> None:
    """Canceling made the requester create the request again, 125-280 times a second, and the
    drain never moved: a pod owner's bad annotation is ignored instead, with one Warning."""
    pod = make_pod(annotations={INTERCEPTORS_ANNOTATION: "a.example.com,a.example.com"})
    plan = plan_request(make_request(), pod, T0, SETTINGS)
    assert plan.status is not None
    assert not plan.finished
    assert plan.status["targetInterceptors"] == [{"name": IMPERATIVE_INTERCEPTOR}]
    assert plan.status["activeInterceptors"] == [IMPERATIVE_INTERCEPTOR]
    assert not any(
        c["type"] == "Canceled" and c["status"] == "True"
        for c in plan.status.get("conditions") or []
    )
    (event,) = [e for e in plan.events if e.reason == "InvalidInterceptors"]
    assert event.type == "Warning"
    assert event.message == (
        f"Pod ns/web-1: annotation {INTERCEPTORS_ANNOTATION}: item 2 ('a.example.com'): "
        f"repeats item 1; the annotation is ignored and the default interceptors take turns: "
        f"{IMPERATIVE_INTERCEPTOR}."
    )


def test_a_request_whose_interceptors_are_set_does_not_warn_again() -> None:
    pod = make_pod(annotations={INTERCEPTORS_ANNOTATION: "a.example.com,a.example.com"})
    first = plan_request(make_request(), pod, T0, SETTINGS)
    assert first.status is not None
    request = make_request()
    request["status"] = first.status
    again = plan_request(request, pod, T0, SETTINGS)
    assert not [e for e in again.events if e.reason == "InvalidInterceptors"]


# --- evicted and canceled --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pod", "reason", "text"),
    [
        (None, "PodDeleted", "Pod ns/web-1 was deleted."),
        (make_pod(uid="u2"), "PodReplaced", "a pod of that name now has UID u2"),
        ({**make_pod(), "status": {"phase": "Succeeded"}}, "PodTerminal", "phase Succeeded"),
    ],
)
def test_evicted_when_the_pod_is_gone_terminal_or_replaced(
    pod: dict[str, Any] | None, reason: str, text: str
) -> None:
    request, _ = at_imperative()
    plan = plan_request(request, pod, T0, SETTINGS)
    evicted = condition(plan, "Evicted")
    assert evicted["status"] == "True" and evicted["reason"] == reason
    assert text in evicted["message"]
    assert plan.finished and not plan.evict
    assert plan.status is not None
    assert plan.status["activeInterceptors"] == []
    assert plan.status["processedInterceptors"] == [IMPERATIVE_INTERCEPTOR]
    entry = plan.status["interceptors"][0]
    assert entry["completionTime"] == format_micro_time(T0)


@pytest.mark.parametrize(
    "outcome", [None, EvictionOutcome("refused", "429"), EvictionOutcome("gone", "404")]
)
def test_completion_seconds_after_a_heartbeat_leaves_the_heartbeat(
    outcome: EvictionOutcome | None,
) -> None:
    """The CRD (KEP-4563) refuses a heartbeat moved less than 60 s forward: the completion
    written when the pod is gone keeps the one the report just before it wrote."""
    request, pod = at_imperative(make_pod(deletionTimestamp="2030-01-01T12:00:00Z"))
    if outcome is not None:
        pod = make_pod()
    plan = plan_request(request, pod, T0 + SEC, SETTINGS, outcome=outcome)
    request = applied(request, plan)
    [reported] = request["status"]["interceptors"]
    assert reported["heartbeatTime"] == format_micro_time(T0 + SEC)
    plan = plan_request(request, None, T0 + 5 * SEC, SETTINGS, imperative=plan.imperative)
    assert plan.status is not None
    [entry] = plan.status["interceptors"]
    assert entry["heartbeatTime"] == reported["heartbeatTime"]
    assert entry["completionTime"] == format_micro_time(T0 + 5 * SEC)
    assert entry["message"] == "The pod is gone."


def test_another_interceptor_keeps_its_turn_after_eviction_until_it_completes() -> None:
    pod = make_pod(annotations={INTERCEPTORS_ANNOTATION: "mover.example.com"})
    request = applied(make_request(), plan_request(make_request(), pod, T0, SETTINGS))
    plan = plan_request(request, make_pod(uid="u2"), T0 + SEC, SETTINGS)
    assert condition(plan, "Evicted")["reason"] == "PodReplaced"
    assert plan.status is not None and plan.status["activeInterceptors"] == ["mover.example.com"]
    request = applied(request, plan)
    # it reports completion afterwards: it leaves activeInterceptors, nobody follows
    for e in request["status"]["interceptors"]:
        if e["name"] == "mover.example.com":
            e["completionTime"] = format_micro_time(T0 + 2 * SEC)
    plan = plan_request(request, None, T0 + 3 * SEC, SETTINGS)
    assert plan.status is not None
    assert plan.status["activeInterceptors"] == []
    assert plan.status["processedInterceptors"] == ["mover.example.com"]
    assert not plan.evict and not plan.events and plan.finished


def test_no_requester_left_cancels_and_clears_the_active_interceptor() -> None:
    request, pod = at_imperative()
    request["spec"]["requesters"] = []
    plan = plan_request(request, pod, T0, SETTINGS, imperative=ImperativeState(3))
    canceled = condition(plan, "Canceled")
    assert canceled["reason"] == "NoRequesters"
    assert plan.status is not None
    assert plan.status["activeInterceptors"] == []
    assert plan.status["processedInterceptors"] == [IMPERATIVE_INTERCEPTOR]
    assert plan.finished and not plan.evict and plan.imperative is None


def test_a_canceled_request_is_left_alone() -> None:
    request, pod = at_imperative()
    request["spec"]["requesters"] = []
    request = applied(request, plan_request(request, pod, T0, SETTINGS))
    request["spec"]["requesters"] = [{"name": "again.example.com"}]
    plan = plan_request(request, pod, T0 + SEC, SETTINGS)
    assert plan.status is None and not plan.evict and not plan.labels and plan.finished
    request["metadata"]["generation"] = 2
    plan = plan_request(request, pod, T0 + SEC, SETTINGS)
    assert plan.status is not None and plan.status["observedGeneration"] == 2
    assert not plan.evict


def test_evicted_wins_over_no_requesters() -> None:
    request, _ = at_imperative()
    request["spec"]["requesters"] = []
    plan = plan_request(request, None, T0, SETTINGS)
    assert condition(plan, "Evicted")["status"] == "True"


# --- interceptor turns -----------------------------------------------------------------------


def test_silent_interceptor_is_passed_over_after_the_deadline() -> None:
    pod = make_pod(annotations={INTERCEPTORS_ANNOTATION: "silent.example.com"})
    request = applied(make_request(), plan_request(make_request(), pod, T0, SETTINGS))
    plan = plan_request(request, pod, T0 + timedelta(minutes=20), SETTINGS)
    assert plan.status is not None
    assert plan.status["activeInterceptors"] == [IMPERATIVE_INTERCEPTOR]
    assert plan.status["processedInterceptors"] == ["silent.example.com"]
    assert plan.events[0].reason == "InterceptorTimedOut"
    assert "did not report within 20m" in plan.events[0].message
    # the imperative interceptor's turn is recorded first; it acts on the next pass
    assert not plan.evict and plan.requeue_after == 0.0
    request = applied(request, plan)
    assert plan_request(request, pod, T0 + timedelta(minutes=20), SETTINGS).evict


def test_activation_time_from_memory_when_the_status_lags() -> None:
    pod = make_pod(annotations={INTERCEPTORS_ANNOTATION: "a.example.com,b.example.com"})
    status = {
        "targetInterceptors": [
            {"name": "a.example.com"},
            {"name": "b.example.com"},
            {"name": IMPERATIVE_INTERCEPTOR},
        ],
        "activeInterceptors": ["b.example.com"],
        "processedInterceptors": ["a.example.com"],
    }
    request = make_request(status=status)
    later = T0 + timedelta(minutes=19)
    plan = plan_request(request, pod, later, SETTINGS, activated_at=T0)
    assert plan.status is None or plan.status["activeInterceptors"] == ["b.example.com"]
    assert plan.requeue_after == pytest.approx(60)
    # Nothing known at all: the turn counts from now, and that is recorded.
    plan = plan_request(request, pod, later, SETTINGS)
    assert plan.status is not None
    assert {"name": "b.example.com", "startTime": format_micro_time(later)} in plan.status[
        "interceptors"
    ]


# --- the imperative eviction -----------------------------------------------------------------


def test_imperative_evicts_then_writes_nothing_until_a_heartbeat_is_due() -> None:
    # The accepted eviction is no news worth a write: the pod's deletion follows (and with it
    # the request, which the pod owns). A pod slow to go gets heartbeats, with the message.
    request, pod = at_imperative()
    plan = plan_request(request, pod, T0 + SEC, SETTINGS)
    assert plan.evict
    plan = plan_request(request, pod, T0 + SEC, SETTINGS, outcome=EvictionOutcome("evicted"))
    assert not plan.evict and plan.status is None and plan.events == ()
    assert plan.imperative is not None and plan.imperative.evicted
    interval = timedelta(minutes=3)  # a quarter of the 20-minute deadline, at most 3 minutes
    assert plan.requeue_after == pytest.approx((interval - SEC).total_seconds())
    quiet = plan_request(request, pod, T0 + 2 * SEC, SETTINGS, imperative=plan.imperative)
    assert quiet.status is None and not quiet.evict
    due = plan_request(request, pod, T0 + interval, SETTINGS, imperative=plan.imperative)
    assert due.status is not None and not due.evict
    entry = due.status["interceptors"][0]
    assert entry["message"].startswith("Evicted the pod through the Eviction API")
    assert entry["heartbeatTime"] == format_micro_time(T0 + interval)
    assert entry["startTime"] == format_micro_time(T0)


def test_refusals_back_off_and_count() -> None:
    request, pod = at_imperative()
    state: ImperativeState | None = None
    now = T0
    delays = []
    for attempt in range(1, 5):
        plan = plan_request(request, pod, now, SETTINGS, imperative=state)
        assert plan.evict, attempt
        plan = plan_request(
            request,
            pod,
            now,
            SETTINGS,
            imperative=state,
            outcome=EvictionOutcome("refused", "429 TooManyRequests: budget"),
        )
        assert plan.status is not None
        message = plan.status["interceptors"][0]["message"]
        assert f"number of retries: {attempt}" in message
        assert "(last: 429 TooManyRequests: budget)" in message
        assert plan.requeue_after is not None
        delays.append(plan.requeue_after)
        state = plan.imperative
        assert state is not None and state.retries == attempt
        # not yet due: no call, just wait
        early = plan_request(request, pod, now + SEC / 2, SETTINGS, imperative=state)
        assert not early.evict
        request = applied(request, plan)
        now += timedelta(seconds=plan.requeue_after)
    assert delays == [1.0, 2.0, 4.0, 8.0]


def test_an_accepted_eviction_is_never_repeated() -> None:
    """Even when the status write after it was lost and the cache still shows the pod running."""
    request, pod = at_imperative()
    plan = plan_request(request, pod, T0, SETTINGS, outcome=EvictionOutcome("evicted"))
    state = plan.imperative
    assert state is not None and state.evicted
    for later in (T0 + SEC, T0 + 3600 * SEC):
        again = plan_request(request, pod, later, SETTINGS, imperative=state)
        assert not again.evict
    # said once a heartbeat is due
    assert again.status is not None
    message = again.status["interceptors"][0]["message"]
    assert message.startswith("Evicted the pod through the Eviction API")


def test_retry_count_continues_after_a_restart() -> None:
    request, pod = at_imperative(message="Could not evict ..., number of retries: 7")
    plan = plan_request(request, pod, T0, SETTINGS)
    assert plan.evict and plan.imperative == ImperativeState(7)
    assert plan.status is None  # nothing new to say
    plan = plan_request(request, pod, T0, SETTINGS, outcome=EvictionOutcome("refused", "x"))
    assert plan.imperative is not None and plan.imperative.retries == 8
    assert plan.requeue_after == 128.0


def test_backoff_is_capped() -> None:
    request, pod = at_imperative()
    settings = EvictionSettings(backoff_base=1.0, backoff_cap=900.0)
    plan = plan_request(
        request,
        pod,
        T0,
        settings,
        imperative=ImperativeState(30),
        outcome=EvictionOutcome("refused", "x"),
    )
    assert plan.requeue_after == 900.0


def test_terminating_pod_is_not_evicted() -> None:
    request, pod = at_imperative(make_pod(deletionTimestamp="2030-01-01T12:00:00Z"))
    plan = plan_request(request, pod, T0, SETTINGS)
    assert not plan.evict
    assert plan.status is not None
    assert "terminating" in plan.status["interceptors"][0]["message"]


@pytest.mark.parametrize(
    ("extra", "text"),
    [
        ({"annotations": {"kubernetes.io/config.mirror": "x"}}, "cannot remove mirror pods"),
        (
            {"ownerReferences": [{"kind": "DaemonSet", "name": "d", "controller": True}]},
            f"{DAEMONSET_INTERCEPTOR} removes them",
        ),
    ],
)
def test_mirror_and_daemonset_pods_are_not_evicted_and_it_says_so(
    extra: dict[str, Any], text: str
) -> None:
    request, pod = at_imperative(make_pod(**extra))
    plan = plan_request(request, pod, T0, SETTINGS)
    assert not plan.evict
    assert plan.status is not None
    message = plan.status["interceptors"][0]["message"]
    assert message.startswith("Not calling the Eviction API") and text in message


def test_gone_during_eviction_looks_again_soon() -> None:
    request, pod = at_imperative()
    plan = plan_request(request, pod, T0, SETTINGS, outcome=EvictionOutcome("gone", "404"))
    assert plan.requeue_after == 1.0 and not plan.finished


@given(
    st.lists(
        st.sampled_from(["evicted", "refused", "error", "gone", "tick"]), min_size=1, max_size=30
    )
)
def test_never_calls_the_api_before_the_backoff_ran_out(outcomes: list[str]) -> None:
    request, pod = at_imperative()
    state: ImperativeState | None = None
    now = T0
    not_before = T0
    for kind in outcomes:
        plan = plan_request(request, pod, now, SETTINGS, imperative=state)
        if plan.evict:
            assert now >= not_before
            if kind != "tick":
                plan = plan_request(
                    request,
                    pod,
                    now,
                    SETTINGS,
                    imperative=state,
                    outcome=EvictionOutcome(kind, "detail"),  # type: ignore[arg-type]
                )
        state = plan.imperative
        if state is not None and state.next_attempt is not None:
            not_before = max(not_before, state.next_attempt)
        request = applied(request, plan)
        assert EvictionRequestView.from_obj(request).active == IMPERATIVE_INTERCEPTOR
        now += SEC


# --- a disruption budget that allows nothing ----------------------------------------------------

HELD = BudgetGate("default/web", "7", room=0)


def test_a_budget_that_allows_nothing_is_said_in_the_activation_write() -> None:
    # One status write records the turn and what it waits for; no eviction is asked for.
    plan = plan_request(make_request(), make_pod(), T0, SETTINGS, gate=HELD)
    assert plan.status is not None and not plan.evict
    entry = plan.status["interceptors"][0]
    assert entry["startTime"] == format_micro_time(T0)
    assert entry["message"] == HELD.waiting_message()
    assert imperative_refusal_cause(entry["message"]) == "PodDisruptionBudget web"
    request = applied(make_request(), plan)
    # held: nothing more is written or called while the budget allows nothing
    again = plan_request(
        request, make_pod(), T0 + SEC, SETTINGS, imperative=plan.imperative, gate=HELD
    )
    assert again.status is None and not again.evict
    assert again.requeue_after is not None and again.requeue_after <= 10
    # room again (the budget's watch event): the eviction is asked for, nothing written first
    room = BudgetGate("default/web", "8", room=1)
    go = plan_request(
        request, make_pod(), T0 + 2 * SEC, SETTINGS, imperative=again.imperative, gate=room
    )
    assert go.evict and go.status is None


def test_once_evicted_the_request_says_so_at_once_not_at_its_next_heartbeat() -> None:
    """The pod's budget held it back, then let it go: its request no longer says it waits for
    the budget (nor does the maintenance's Blocked By, which reads it) while it terminates."""
    plan = plan_request(make_request(), make_pod(), T0, SETTINGS, gate=HELD)
    request = applied(make_request(), plan)
    room = BudgetGate("default/web", "8", room=1)
    go = plan_request(
        request, make_pod(), T0 + SEC, SETTINGS, imperative=plan.imperative, gate=room
    )
    assert go.evict
    done = plan_request(
        request,
        make_pod(),
        T0 + SEC,
        SETTINGS,
        imperative=plan.imperative,
        gate=room,
        outcome=EvictionOutcome("evicted"),
    )
    assert done.status is not None
    message = done.status["interceptors"][0]["message"]
    assert message.startswith("Evicted the pod through the Eviction API")
    assert imperative_refusal_cause(message) is None
    # the heartbeat stays where it was: only the message moved
    assert done.status["interceptors"][0]["heartbeatTime"] == format_micro_time(T0)


def test_a_held_eviction_is_asked_for_anyway_after_a_while() -> None:
    # The server is the authority: a budget event that never comes must not stall the drain.
    request, pod = at_imperative()
    held = plan_request(request, pod, T0, SETTINGS, gate=HELD)
    assert not held.evict and held.imperative is not None
    later = plan_request(
        request, pod, T0 + HELD_AT_MOST, SETTINGS, imperative=held.imperative, gate=HELD
    )
    assert later.evict


@given(seconds=st.floats(0, 9.99))
def test_held_back_means_no_call_before_the_interval(seconds: float) -> None:
    request, pod = at_imperative()
    held = plan_request(request, pod, T0, SETTINGS, gate=HELD)
    at = T0 + timedelta(seconds=seconds)
    plan = plan_request(request, pod, at, SETTINGS, imperative=held.imperative, gate=HELD)
    assert not plan.evict


def test_a_pod_that_owns_its_request_leaves_the_request_to_the_garbage_collector() -> None:
    request, _ = at_imperative()
    request["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": "web",
            "uid": request["spec"]["target"]["pod"]["uid"],
        }
    ]
    plan = plan_request(request, None, T0, SETTINGS)
    assert plan.finished and plan.status is None and plan.events == ()
    request, _ = at_imperative()  # not owned: the Evicted condition is written
    plan = plan_request(request, None, T0, SETTINGS)
    assert plan.finished and condition(plan, "Evicted")["reason"] == "PodDeleted"


def test_with_nobody_s_turn_stored_the_imperative_acts_at_once_and_writes_once() -> None:
    # A pod with no interceptor of its own: the turn, the eviction's outcome and the message
    # go in one status write (a pass to record the turn first would cost a write per pod).
    request, pod = make_request(), make_pod()
    first = plan_request(request, pod, T0, SETTINGS)
    assert first.evict
    done = plan_request(request, pod, T0, SETTINGS, outcome=EvictionOutcome("evicted"))
    assert done.status is not None and not done.evict
    assert done.status["activeInterceptors"] == [IMPERATIVE_INTERCEPTOR]
    [entry] = done.status["interceptors"]
    assert entry["startTime"] == format_micro_time(T0)
    assert entry["message"].startswith("Evicted the pod through the Eviction API")
    assert "heartbeatTime" not in entry  # the turn's start is its sign of life
    assert done.imperative is not None and done.imperative.evicted
    # nothing more until a heartbeat is due
    request = applied(request, done)
    later = plan_request(request, pod, T0 + 10 * SEC, SETTINGS, imperative=done.imperative)
    assert later.status is None and not later.evict


# --- a request only the eviction bridge made -------------------------------------------------


def test_a_request_only_the_bridge_made_is_left_to_the_callers_retry() -> None:
    # A review is no command: the caller's retried eviction goes through at this turn, never
    # one of ours; said in the entry, with heartbeats while the pod stays.
    request, pod = at_imperative()
    request["spec"]["requesters"] = [{"name": BRIDGE_REQUESTER}]
    plan = plan_request(request, pod, T0 + SEC, SETTINGS)
    assert not plan.evict and plan.status is not None
    entry = plan.status["interceptors"][0]
    assert entry["message"] == CALLER_EVICTS and "completionTime" not in entry
    interval = timedelta(minutes=3)  # heartbeats from its first report on
    assert entry["heartbeatTime"] == format_micro_time(T0 + SEC)
    assert plan.requeue_after == pytest.approx(interval.total_seconds())
    request = applied(request, plan)
    quiet = plan_request(request, pod, T0 + 2 * SEC, SETTINGS, imperative=plan.imperative)
    assert quiet.status is None and not quiet.evict
    due = plan_request(request, pod, T0 + SEC + interval, SETTINGS, imperative=plan.imperative)
    assert not due.evict and due.status is not None
    # a budget that allows nothing is not what it waits for
    held = plan_request(request, pod, T0 + 2 * SEC, SETTINGS, gate=HELD)
    assert not held.evict and held.status is None
    # the caller's eviction went through: the pod terminates
    terminating = make_pod(deletionTimestamp="2030-01-01T12:00:05Z")
    assert not plan_request(request, terminating, T0 + 6 * SEC, SETTINGS).evict
    # a maintenance joins: carried out as before
    request["spec"]["requesters"].append({"name": "nodemaintenance.k8s.io"})
    assert plan_request(request, pod, T0 + 3 * SEC, SETTINGS, imperative=plan.imperative).evict


def test_the_bridges_request_is_not_held_by_a_budget_at_its_turn() -> None:
    request = make_request(requesters=(BRIDGE_REQUESTER,))
    plan = plan_request(request, make_pod(), T0, SETTINGS, gate=HELD)
    assert plan.status is not None and not plan.evict
    assert plan.status["interceptors"][0]["message"] == CALLER_EVICTS
