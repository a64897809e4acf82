"""The sim's metav1.Time (`nodeagent_testbed.sim.lifecycle_types`): read as Go's `time.Parse`
reads RFC 3339, written as the server encodes it; and agreement with the agent's
`nodeagent.model.times` (two implementations written apart), which reads more than RFC 3339: it
only ever reads what a server wrote."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodeagent.model import times as agent
from nodeagent_testbed.sim.lifecycle_types import format_time, parse_time

_TZ = timezone(timedelta(hours=2))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-03-01T10:20:30Z", datetime(2024, 3, 1, 10, 20, 30, tzinfo=UTC)),
        ("2024-03-01T12:20:30+02:00", datetime(2024, 3, 1, 12, 20, 30, tzinfo=_TZ)),
        ("2024-03-01T10:20:30.5Z", datetime(2024, 3, 1, 10, 20, 30, 500000, tzinfo=UTC)),
        # nanoseconds (and beyond), kept to the microsecond
        ("2024-03-01T10:20:30.123456789Z", datetime(2024, 3, 1, 10, 20, 30, 123456, tzinfo=UTC)),
        (
            "2024-02-29T23:59:59-23:59",
            datetime(2024, 2, 29, 23, 59, 59, tzinfo=timezone(-timedelta(hours=23, minutes=59))),
        ),
        ("2023-02-29T00:00:00Z", None),  # no such day
        ("2024-03-01T24:00:00Z", None),
        ("2024-03-01T10:20:60Z", None),  # no leap seconds
        ("2024-03-01T10:20:30", None),  # a zone is required
        ("2024-03-01T10:20:30z", None),
        ("2024-03-01 10:20:30Z", None),
        ("2024-03-01T10:20:30.Z", None),
        ("2024-03-01T10:20:30+0200", None),
        ("2024-03-01T10:20:30+24:00", None),
        ("2024-03-01", None),
        (" 2024-03-01T10:20:30Z", None),
        ("0000-01-01T00:00:00Z", None),  # Go takes year 0, Python has none
        ("", None),
        (None, None),
        (1709288430, None),
    ],
)
def test_parse_time_as_go_reads_rfc3339(text: object, expected: datetime | None) -> None:
    assert parse_time(text) == expected


def test_format_time_as_the_server_writes_it() -> None:
    when = datetime(2024, 3, 1, 12, 20, 30, 999999, tzinfo=_TZ)
    assert format_time(when) == "2024-03-01T10:20:30Z"  # UTC, the fraction dropped


_instants = st.datetimes(
    min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.timezones()
)


def test_format_time_writes_four_digit_years() -> None:
    # the agent's format_time writes "999-01-01T00:00:00Z" (strftime), which neither reads
    assert format_time(datetime(999, 1, 1, tzinfo=UTC)) == "0999-01-01T00:00:00Z"
    assert parse_time("0999-01-01T00:00:00Z") == datetime(999, 1, 1, tzinfo=UTC)


@given(_instants.filter(lambda when: when.astimezone(UTC).year >= 1000))
def test_times_the_server_writes_agree_with_the_agents(when: datetime) -> None:
    assert format_time(when) == agent.format_time(when)
    for text in (agent.format_time(when), agent.format_micro_time(when)):
        assert parse_time(text) == agent.parse_time(text)
        assert parse_time(text) is not None


@given(_instants)
def test_times_round_trip(when: datetime) -> None:
    assert parse_time(format_time(when)) == when.astimezone(UTC).replace(microsecond=0)


@st.composite
def _rfc3339(draw: st.DrawFn) -> str:
    """RFC 3339 texts, sometimes with one character changed."""
    when = draw(st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)))
    text = when.replace(microsecond=0).isoformat()
    text += draw(st.sampled_from(["", "."])) + draw(st.text(alphabet="0123456789", max_size=10))
    zone = draw(st.sampled_from(["Z", "+", "-"]))
    if zone != "Z":
        zone += f"{draw(st.integers(0, 23)):02d}:{draw(st.integers(0, 59)):02d}"
    text += zone
    if draw(st.booleans()):
        i = draw(st.integers(0, len(text) - 1))
        text = text[:i] + draw(st.sampled_from("0912-:T.Zz+ ")) + text[i + 1 :]
    return text


@given(_rfc3339())
def test_what_the_sim_reads_the_agent_reads_alike(text: str) -> None:
    when = parse_time(text)
    if when is not None:
        assert agent.parse_time(text) == when
