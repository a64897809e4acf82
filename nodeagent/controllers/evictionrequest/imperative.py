"""The ``imperative-eviction.k8s.io`` interceptor's part of a plan (KEP "Eviction"), pure: when
to call the Eviction API, what came of the call, and what its entry in the request's status
says. It writes its entry when its message says something new to the requesters (a refusal, a
budget it waits for) and otherwise only when a heartbeat is due: an accepted eviction is not
worth a status write of its own, the pod's deletion follows."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from nodeagent.controllers.evictionrequest.plan import PlanBuilder
from nodeagent.controllers.settings import EvictionSettings
from nodeagent.model.bodies import Event
from nodeagent.model.budgets import BudgetGate
from nodeagent.model.drainplan import PodType, classify
from nodeagent.model.interceptors.heartbeats import (
    heartbeat_interval,
    next_heartbeat_in,
    report_progress,
)
from nodeagent.model.interceptors.imperative import (
    CALLER_EVICTS,
    HELD_AT_MOST,
    EvictionOutcome,
    ImperativeState,
    caller_evicts,
    eviction_backoff,
    imperative_refusal_cause,
    imperative_refusal_message,
    parse_retries,
)
from nodeagent.model.interceptors.status import InterceptorStatus
from nodeagent.model.names import DAEMONSET_INTERCEPTOR, IMPERATIVE_INTERCEPTOR, KUBELET_INTERCEPTOR
from nodeagent.model.podstate import pod_terminating

__all__ = ["imperative_turn"]


def imperative_turn(
    b: PlanBuilder,
    pod: Mapping[str, Any],
    settings: EvictionSettings,
    state: ImperativeState | None,
    outcome: EvictionOutcome | None,
    gate: BudgetGate | None,
) -> None:
    """The interceptor's turn: before the Eviction API call (``outcome`` None) or after it."""
    entry = b.entry(IMPERATIVE_INTERCEPTOR)
    if state is None:
        state = ImperativeState(retries=parse_retries(entry.message))
    b.imperative = state
    turn = _Turn(b, entry, settings)
    # A pod we evicted is terminating now: nothing to say until a heartbeat is due
    why_not = None if state.evicted and outcome is None else _not_evictable(pod)
    if why_not is not None:
        turn.report(why_not)
    elif outcome is None:
        _before_the_call(turn, state, gate)
    else:
        _after_the_call(turn, state, outcome)


@dataclass(frozen=True)
class _Turn:
    """The plan being made and the interceptor's entry as the request's status has it."""

    b: PlanBuilder
    entry: InterceptorStatus
    settings: EvictionSettings

    def report(self, message: str) -> None:
        s = self.settings
        update = report_progress(
            self.entry, message, self.b.now, s.heartbeat_deadline, s.heartbeat_min_interval
        )
        if update is not None:
            self.b.set_entry(update)

    def keep_alive(self, message: str) -> None:
        """Heartbeat (with ``message``) once one is due; before, write the message alone only
        to replace one that says the eviction is refused or held back."""
        b, entry, now = self.b, self.entry, self.b.now
        s = self.settings
        interval = heartbeat_interval(s.heartbeat_deadline, s.heartbeat_min_interval)
        last = entry.last_report
        if b.activation is not None and b.activation[1] == now:
            b.set_entry(replace(entry, message=message))
            b.wake_in(interval.total_seconds())
        elif last is None or now - last >= interval:
            b.set_entry(entry.heartbeat(now, message))
            b.wake_in(interval.total_seconds())
        else:
            if entry.message != message and imperative_refusal_cause(entry.message) is not None:
                # a refusal or a budget's hold is no longer true (evicted now): said at once;
                # any other message waits for the next heartbeat (no write per evicted pod)
                b.set_entry(replace(entry, message=message))
            b.wake_in((last + interval - now).total_seconds())


def _not_evictable(pod: Mapping[str, Any]) -> str | None:
    if pod_terminating(pod):
        return "The pod is terminating; it is not evicted again."
    pod_type = classify(pod).pod_type
    if pod_type is PodType.STATIC:
        return (
            "Not calling the Eviction API: it cannot remove mirror pods (the kubelet runs "
            f"static pods from their manifests; {KUBELET_INTERCEPTOR} stops them)."
        )
    if pod_type is PodType.DAEMONSET:
        return (
            "Not calling the Eviction API: it cannot keep DaemonSet pods off the node (their "
            f"DaemonSet recreates them; {DAEMONSET_INTERCEPTOR} removes them)."
        )
    return None


def _before_the_call(turn: _Turn, state: ImperativeState, gate: BudgetGate | None) -> None:
    """Call the Eviction API now, unless the pod is evicted already, its backoff runs, or a
    budget that allows nothing holds it back."""
    b, now = turn.b, turn.b.now
    if state.evicted:
        turn.keep_alive(state.message)
        return
    if caller_evicts(b.view.requesters):
        _callers_turn(turn, state)
        return
    if state.next_attempt is not None and now < state.next_attempt:
        if state.message:
            turn.report(state.message)
        b.wake_in((state.next_attempt - now).total_seconds())
        return
    held_since = state.held_since or now
    if gate is not None and gate.room == 0 and now - held_since < HELD_AT_MOST:
        # The budget's next change wakes this request; should it not come (or the
        # server see it otherwise), the Eviction API is asked after HELD_AT_MOST.
        message = gate.waiting_message()
        b.imperative = replace(state, held_since=held_since, message=message)
        if turn.entry.message != message:
            turn.report(message)
        b.wake_in((held_since + HELD_AT_MOST - now).total_seconds())
        return
    b.evict = True


def _callers_turn(turn: _Turn, state: ImperativeState) -> None:
    """Only the bridge asked: no call; said, and heartbeats until the pod goes (the caller's
    eviction) or another requester joins (then the eviction is carried out)."""
    b, s = turn.b, turn.settings
    b.imperative = replace(state, message=CALLER_EVICTS, held_since=None)
    turn.report(CALLER_EVICTS)
    entry = b.entry(IMPERATIVE_INTERCEPTOR)
    b.wake_in(next_heartbeat_in(entry, b.now, s.heartbeat_deadline, s.heartbeat_min_interval))


def _after_the_call(turn: _Turn, state: ImperativeState, outcome: EvictionOutcome) -> None:
    b = turn.b
    if outcome.kind == "evicted":
        after = f" after {state.retries} refused attempts" if state.retries else ""
        message = f"Evicted the pod through the Eviction API{after}; waiting for it to terminate."
        b.imperative = ImperativeState(state.retries, message=message, evicted=True)
        turn.keep_alive(message)
    elif outcome.kind == "gone":
        # 404, or a 409 for a pod replaced under the same name: no point in calling again.
        message = "The pod was gone when the Eviction API was called."
        turn.report(message)
        b.imperative = ImperativeState(state.retries, message=message, evicted=True)
        b.wake_in(1.0)
    else:
        _refused(turn, state, outcome)


def _refused(turn: _Turn, state: ImperativeState, outcome: EvictionOutcome) -> None:
    """Refused (or failed): try again after a backoff."""
    b, s = turn.b, turn.settings
    retries = state.retries + 1
    delay = eviction_backoff(retries, s.backoff_base, s.backoff_cap)
    message = imperative_refusal_message(retries, outcome.detail)
    b.imperative = ImperativeState(retries, b.now + timedelta(seconds=delay), message)
    turn.report(message)
    b.wake_in(delay)
    if state.retries == 0:
        # On the pod: its owner learns what holds it (a budget, say). Said once per request:
        # held back by a budget first, a pod is refused only after waiting a heartbeat interval.
        b.events.append(
            Event(
                "Warning",
                "EvictionRefused",
                f"Eviction of pod {b.pod_ref} refused; retrying with backoff: {outcome.detail}",
                on_pod=True,
            )
        )
