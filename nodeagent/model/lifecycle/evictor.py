"""The `imperative-eviction.k8s.io/evictor` responder's turn on an upstream Eviction, pure:
whether to call the policy/v1 Eviction API now, and what its entry in `status.responders` says.

The turn itself is the CRD's imperative interceptor's (`model.interceptors.imperative_turn`):
the call is budget-aware (held back while the cached budget allows nothing, at most
HELD_AT_MOST), a refusal is retried after a backoff doubling up to `eviction.backoffCap` and
counted in the message, and DaemonSet and mirror pods are not evicted (the API cannot keep them
off the node): the evictor completes at once saying so. Once the server accepted the eviction
it stays Active while the pod terminates, as upstream's: heartbeats, `expectedCompletionTime`
the pod's `deletionTimestamp`, and it completes as the pod is gone or terminal, whoever ended
it.

Writes are few (each is a status patch of the Eviction): what it says after the call waits for
the pod's `deletionTimestamp` (one write with `expectedCompletionTime`, not two), and its
completion as the pod ends (`ends_with_pod`) is not written where the garbage collector removes
the Eviction with the pod's requests. (It cannot ride on the controller's write of the
Eviction's end: the server keeps a responder's entry as it was once it is no longer Active.)"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from nodeagent.model.bodies import Obj, items, mapping, metadata_of
from nodeagent.model.budgets import BudgetGate
from nodeagent.model.interceptors.heartbeats import heartbeat_interval
from nodeagent.model.interceptors.imperative import (
    EvictionOutcome,
    ImperativeState,
    parse_retries,
)
from nodeagent.model.interceptors.imperative_turn import (
    Step,
    after_the_call,
    before_the_call,
    evicted_message,
    not_evicted,
)
from nodeagent.model.lifecycle.eviction import SERVER_HEARTBEAT_DEADLINE
from nodeagent.model.names import IMPERATIVE_RESPONDER
from nodeagent.model.podstate import pod_phase, pod_terminal, pod_terminating
from nodeagent.model.times import format_time, parse_time

__all__ = ["EvictorTurn", "active_evictor", "evictor_turn", "requesters_of", "with_entry"]

# the server asks responders not to heartbeat more often than every 20 s; a quarter of its
# deadline, at most 3 minutes, as our interceptors do
_HEARTBEAT = heartbeat_interval(SERVER_HEARTBEAT_DEADLINE, timedelta(seconds=20))


@dataclass(frozen=True)
class EvictorTurn:
    call: bool = False
    """Call the Eviction API for the pod (its UID as precondition), then decide again with
    the outcome."""
    entry: Obj | None = None
    """The evictor's whole new `status.responders` entry, or None when it does not change."""
    state: ImperativeState | None = None
    requeue_after: float | None = None
    ends_with_pod: bool = False
    """`entry` completes the turn as the pod is gone or terminal: needless where the pod's
    requests, and the Eviction with them, are collected."""


def active_evictor(eviction: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The evictor's `status.responders` entry while it is the Active responder."""
    status = mapping(eviction, "status")
    active = any(
        t.get("name") == IMPERATIVE_RESPONDER and t.get("state") == "Active"
        for t in items(status, "targetResponders")
        if isinstance(t, Mapping)
    )
    if not active:
        return None
    return next(
        (r for r in items(status, "responders") if r.get("name") == IMPERATIVE_RESPONDER), None
    )


def with_entry(eviction: Mapping[str, Any], entry: Mapping[str, Any]) -> Obj:
    """`eviction` with `entry` as the evictor's `status.responders` entry."""
    status = mapping(eviction, "status")
    responders = [
        dict(entry) if r.get("name") == IMPERATIVE_RESPONDER else r
        for r in items(status, "responders")
    ]
    return {**eviction, "status": {**status, "responders": responders}}


def requesters_of(eviction: Mapping[str, Any]) -> tuple[str, ...]:
    """The requesters that want `eviction` (intent Eviction), as its controller wrote them."""
    return tuple(
        str(r.get("name"))
        for r in items(mapping(eviction, "status"), "requesters")
        if r.get("intent") == "Eviction"
    )


def evictor_turn(
    entry: Mapping[str, Any],
    pod: Mapping[str, Any] | None,
    target_uid: str,
    state: ImperativeState | None,
    outcome: EvictionOutcome | None,
    gate: BudgetGate | None,
    backoff: tuple[float, float],
    now: datetime,
    requesters: Sequence[str] = (),
) -> EvictorTurn:
    """The Active evictor's turn, before the call (`outcome` None) or after it. `backoff`:
    `eviction.backoffBase` and `eviction.backoffCap`; `requesters`: those that want the
    eviction (:func:`requesters_of`): only the bridge's, and the Eviction API is not called
    (:func:`nodeagent.model.interceptors.imperative.caller_evicts`)."""
    ask = _Ask(entry, pod, target_uid, state, outcome, gate, backoff, now, tuple(requesters))
    turn = _turn(ask)
    if turn.entry is not None and turn.entry == dict(entry):
        return replace(turn, entry=None)
    return turn


class _Ask(NamedTuple):
    entry: Mapping[str, Any]
    pod: Mapping[str, Any] | None
    target_uid: str
    state: ImperativeState | None
    outcome: EvictionOutcome | None
    gate: BudgetGate | None
    backoff: tuple[float, float]
    now: datetime
    requesters: tuple[str, ...]


def _turn(ask: _Ask) -> EvictorTurn:
    entry, pod, state, outcome, now = ask.entry, ask.pod, ask.state, ask.outcome, ask.now
    if state is None:
        state = ImperativeState(retries=parse_retries(str(entry.get("message", ""))))
    if entry.get("completionTime"):
        return EvictorTurn(state=state)  # the controller moves it on
    # as upstream's evictor: done once the pod is, whoever ended it (said again while a
    # completion lost to a 409 against the controller's write leaves it Active)
    if pod is None or metadata_of(pod).get("uid") != ask.target_uid:
        gone = _ended(state, "the pod is gone")
        return _ends_with_pod(entry, gone, state, now)
    if pod_terminal(pod):
        ended = _ended(state, f"the pod reached phase {pod_phase(pod)}")
        return _ends_with_pod(entry, ended, state, now)
    if state.evicted and not pod_terminating(pod):
        # the pod's update (its deletionTimestamp) is a moment away: said then, with when it
        # is expected to end, in one write
        return EvictorTurn(state=state)
    if state.evicted or pod_terminating(pod):
        # the pod terminates: Active until it is gone, as upstream's (its message says who
        # ended it: this eviction, or someone else's deletion)
        said = state.message if state.evicted else "The pod is terminating."
        return _keep_alive(entry, replace(state, message=said), now, _deleted_at(pod, now))
    if (why := not_evicted(pod)) is not None:
        return EvictorTurn(entry=_report(entry, why, now, done=True), state=state)
    if outcome is not None:
        return _after_the_call(entry, after_the_call(state, outcome, ask.backoff, now), now)
    step = before_the_call(state, ask.requesters, ask.gate, now)
    if step.kind == "call":
        return EvictorTurn(call=True, state=step.state)
    if step.kind == "held":
        entry_ = _report(entry, step.message, now)
        return EvictorTurn(entry=entry_, state=step.state, requeue_after=step.wait)
    # the caller's turn, or a backoff: heartbeats go on meanwhile (the cap is 15 minutes)
    kept = _keep_alive(entry, step.state, now)
    if step.wait is None:
        return kept
    return replace(kept, requeue_after=min(step.wait, kept.requeue_after or step.wait))


def _ended(state: ImperativeState, how: str) -> str:
    """What the evictor says as the pod ends: that it evicted it, if it did."""
    if state.gone:
        return state.message
    if state.evicted:
        return evicted_message(state.retries, how)
    return f"{how[0].upper()}{how[1:]}."


def _ends_with_pod(
    entry: Mapping[str, Any], message: str, state: ImperativeState, now: datetime
) -> EvictorTurn:
    out = _report(entry, message, now, done=True)
    return EvictorTurn(entry=out, state=state, ends_with_pod=True)


def _after_the_call(entry: Mapping[str, Any], step: Step, now: datetime) -> EvictorTurn:
    if step.kind == "evicted":
        return EvictorTurn(state=step.state)  # said as the pod shows it terminates (above)
    if step.kind == "gone":
        return _ends_with_pod(entry, step.message, step.state, now)
    out = _report(entry, step.message, now)
    return EvictorTurn(entry=out, state=step.state, requeue_after=step.wait)


def _keep_alive(
    entry: Mapping[str, Any],
    state: ImperativeState,
    now: datetime,
    expected: datetime | None = None,
) -> EvictorTurn:
    """Say `state.message` (and `expected` as `expectedCompletionTime`) with a heartbeat, or
    when one is due; look again then."""
    wait = _until_heartbeat(entry, now)
    said = entry.get("message") == state.message
    if wait > 0 and said and (expected is None or _expected(entry) is not None):
        return EvictorTurn(state=state, requeue_after=wait)
    out = _report(entry, state.message, now)
    if expected is not None and _expected(entry) is None:
        out["expectedCompletionTime"] = format_time(expected)
    return EvictorTurn(entry=out, state=state, requeue_after=wait if wait > 0 else None)


def _deleted_at(pod: Mapping[str, Any], now: datetime) -> datetime | None:
    """When the terminating pod's grace period ends, if it is still ahead (the server refuses
    an `expectedCompletionTime` in the past)."""
    at = parse_time(metadata_of(pod).get("deletionTimestamp"))
    return at if at is not None and at > now else None


def _expected(entry: Mapping[str, Any]) -> datetime | None:
    return parse_time(entry.get("expectedCompletionTime"))


def _report(entry: Mapping[str, Any], message: str, now: datetime, done: bool = False) -> Obj:
    """`entry` with `message`, a heartbeat when one is due, and `completionTime` when done."""
    out = dict(entry)
    out["message"] = message
    if done or _until_heartbeat(entry, now) <= 0:
        out["heartbeatTime"] = format_time(now)
    if done:
        out["completionTime"] = format_time(now)
    return out


def _until_heartbeat(entry: Mapping[str, Any], now: datetime) -> float:
    last = parse_time(entry.get("heartbeatTime")) or parse_time(entry.get("startTime")) or now
    return (last + _HEARTBEAT - now).total_seconds()
