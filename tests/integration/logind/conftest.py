"""A private dbus-daemon with a fake logind per test, and a shutdown guard talking to it."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import pytest

from nodeagent.config import ShutdownConfig
from nodeagent.logind.guard import ShutdownGuard
from nodeagent.model.backoff import JitteredBackoff
from nodeagent_testbed.fakelogind import DBusDaemon, FakeLogind, dbus_daemon_path

if dbus_daemon_path() is None:
    pytest.skip(
        "dbus-daemon is not installed (apt-get install dbus-daemon): no private bus for the "
        "logind integration tests",
        allow_module_level=True,
    )


@pytest.fixture(autouse=True)
def collect_garbage_between_tests() -> Iterator[None]:
    """dbus-next leaves futures of calls cut off by a closed bus for the garbage collector,
    which logs them from their finalizer. Collected at some later allocation, that can land in
    the middle of a module's compile, where CPython 3.11 fails with "AST constructor recursion
    depth mismatch": collect at each test's end instead."""
    yield
    gc.collect()


# reconnect fast in tests: the production default starts at 0.2 s and grows to 30 s
FAST_RECONNECT = JitteredBackoff(base=0.02, cap=0.2, jitter=0.5)


@pytest.fixture
async def daemon() -> AsyncIterator[DBusDaemon]:
    d = DBusDaemon()
    await d.start()
    try:
        yield d
    finally:
        await d.close()


@pytest.fixture
def conf_root(tmp_path: Path) -> Path:
    """Stands for `/`: the drop-in goes to <root>/etc/systemd/logind.conf.d/."""
    root = tmp_path / "root"
    root.mkdir()
    return root


@pytest.fixture
def dropin_path(conf_root: Path) -> Path:
    return conf_root / "etc/systemd/logind.conf.d/zz-nodeagent.conf"


@pytest.fixture
def fake_options() -> dict[str, object]:
    """Override with `@pytest.mark.parametrize("fake_options", [{...}])`."""
    return {}


@pytest.fixture
async def fake(
    daemon: DBusDaemon, conf_root: Path, fake_options: dict[str, object]
) -> AsyncIterator[FakeLogind]:
    f = FakeLogind(daemon, conf_root=conf_root, **fake_options)  # type: ignore[arg-type]
    await f.start()
    try:
        yield f
    finally:
        await f.close()


@pytest.fixture
def config(daemon: DBusDaemon, dropin_path: Path) -> ShutdownConfig:
    return ShutdownConfig(
        dbus_address=daemon.address, logind_dropin=dropin_path, manage_dropin=False, budget=600
    )


class Handler:
    """Records calls; `on_shutdown` returns when the test sets `proceed`."""

    def __init__(self) -> None:
        self.kinds: list[str] = []
        self.started = asyncio.Event()
        self.proceed = asyncio.Event()
        self.finished = asyncio.Event()
        self.cancelled = asyncio.Event()
        self.cancels = 0
        self.cancel_seen = asyncio.Event()
        self.lock_held_during: list[bool] = []
        self.fail: BaseException | None = None
        self.guard: ShutdownGuard | None = None

    async def on_shutdown(self, kind: str) -> None:
        self.kinds.append(kind)
        if self.guard is not None:
            self.lock_held_during.append(self.guard.lock_held)
        self.started.set()
        try:
            await self.proceed.wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        self.finished.set()
        if self.fail is not None:
            raise self.fail

    async def on_cancel(self) -> None:
        self.cancels += 1
        self.cancel_seen.set()


@pytest.fixture
def handler() -> Handler:
    return Handler()


RunGuard = Callable[..., Awaitable[ShutdownGuard]]


@pytest.fixture
async def run_guard(
    config: ShutdownConfig, handler: Handler, fake: FakeLogind
) -> AsyncIterator[RunGuard]:
    """Start a guard (in a task) with `config`, optionally changed; stopped at teardown."""
    tasks: list[asyncio.Task[None]] = []

    async def start(**changes: object) -> ShutdownGuard:
        cfg = dataclasses.replace(config, **changes)  # type: ignore[arg-type]
        guard = ShutdownGuard(cfg, handler, reconnect=FAST_RECONNECT)
        handler.guard = guard
        tasks.append(asyncio.create_task(guard.run(), name="guard"))
        return guard

    yield start
    for t in tasks:
        t.cancel()
    for t in tasks:
        try:
            async with asyncio.timeout(10):  # a guard that ignores cancellation fails here
                await t
        except asyncio.CancelledError:
            pass
        except Exception:
            logging.getLogger(__name__).exception("guard task failed")
            raise
