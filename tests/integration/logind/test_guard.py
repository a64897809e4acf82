"""The shutdown guard against a fake logind on a private dbus-daemon (real D-Bus, real fds)."""

from __future__ import annotations

import asyncio

import pytest

from nodeagent.model.names import AGENT
from nodeagent_testbed.fakelogind import FakeLogind
from tests.integration.logind.conftest import Handler, RunGuard
from tests.narrowing import now


async def test_lock_held_after_startup(fake: FakeLogind, run_guard: RunGuard) -> None:
    guard = await run_guard()
    async with asyncio.timeout(5):
        await guard.wait_lock()
    inh = await fake.lock_taken()
    assert (inh.what, inh.who, inh.mode) == ("shutdown", AGENT, "delay")
    assert inh.why
    assert guard.lock_held and guard.lock_held_event.is_set()
    assert not guard.lock_free_event.is_set()
    # logind's own view, through the guard's diagnostics call
    async with asyncio.timeout(5):
        await guard.connected_event.wait()
    listed = await guard.list_inhibitors()
    assert [(i.what, i.who, i.mode) for i in listed] == [("shutdown", AGENT, "delay")]
    assert guard.inhibit_delay_max == 5.0
    assert len(fake.active()) == 1


async def test_shutdown_holds_lock_until_on_shutdown_returns(
    fake: FakeLogind, run_guard: RunGuard, handler: Handler
) -> None:
    guard = await run_guard()
    async with asyncio.timeout(5):
        await guard.wait_lock()
    inh = await fake.lock_taken()

    fake.emit_shutdown(True, type="reboot")
    async with asyncio.timeout(5):
        await handler.started.wait()
    # both signals came (metadata first), the handler ran once, with the type
    assert handler.kinds == ["reboot"]
    assert handler.lock_held_during == [True]
    assert inh.active and guard.lock_held
    assert guard.preparing_for_shutdown and guard.shutdown_kind == "reboot"

    handler.proceed.set()
    await fake.lock_released(timeout=1.0, inhibitor=inh)
    assert not now(guard.lock_held) and guard.lock_free_event.is_set()
    assert handler.kinds == ["reboot"]
    # logind refuses new delay locks now; the guard does not take one
    assert fake.active() == []


@pytest.mark.parametrize("fake_options", [{"with_metadata": False}])
async def test_old_logind_without_metadata(
    fake: FakeLogind, run_guard: RunGuard, handler: Handler
) -> None:
    guard = await run_guard()
    async with asyncio.timeout(5):
        await guard.wait_lock()
    inh = await fake.lock_taken()
    fake.emit_shutdown(True, type="poweroff")
    async with asyncio.timeout(5):
        await handler.started.wait()
    assert handler.kinds == ["unknown"]
    handler.proceed.set()
    await fake.lock_released(timeout=1.0, inhibitor=inh)


async def test_on_shutdown_failing_still_releases(
    fake: FakeLogind, run_guard: RunGuard, handler: Handler
) -> None:
    handler.fail = RuntimeError("API server on fire")
    guard = await run_guard()
    async with asyncio.timeout(5):
        await guard.wait_lock()
    inh = await fake.lock_taken()
    fake.emit_shutdown(True, type="halt")
    handler.proceed.set()
    await fake.lock_released(timeout=1.0, inhibitor=inh)
    assert handler.kinds == ["halt"]


async def test_cancel_while_waiting_keeps_the_lock(
    fake: FakeLogind, run_guard: RunGuard, handler: Handler
) -> None:
    guard = await run_guard()
    async with asyncio.timeout(5):
        await guard.wait_lock()
    inh = await fake.lock_taken()
    fake.emit_shutdown(True, type="reboot")
    async with asyncio.timeout(5):
        await handler.started.wait()

    fake.emit_shutdown(False, type="reboot")
    async with asyncio.timeout(5):
        await handler.cancel_seen.wait()
    assert handler.cancelled.is_set()  # on_shutdown was cancelled, not left waiting
    assert handler.cancels == 1
    assert not handler.finished.is_set()
    # the lock never went away: same inhibitor, still held
    assert inh.active and guard.lock_held
    assert [i.id for i in fake.active()] == [inh.id]
    assert not guard.preparing_for_shutdown


async def test_cancel_after_release_takes_a_new_lock(
    fake: FakeLogind, run_guard: RunGuard, handler: Handler
) -> None:
    guard = await run_guard()
    async with asyncio.timeout(5):
        await guard.wait_lock()
    first = await fake.lock_taken()
    fake.emit_shutdown(True, type="reboot")
    handler.proceed.set()
    await fake.lock_released(timeout=1.0, inhibitor=first)

    fake.emit_shutdown(False, type="reboot")
    second = await fake.lock_taken(after=first.id)
    async with asyncio.timeout(5):
        await handler.cancel_seen.wait()
    async with asyncio.timeout(5):
        await guard.wait_lock()
    assert handler.cancels == 1
    assert [i.id for i in fake.active()] == [second.id]

    # and the next shutdown is handled again
    handler.started.clear()
    fake.emit_shutdown(True, type="poweroff")
    async with asyncio.timeout(5):
        await handler.started.wait()
    assert handler.kinds == ["reboot", "poweroff"]
    await fake.lock_released(timeout=1.0, inhibitor=second)


async def test_dbus_daemon_restart_gets_the_lock_back(
    fake: FakeLogind, run_guard: RunGuard
) -> None:
    guard = await run_guard()
    async with asyncio.timeout(5):
        await guard.wait_lock()
    first = await fake.lock_taken()
    sessions = guard.sessions

    await fake.daemon.kill()
    async with asyncio.timeout(5):
        await guard.wait_until(lambda: not guard.connected)
    await fake.daemon.start()
    await fake.restart()

    second = await fake.lock_taken(after=first.id, timeout=10)
    async with asyncio.timeout(10):
        await guard.connected_event.wait()
    # make-before-break: the old fd (still a valid lock for logind) is closed after
    await fake.lock_released(timeout=5, inhibitor=first)
    assert [i.id for i in fake.active()] == [second.id]
    assert guard.lock_held
    assert guard.sessions == sessions + 1


async def test_logind_restart_gets_the_lock_back(fake: FakeLogind, run_guard: RunGuard) -> None:
    guard = await run_guard()
    async with asyncio.timeout(5):
        await guard.wait_lock()
    first = await fake.lock_taken()

    await fake.restart()  # the name changes owner; the bus stays

    second = await fake.lock_taken(after=first.id, timeout=10)
    await fake.lock_released(timeout=5, inhibitor=first)
    assert [i.id for i in fake.active()] == [second.id]
    assert guard.lock_held


async def test_logind_appearing_later(fake: FakeLogind, run_guard: RunGuard) -> None:
    await fake.stop()
    guard = await run_guard()
    # the guard retries (LogindUnavailable) while org.freedesktop.login1 has no owner
    async with asyncio.timeout(5):
        await guard.wait_until(lambda: guard.reconnects >= 2)
    assert not guard.connected and not guard.lock_held
    await fake.start()
    await fake.lock_taken(timeout=10)
    async with asyncio.timeout(5):
        await guard.wait_lock()


async def test_startup_during_shutdown_acts_on_it(
    fake: FakeLogind, run_guard: RunGuard, handler: Handler
) -> None:
    fake.preparing, fake.kind = True, "poweroff"
    guard = await run_guard()
    # known the moment the guard says it is connected (READY's status reports it): it was
    # only queued then, and an agent started during a shutdown reported no shutdown
    await guard.connected_event.wait()
    assert guard.preparing_for_shutdown
    async with asyncio.timeout(5):
        await handler.started.wait()
    assert handler.kinds == ["poweroff"]
    # logind refuses a delay lock while the shutdown runs (OperationInProgress)
    assert not guard.lock_held
    assert fake.active() == []
    handler.proceed.set()
    async with asyncio.timeout(5):
        await handler.finished.wait()
    assert handler.kinds == ["poweroff"]


@pytest.mark.parametrize("fake_options", [{"with_metadata": False}])
async def test_startup_during_shutdown_old_logind(
    fake: FakeLogind, run_guard: RunGuard, handler: Handler
) -> None:
    fake.preparing = True
    await run_guard()
    async with asyncio.timeout(5):
        await handler.started.wait()
    assert handler.kinds == ["unknown"]


async def test_reconnect_during_shutdown_keeps_lock_and_does_not_repeat(
    fake: FakeLogind, run_guard: RunGuard, handler: Handler
) -> None:
    guard = await run_guard()
    async with asyncio.timeout(5):
        await guard.wait_lock()
    inh = await fake.lock_taken()
    fake.emit_shutdown(True, type="reboot")
    async with asyncio.timeout(5):
        await handler.started.wait()
    sessions = guard.sessions

    await fake.restart()
    async with asyncio.timeout(10):
        await guard.wait_until(lambda: guard.sessions > sessions)
    # logind refused a new lock (shutdown under way); the one we have is kept
    assert inh.active and guard.lock_held
    assert handler.kinds == ["reboot"]

    handler.proceed.set()
    await fake.lock_released(timeout=1.0, inhibitor=inh)
    assert handler.kinds == ["reboot"]


async def test_stopping_the_guard_releases_the_lock(fake: FakeLogind, config: object) -> None:
    from nodeagent.logind.guard import ShutdownGuard
    from tests.integration.logind.conftest import FAST_RECONNECT

    handler = Handler()
    guard = ShutdownGuard(config, handler, reconnect=FAST_RECONNECT)  # type: ignore[arg-type]
    task = asyncio.create_task(guard.run())
    async with asyncio.timeout(5):
        await guard.wait_lock()
    inh = await fake.lock_taken()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await fake.lock_released(timeout=1.0, inhibitor=inh)
    assert not guard.lock_held
