"""How often an interceptor of ours reports (KEP-4563 heartbeats), and what it writes when."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from nodeagent.model.interceptors.status import InterceptorStatus

__all__ = [
    "DEFAULT_HEARTBEAT_DEADLINE",
    "MIN_HEARTBEAT_INTERVAL",
    "heartbeat_due",
    "heartbeat_interval",
    "next_heartbeat_in",
    "report_progress",
]

DEFAULT_HEARTBEAT_DEADLINE = timedelta(minutes=20)
# KEP: heartbeats "every 3 minutes may be sufficient"; never less often than this.
_MAX_HEARTBEAT_INTERVAL = timedelta(minutes=3)
# KEP: the API server "only allow[s] periodic updates that are 60+ seconds" apart (our CRD's CEL
# rule); never more often than this.
MIN_HEARTBEAT_INTERVAL = timedelta(seconds=60)


def heartbeat_interval(
    deadline: timedelta = DEFAULT_HEARTBEAT_DEADLINE, minimum: timedelta = MIN_HEARTBEAT_INTERVAL
) -> timedelta:
    """How often our own interceptors report: a quarter of the deadline, at most 3 minutes and
    at least ``minimum`` (the KEP's 60 s; tests with second-long deadlines lower it)."""
    return max(minimum, min(_MAX_HEARTBEAT_INTERVAL, deadline / 4))


def heartbeat_due(status: InterceptorStatus, now: datetime, every: timedelta) -> bool:
    """Whether ``status`` may heartbeat ``now``: it has no heartbeat yet, or its last is
    ``every`` old (:func:`heartbeat_interval` for the controllers' interceptors, a fixed
    interval for the node agent's static-pod interceptor)."""
    last = status.heartbeat_time
    return last is None or now - last >= every


def report_progress(
    entry: InterceptorStatus, message: str, now: datetime, every: timedelta
) -> InterceptorStatus | None:
    """The entry an interceptor writes to report ``message``, or None when nothing needs writing.
    The first report sets startTime and heartbeatTime; later ones heartbeat when
    :func:`heartbeat_due`, and otherwise only change the message (the KEP wants heartbeats
    spaced out, not one per status write)."""
    if entry.start_time is None or heartbeat_due(entry, now, every):
        return entry.heartbeat(now, message)
    if entry.message != message:
        return replace(entry, message=message)
    return None


def next_heartbeat_in(entry: InterceptorStatus, now: datetime, every: timedelta) -> float:
    """Seconds until :func:`heartbeat_due` holds for ``entry``: 0 when it does."""
    last = entry.heartbeat_time
    return 0.0 if last is None else max(0.0, (last + every - now).total_seconds())
