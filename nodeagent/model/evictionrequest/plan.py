"""What the eviction request controller's decision (:mod:`.reconcile`) returns, and the builder
that makes it, pure: a :class:`Plan` (with the imperative eviction's state the controller keeps
between plans, `model.interceptors.imperative`)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from nodeagent.model.bodies import Event, EventType, set_condition
from nodeagent.model.interceptors.imperative import ImperativeState
from nodeagent.model.interceptors.requests import CANCELED, EVICTED, EvictionRequestView
from nodeagent.model.interceptors.status import InterceptorStatus, with_interceptor_status
from nodeagent.model.names import IMPERATIVE_INTERCEPTOR

__all__ = ["Plan", "PlanBuilder"]


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


class PlanBuilder:
    """A plan in the making: the status as it changes, and what else the plan says."""

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
