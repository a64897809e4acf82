"""The bridge's memory of the evictions it answered without writing: the first attempt of each
pod, kept for the bound and then forgotten."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from nodeagent.bridge.attempts import Attempts

START = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
WITHIN = timedelta(seconds=60)


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


def test_the_first_attempt_is_remembered_for_the_bound_and_then_starts_over() -> None:
    clock = Clock()
    attempts = Attempts(WITHIN, clock)
    assert attempts.first("ns", "u1") is None  # the first: recorded
    clock.now += timedelta(seconds=5)
    assert attempts.first("ns", "u1") == START  # asked again: the first is still the first
    clock.now = START + WITHIN
    assert attempts.first("ns", "u1") == START
    clock.now = START + WITHIN + timedelta(microseconds=1)
    assert attempts.first("ns", "u1") is None  # forgotten: this one is a new first
    assert attempts.first("ns", "u1") == clock.now


def test_each_pod_has_its_own_first_and_the_memory_holds_only_the_bound() -> None:
    clock = Clock()
    attempts = Attempts(WITHIN, clock)
    for i in range(100):
        attempts.first("ns", f"u{i}")
        clock.now += timedelta(seconds=1)
    assert attempts.first("other", "u0") is None  # namespaces apart
    assert attempts.first("ns", "u99") == START + timedelta(seconds=99)
    # only those of the last minute are left, and the one just recorded
    assert len(attempts) == 61  # u40..u99 and other/u0
