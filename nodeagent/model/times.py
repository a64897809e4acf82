"""API times (meta/v1 Time and MicroTime), defined once: how they are written and read; and the
wall clock the product reads them from."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

__all__ = ["Clock", "format_micro_time", "format_time", "parse_time", "utcnow"]

Clock = Callable[[], datetime]
"""A wall clock (aware datetimes), injected into controllers so tests can move it."""


def utcnow() -> datetime:
    """The clock controllers take by default (injected, so tests can move it)."""
    return datetime.now(UTC)


def format_time(when: datetime) -> str:
    """meta/v1 Time: RFC 3339 in UTC with second precision (``2006-01-02T15:04:05Z``)."""
    # isoformat, not strftime: %Y writes the year 999 as "999", which RFC 3339 refuses
    return when.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="seconds") + "Z"


def format_micro_time(when: datetime) -> str:
    """meta/v1 MicroTime: RFC 3339 in UTC with microseconds (``2006-01-02T15:04:05.000000Z``),
    also valid for ``format: date-time`` fields of our CRDs."""
    return when.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def parse_time(value: object) -> datetime | None:
    """A Time or MicroTime (any RFC 3339 offset) as an aware datetime; None if absent or bad."""
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    if text[-1] in "Zz":
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)
