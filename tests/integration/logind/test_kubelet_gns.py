"""Detecting the kubelet's Graceful Node Shutdown, on either cluster backend: a simulated logind
on a private dbus-daemon, a "kubelet" (a process of that name, a real D-Bus client) that takes
its delay lock as the real one does, and node-1's agent credentials for the Events.

The agent sees GNS on when the kubelet writes its drop-in and holds its lock, and off again
when the kubelet exits (its lock goes with it); a garbage kubelet config file is "unknown"."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from nodeagent.config import ShutdownConfig
from nodeagent.kube.events import EventRecorder
from nodeagent.kube.resources import EVENTS
from nodeagent.logind.guard import ShutdownGuard
from nodeagent.model.kubelet_shutdown import EVENT_OFF, EVENT_ON, GnsState, Verdict
from nodeagent.node.kubelet import kubelet_processes
from nodeagent.node.kubelet_shutdown import KubeletShutdownWatch
from nodeagent_testbed.fakelogind import FakeLogind
from tests.clusters import ClusterView
from tests.integration.logind.conftest import FAST_RECONNECT
from tests.integration.shutdown_cluster import ShutdownCluster, shutdown_cluster
from tests.tasks import cancel_and_wait
from tests.until import until

__all__ = ["shutdown_cluster"]  # the fixture

Obj = dict[str, Any]
PYTHON = os.path.realpath(sys.executable)

# what the kubelet's nodeshutdown dbus module does at start, as a separate process
KUBELET = textwrap.dedent(
    """
    import asyncio, sys
    from dbus_next import Message
    from dbus_next.aio import MessageBus

    async def main():
        bus = await MessageBus(bus_address=sys.argv[1], negotiate_unix_fd=True).connect()
        reply = await bus.call(Message(
            destination="org.freedesktop.login1", path="/org/freedesktop/login1",
            interface="org.freedesktop.login1.Manager", member="Inhibit", signature="ssss",
            body=["shutdown", "kubelet", "Kubelet needs time to handle node shutdown", "delay"]))
        assert reply.unix_fds, reply.body
        print("locked", flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())
    """
)


@contextlib.asynccontextmanager
async def kubelet(
    tmp_path: Path, address: str, config: Path
) -> AsyncIterator[asyncio.subprocess.Process]:
    """A process named `kubelet` (Python under that name) holding the kubelet's lock."""
    exe = tmp_path / "bin" / "kubelet"
    exe.parent.mkdir(exist_ok=True)
    if not exe.exists():
        exe.symlink_to(PYTHON)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    proc = await asyncio.create_subprocess_exec(
        str(exe), "-c", KUBELET, address, "--config", str(config),
        stdout=asyncio.subprocess.PIPE, env=env,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        async with asyncio.timeout(20):
            assert await proc.stdout.readline() == b"locked\n"
        yield proc
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


def gns_watch(
    guard: ShutdownGuard,
    reports: Reports,
    dropins: Path,
    kubelet_config: Path,
    mine: set[int],
    events: EventRecorder | None = None,
) -> KubeletShutdownWatch:
    return KubeletShutdownWatch(
        guard,
        events,
        "node-1",
        report=reports,
        dropin_dir=dropins,
        # only the test's kubelets (`mine`): other kubelets may run on this machine
        processes=lambda: [p for p in kubelet_processes() if p.pid in mine],
        kubelet_config=kubelet_config,
    )


def node_events(view: ClusterView) -> list[Obj]:
    return [
        e
        for e in view.list(EVENTS, "default")
        if e["involvedObject"]["kind"] == "Node" and e["reason"] in (EVENT_ON, EVENT_OFF)
    ]


async def test_kubelet_lock_reports_gns_on_and_its_exit_off(
    shutdown_cluster: ShutdownCluster,
    fake: FakeLogind,
    config: ShutdownConfig,
    conf_root: Path,
    tmp_path: Path,
) -> None:
    c = shutdown_cluster
    dropins = conf_root / "etc/systemd/logind.conf.d"
    dropins.mkdir(parents=True)
    kubelet_config = tmp_path / "kubelet-config.yaml"
    # what the file says is off: the running kubelet's lock is what counts
    kubelet_config.write_text("kind: KubeletConfiguration\nshutdownGracePeriod: 0s\n")
    mine: set[int] = set()
    view = ClusterView(c.kube, [EVENTS])
    await view.start()
    guard = ShutdownGuard(config, _NoShutdown(), reconnect=FAST_RECONNECT)
    reports = Reports()
    events = EventRecorder(c.agent, component="nodeagent", host="node-1")
    watch = gns_watch(guard, reports, dropins, kubelet_config, mine, events)
    tasks = [asyncio.create_task(guard.run()), asyncio.create_task(watch.run())]
    try:
        async with asyncio.timeout(10):
            await guard.wait_lock()
        await reports.until(GnsState.OFF)
        assert not node_events(view), "off from the start: nothing to tell"

        async with kubelet(tmp_path, fake.daemon.address, kubelet_config) as proc:
            mine.add(proc.pid)
            # the kubelet writes its drop-in (here after its lock, so the check sees both)
            (dropins / "99-kubelet.conf").write_text("[Login]\nInhibitDelayMaxSec=30\n")
            await reports.until(GnsState.ON)
            assert watch.verdict is not None
            assert f"pid {proc.pid}" in watch.verdict.evidence
            await view.until(lambda: [e["reason"] for e in node_events(view)] == [EVENT_ON])
            (event,) = node_events(view)
            assert event["type"] == "Warning"
            assert event["involvedObject"]["name"] == "node-1"
            assert "shutdownGracePeriod: 0" in event["message"]
            checks = watch.checks
            proc.kill()
            await proc.wait()
        mine.clear()
        # nothing else changed: the kubelet's exit alone brings the check
        await reports.until(GnsState.OFF)
        assert watch.checks > checks
        await view.until(lambda: len(node_events(view)) == 2)
        assert sorted(e["reason"] for e in node_events(view)) == [EVENT_OFF, EVENT_ON]
    finally:
        await cancel_and_wait(tasks)
        await view.stop()


async def test_a_dropin_directory_made_later_is_watched_once_it_exists(
    fake: FakeLogind,
    config: ShutdownConfig,
    conf_root: Path,
    tmp_path: Path,
) -> None:
    """No logind.conf.d yet (the kubelet makes it as it writes its drop-in): the watch waits in
    its parent, moves into it once it exists, and sees a drop-in written there afterwards."""
    kubelet_config = tmp_path / "kubelet-config.yaml"
    kubelet_config.write_text("kind: KubeletConfiguration\nshutdownGracePeriod: 30s\n")
    dropins = conf_root / "etc/systemd/logind.conf.d"
    dropins.parent.mkdir(parents=True)
    mine: set[int] = set()
    guard = ShutdownGuard(config, _NoShutdown(), reconnect=FAST_RECONNECT)
    reports = Reports()
    watch = gns_watch(guard, reports, dropins, kubelet_config, mine)
    tasks = [asyncio.create_task(guard.run()), asyncio.create_task(watch.run())]
    try:
        async with asyncio.timeout(10):
            await guard.wait_lock()
        async with kubelet(tmp_path, fake.daemon.address, kubelet_config) as proc:
            mine.add(proc.pid)
            dropins.mkdir()
            dropin = dropins / "99-kubelet.conf"
            dropin.write_text("[Login]\nInhibitDelayMaxSec=30\n")
            await reports.until(GnsState.ON)
            # watched in the directory itself now (the parent's watch is not recursive): a
            # drop-in written there brings a check
            checks = watch.checks
            (dropins / "50-other.conf").write_text("[Login]\nInhibitDelayMaxSec=45\n")
            await until(lambda: watch.checks > checks, what="a check after the new drop-in")
    finally:
        await cancel_and_wait(tasks)


async def test_garbage_kubelet_config_is_unknown_with_one_clear_line(
    fake: FakeLogind,
    config: ShutdownConfig,
    conf_root: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    kubelet_config = tmp_path / "config.yaml"
    kubelet_config.write_text("kind: KubeletConfiguration\nshutdownGracePeriod: [1, 2\n")
    dropins = conf_root / "etc/systemd/logind.conf.d"
    dropins.mkdir(parents=True)
    guard = ShutdownGuard(config, _NoShutdown(), reconnect=FAST_RECONNECT)
    reports = Reports()
    watch = KubeletShutdownWatch(
        guard,
        None,
        "node-1",
        report=reports,
        dropin_dir=dropins,
        processes=list,
        kubelet_config=kubelet_config,
    )
    tasks = [asyncio.create_task(guard.run()), asyncio.create_task(watch.run())]
    try:
        with caplog.at_level(logging.WARNING, "nodeagent.node.kubelet_shutdown"):
            await reports.until(GnsState.UNKNOWN)
            kubelet_config.write_text("kind: KubeletConfiguration\nshutdownGracePeriod: 30\n")
            verdict = await watch.check()
            assert verdict.state is GnsState.UNKNOWN
        lines = [r.getMessage() for r in caplog.records]
        assert len(lines) == 1, lines  # once per change, not per check
        assert str(kubelet_config) in lines[0]
        assert "\n" not in lines[0]
        assert "shutdownGracePeriod: 30 is not a duration string" in verdict.evidence
    finally:
        await cancel_and_wait(tasks)


class Reports:
    """The watch's `report` callback: every change it announced."""

    def __init__(self) -> None:
        self.states: list[GnsState] = []
        self._changed = asyncio.Event()

    def __call__(self, verdict: Verdict) -> None:
        self.states.append(verdict.state)
        self._changed.set()

    async def until(self, state: GnsState, timeout: float = 10) -> None:
        await until(
            lambda: bool(self.states) and self.states[-1] is state,
            what=f"the watch to report {state}",
            changed=self._changed,
            timeout=timeout,
        )


class _NoShutdown:
    async def on_shutdown(self, kind: str) -> None:
        raise AssertionError("no shutdown in these tests")

    async def on_cancel(self) -> None:
        pass
