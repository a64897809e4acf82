"""Timing tests on a fake clock: an asyncio event loop whose time moves only when it would
otherwise wait.

`FakeTimeLoop` is a selector event loop with a `FakeClock` for its time. Whenever nothing is
ready to run and no I/O is waiting, it moves its clock straight to the next timer instead of
sleeping, so `asyncio.sleep(30)`, `asyncio.timeout(...)` and `loop.call_later` cost no wall
time and every interval a test measures with `loop.time()` is exact. Code under test needs no
test-only parameter: it keeps reading time from its loop (`loop.time()`, asyncio's timers), and a
monotonic clock it takes (`nodeagent.kube.ratelimit.Clock`, e.g. the workqueue's) can be the same
`FakeClock`.

Tests marked `fake_time` run on it (tests/unit/conftest.py). With no timer pending, the loop
blocks on real I/O as usual (a thread's `call_soon_threadsafe` wakes it); a test that waits for
a thread while a timer is pending sees the timer fire first, so keep threads out of such tests.
"""

from __future__ import annotations

import asyncio
import selectors


class FakeClock:
    """A monotonic clock that moves only when told to (or when its loop would sleep)."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("a monotonic clock does not go back")
        self.now += seconds


class _FakeTimeSelector(selectors.DefaultSelector):
    def __init__(self, clock: FakeClock) -> None:
        super().__init__()
        self._clock = clock

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready: list[tuple[selectors.SelectorKey, int]] = super().select(0)
        if ready or (timeout is not None and timeout <= 0):
            return ready
        if timeout is None:
            # no timer: only I/O or another thread can wake the loop
            blocked: list[tuple[selectors.SelectorKey, int]] = super().select(None)
            return blocked
        self._clock.advance(timeout)  # the loop would sleep until its next timer: jump there
        return []


class FakeTimeLoop(asyncio.SelectorEventLoop):
    def __init__(self, clock: FakeClock | None = None) -> None:
        self.clock = clock if clock is not None else FakeClock()
        super().__init__(_FakeTimeSelector(self.clock))

    def time(self) -> float:
        return self.clock()


def fake_clock() -> FakeClock:
    """The running loop's clock (the test must run on a `FakeTimeLoop`)."""
    loop = asyncio.get_running_loop()
    assert isinstance(loop, FakeTimeLoop), "mark the test fake_time"
    return loop.clock
