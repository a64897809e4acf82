"""The shutdown lock outlives the agent: a copy of the inhibitor fd goes to the service manager's
fd store (a real notify socket here, read as systemd reads it), an agent that stops during a
shutdown leaves the lock there, and the next one takes it back and carries the shutdown on."""

from __future__ import annotations

import array
import asyncio
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from nodeagent.config import ShutdownConfig
from nodeagent.logind.fdstore import FdStore
from nodeagent.logind.guard import ShutdownGuard
from nodeagent_testbed.fakelogind import FakeLogind
from tests.integration.logind.conftest import FAST_RECONNECT, Handler
from tests.until import until


class ServiceManager:
    """The fd store side of systemd's notify socket: FDSTORE=1 keeps the fd under its FDNAME,
    FDSTOREREMOVE=1 closes and forgets the fds of that name."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.setblocking(False)
        self.store: dict[str, list[int]] = {}
        self.changed = asyncio.Event()
        asyncio.get_running_loop().add_reader(self.sock, self._read)

    def _read(self) -> None:
        while True:
            try:
                data, ancdata, _, _ = self.sock.recvmsg(4096, socket.CMSG_SPACE(16 * 4))
            except BlockingIOError:
                return
            fds = array.array("i")
            for level, kind, payload in ancdata:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
            fields = dict(line.split("=", 1) for line in data.decode().splitlines() if "=" in line)
            name = fields.get("FDNAME", "stored")
            if fields.get("FDSTORE") == "1":
                self.store.setdefault(name, []).extend(fds)
            else:
                for fd in fds:
                    os.close(fd)
            if fields.get("FDSTOREREMOVE") == "1":
                for fd in self.store.pop(name, []):
                    os.close(fd)
            self.changed.set()

    def fds(self) -> list[tuple[int, str]]:
        return [(fd, name) for name, fds in self.store.items() for fd in fds]

    def hand_back(self) -> list[tuple[int, str]]:
        """What a restarted service gets: its own copies of the stored fds."""
        return [(os.dup(fd), name) for fd, name in self.fds()]

    def close(self) -> None:
        asyncio.get_running_loop().remove_reader(self.sock)
        self.sock.close()
        for fd, _ in self.fds():
            os.close(fd)


@pytest.fixture
async def manager(tmp_path: Path) -> AsyncIterator[ServiceManager]:
    m = ServiceManager(tmp_path / "notify")
    yield m
    m.close()


def guard_with_store(
    config: ShutdownConfig, handler: Handler, manager: ServiceManager
) -> tuple[ShutdownGuard, asyncio.Task[None]]:
    store = FdStore({"NOTIFY_SOCKET": str(manager.path)})
    guard = ShutdownGuard(
        config, handler, reconnect=FAST_RECONNECT, fdstore=store, inherited=manager.hand_back()
    )
    handler.guard = guard
    return guard, asyncio.create_task(guard.run())


async def stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_the_lock_is_stored_and_a_restart_during_a_shutdown_carries_it_on(
    fake: FakeLogind, config: ShutdownConfig, manager: ServiceManager
) -> None:
    first = Handler()
    guard, task = guard_with_store(config, first, manager)
    async with asyncio.timeout(5):
        await guard.wait_lock()
        await manager.changed.wait()
    inh = await fake.lock_taken()
    (stored,) = manager.fds()
    assert stored[1].startswith("logind-inhibitor-")
    assert guard._lock is not None and guard._lock.fd is not None
    assert os.fstat(stored[0]).st_ino == os.fstat(guard._lock.fd).st_ino

    fake.emit_shutdown(True, type="reboot")
    async with asyncio.timeout(5):
        await first.started.wait()
    # the agent goes away mid-drain: its own fd closes, the stored copy holds the shutdown
    await stop(task)
    assert inh.active, "the shutdown went on when the agent stopped"
    assert len(manager.fds()) == 1

    # the next start takes the lock back (logind refuses new delay locks now) and carries on
    second = Handler()
    guard, task = guard_with_store(config, second, manager)
    async with asyncio.timeout(5):
        await second.started.wait()
    assert second.kinds == ["reboot"] and guard.lock_held and inh.active
    manager.changed.clear()
    second.proceed.set()
    await fake.lock_released(timeout=2.0, inhibitor=inh)
    assert manager.fds() == [], "the stored copy went with the release"
    await stop(task)


async def test_a_new_lock_replaces_the_stored_one(
    fake: FakeLogind, config: ShutdownConfig, manager: ServiceManager
) -> None:
    handler = Handler()
    guard, task = guard_with_store(config, handler, manager)
    async with asyncio.timeout(5):
        await guard.wait_lock()
    first = await fake.lock_taken()
    async with asyncio.timeout(5):
        await manager.changed.wait()
    # logind restarts: the guard takes a new lock, stores it, and lets the old one go
    await fake.restart()
    second = await fake.lock_taken(after=first.id, timeout=10)
    await fake.lock_released(inhibitor=first, timeout=5)
    await until(lambda: len(manager.fds()) == 1, changed=manager.changed, timeout=5)
    (stored,) = manager.fds()
    assert guard._lock is not None and guard._lock.fd is not None
    assert os.fstat(stored[0]).st_ino == os.fstat(guard._lock.fd).st_ino
    assert second.active
    await stop(task)
    # stopped outside a shutdown: the store still holds it, systemd closes it when the unit
    # is stopped for good
    assert second.active and len(manager.fds()) == 1


async def test_without_a_service_manager_stopping_releases(
    fake: FakeLogind, config: ShutdownConfig
) -> None:
    handler = Handler()
    guard = ShutdownGuard(config, handler, reconnect=FAST_RECONNECT, fdstore=FdStore({}))
    task = asyncio.create_task(guard.run())
    async with asyncio.timeout(5):
        await guard.wait_lock()
    inh = await fake.lock_taken()
    await stop(task)
    await fake.lock_released(timeout=1.0, inhibitor=inh)


INHERIT = """
import os, sys
from nodeagent.logind.fdstore import inherited_fds
for target in (3, 4):  # a fresh process: place two pipes where systemd puts passed fds
    r, w = os.pipe()
    os.dup2(w, target, inheritable=True)
env = {"LISTEN_PID": str(os.getpid()) if sys.argv[2] == "ours" else "1",
       "LISTEN_FDS": "2", "LISTEN_FDNAMES": sys.argv[1], "PATH": "/bin"}
got = inherited_fds(env)
def is_open(fd):
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False
print(got, sorted(env), [os.get_inheritable(fd) for fd, _ in got], is_open(4), flush=True)
"""


@pytest.mark.parametrize(
    ("names", "pid", "expected"),
    [
        # not ours to keep: fd 4 is closed
        (
            "logind-inhibitor-7-1:other",
            "ours",
            "[(3, 'logind-inhibitor-7-1')] ['PATH'] [False] False",
        ),
        (
            "logind-inhibitor-7-1:logind-inhibitor-9-2",
            "ours",
            "[(3, 'logind-inhibitor-7-1'), (4, 'logind-inhibitor-9-2')] ['PATH'] [False, False]"
            " True",
        ),
        # meant for another process (LISTEN_PID): nothing taken, nothing closed
        ("logind-inhibitor-7-1:other", "other", "[] ['PATH'] [] True"),
    ],
)
def test_inherited_fds_are_read_as_sd_listen_fds_does(names: str, pid: str, expected: str) -> None:
    out = subprocess.run(
        [sys.executable, "-c", INHERIT, names, pid], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == expected, out.stderr
