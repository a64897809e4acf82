"""The imperative evictor's turn on an upstream Eviction (nodeagent.model.lifecycle.evictor)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from nodeagent.model.budgets import BudgetGate
from nodeagent.model.interceptors.imperative import (
    CALLER_EVICTS,
    HELD_AT_MOST,
    EvictionOutcome,
    ImperativeState,
)
from nodeagent.model.lifecycle.evictor import (
    active_evictor,
    evictor_turn,
    requesters_of,
    with_entry,
)
from nodeagent.model.names import IMPERATIVE_RESPONDER
from nodeagent.model.times import format_time

T0 = datetime(2026, 11, 27, 10, 0, tzinfo=UTC)
UID = "3c1b2a9e-0000-4000-8000-000000000001"
BACKOFF = (1.0, 8.0)
ENTRY = {"name": IMPERATIVE_RESPONDER, "startTime": format_time(T0)}


def pod(**metadata: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "web-0", "namespace": "default", "uid": UID, **metadata},
        "spec": {},
        "status": {"phase": "Running"},
    }


def turn(entry: dict[str, Any] = ENTRY, p: Any = None, **kw: Any) -> Any:
    args: dict[str, Any] = {"state": None, "outcome": None, "gate": None, "now": T0}
    args.update(kw)
    return evictor_turn(entry, pod() if p is None else p, UID, backoff=BACKOFF, **args)


def test_its_entry_only_while_it_is_the_active_responder() -> None:
    status: dict[str, Any] = {
        "targetResponders": [{"name": IMPERATIVE_RESPONDER, "priority": 100, "state": "Inactive"}],
        "responders": [ENTRY],
    }
    assert active_evictor({"status": status}) is None
    status["targetResponders"][0]["state"] = "Active"
    assert active_evictor({"status": status}) == ENTRY


def test_it_calls_stays_active_while_the_pod_terminates_and_completes_when_it_is_gone() -> None:
    """As upstream's evictor: the server's acceptance is not the end; the pod's end is."""
    first = turn()
    assert first.call and first.entry is None
    after = turn(state=first.state, outcome=EvictionOutcome("evicted"))
    # nothing written yet: said as the pod shows its deletionTimestamp, in one write
    assert after.entry is None and after.state.evicted and after.requeue_after is None
    said = "Evicted the pod through the Eviction API; waiting for it to terminate."
    assert after.state.message == said
    assert turn(state=after.state).entry is None  # another event, the pod not yet updated
    # never evicted again while it terminates; expected to end with its grace period
    soon = T0 + timedelta(seconds=1)
    terminating = pod(deletionTimestamp=format_time(T0 + timedelta(seconds=30)))
    ends = turn(ENTRY, p=terminating, state=after.state, now=soon)
    assert not ends.call and "completionTime" not in ends.entry
    assert ends.entry["expectedCompletionTime"] == format_time(T0 + timedelta(seconds=30))
    assert ends.entry["message"] == said and not ends.ends_with_pod
    quiet = turn(ends.entry, p=terminating, state=ends.state, now=soon)
    assert quiet.entry is None and quiet.requeue_after is not None
    gone = evictor_turn(ends.entry, None, UID, ends.state, None, None, BACKOFF, soon)
    assert gone.entry is not None and gone.ends_with_pod
    assert gone.entry["completionTime"] == format_time(soon)
    assert gone.entry["message"] == "Evicted the pod through the Eviction API; the pod is gone."


def test_a_pod_gone_before_the_call_ends_the_turn_with_the_pod() -> None:
    gone = turn(state=turn().state, outcome=EvictionOutcome("gone"))
    assert gone.ends_with_pod and gone.entry["completionTime"] == format_time(T0)
    assert gone.entry["message"] == "The pod was gone when the Eviction API was called."


def test_the_evictors_entry_replaces_its_own_only() -> None:
    other = {"name": "example.com/other", "startTime": format_time(T0)}
    status = {"responders": [other, ENTRY]}
    eviction: dict[str, Any] = {"metadata": {"name": "pod-1-web-0"}, "status": status}
    done = {**ENTRY, "completionTime": format_time(T0)}
    assert with_entry(eviction, done)["status"]["responders"] == [other, done]
    assert eviction["status"]["responders"] == [other, ENTRY]  # a copy


def test_a_terminating_pod_past_its_grace_period_gets_no_expected_time() -> None:
    """The server refuses an expectedCompletionTime in the past (a finalizer keeps the pod)."""
    late = pod(deletionTimestamp=format_time(T0 - timedelta(minutes=5)))
    kept = turn(p=late)
    assert "expectedCompletionTime" not in kept.entry and "completionTime" not in kept.entry


def test_an_eviction_whose_report_was_lost_is_reported_again() -> None:
    after = turn(state=turn().state, outcome=EvictionOutcome("evicted"))
    # the write lost to a 409: the entry is still the old one, the pod terminating
    later = T0 + timedelta(seconds=2)
    terminating = pod(deletionTimestamp=format_time(T0))
    again = turn(ENTRY, p=terminating, state=after.state, now=later)
    assert not again.call and "completionTime" not in again.entry
    assert again.entry["message"] == after.state.message


def test_a_refusal_is_counted_and_retried_after_a_doubling_backoff() -> None:
    refused = EvictionOutcome("refused", "429 Too Many Requests: budget web")
    one = turn(outcome=refused)
    assert one.requeue_after == 1.0 and not one.call
    assert "number of retries: 1" in one.entry["message"]
    assert "completionTime" not in one.entry
    soon = turn(state=one.state, now=T0 + timedelta(seconds=0.5))
    assert not soon.call and soon.requeue_after == 0.5
    later = turn(state=one.state, now=T0 + timedelta(seconds=1))
    assert later.call
    two = turn(state=one.state, outcome=refused, now=T0 + timedelta(seconds=1))
    assert two.requeue_after == 2.0 and "number of retries: 2" in two.entry["message"]


def test_a_new_leader_picks_the_retry_count_up_from_the_message() -> None:
    refused = EvictionOutcome("refused", "429")
    one = turn(outcome=refused)
    fresh = turn(one.entry, state=None, outcome=refused)
    assert "number of retries: 2" in fresh.entry["message"]


def test_a_budget_that_allows_nothing_holds_the_call_back_a_while() -> None:
    gate = BudgetGate("default/web", "7", room=0)
    held = turn(gate=gate)
    assert not held.call and held.requeue_after == HELD_AT_MOST.total_seconds()
    assert held.entry["message"].startswith("Waiting for disruption budget web")
    assert turn(state=held.state, gate=gate, now=T0 + HELD_AT_MOST).call


def test_daemonset_and_mirror_pods_are_not_evicted() -> None:
    ds = pod(ownerReferences=[{"kind": "DaemonSet", "name": "agent", "controller": True}])
    done = turn(p=ds)
    assert not done.call and done.entry["completionTime"] == format_time(T0)
    assert "DaemonSet" in done.entry["message"]
    mirror = pod(annotations={"kubernetes.io/config.mirror": "abc"})
    assert "mirror pods" in turn(p=mirror).entry["message"]


def test_heartbeats_are_spaced_while_a_terminating_pod_ends() -> None:
    terminating = pod(deletionTimestamp=format_time(T0))
    first = turn(p=terminating)
    assert first.entry == {**ENTRY, "message": "The pod is terminating."}  # started just now
    again = turn(first.entry, p=terminating, state=first.state, now=T0 + timedelta(seconds=30))
    assert again.entry is None and again.requeue_after == 150.0  # every 3 minutes
    due = T0 + timedelta(minutes=3)
    beat = turn(first.entry, p=terminating, state=first.state, now=due)
    assert beat.entry["heartbeatTime"] == format_time(due)


def test_done_once_the_pod_is_gone_replaced_or_terminal_and_nothing_after_completion() -> None:
    """As upstream's evictor: it completes when the pod ends, whoever ended it (the controller
    then marks it Completed rather than Interrupted)."""
    gone = evictor_turn(ENTRY, None, UID, None, None, None, BACKOFF, T0)
    assert not gone.call and gone.entry is not None
    assert gone.entry["completionTime"] == format_time(T0)
    assert gone.entry["message"] == "The pod is gone."
    other = turn(p=pod(uid="another"))
    assert not other.call and other.entry is not None and other.entry["completionTime"]
    terminal = turn(p={**pod(), "status": {"phase": "Succeeded"}})
    assert not terminal.call and terminal.entry is not None
    assert terminal.entry["message"] == "The pod reached phase Succeeded."
    done = {**ENTRY, "completionTime": format_time(T0)}
    assert turn(done, state=ImperativeState()).entry is None
    assert evictor_turn(done, None, UID, ImperativeState(), None, None, BACKOFF, T0).entry is None


def test_an_unwritten_completion_is_written_even_once_the_pod_is_gone() -> None:
    """Its first write lost to the controller's (a 409), the pod then ended: it still says it
    evicted the pod, not that it found the pod gone."""
    evicted = turn(outcome=EvictionOutcome("evicted", ""))
    again = evictor_turn(ENTRY, None, UID, evicted.state, None, None, BACKOFF, T0)
    assert again.entry is not None and again.entry["message"].startswith("Evicted the pod")
    assert again.ends_with_pod


def test_heartbeats_go_on_while_a_long_backoff_runs() -> None:
    refused = EvictionOutcome("refused", "429")
    state = ImperativeState(retries=9)
    one = turn(state=state, outcome=refused)  # the tenth refusal: 8 s (the cap here)
    assert one.requeue_after == 8.0
    entry = {**one.entry, "heartbeatTime": format_time(T0 - timedelta(minutes=3))}
    due = turn(entry, state=one.state, now=T0 + timedelta(seconds=1))
    assert due.entry["heartbeatTime"] == format_time(T0 + timedelta(seconds=1))
    assert due.requeue_after == 7.0 and not due.call


def test_a_request_only_the_bridge_made_is_left_to_the_callers_retry() -> None:
    bridge_only = ("nodeagent.io/eviction-bridge",)
    waiting = turn(requesters=bridge_only)
    assert not waiting.call
    assert waiting.entry["message"] == CALLER_EVICTS
    assert "completionTime" not in waiting.entry
    # said once; then nothing until a heartbeat is due, when it says it again
    said = turn(waiting.entry, state=waiting.state, requesters=bridge_only)
    assert not said.call and said.entry is None and said.requeue_after > 0
    later = T0 + timedelta(seconds=said.requeue_after)
    beat = turn(waiting.entry, state=waiting.state, requesters=bridge_only, now=later)
    assert not beat.call and beat.entry["heartbeatTime"] == format_time(later)
    # a budget that allows nothing changes nothing of it
    held = turn(requesters=bridge_only, gate=BudgetGate("default/db", "1", 0))
    assert not held.call and held.entry["message"] == CALLER_EVICTS
    # a maintenance joins: carried out as usual
    both = turn(waiting.entry, state=waiting.state, requesters=(*bridge_only, "nodeagent.io/x"))
    assert both.call


def test_the_requesters_that_want_the_eviction() -> None:
    status = {
        "requesters": [
            {"name": "nodeagent.io/eviction-bridge", "intent": "Eviction"},
            {"name": "nodeagent.io/node-maintenance", "intent": "Withdrawn"},
        ]
    }
    assert requesters_of({"status": status}) == ("nodeagent.io/eviction-bridge",)
