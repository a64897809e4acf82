"""meta/v1 Time and MicroTime as the API server writes and reads them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from hypothesis import given
from hypothesis import strategies as st

from nodeagent.model.times import format_micro_time, format_time, parse_time

instants = st.datetimes(
    min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)
)


@given(instants, st.integers(-12 * 60, 12 * 60))
def test_any_instant_is_written_in_utc_with_four_digit_years_and_read_back(
    when: datetime, offset_minutes: int
) -> None:
    local = when.astimezone(timezone(timedelta(minutes=offset_minutes)))
    written, micro = format_time(local), format_micro_time(local)
    # RFC 3339 always has a four-digit year (strftime's %Y writes 999 for the year 999)
    assert len(written) == len("2006-01-02T15:04:05Z") and written.endswith("Z")
    assert len(micro) == len("2006-01-02T15:04:05.000000Z") and micro.endswith("Z")
    assert parse_time(micro) == when
    assert parse_time(written) == when.replace(microsecond=0)


def test_the_years_before_1000_keep_their_leading_zeros() -> None:
    assert format_time(datetime(999, 3, 4, 5, 6, 7, tzinfo=UTC)) == "0999-03-04T05:06:07Z"
