"""logind's Reboot, through `nodeagent.logind.manager` and the fake logind on a real
dbus-daemon: the shutdown is announced (PrepareForShutdown(true), type reboot), the reboot waits
for the delay locks of shutdown (at most InhibitDelayMaxUSec), and a second action while one is
under way is refused with OperationInProgress, as logind does."""

from __future__ import annotations

import asyncio

import pytest

from nodeagent.logind.bus import Bus, CallFailed
from nodeagent.logind.manager import Logind, ShutdownSignal, reboot
from nodeagent.logind.names import ERROR_OPERATION_IN_PROGRESS
from nodeagent_testbed.fakelogind import DBusDaemon, FakeLogind


async def test_reboot_announces_the_shutdown_and_waits_for_the_delay_lock(
    daemon: DBusDaemon, fake: FakeLogind
) -> None:
    bus = await Bus.connect(daemon.address)
    signals: list[ShutdownSignal] = []
    got = asyncio.Event()
    logind = Logind(bus)

    def on_signal(s: ShutdownSignal) -> None:
        signals.append(s)
        got.set()

    try:
        await logind.subscribe(on_signal, lambda _how: None)
        lock = await logind.inhibit("test")
        await reboot(daemon.address)
        assert fake.reboot_calls == [False]
        async with asyncio.timeout(5):
            await got.wait()
        assert signals == [ShutdownSignal(True, "reboot", "PrepareForShutdownWithMetadata")]
        assert not fake.rebooted.is_set(), "held back while the delay lock is held"
        with pytest.raises(CallFailed) as refused:
            await reboot(daemon.address)
        assert refused.value.name == ERROR_OPERATION_IN_PROGRESS
        lock.release()
        async with asyncio.timeout(2):
            await fake.rebooted.wait()
    finally:
        logind.close()
        await bus.close()


async def test_the_delay_lock_holds_a_reboot_no_longer_than_logind_allows(
    daemon: DBusDaemon, fake: FakeLogind
) -> None:
    fake.delay_max_usec = 200_000
    bus = await Bus.connect(daemon.address)
    try:
        lock = await Logind(bus).inhibit("test")
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        await reboot(daemon.address)
        async with asyncio.timeout(3):
            await fake.rebooted.wait()
        assert loop.time() - t0 >= 0.2, "logind waited for the lock, as long as it allows"
        assert fake.active(), "and went on with the lock still held"
        lock.release()
    finally:
        await bus.close()


async def test_no_lock_reboots_at_once(daemon: DBusDaemon, fake: FakeLogind) -> None:
    await reboot(daemon.address)
    async with asyncio.timeout(2):
        await fake.rebooted.wait()
