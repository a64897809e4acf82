"""Whose turn it is (KEP-4563 "Interceptor Selection"): the active interceptor, and when it is
passed over for the next one."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from nodeagent.model.interceptors.heartbeats import DEFAULT_HEARTBEAT_DEADLINE
from nodeagent.model.interceptors.status import InterceptorStatus

__all__ = ["MAX_CLOCK_SKEW", "Handover", "Selection", "select_active"]


@dataclass(frozen=True)
class Handover:
    """The turn passed from ``previous`` to ``next`` (None: nobody left)."""

    previous: str
    next: str | None
    reason: Literal["Completed", "HeartbeatDeadline"]

    def describe(self, deadline: timedelta) -> str:
        why = (
            "set completionTime"
            if self.reason == "Completed"
            else f"did not report within {_duration(deadline)}"
        )
        to = self.next if self.next is not None else "no further interceptor"
        return f"{self.previous} {why}; passed to {to}"


@dataclass(frozen=True)
class Selection:
    """The outcome of :func:`select_active`."""

    active: str | None
    processed: tuple[str, ...]
    handovers: tuple[Handover, ...] = ()
    activated: bool = False
    """True when ``active`` got its turn in this call (its activation time is ``now``)."""
    deadline: datetime | None = None
    """When ``active`` will be passed over unless it reports; None when it cannot be (nobody
    follows it) or when its activation time is unknown."""


def _next_after(
    targets: Sequence[str], current: str | None, processed: Sequence[str]
) -> str | None:
    start = targets.index(current) + 1 if current in targets else 0
    for name in targets[start:]:
        if name not in processed and name != current:
            return name
    return None


def select_active(
    targets: Sequence[str],
    active: str | None,
    processed: Sequence[str],
    statuses: Mapping[str, InterceptorStatus],
    now: datetime,
    deadline: timedelta = DEFAULT_HEARTBEAT_DEADLINE,
    activated_at: datetime | None = None,
) -> Selection:
    """KEP "Interceptor Selection": pick index 0 first; pass to the next one at a higher index
    when the active one has set ``completionTime`` or has not reported for ``deadline``.

    The deadline runs from the active interceptor's last sign of life: the latest of its
    ``startTime``, ``heartbeatTime`` and ``activated_at`` (when it got its turn). With none of
    them known there is no deadline yet (the caller records the activation time and asks again).
    The last interceptor is never passed over for a missed deadline (there is nobody to pass to);
    when it completes, nobody is active any more. Each interceptor that loses its turn is appended
    to ``processed``.
    """
    done = list(dict.fromkeys(processed))
    handovers: list[Handover] = []
    activated = False
    since = activated_at
    if active is None:
        active = _first_unprocessed(targets, done)
        activated = active is not None
        since = now
    while active is not None:
        status = statuses.get(active) or InterceptorStatus(active)
        following = _next_after(targets, active, done)
        reason: Literal["Completed", "HeartbeatDeadline"] | None = None
        if status.completion_time is not None:
            # Also when it completed before its turn came: its turn is over at once.
            reason = "Completed"
        elif following is not None:
            last = _latest(_trusted(status.last_report, now), since)
            if last is not None and now - last >= deadline:
                reason = "HeartbeatDeadline"
        if reason is None:
            break
        done.append(active)
        handovers.append(Handover(active, following, reason))
        active = following
        activated = active is not None
        since = now
    expiry: datetime | None = None
    if active is not None and _next_after(targets, active, done) is not None:
        status = statuses.get(active) or InterceptorStatus(active)
        last = _latest(_trusted(status.last_report, now), since)
        if last is not None:
            expiry = last + deadline
    return Selection(active, tuple(done), tuple(handovers), activated, expiry)


def _first_unprocessed(targets: Sequence[str], processed: Sequence[str]) -> str | None:
    # Nobody active but some processed: resume after the last processed one in target order.
    indexes = [targets.index(p) for p in processed if p in targets]
    start = max(indexes) + 1 if indexes else 0
    for name in targets[start:]:
        if name not in processed:
            return name
    return None


# how far ahead of our clock an interceptor's report may be and still count (clock skew)
MAX_CLOCK_SKEW = timedelta(seconds=60)


def _trusted(report: datetime | None, now: datetime) -> datetime | None:
    """A report time from the future (beyond clock skew) is no sign of life: it would keep an
    interceptor active past its deadline for as long as it likes."""
    if report is not None and report > now + MAX_CLOCK_SKEW:
        return None
    return report


def _latest(*times: datetime | None) -> datetime | None:
    known = [t for t in times if t is not None]
    return max(known) if known else None


def _duration(delta: timedelta) -> str:
    seconds = delta.total_seconds()
    if seconds >= 60 and seconds % 60 == 0:
        return f"{int(seconds // 60)}m"
    return f"{seconds:g}s"
