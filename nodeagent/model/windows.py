"""Reboot windows (``nodeMaintenance.rebootWindows``): when a reboot asked for may be admitted
to a drain slot.

Pure. A window is a set of days, a start and an end (``HH:MM``, wall-clock time in a time zone).
It is open while the wall clock of its zone reads a time from ``start`` (included) to ``end``
(excluded) on one of its days; an ``end`` at or before ``start`` crosses midnight (it closes on
the next day, whatever that day is): ``22:00``-``04:00`` on ``Sat`` is open from Saturday 22:00
to Sunday 04:00, ``02:00``-``02:00`` for a whole day from 02:00. ``24:00`` ends a window at
midnight. The wall clock decides, so across a DST change a window is as long as the clock says:
a time the clock skips (Europe/Berlin's 02:30 on the last Sunday of March) never opens a window
but the window is open from the first minute after the jump that lies inside it, and a time the
clock reads twice is inside the window both times. No windows at all: always open.

The next edge (opening or closing) from any instant is found among the instants the answer can
change at: those where a zone's wall clock reads some window's start or end, or midnight (a day
changes), and the zone's UTC offset changes (found by bisection, to the second); between two
such instants the answer stays the same.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from nodeagent.model.times import format_time

__all__ = [
    "ALWAYS",
    "DAYS",
    "FINISH",
    "STOP",
    "WAITING_FOR_WINDOW",
    "WINDOW_ENDS",
    "InvalidWindow",
    "RebootWindow",
    "Schedule",
    "parse_windows",
]

DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
"""The names of the days, as ``days`` lists them (Monday is 0, as ``date.weekday()``)."""
FINISH = "Finish"
"""``windowEnd: Finish``: a drain under way when the windows close goes on to its end."""
STOP = "Stop"
"""``windowEnd: Stop``: it stops (its slot given back, its EvictionRequests withdrawn, its node
uncordoned) and resumes where it stopped in the next window."""
WINDOW_ENDS = (FINISH, STOP)
WAITING_FOR_WINDOW = "Waiting for the reboot window"
"""How the drainMessage of a reboot held outside the windows starts."""
_CLOCK = re.compile(r"([01][0-9]|2[0-3]):([0-5][0-9])")
_MINUTES_A_DAY = 24 * 60
_HORIZON = 16
"""Days looked ahead for the next edge: a weekly schedule changes within a week, or two where a
window falls on a time a DST change skips, or never."""


class InvalidWindow(ValueError):
    """A window as written is not one; the message starts with the key at fault."""


@dataclass(frozen=True)
class RebootWindow:
    days: frozenset[int]
    """The days it opens on (0: Monday)."""
    start: int
    """Minutes after midnight, 0 to 1439."""
    end: int
    """Minutes after midnight, 0 to 1440; at or before ``start``: on the next day."""
    zone: str = "UTC"
    """An IANA time zone."""

    @property
    def tz(self) -> ZoneInfo:
        return ZoneInfo(self.zone)

    def open_at(self, when: datetime) -> bool:
        """Whether the zone's wall clock reads a time inside the window at ``when``."""
        local = when.astimezone(self.tz)
        minute = local.hour * 60 + local.minute
        today = local.weekday()
        if self.start < self.end:
            return today in self.days and self.start <= minute < self.end
        # crosses midnight (or lasts a whole day): from start on its day, until end the next
        yesterday = (today - 1) % 7
        return (today in self.days and minute >= self.start) or (
            yesterday in self.days and minute < self.end
        )

    def __str__(self) -> str:
        days = ",".join(DAYS[d] for d in sorted(self.days))
        return f"{days} {_clock(self.start)}-{_clock(self.end)} {self.zone}"


def _clock(minutes: int) -> str:
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


@dataclass(frozen=True)
class Schedule:
    """Every window of ``nodeMaintenance.rebootWindows``: open while any of them is."""

    windows: tuple[RebootWindow, ...] = ()

    @property
    def always(self) -> bool:
        return not self.windows

    def open_at(self, when: datetime) -> bool:
        return self.always or any(w.open_at(when) for w in self.windows)

    def next_edge(self, when: datetime) -> datetime | None:
        """The first instant after ``when`` at which :meth:`open_at` changes (None: never
        within the horizon, as when the windows cover every minute of the week)."""
        if self.always:
            return None
        now = self.open_at(when)
        for instant in self._changes(when):
            if self.open_at(instant) != now:
                return instant
        return None

    def next_opening(self, when: datetime) -> datetime | None:
        """``when`` itself while open, else the instant the next window opens."""
        return when if self.open_at(when) else self.next_edge(when)

    def next_closing(self, when: datetime) -> datetime | None:
        """None while closed or when never closing; else the instant the open windows close."""
        return self.next_edge(when) if self.open_at(when) and not self.always else None

    def waiting_message(self, when: datetime) -> str:
        """``Waiting for the reboot window (next: 2024-05-04T20:00:00Z)``."""
        opening = self.next_opening(when)
        shown = format_time(opening) if opening is not None else f"none within {_HORIZON} days"
        return f"{WAITING_FOR_WINDOW} (next: {shown})"

    def _changes(self, when: datetime) -> list[datetime]:
        """Every instant after ``when`` within the horizon at which :meth:`open_at` may change,
        in order."""
        end = when + timedelta(days=_HORIZON)
        found: set[datetime] = set()
        for zone in {w.zone for w in self.windows}:
            boundaries = frozenset(
                {0}
                | {
                    m % _MINUTES_A_DAY
                    for w in self.windows
                    if w.zone == zone
                    for m in (w.start, w.end)
                }
            )
            first = when.astimezone(ZoneInfo(zone)).date() - timedelta(days=1)
            found.update(_zone_changes(zone, boundaries, first))
        return sorted(t for t in found if when < t <= end)


ALWAYS = Schedule()
"""No windows: always open."""


@lru_cache(maxsize=64)
def _zone_changes(zone: str, boundaries: frozenset[int], first: date) -> frozenset[datetime]:
    """The instants (UTC) of the horizon's local days from ``first`` at which ``zone``'s wall
    clock reads one of ``boundaries`` (minutes of the day) or its offset changes. Remembered: a
    decision asks again and again with the same day, and the answer depends on these alone."""
    tz = ZoneInfo(zone)
    found: set[datetime] = set()
    for offset in range(_HORIZON + 2):
        day = first + timedelta(days=offset)
        for minute in boundaries:
            for fold in (0, 1):
                found.add(_local(day, minute, tz, fold).astimezone(UTC))
        found.update(_offset_changes(day, tz))
    return frozenset(found)


def _local(day: date, minute: int, tz: ZoneInfo, fold: int) -> datetime:
    return datetime.combine(day, time(minute // 60, minute % 60), tzinfo=tz).replace(fold=fold)


def _offset_changes(day: date, tz: ZoneInfo) -> Iterable[datetime]:
    """The instant of ``day`` (local midnight to the next) at which ``tz``'s UTC offset
    changes, found by bisection on whole seconds (the database's changes fall on them); one
    a day at most, as in every zone of the database."""
    lo = int(_local(day, 0, tz, 0).timestamp())
    hi = int(_local(day + timedelta(days=1), 0, tz, 0).timestamp())
    before = _offset(lo, tz)
    if before == _offset(hi, tz):
        return ()
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _offset(mid, tz) == before:
            lo = mid
        else:
            hi = mid
    return (datetime.fromtimestamp(hi, UTC),)


def _offset(seconds: int, tz: ZoneInfo) -> timedelta | None:
    return datetime.fromtimestamp(seconds, tz).utcoffset()


def _parse_clock(raw: object, where: str, *, end: bool) -> int:
    if end and raw == "24:00":
        return _MINUTES_A_DAY
    m = _CLOCK.fullmatch(raw) if isinstance(raw, str) else None
    if m is None:
        extra = " (or 24:00)" if end else ""
        raise InvalidWindow(f"{where}: must be a time of day as HH:MM{extra}, got {raw!r}")
    return int(m.group(1)) * 60 + int(m.group(2))


def _parse_window(raw: object, where: str) -> RebootWindow:
    if not isinstance(raw, Mapping):
        raise InvalidWindow(f"{where}: must be a mapping of days, start, end and timeZone")
    for key in raw:
        if key not in ("days", "start", "end", "timeZone"):
            raise InvalidWindow(
                f"{where}.{key}: unknown setting (known: days, end, start, timeZone)"
            )
    for key in ("days", "start", "end"):
        if key not in raw:
            raise InvalidWindow(f"{where}.{key}: required")
    days_raw = raw["days"]
    if not isinstance(days_raw, list) or not days_raw:
        raise InvalidWindow(f"{where}.days: must be a list of days ({', '.join(DAYS)})")
    days: set[int] = set()
    for day in days_raw:
        if day not in DAYS:
            raise InvalidWindow(f"{where}.days: {day!r} is not one of {', '.join(DAYS)}")
        days.add(DAYS.index(day))
    zone = raw.get("timeZone", "UTC")
    if not isinstance(zone, str) or not zone:
        raise InvalidWindow(f"{where}.timeZone: must be an IANA time zone, got {zone!r}")
    try:
        ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidWindow(f"{where}.timeZone: unknown time zone {zone!r}") from None
    return RebootWindow(
        days=frozenset(days),
        start=_parse_clock(raw["start"], f"{where}.start", end=False),
        end=_parse_clock(raw["end"], f"{where}.end", end=True),
        zone=zone,
    )


def parse_windows(raw: object, where: str) -> Schedule:
    """``nodeMaintenance.rebootWindows`` as written (a list; null or empty: always open)."""
    if raw is None:
        return Schedule()
    if not isinstance(raw, Sequence) or isinstance(raw, str):
        raise InvalidWindow(f"{where}: must be a list of windows")
    return Schedule(tuple(_parse_window(w, f"{where}[{i}]") for i, w in enumerate(raw)))
