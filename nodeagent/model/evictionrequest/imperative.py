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

from nodeagent.model.bodies import Event
from nodeagent.model.budgets import BudgetGate
from nodeagent.model.evictionrequest.plan import PlanBuilder
from nodeagent.model.interceptors.heartbeats import (
    heartbeat_interval,
    next_heartbeat_in,
    report_progress,
)
from nodeagent.model.interceptors.imperative import (
    EvictionOutcome,
    ImperativeState,
    imperative_refusal_cause,
    parse_retries,
)
from nodeagent.model.interceptors.imperative_turn import (
    Step,
    after_the_call,
    before_the_call,
    not_evicted,
)
from nodeagent.model.interceptors.settings import EvictionSettings
from nodeagent.model.interceptors.status import InterceptorStatus
from nodeagent.model.names import IMPERATIVE_INTERCEPTOR
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
    if outcome is not None:
        backoff = (settings.backoff_base, settings.backoff_cap)
        _after_the_call(turn, after_the_call(state, outcome, backoff, b.now), outcome)
    elif state.evicted:
        # a pod we evicted is terminating now: nothing to say until a heartbeat is due
        turn.keep_alive(state.message)
    elif (why_not := _not_evictable(pod)) is not None:
        turn.report(why_not)
    else:
        _before_the_call(turn, before_the_call(state, b.view.requesters, gate, b.now))


@dataclass(frozen=True)
class _Turn:
    """The plan being made and the interceptor's entry as the request's status has it."""

    b: PlanBuilder
    entry: InterceptorStatus
    settings: EvictionSettings

    @property
    def every(self) -> timedelta:
        """How often the interceptor heartbeats."""
        s = self.settings
        return heartbeat_interval(s.heartbeat_deadline, s.heartbeat_min_interval)

    def report(self, message: str) -> None:
        update = report_progress(self.entry, message, self.b.now, self.every)
        if update is not None:
            self.b.set_entry(update)

    def keep_alive(self, message: str) -> None:
        """Heartbeat (with ``message``) once one is due; before, write the message alone only
        to replace one that says the eviction is refused or held back."""
        b, entry, now = self.b, self.entry, self.b.now
        interval = self.every
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
    return not_evicted(pod, name_who_does=True)


def _before_the_call(turn: _Turn, step: Step) -> None:
    b = turn.b
    if step.kind == "call":
        b.evict = True
        return
    b.imperative = step.state
    if step.kind == "caller":
        # only the bridge asked: said, and heartbeats until the pod goes (the caller's
        # eviction) or another requester joins (then the eviction is carried out)
        turn.report(step.message)
        b.wake_in(next_heartbeat_in(b.entry(IMPERATIVE_INTERCEPTOR), b.now, turn.every))
        return
    if step.message and (step.kind == "backoff" or turn.entry.message != step.message):
        turn.report(step.message)
    assert step.wait is not None
    b.wake_in(step.wait)


def _after_the_call(turn: _Turn, step: Step, outcome: EvictionOutcome) -> None:
    b = turn.b
    b.imperative = step.state
    if step.kind == "evicted":
        turn.keep_alive(step.message)
        return
    turn.report(step.message)
    if step.kind == "gone":
        b.wake_in(1.0)
        return
    assert step.wait is not None
    b.wake_in(step.wait)
    if step.state.retries == 1:
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
