"""The eviction request controller's decisions (KEP-4563 "Eviction Request Controller"), pure.

:func:`plan_request` takes one EvictionRequest, the pod of its target's name (or None), the time
and the in-memory retry state of the imperative eviction, and returns a :class:`Plan`: the status
to write, labels to set, whether to call the Eviction API, when to look again.
When the plan says ``evict``, the controller calls the API and asks again with the
:class:`EvictionOutcome`, which yields the final plan.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Literal

from nodeagent.controllers.settings import EvictionSettings
from nodeagent.model.bodies import Event, EventType, set_condition, uid_of
from nodeagent.model.budgets import BudgetGate
from nodeagent.model.drainplan import PodType, classify
from nodeagent.model.interceptors.heartbeats import heartbeat_interval, report_progress
from nodeagent.model.interceptors.imperative import (
    eviction_backoff,
    imperative_refusal_message,
    parse_retries,
)
from nodeagent.model.interceptors.requests import CANCELED, EVICTED, EvictionRequestView
from nodeagent.model.interceptors.status import InterceptorStatus, with_interceptor_status
from nodeagent.model.interceptors.targets import (
    InvalidInterceptors,
    default_interceptors,
    target_interceptors,
)
from nodeagent.model.interceptors.turns import Selection, select_active
from nodeagent.model.names import (
    DAEMONSET_INTERCEPTOR,
    IMPERATIVE_INTERCEPTOR,
    KUBELET_INTERCEPTOR,
    NODE_LABEL,
)
from nodeagent.model.podstate import pod_phase, pod_terminal, pod_terminating

__all__ = [
    "HELD_AT_MOST",
    "EventType",
    "EvictionOutcome",
    "ImperativeState",
    "Plan",
    "plan_request",
]


@dataclass(frozen=True)
class ImperativeState:
    """The imperative eviction's retry state for one request, kept in memory by the controller
    (the retry count is also in the interceptor's message, where a new leader picks it up)."""

    retries: int = 0
    next_attempt: datetime | None = None
    message: str = ""
    """The last message, written again should its first write have been lost."""
    evicted: bool = False
    """The Eviction API accepted: the pod is on its way out and is never evicted again."""
    held_since: datetime | None = None
    """Since when a disruption budget that allows nothing has held the eviction back
    (:mod:`nodeagent.model.budgets`); None while it does not."""


@dataclass(frozen=True)
class EvictionOutcome:
    """What the Eviction API answered. ``gone``: 404, or a 409 for a pod since replaced;
    ``refused``: 429 (a PodDisruptionBudget), a 5xx such as the one for a pod under two budgets,
    or a 409 for the same pod (a conflict on the server's side: tried again with backoff);
    ``error``: anything else."""

    kind: Literal["evicted", "gone", "refused", "error"]
    detail: str = ""


@dataclass(frozen=True)
class Plan:
    status: dict[str, Any] | None = None
    """The whole new status, or None when it does not change."""
    labels: Mapping[str, str] = field(default_factory=dict)
    """Labels to set on the request (merged; nothing is removed)."""
    evict: bool = False
    """Call the Eviction API for the target pod (with its UID as precondition), then plan again
    with the outcome."""
    requeue_after: float | None = None
    events: tuple[Event, ...] = ()
    imperative: ImperativeState | None = None
    """The retry state to keep (None: forget it)."""
    activation: tuple[str, datetime] | None = None
    """The active interceptor and when it got its turn, as recorded by this plan."""
    finished: bool = False
    """Evicted or Canceled: nothing more will happen to this request."""


class _Builder:
    def __init__(self, request: Mapping[str, Any], view: EvictionRequestView, now: datetime):
        self.view = view
        self.now = now
        raw = request.get("status")
        self.old: dict[str, Any] = dict(raw) if isinstance(raw, Mapping) else {}
        self.status: dict[str, Any] = copy.deepcopy(self.old)
        self.labels: dict[str, str] = {}
        self.events: list[Event] = []
        self.requeue: float | None = None
        self.evict = False
        self.imperative: ImperativeState | None = None
        self.activation: tuple[str, datetime] | None = None

    @property
    def pod_ref(self) -> str:
        return f"{self.view.namespace}/{self.view.target_name}"

    def observed(self) -> None:
        if self.view.generation > 0:
            self.status["observedGeneration"] = self.view.generation

    def condition(self, type_: str, reason: str, message: str) -> None:
        self.status["conditions"] = set_condition(
            self.status.get("conditions") or (),
            type_,
            "True",
            reason,
            message,
            self.now,
            self.view.generation or None,
        )

    def retire_active(self) -> None:
        """Nobody is active any more; the one that was goes to processedInterceptors."""
        active = self.view.active
        if active is None:
            return
        processed = list(self.status.get("processedInterceptors") or [])
        if active not in processed:
            processed.append(active)
        self.status["processedInterceptors"] = processed
        self.status["activeInterceptors"] = []

    def cancel(self, reason: str, message: str) -> None:
        self.condition(CANCELED, reason, message)
        self.retire_active()
        kind: EventType = "Warning" if reason == "ValidationFailed" else "Normal"
        self.events.append(Event(kind, "Canceled" if kind == "Normal" else reason, message))

    def evicted(self, reason: str, message: str) -> None:
        """Evicted. Our own imperative interceptor completes with it; another active interceptor
        keeps its turn until it reports completion (see :meth:`retire_completed`)."""
        self.condition(EVICTED, reason, message)
        if self.view.active == IMPERATIVE_INTERCEPTOR:
            entry = self.view.entry(IMPERATIVE_INTERCEPTOR)
            if entry.completion_time is None:
                self.set_entry(entry.complete(self.now, "The pod is gone."))
            self.retire_active()
        else:
            self.retire_completed()

    def retire_completed(self) -> None:
        """An active interceptor leaves activeInterceptors once it sets completionTime (KEP)."""
        active = self.view.active
        if active is not None and self.view.entry(active).completion_time is not None:
            self.retire_active()

    def entry(self, name: str) -> InterceptorStatus:
        """``name``'s entry as this plan leaves it so far."""
        for raw in self.status.get("interceptors") or ():
            if isinstance(raw, Mapping) and raw.get("name") == name:
                return InterceptorStatus.from_dict(raw)
        return InterceptorStatus(name)

    def set_entry(self, entry: InterceptorStatus) -> None:
        self.status["interceptors"] = with_interceptor_status(
            self.status.get("interceptors") or (), entry
        )

    def wake_in(self, seconds: float) -> None:
        seconds = max(0.0, seconds)
        self.requeue = seconds if self.requeue is None else min(self.requeue, seconds)

    def plan(self, finished: bool = False) -> Plan:
        self.observed()
        return Plan(
            status=self.status if self.status != self.old else None,
            labels=self.labels,
            evict=self.evict,
            requeue_after=self.requeue,
            events=tuple(self.events),
            imperative=None if finished else self.imperative,
            activation=self.activation,
            finished=finished,
        )


def _validation_problem(view: EvictionRequestView) -> str | None:
    if not view.target_name or not view.target_uid:
        return "spec.target.pod must give the name and the UID of the pod to evict."
    if view.name != view.target_uid:
        return (
            f"metadata.name {view.name!r} is not the UID of the target pod "
            f"{view.namespace}/{view.target_name} (spec.target.pod.uid {view.target_uid!r}); "
            "an EvictionRequest must be named after the UID of its pod."
        )
    return None


def _label_changes(request: Mapping[str, Any], pod: Mapping[str, Any]) -> dict[str, str]:
    """KEP "Label Synchronization": the pod's labels win; plus the pod's node."""
    md = request.get("metadata")
    have = md.get("labels") if isinstance(md, Mapping) else None
    have = have if isinstance(have, Mapping) else {}
    pod_md = pod.get("metadata")
    want: dict[str, str] = {}
    if isinstance(pod_md, Mapping) and isinstance(pod_md.get("labels"), Mapping):
        want.update({k: v for k, v in pod_md["labels"].items() if isinstance(v, str)})
    spec = pod.get("spec")
    node = spec.get("nodeName") if isinstance(spec, Mapping) else None
    if isinstance(node, str) and node:
        want[NODE_LABEL] = node
    return {k: v for k, v in want.items() if have.get(k) != v}


def plan_request(
    request: Mapping[str, Any],
    pod: Mapping[str, Any] | None,
    now: datetime,
    settings: EvictionSettings,
    *,
    imperative: ImperativeState | None = None,
    activated_at: datetime | None = None,
    outcome: EvictionOutcome | None = None,
    gate: BudgetGate | None = None,
) -> Plan:
    """Decide what to do about ``request``.

    ``pod``: the pod named by ``spec.target.pod.name`` in the request's namespace, whatever its
    UID, or None when there is none. ``activated_at``: when the active interceptor got its turn,
    if the caller knows better than the request's status. ``outcome``: the answer of the
    Eviction API call an earlier plan asked for. ``gate``: the disruption budget that selects
    the pod, as cached (:func:`nodeagent.model.budgets.budget_gate`), if one decides alone.
    """
    view = EvictionRequestView.from_obj(request)
    b = _Builder(request, view, now)
    if view.finished:
        # Bookkeeping only: no interceptor gets a turn any more, nothing touches the pod.
        if view.evicted:
            b.retire_completed()
        return b.plan(finished=True)
    target = pod if pod is not None and uid_of(pod) == view.target_uid else None
    ended = _ended(b, view, pod, target)
    if ended is not None:
        return ended
    assert target is not None  # _ended ends every request without its pod
    b.labels = _label_changes(request, target)
    targets = view.target_interceptors
    if targets is None:
        targets = _first_target_interceptors(b, target, settings)
    selection = _take_turns(b, view, targets, now, settings, activated_at)
    if selection.active == IMPERATIVE_INTERCEPTOR:
        if selection.activated and view.active is not None:
            # Record its turn before it acts: an eviction must never happen while the stored
            # status still shows another interceptor's turn. Held back by a budget, it says so
            # in the same write. (With nobody's turn stored, it acts at once and its turn and
            # what came of it go in one write.)
            if gate is not None and gate.room == 0:
                b.set_entry(
                    replace(b.entry(IMPERATIVE_INTERCEPTOR), message=gate.waiting_message())
                )
                b.imperative = ImperativeState(held_since=now)
            b.wake_in(0.0)
        else:
            _imperative(b, target, settings, imperative, outcome, gate)
    return b.plan()


def _ended(
    b: _Builder,
    view: EvictionRequestView,
    pod: Mapping[str, Any] | None,
    target: Mapping[str, Any] | None,
) -> Plan | None:
    """The plan of a request that ends now (invalid, its pod gone or terminal, no requester
    left), or None when it goes on."""
    problem = _validation_problem(view)
    if problem is not None:
        b.cancel("ValidationFailed", problem)
        return b.plan(finished=True)
    if target is None:
        other = uid_of(pod)
        if view.target_interceptors is None:
            # Never seen: the request named a pod that does not exist.
            message = f"Target Pod {b.pod_ref} was not found."
            if other:
                message = (
                    f"Target Pod {b.pod_ref} with UID {view.target_uid} was not found "
                    f"(the pod of that name has UID {other})."
                )
            b.cancel("ValidationFailed", message)
        elif view.owned_by_target:
            # Its pod owns it: the garbage collector deletes it now, nobody reads it any more.
            return Plan(finished=True)
        elif other:
            b.evicted(
                "PodReplaced",
                f"Pod {b.pod_ref} with UID {view.target_uid} is gone; "
                f"a pod of that name now has UID {other}.",
            )
        else:
            b.evicted("PodDeleted", f"Pod {b.pod_ref} was deleted.")
        return b.plan(finished=True)
    if pod_terminal(target):
        b.evicted("PodTerminal", f"Pod {b.pod_ref} reached phase {pod_phase(target)}.")
        return b.plan(finished=True)
    if not view.requesters:
        b.cancel(
            "NoRequesters",
            "No requester is left in spec.requesters; the eviction request is canceled.",
        )
        return b.plan(finished=True)
    return None


def _first_target_interceptors(
    b: _Builder, target: Mapping[str, Any], settings: EvictionSettings
) -> tuple[str, ...]:
    """The interceptors that take turns, chosen once (`status.targetInterceptors` is immutable
    once set), with an entry each."""
    try:
        targets = target_interceptors(target, settings.configured)
    except InvalidInterceptors as exc:
        # A pod owner's bad annotation must not stall a drain (a canceled request is made
        # again by its requester, over and over): the defaults take its place, once, said.
        targets = default_interceptors(target, settings.configured)
        b.events.append(
            Event(
                "Warning",
                "InvalidInterceptors",
                f"Pod {b.pod_ref}: {exc}; the annotation is ignored and the default "
                f"interceptors take turns: {', '.join(targets)}.",
            )
        )
    b.status["targetInterceptors"] = [{"name": n} for n in targets]
    entries = [e for e in b.status.get("interceptors") or () if isinstance(e, Mapping)]
    named = {e.get("name") for e in entries}
    b.status["interceptors"] = [dict(e) for e in entries] + [
        {"name": n} for n in targets if n not in named
    ]
    return targets


def _take_turns(
    b: _Builder,
    view: EvictionRequestView,
    targets: Sequence[str],
    now: datetime,
    settings: EvictionSettings,
    activated_at: datetime | None,
) -> Selection:
    """Whose turn it is (`select_active`), written into the status, with an Event for each
    handover and a wake-up at the active interceptor's deadline."""
    known = activated_at or view.activated_at()
    selection = select_active(
        targets,
        view.active,
        view.processed,
        view.interceptors,
        now,
        settings.heartbeat_deadline,
        known or now,
    )
    b.status["activeInterceptors"] = [selection.active] if selection.active else []
    b.status["processedInterceptors"] = list(selection.processed)
    for handover in selection.handovers:
        b.events.append(
            Event(
                "Normal" if handover.reason == "Completed" else "Warning",
                "InterceptorCompleted" if handover.reason == "Completed" else "InterceptorTimedOut",
                handover.describe(settings.heartbeat_deadline),
            )
        )
    if selection.active is not None:
        if selection.activated or known is None:
            # Its turn starts now, recorded in its entry's startTime by this status write (the
            # deadline of an interceptor that never reports runs from there).
            b.set_entry(replace(view.entry(selection.active), start_time=now))
            b.activation = (selection.active, now)
        elif activated_at is None:
            b.activation = (selection.active, known)
    if selection.deadline is not None:
        b.wake_in((selection.deadline - now).total_seconds())
    return selection


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


# How long a budget that allows nothing, as cached, holds an eviction back before the server is
# asked anyway: its watch event normally wakes the pod much sooner; this bounds what a missed
# or unforeseen one costs (a 429, and the backoff, if the cache was right)
HELD_AT_MOST = timedelta(seconds=10)


def _imperative(
    b: _Builder,
    pod: Mapping[str, Any],
    settings: EvictionSettings,
    state: ImperativeState | None,
    outcome: EvictionOutcome | None,
    gate: BudgetGate | None,
) -> None:
    """The ``imperative-eviction.k8s.io`` interceptor (KEP "Eviction"). It writes its entry
    when its message says something new to the requesters (a refusal, a budget it waits for)
    and otherwise only when a heartbeat is due: an accepted eviction is not worth a status
    write of its own, the pod's deletion follows."""
    now = b.now
    entry = b.entry(IMPERATIVE_INTERCEPTOR)
    if state is None:
        state = ImperativeState(retries=parse_retries(entry.message))
    b.imperative = state
    interval = heartbeat_interval(settings.heartbeat_deadline, settings.heartbeat_min_interval)

    def report(message: str) -> None:
        update = report_progress(
            entry, message, now, settings.heartbeat_deadline, settings.heartbeat_min_interval
        )
        if update is not None:
            b.set_entry(update)

    def keep_alive(message: str) -> None:
        """Heartbeat (with ``message``) once one is due; nothing before, but for the message
        when its turn is being written anyway."""
        last = entry.last_report
        if b.activation is not None and b.activation[1] == now:
            b.set_entry(replace(entry, message=message))
            b.wake_in(interval.total_seconds())
        elif last is None or now - last >= interval:
            b.set_entry(entry.heartbeat(now, message))
            b.wake_in(interval.total_seconds())
        else:
            b.wake_in((last + interval - now).total_seconds())

    # A pod we evicted is terminating now: nothing to say until a heartbeat is due
    why_not = None if state.evicted and outcome is None else _not_evictable(pod)
    if why_not is not None:
        report(why_not)
        return
    if outcome is None:
        if state.evicted:
            keep_alive(state.message)
            return
        if state.next_attempt is not None and now < state.next_attempt:
            if state.message:
                report(state.message)
            b.wake_in((state.next_attempt - now).total_seconds())
            return
        held_since = state.held_since or now
        if gate is not None and gate.room == 0 and now - held_since < HELD_AT_MOST:
            # The budget's next change wakes this request; should it not come (or the
            # server see it otherwise), the Eviction API is asked after HELD_AT_MOST.
            message = gate.waiting_message()
            b.imperative = replace(state, held_since=held_since, message=message)
            if entry.message != message:
                report(message)
            b.wake_in((held_since + HELD_AT_MOST - now).total_seconds())
            return
        b.evict = True
        return
    if outcome.kind == "evicted":
        after = f" after {state.retries} refused attempts" if state.retries else ""
        message = f"Evicted the pod through the Eviction API{after}; waiting for it to terminate."
        b.imperative = ImperativeState(state.retries, message=message, evicted=True)
        keep_alive(message)
        return
    if outcome.kind == "gone":
        # 404, or a 409 for a pod replaced under the same name: no point in calling again.
        message = "The pod was gone when the Eviction API was called."
        report(message)
        b.imperative = ImperativeState(state.retries, message=message, evicted=True)
        b.wake_in(1.0)
        return
    retries = state.retries + 1
    delay = eviction_backoff(retries, settings.backoff_base, settings.backoff_cap)
    message = imperative_refusal_message(retries, outcome.detail)
    b.imperative = ImperativeState(retries, now + timedelta(seconds=delay), message)
    report(message)
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
