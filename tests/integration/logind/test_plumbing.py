"""The D-Bus plumbing on its own: connection, inhibitor fd, logind signals, backoff."""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

import pytest

from nodeagent.logind.bus import Bus, BusClosed, CallFailed
from nodeagent.logind.inhibitor import InhibitorLock
from nodeagent.logind.manager import KIND_UNKNOWN, Logind, LogindUnavailable, ShutdownSignal
from nodeagent.logind.names import ERROR_OPERATION_IN_PROGRESS
from nodeagent_testbed.fakelogind import DBusDaemon, FakeLogind
from tests.narrowing import now


def _open_fds() -> int:
    return len(list(Path("/proc/self/fd").iterdir()))


async def test_connections_do_not_leak_fds(daemon: DBusDaemon) -> None:
    for _ in range(3):  # warm up whatever the loop allocates once
        await (await Bus.connect(daemon.address)).close()
    before = _open_fds()
    for _ in range(20):
        bus = await Bus.connect(daemon.address)
        assert bus.connected and bus.unique_name
        await bus.close()
        await bus.close()  # idempotent
        assert not bus.connected
    assert _open_fds() <= before


async def test_connect_failure_is_a_bus_error(tmp_path: Path) -> None:
    with pytest.raises(BusClosed, match="cannot connect"):
        await Bus.connect(f"unix:path={tmp_path}/nothing-here")


async def test_daemon_gone_is_seen_and_calls_fail(daemon: DBusDaemon) -> None:
    bus = await Bus.connect(daemon.address)
    await daemon.kill()
    async with asyncio.timeout(5):
        err = await bus.wait_closed()
    assert err is not None
    assert not bus.connected
    with pytest.raises(BusClosed):
        await bus.call_dbus("ListNames")
    await bus.close()


async def test_call_error_names_the_dbus_error(daemon: DBusDaemon) -> None:
    bus = await Bus.connect(daemon.address)
    try:
        with pytest.raises(CallFailed) as e:
            await bus.call("org.example.Nobody", "/", "org.example.X", "Y")
        assert e.value.name == "org.freedesktop.DBus.Error.ServiceUnknown"
        assert await bus.name_owner("org.example.Nobody") is None
    finally:
        await bus.close()


async def test_logind_missing(daemon: DBusDaemon) -> None:
    bus = await Bus.connect(daemon.address)
    try:
        with pytest.raises(LogindUnavailable):
            await Logind(bus).subscribe(lambda s: None, lambda how: None)
    finally:
        await bus.close()


@pytest.mark.parametrize("with_metadata", [True, False])
async def test_each_transition_reported_once(daemon: DBusDaemon, with_metadata: bool) -> None:
    fake = FakeLogind(daemon, with_metadata=with_metadata)
    await fake.start()
    bus = await Bus.connect(daemon.address)
    got: list[ShutdownSignal] = []
    gone: list[str] = []
    arrived = asyncio.Event()
    vanished = asyncio.Event()

    def on_signal(s: ShutdownSignal) -> None:
        got.append(s)
        arrived.set()

    def on_vanished(how: str) -> None:
        gone.append(how)
        vanished.set()

    try:
        logind = Logind(bus)
        await logind.subscribe(on_signal, on_vanished)
        assert logind.features.metadata_signal is with_metadata
        assert logind.features.metadata_property is with_metadata
        for active, kind in [(True, "soft-reboot"), (False, "soft-reboot"), (True, "kexec")]:
            arrived.clear()
            fake.emit_shutdown(active, type=kind)
            async with asyncio.timeout(5):
                await arrived.wait()
        # a round trip after the last signal: its plain twin (if any) has been processed too
        await logind.inhibit_delay_max_usec()
        expect = [(True, "soft-reboot"), (False, "soft-reboot"), (True, "kexec")]
        if not with_metadata:
            expect = [(a, KIND_UNKNOWN) for a, _ in expect]
        assert [(s.active, s.kind) for s in got] == expect
        assert logind.signals_seen == 3
        state = await logind.preparing_for_shutdown()
        assert state.active and state.kind == ("kexec" if with_metadata else KIND_UNKNOWN)

        await fake.restart()
        async with asyncio.timeout(5):
            await vanished.wait()
        assert gone == ["left the bus"]
    finally:
        await bus.close()
        await fake.close()


async def test_inhibit_refused_during_shutdown(daemon: DBusDaemon) -> None:
    fake = FakeLogind(daemon)
    fake.preparing = True
    await fake.start()
    bus = await Bus.connect(daemon.address)
    try:
        logind = Logind(bus)
        await logind.subscribe(lambda s: None, lambda how: None)
        before = _open_fds()
        with pytest.raises(CallFailed) as e:
            await logind.inhibit("test")
        assert e.value.name == ERROR_OPERATION_IN_PROGRESS
        assert _open_fds() == before
    finally:
        await bus.close()
        await fake.close()


async def test_inhibitor_fd_is_the_lock(daemon: DBusDaemon) -> None:
    fake = FakeLogind(daemon)
    await fake.start()
    bus = await Bus.connect(daemon.address)
    try:
        logind = Logind(bus)
        await logind.subscribe(lambda s: None, lambda how: None)
        lock = await logind.inhibit("why not")
        assert lock.held and lock.fd is not None
        assert not os.get_inheritable(lock.fd)
        inh = await fake.lock_taken()
        assert (inh.what, inh.who, inh.why) == ("shutdown", "nodeagent", "why not")
        assert inh.mode == "delay"
        # closing the bus does not release the lock: the fd is independent of the connection
        await bus.close()
        assert inh.active
        assert lock.release() is True
        assert lock.release() is False
        assert not now(lock.held)
        await fake.lock_released(timeout=1.0, inhibitor=inh)
    finally:
        await bus.close()
        await fake.close()


def test_release_error_is_logged_not_hidden(caplog: pytest.LogCaptureFixture) -> None:
    r, w = os.pipe()
    os.close(r)
    lock = InhibitorLock(w, "shutdown", "nodeagent", "test", "delay")
    os.close(w)  # somebody closed it behind the lock's back
    with caplog.at_level(logging.ERROR, logger="nodeagent.logind.inhibitor"):
        assert lock.release() is True
    assert not lock.held
    assert any("failed" in r.getMessage() for r in caplog.records)
    assert lock.release() is False
