"""The eviction request controller's decisions (KEP-4563 "Eviction Request Controller"), pure.

:func:`plan_request` takes one EvictionRequest, the pod of its target's name (or None), the time
and the in-memory retry state of the imperative eviction, and returns a :class:`~.plan.Plan`:
the status to write, labels to set, whether to call the Eviction API, when to look again.
When the plan says ``evict``, the controller calls the API and asks again with the
:class:`~.plan.EvictionOutcome`, which yields the final plan. Whose turn it is is decided here;
the imperative interceptor's turn in :mod:`.imperative`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from nodeagent.model.bodies import Event, uid_of
from nodeagent.model.budgets import BudgetGate
from nodeagent.model.evictionrequest.imperative import imperative_turn
from nodeagent.model.evictionrequest.plan import Plan, PlanBuilder
from nodeagent.model.interceptors.imperative import (
    EvictionOutcome,
    ImperativeState,
    caller_evicts,
)
from nodeagent.model.interceptors.requests import EvictionRequestView
from nodeagent.model.interceptors.settings import EvictionSettings
from nodeagent.model.interceptors.targets import (
    InvalidInterceptors,
    default_interceptors,
    target_interceptors,
)
from nodeagent.model.interceptors.turns import Selection, select_active
from nodeagent.model.names import IMPERATIVE_INTERCEPTOR, NODE_LABEL
from nodeagent.model.podstate import pod_phase, pod_terminal

__all__ = ["plan_request"]


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
    b = PlanBuilder(request, view, now)
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
            if gate is not None and gate.room == 0 and not caller_evicts(view.requesters):
                b.set_entry(
                    replace(b.entry(IMPERATIVE_INTERCEPTOR), message=gate.waiting_message())
                )
                b.imperative = ImperativeState(held_since=now)
            b.wake_in(0.0)
        else:
            imperative_turn(b, target, settings, imperative, outcome, gate)
    return b.plan()


def _ended(
    b: PlanBuilder,
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
    b: PlanBuilder, target: Mapping[str, Any], settings: EvictionSettings
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
    b: PlanBuilder,
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
