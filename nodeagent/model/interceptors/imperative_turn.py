"""The imperative eviction's turn, whichever API it answers on, pure: whether to call the
Eviction API now (the bridge's requests are the caller's, a backoff runs, a budget that allows
nothing holds it back), what came of a call, and which pods it never evicts. Our CRD's
interceptor (`controllers.evictionrequest.imperative`) and the upstream evictor
(`model.lifecycle.evictor`) each turn a :class:`Step` into their own status entry."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Literal

from nodeagent.model.budgets import BudgetGate
from nodeagent.model.drainplan import PodType, classify
from nodeagent.model.interceptors.imperative import (
    CALLER_EVICTS,
    HELD_AT_MOST,
    EvictionOutcome,
    ImperativeState,
    caller_evicts,
    eviction_backoff,
    imperative_refusal_message,
)
from nodeagent.model.names import DAEMONSET_INTERCEPTOR, KUBELET_INTERCEPTOR

__all__ = ["Step", "after_the_call", "before_the_call", "evicted_message", "not_evicted"]


@dataclass(frozen=True)
class Step:
    """``call``: call the Eviction API now; ``caller``: only the bridge asked (the caller's
    retried eviction goes through); ``backoff``: a refusal's backoff runs; ``held``: a budget
    that allows nothing holds the call back; after a call ``evicted``, ``gone`` or
    ``refused``. `message` is what to say, `wait` seconds until the next look (None: an
    event brings it)."""

    kind: Literal["call", "caller", "backoff", "held", "evicted", "gone", "refused"]
    state: ImperativeState
    message: str = ""
    wait: float | None = None


def before_the_call(
    state: ImperativeState, requesters: Iterable[str], gate: BudgetGate | None, now: datetime
) -> Step:
    """The turn of a pod that may be evicted and was not yet."""
    if caller_evicts(requesters):
        return Step("caller", replace(state, message=CALLER_EVICTS, held_since=None), CALLER_EVICTS)
    if state.next_attempt is not None and now < state.next_attempt:
        return Step("backoff", state, state.message, (state.next_attempt - now).total_seconds())
    held_since = state.held_since or now
    if gate is not None and gate.room == 0 and now - held_since < HELD_AT_MOST:
        # the budget's next change wakes this pod; should it not come (or the server see it
        # otherwise), the Eviction API is asked after HELD_AT_MOST
        message = gate.waiting_message()
        wait = (held_since + HELD_AT_MOST - now).total_seconds()
        return Step("held", replace(state, held_since=held_since, message=message), message, wait)
    return Step("call", state)


def after_the_call(
    state: ImperativeState, outcome: EvictionOutcome, backoff: tuple[float, float], now: datetime
) -> Step:
    """What the Eviction API's answer makes of the turn; `backoff`: `eviction.backoffBase` and
    `eviction.backoffCap`."""
    if outcome.kind == "evicted":
        message = evicted_message(state.retries, "waiting for it to terminate")
        evicted = ImperativeState(state.retries, message=message, evicted=True)
        return Step("evicted", evicted, message)
    if outcome.kind == "gone":
        # 404, or a 409 for a pod replaced under the same name: no point in calling again
        message = "The pod was gone when the Eviction API was called."
        done = ImperativeState(state.retries, message=message, evicted=True, gone=True)
        return Step("gone", done, message)
    retries = state.retries + 1
    delay = eviction_backoff(retries, *backoff)
    message = imperative_refusal_message(retries, outcome.detail)
    refused = ImperativeState(retries, now + timedelta(seconds=delay), message)
    return Step("refused", refused, message, delay)


def evicted_message(retries: int, then: str) -> str:
    after = f" after {retries} refused attempts" if retries else ""
    return f"Evicted the pod through the Eviction API{after}; {then}."


def not_evicted(pod: Mapping[str, Any], *, name_who_does: bool = False) -> str | None:
    """Why the Eviction API is not called for `pod` (it cannot keep it off the node), or None;
    `name_who_does`: say which of our interceptors removes it instead (on our CRD, where they
    take their turns before)."""
    pod_type = classify(pod).pod_type
    if pod_type is PodType.STATIC:
        who = f"; {KUBELET_INTERCEPTOR} stops them" if name_who_does else ""
        return (
            "Not calling the Eviction API: it cannot remove mirror pods (the kubelet runs "
            f"static pods from their manifests{who})."
        )
    if pod_type is PodType.DAEMONSET:
        who = f"; {DAEMONSET_INTERCEPTOR} removes them" if name_who_does else ""
        return (
            "Not calling the Eviction API: it cannot keep DaemonSet pods off the node (their "
            f"DaemonSet recreates them{who})."
        )
    return None
