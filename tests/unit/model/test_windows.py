"""Reboot windows (model.windows): open while the zone's wall clock reads a time inside one, the
next edge from any instant (across midnight and DST changes), the one-line errors."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nodeagent.model.windows import DAYS, InvalidWindow, RebootWindow, Schedule, parse_windows

BERLIN = "Europe/Berlin"
ZONES = ("UTC", BERLIN, "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata")


def window(days: list[str], start: str, end: str, zone: str = BERLIN) -> dict[str, Any]:
    return {"days": days, "start": start, "end": end, "timeZone": zone}


def schedule(*windows: dict[str, Any]) -> Schedule:
    return parse_windows(list(windows), "rebootWindows")


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


def oracle(s: Schedule, when: datetime) -> bool:
    """Open, by minutes of the local week: each window covers [day start, day start + length)
    of its zone's week, wrapping from Sunday to Monday."""
    for w in s.windows:
        local = when.astimezone(ZoneInfo(w.zone))
        week_minute = local.weekday() * 1440 + local.hour * 60 + local.minute
        length = w.end - w.start if w.end > w.start else 1440 - w.start + w.end
        for day in w.days:
            begin = day * 1440 + w.start
            if (week_minute - begin) % (7 * 1440) < length:
                return True
    return not s.windows


clocks = st.builds(lambda h, m: f"{h:02d}:{m:02d}", st.integers(0, 23), st.integers(0, 59))
windows = st.builds(
    window,
    st.lists(st.sampled_from(DAYS), min_size=1, max_size=7, unique=True),
    clocks,
    clocks | st.just("24:00"),
    st.sampled_from(ZONES),
)
instants = st.datetimes(
    min_value=datetime(2023, 1, 1), max_value=datetime(2027, 12, 31), timezones=st.just(UTC)
)


@settings(max_examples=300, deadline=None)
@given(ws=st.lists(windows, min_size=1, max_size=3), when=instants)
def test_open_is_the_wall_clock_inside_a_window(ws: list[dict[str, Any]], when: datetime) -> None:
    s = schedule(*ws)
    assert s.open_at(when) == oracle(s, when)


@settings(max_examples=150, deadline=None)
@given(ws=st.lists(windows, min_size=1, max_size=3), when=instants, data=st.data())
def test_the_next_edge_is_the_first_change(
    ws: list[dict[str, Any]], when: datetime, data: st.DataObject
) -> None:
    """Nothing changes from ``when`` until the edge, and at the edge it changes; the next
    opening and closing agree with it."""
    s = schedule(*ws)
    now = s.open_at(when)
    edge = s.next_edge(when)
    if edge is None:  # the windows cover every minute of the week: always open
        assert now
        for _ in range(20):
            later = when + timedelta(minutes=data.draw(st.integers(0, 14 * 1440)))
            assert oracle(s, later)
        return
    assert edge > when
    assert edge - when <= timedelta(days=15)
    assert s.open_at(edge) != now
    assert s.open_at(edge - timedelta(seconds=1)) == now
    step = timedelta(minutes=1)
    probe = when
    while probe < edge:  # every minute until the edge (at most two weeks of them)
        assert oracle(s, probe) == now, probe
        probe += step if edge - probe > timedelta(hours=2) else timedelta(seconds=30)
    if now:
        assert s.next_opening(when) == when and s.next_closing(when) == edge
    else:
        assert s.next_opening(when) == edge and s.next_closing(when) is None


@given(when=instants)
def test_no_windows_is_always_open(when: datetime) -> None:
    s = parse_windows([], "rebootWindows")
    assert s.open_at(when) and s.next_edge(when) is None
    assert s.next_opening(when) == when and s.next_closing(when) is None


def test_a_window_crosses_midnight_into_a_day_not_listed() -> None:
    s = schedule(window(["Sat"], "22:00", "04:00", "UTC"))
    assert not s.open_at(utc(2024, 5, 4, 21, 59))  # Saturday
    assert s.open_at(utc(2024, 5, 4, 22, 0))
    assert s.open_at(utc(2024, 5, 5, 3, 59))  # Sunday, not listed: the window goes on
    assert not s.open_at(utc(2024, 5, 5, 4, 0))
    assert not s.open_at(utc(2024, 5, 5, 22, 30))  # Sunday evening opens nothing
    assert s.next_edge(utc(2024, 5, 5, 1, 0)) == utc(2024, 5, 5, 4, 0)
    assert s.next_edge(utc(2024, 5, 5, 4, 0)) == utc(2024, 5, 11, 22, 0)


def test_start_equal_to_end_is_a_whole_day_and_24_00_is_midnight() -> None:
    day = schedule(window(["Mon"], "02:00", "02:00", "UTC"))
    assert day.open_at(utc(2024, 5, 7, 1, 59)) and not day.open_at(utc(2024, 5, 7, 2, 0))
    evening = schedule(window(["Mon"], "18:00", "24:00", "UTC"))
    assert evening.next_edge(utc(2024, 5, 6, 19, 0)) == utc(2024, 5, 7, 0, 0)


def test_dst_spring_forward_shortens_a_window_by_the_hour_the_clock_skips() -> None:
    s = schedule(window(["Sun"], "01:00", "05:00"))
    opens = s.next_edge(utc(2024, 3, 30, 12))
    assert opens == utc(2024, 3, 31, 0, 0)  # 01:00 CET
    assert s.next_edge(opens) == utc(2024, 3, 31, 3, 0)  # 05:00 CEST: three hours


def test_dst_fall_back_lengthens_a_window_by_the_hour_read_twice() -> None:
    s = schedule(window(["Sun"], "01:00", "05:00"))
    opens = s.next_edge(utc(2024, 10, 26, 12))
    assert opens == utc(2024, 10, 26, 23, 0)  # 01:00 CEST
    assert s.next_edge(opens) == utc(2024, 10, 27, 4, 0)  # 05:00 CET: five hours


def test_a_window_starting_in_the_skipped_hour_opens_at_the_jump() -> None:
    s = schedule(window(["Sun"], "02:30", "04:00"))
    opens = s.next_edge(utc(2024, 3, 30, 12))
    assert opens == utc(2024, 3, 31, 1, 0)  # the clock jumps from 02:00 CET to 03:00 CEST
    assert s.next_edge(opens) == utc(2024, 3, 31, 2, 0)


def test_a_window_inside_the_hour_read_twice_opens_twice() -> None:
    s = schedule(window(["Sun"], "02:00", "02:30"))
    first = s.next_edge(utc(2024, 10, 26, 12))
    assert first == utc(2024, 10, 27, 0, 0)  # 02:00 CEST
    closes = s.next_edge(first)
    assert closes == utc(2024, 10, 27, 0, 30)
    assert s.next_edge(closes) == utc(2024, 10, 27, 1, 0)  # 02:00 CET, the second time
    assert s.next_edge(utc(2024, 10, 27, 1, 0)) == utc(2024, 10, 27, 1, 30)


def test_overlapping_windows_close_when_the_last_does() -> None:
    s = schedule(window(["Mon"], "22:00", "02:00", "UTC"), window(["Tue"], "01:00", "03:00", "UTC"))
    assert s.next_closing(utc(2024, 5, 6, 23, 0)) == utc(2024, 5, 7, 3, 0)


def test_a_window_says_what_it_is() -> None:
    w = RebootWindow(frozenset({5, 6}), 22 * 60, 4 * 60, BERLIN)
    assert str(w) == "Sat,Sun 22:00-04:00 Europe/Berlin"


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        ("Mon", "rebootWindows: must be a list of windows"),
        ([["Mon"]], "rebootWindows[0]: must be a mapping"),
        ([{"days": ["Mon"], "start": "01:00"}], "rebootWindows[0].end: required"),
        ([window([], "01:00", "02:00")], "rebootWindows[0].days: must be a list of days"),
        ([window(["Monday"], "01:00", "02:00")], "rebootWindows[0].days: 'Monday' is not one"),
        ([window(["Mon"], "1:00", "02:00")], "rebootWindows[0].start: must be a time of day"),
        ([window(["Mon"], "24:00", "02:00")], "rebootWindows[0].start: must be a time of day"),
        ([window(["Mon"], "01:00", "24:01")], "rebootWindows[0].end: must be a time of day"),
        ([window(["Mon"], "01:00", "02:00", "Mars/Olympus")], "rebootWindows[0].timeZone: unknown"),
        ([{**window(["Mon"], "01:00", "02:00"), "zone": "UTC"}], "rebootWindows[0].zone: unknown"),
    ],
)
def test_errors_are_one_line_naming_the_key(raw: Any, error: str) -> None:
    with pytest.raises(InvalidWindow) as e:
        parse_windows(raw, "rebootWindows")
    assert str(e.value).startswith(error)
    assert "\n" not in str(e.value)


def test_the_zone_defaults_to_utc() -> None:
    s = parse_windows([{"days": ["Mon"], "start": "01:00", "end": "02:00"}], "w")
    assert s.windows[0].zone == "UTC"
