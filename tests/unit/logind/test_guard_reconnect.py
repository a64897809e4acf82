"""The shutdown guard's reconnect timing on a fake clock (tests/faketime.py): with no bus to
connect to, it tries again after the backoff's delays, doubling up to the cap, and holds no
lock meanwhile. A connection that fails at once waits on no I/O, so the loop's clock moves
only by the guard's own sleeps. With a bus and logind: tests/integration/logind."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

import pytest

from nodeagent.config import ShutdownConfig
from nodeagent.logind.guard import ShutdownGuard
from nodeagent.model.backoff import JitteredBackoff
from tests.tasks import cancel_and_wait

pytestmark = pytest.mark.fake_time


class NoShutdown:
    async def on_shutdown(self, kind: str) -> None:
        raise AssertionError("there is no logind to announce a shutdown")

    async def on_cancel(self) -> None:
        raise AssertionError("there is no logind to cancel a shutdown")


async def test_without_a_bus_the_guard_retries_after_a_doubling_capped_delay(
    tmp_path: Path,
) -> None:
    config = ShutdownConfig(dbus_address=f"unix:path={tmp_path / 'no-bus'}", manage_dropin=False)
    backoff = JitteredBackoff(base=0.2, cap=30.0, jitter=0.0)  # the guard's, without jitter
    guard = ShutdownGuard(config, NoShutdown(), reconnect=backoff)
    loop = asyncio.get_running_loop()
    start = loop.time()
    attempts: list[float] = []  # when each failed connection was seen, from the start
    task = asyncio.create_task(guard.run())
    try:
        while len(attempts) < 10:
            await guard.wait_until(lambda: guard.reconnects > len(attempts))
            attempts.append(loop.time() - start)
            assert not guard.lock_held and not guard.connected
    finally:
        await cancel_and_wait([task])
    gaps = [b - a for a, b in itertools.pairwise(attempts)]
    assert gaps == pytest.approx([0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0])
    assert guard.sessions == 0
