"""Watch for the kubelet's Graceful Node Shutdown (GNS) and say so where an operator looks.

The decision is `nodeagent.model.kubelet_shutdown.decide`; this gathers its inputs (logind's
inhibitors through the shutdown guard, the running kubelet's configuration found as
`nodeagent.node.kubelet` finds it) and reports a change once: a log line, an Event on
the Node, the `nodeagent_kubelet_graceful_shutdown` gauge and a callback (the agent's status
line).

Checks run at start, whenever the logind drop-in directory changes (a kubelet starting with
GNS on writes `99-kubelet.conf` there just before it takes its lock), whenever the guard takes
its lock (again), and when the process holding the kubelet's lock exits (a pidfd: the lock goes
with it). Nothing is polled. A DaemonSet pod sees neither the kubelet's process nor its
configuration (no hostPID): there the lock alone tells, and its going is seen at the next check.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Protocol

import psutil

from nodeagent.kube.events import EventSink, node_object
from nodeagent.logind.bus import BusError
from nodeagent.model.kubelet_shutdown import (
    EVENT_OFF,
    EVENT_ON,
    GnsState,
    InhibitorView,
    KubeletShutdownSettings,
    MalformedKubeletConfig,
    Verdict,
    decide,
    event_message,
    settings_from_documents,
)
from nodeagent.node.dirwatch import watch_directory
from nodeagent.node.kubelet import (
    KUBEADM_KUBELET_CONFIG,
    KubeletConfigUnreadable,
    KubeletProcess,
    kubelet_config_files,
    kubelet_processes,
    read_kubelet_config,
)

__all__ = ["LOGIND_DROPIN_DIR", "KubeletShutdownWatch", "read_kubelet_settings"]

log = logging.getLogger(__name__)

LOGIND_DROPIN_DIR = Path("/etc/systemd/logind.conf.d")
_WATCH_TIMEOUT_MS = 60_000


class InhibitorSource(Protocol):
    """What the watch reads of the shutdown guard (`nodeagent.logind.ShutdownGuard`)."""

    @property
    def sessions(self) -> int: ...

    @property
    def lock_held(self) -> bool: ...

    async def list_inhibitors(self) -> Sequence[InhibitorView]: ...

    async def wait_until(self, predicate: Callable[[], bool]) -> None: ...


def read_kubelet_settings(
    processes: Callable[[], Iterable[KubeletProcess]] = kubelet_processes,
    kubelet_config: Path = KUBEADM_KUBELET_CONFIG,
) -> tuple[KubeletShutdownSettings | None, str | None]:
    """The running kubelet's GNS settings (else, with no kubelet running, those of kubeadm's
    config file), or None and why not. Blocking: run it in a thread."""
    try:
        procs = list(processes())
    except (psutil.Error, OSError) as e:
        return None, f"cannot look for a running kubelet: {e}"
    if procs:
        files = kubelet_config_files(procs[0])
        if not files:
            # no --config: every setting at its default, GNS off
            return KubeletShutdownSettings(source=f"kubelet pid {procs[0].pid} (no --config)"), None
    elif kubelet_config.is_file():
        files = [kubelet_config]
    else:
        return None, None
    try:
        docs = [(str(path), read_kubelet_config(path)) for path in files]
        return settings_from_documents(docs), None
    except (KubeletConfigUnreadable, MalformedKubeletConfig) as e:
        return None, str(e)


class KubeletShutdownWatch:
    def __init__(
        self,
        guard: InhibitorSource | None,
        events: EventSink | None,
        node_name: str,
        *,
        report: Callable[[Verdict], None] = lambda _: None,
        dropin_dir: Path = LOGIND_DROPIN_DIR,
        processes: Callable[[], Iterable[KubeletProcess]] = kubelet_processes,
        kubelet_config: Path = KUBEADM_KUBELET_CONFIG,
    ) -> None:
        """`guard`: None without a shutdown guard (then the configuration alone tells);
        `events`: None for no Events; `report`: told of every change (gauge, status line)."""
        self._guard = guard
        self._events = events
        self._node = node_name
        self._report = report
        self._dropin_dir = dropin_dir
        self._processes = processes
        self._kubelet_config = kubelet_config
        self.verdict: Verdict | None = None
        self.checks = 0
        self._wake = asyncio.Event()
        self._pidfd: int | None = None
        self._reported_on = False

    async def run(self) -> None:
        try:
            async with asyncio.TaskGroup() as tg:
                tg.create_task(self._checker(), name="kubelet-gns-check")
                tg.create_task(self._watch_dropins(), name="kubelet-gns-dropins")
                if self._guard is not None:
                    tg.create_task(self._follow_guard(self._guard), name="kubelet-gns-guard")
        finally:
            self._unwatch_pid()

    def recheck(self) -> None:
        self._wake.set()

    async def _checker(self) -> None:
        while True:
            self._wake.clear()
            await self.check()
            await self._wake.wait()

    async def check(self) -> Verdict:
        inhibitors: Sequence[InhibitorView] | None = None
        if self._guard is not None:
            try:
                inhibitors = await self._guard.list_inhibitors()
            except BusError as e:
                log.debug("cannot list logind's inhibitors: %s", e)
        settings, problem = await asyncio.to_thread(
            read_kubelet_settings, self._processes, self._kubelet_config
        )
        verdict = decide(inhibitors, settings, problem)
        self.checks += 1
        self._watch_pid(verdict.lock_pid)
        changed = self.verdict is None or verdict.state != self.verdict.state
        self.verdict = verdict
        if changed:
            await self._announce(verdict)
        return verdict

    async def _announce(self, verdict: Verdict) -> None:
        self._report(verdict)
        node = node_object(self._node)
        if verdict.state is GnsState.ON:
            log.warning("%s", event_message(verdict))
            self._reported_on = True
            if self._events is not None:
                await self._events.record(node, "Warning", EVENT_ON, event_message(verdict))
        elif verdict.state is GnsState.OFF:
            log.info("%s", event_message(verdict))
            if self._reported_on and self._events is not None:
                await self._events.record(node, "Normal", EVENT_OFF, event_message(verdict))
            self._reported_on = False
        else:
            log.warning(
                "cannot tell whether the kubelet's Graceful Node Shutdown is on: %s",
                verdict.evidence,
            )

    # -- triggers

    async def _watch_dropins(self) -> None:
        """The drop-in directory, or its parent until it exists (the kubelet creates it)."""
        watched = self._dropin_dir

        def target() -> Path:
            return self._dropin_dir if self._dropin_dir.is_dir() else self._dropin_dir.parent

        def where() -> Path:
            nonlocal watched
            watched = target()
            return watched

        def changed() -> bool:
            self.recheck()
            return target() != watched  # it exists now (or is gone): watch that instead

        def failed(directory: Path, e: OSError) -> None:
            log.warning("cannot watch %s: %s", directory, e)

        await watch_directory(where, changed=changed, failed=failed, timeout_ms=_WATCH_TIMEOUT_MS)

    async def _follow_guard(self, guard: InhibitorSource) -> None:
        """Check again each time the guard takes its lock (a new connection, or after a
        cancelled shutdown): then logind answers and the kubelet may have restarted."""
        seen = [(guard.sessions, guard.lock_held)]

        def changed() -> bool:
            return (guard.sessions, guard.lock_held) != seen[0]

        while True:
            await guard.wait_until(changed)
            seen[0] = (guard.sessions, guard.lock_held)
            if guard.lock_held:
                self.recheck()

    def _watch_pid(self, pid: int | None) -> None:
        """Wake when the process holding the kubelet's lock exits, if this agent can see it
        (same pid namespace, named kubelet)."""
        if pid is None:
            self._unwatch_pid()
            return
        if self._pidfd is not None:
            return
        try:
            if psutil.Process(pid).name() != "kubelet":
                return  # another pid namespace (a DaemonSet pod): not the kubelet's pid here
            fd = os.pidfd_open(pid)
        except (psutil.Error, OSError):
            return
        self._pidfd = fd
        asyncio.get_running_loop().add_reader(fd, self._pid_exited)

    def _pid_exited(self) -> None:
        self._unwatch_pid()
        self.recheck()

    def _unwatch_pid(self) -> None:
        fd, self._pidfd = self._pidfd, None
        if fd is not None:
            with contextlib.suppress(Exception):
                asyncio.get_running_loop().remove_reader(fd)
            os.close(fd)
