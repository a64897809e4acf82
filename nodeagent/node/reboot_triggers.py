"""What says this node needs a reboot: a sentinel file, a request file (`nodeagent reboot`), a
sentinel command.

Files are watched (inotify, through watchfiles: the nearest directory of theirs that exists),
never polled; a file last written before this boot began is stale
(`model.reboot_request.sentinel_counts`).
A command cannot be watched: it runs every `reboot.checkInterval` seconds, killed (its process
group) after `reboot.commandTimeout`; it requires a reboot when it exits 0, and a command that
cannot run, fails or hangs counts as not required (and is logged once per kind of outcome).

`RebootTriggers.current()` is the requirement as last seen; `changed` is called on every change.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil
from watchfiles import awatch

from nodeagent.config import RebootConfig
from nodeagent.model import reboot_request
from nodeagent.node.boot import PROC

__all__ = [
    "REQUEST_SOURCE",
    "RebootTriggers",
    "Requirement",
    "boot_started",
    "read_request",
    "run_sentinel_command",
]

log = logging.getLogger(__name__)

REQUEST_SOURCE = "nodeagent reboot"
_WATCH_TIMEOUT_MS = 1000
MAX_REQUEST_BYTES = 4096
_INITS = ("systemd", "init")


@dataclass(frozen=True)
class Requirement:
    """Which triggers require a reboot now (in the order of the configuration), and the text
    the request file holds."""

    sources: tuple[str, ...] = ()
    text: str = ""

    @property
    def required(self) -> bool:
        return bool(self.sources)

    def reason(self) -> str:
        return reboot_request.requested_reason(list(self.sources), self.text)


def boot_started(proc: Path = PROC) -> float | None:
    """When this boot began, in seconds since the epoch: PID 1's start when it is the system's
    init (a soft reboot starts userspace again and keeps /run), else the kernel's boot (in a
    pod, PID 1 is the container's). None when it cannot be told."""
    try:
        if (proc / "1/comm").read_text().strip() in _INITS:
            return float(psutil.Process(1).create_time())
        return float(psutil.boot_time())
    except (OSError, psutil.Error):
        return None


def read_request(path: Path) -> str:
    """The reason a request file holds (its first bytes, as text); empty when unreadable."""
    try:
        with path.open("rb") as f:
            return f.read(MAX_REQUEST_BYTES).decode(errors="replace").strip()
    except OSError:
        return ""


def _modified(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return None
    except OSError as e:
        log.warning("cannot read %s: %s; it counts as not there", path, e)
        return None


async def run_sentinel_command(argv: tuple[str, ...], timeout: float) -> tuple[bool, str]:
    """Run the sentinel command once: (required, what happened). Exit 0 requires a reboot;
    anything else, a command that cannot start or that outlives `timeout` (then its process
    group is killed) does not."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError as e:
        return False, f"cannot run: {e}"
    try:
        async with asyncio.timeout(timeout):
            code = await proc.wait()
    except TimeoutError:
        _kill_group(proc.pid)
        # SIGKILL cannot be ignored: the wait is short, unless the process is stuck in the kernel
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(5.0):
                await proc.wait()
        return False, f"did not finish within {timeout:g}s (killed)"
    except asyncio.CancelledError:
        _kill_group(proc.pid)
        raise
    if code == 0:
        return True, "exited 0"
    if code < 0:
        return False, f"killed by signal {-code}"
    return False, f"exited {code}"


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


class RebootTriggers:
    def __init__(
        self,
        config: RebootConfig,
        *,
        boot_started: float | None,
        changed: Callable[[], None] = lambda: None,
    ) -> None:
        """`boot_started`: when this boot began (`boot_started()`), None: every file counts;
        `changed`: called whenever `current()` may have changed (it must not wait)."""
        self.config = config
        self.boot_started = boot_started
        self.changed = changed
        self.files: dict[Path, str] = {}
        if config.sentinel is not None:
            self.files[config.sentinel] = f"sentinel {config.sentinel}"
        self.files[config.request_file] = REQUEST_SOURCE
        self._file_state: dict[Path, bool] = {}
        self._command_required = False
        self._command_outcome: str | None = None
        self._text = ""
        self.command_runs = 0
        self.ready = asyncio.Event()  # every file watch in place and read once
        self._watching: set[Path] = set()
        for path in self.files:
            self._check_file(path)

    def current(self) -> Requirement:
        sources = [self.files[p] for p in self.files if self._file_state.get(p)]
        if self._command_required:
            sources.append("sentinel command")
        text = self._text if self._file_state.get(self.config.request_file) else ""
        return Requirement(tuple(sources), text)

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tg:
            for path in self.files:
                tg.create_task(self._watch(path), name=f"reboot-trigger {path}")
            if self.config.sentinel_command is not None:
                tg.create_task(self._commands(self.config.sentinel_command), name="reboot-command")

    # -- files

    def _check_file(self, path: Path) -> bool:
        """Read the file's state; True when it changed."""
        counts = reboot_request.sentinel_counts(_modified(path), self.boot_started)
        text = read_request(path) if counts and path == self.config.request_file else None
        before = self._file_state.get(path)
        changed = before != counts or (text is not None and text != self._text)
        self._file_state[path] = counts
        if text is not None:
            self._text = text
        if changed and before is not None:
            log.info(
                "%s %s", self.files[path], "requires a reboot" if counts else "no longer present"
            )
        elif counts and before is None:
            log.info("%s requires a reboot", self.files[path])
        elif before is None and _modified(path) is not None:
            log.warning(
                "%s was last written before this boot began: the reboot it asked for took place; "
                "it requires one again once written again",
                self.files[path],
            )
        return changed

    def _recheck(self, path: Path) -> None:
        if self._check_file(path):
            self.changed()

    async def _watch(self, path: Path) -> None:
        """Watch the file's nearest existing directory for changes of the file (or, while its
        own directory is missing, of the directory on its way)."""
        attempt = 0
        while True:
            target = _nearest_dir(path)
            wanted = _wanted_names(path, target)
            try:
                async for changes in awatch(
                    target,
                    watch_filter=_names_filter(wanted),
                    recursive=False,
                    debounce=50,
                    # the watcher's thread wakes every `step` ms to look for a stop request
                    step=100,
                    rust_timeout=_WATCH_TIMEOUT_MS,
                    yield_on_timeout=True,
                ):
                    attempt = 0
                    if path not in self._watching:
                        # in place now: whatever came before was not reported
                        self._watching.add(path)
                        if self._watching == set(self.files):
                            self.ready.set()
                        self._recheck(path)
                    if changes:
                        self._recheck(path)
                        if _nearest_dir(path) != target:
                            break  # a directory on the way appeared or went: watch anew
            except OSError as e:
                attempt += 1
                log.warning("cannot watch %s for %s: %s", target, path, e)
            self._watching.discard(path)
            self._recheck(path)
            # pacing only after a failed or switched watch, never to poll
            await asyncio.sleep(min(30.0, 0.5 * 2**attempt) if attempt else 0)

    # -- the command

    async def _commands(self, argv: tuple[str, ...]) -> None:
        interval = self.config.check_interval
        timeout = min(self.config.command_timeout, interval)
        while True:
            started = time.monotonic()
            required, outcome = await run_sentinel_command(argv, timeout)
            self.command_runs += 1
            kind = outcome if not required and not outcome.startswith("exited") else None
            if kind is not None and kind != self._command_outcome:
                log.warning(
                    "reboot.sentinelCommand %s %s: counts as no reboot required",
                    " ".join(argv),
                    outcome,
                )
            self._command_outcome = kind
            if required != self._command_required:
                self._command_required = required
                log.info(
                    "reboot.sentinelCommand %s %s",
                    outcome,
                    "requires a reboot" if required else "no longer requires a reboot",
                )
                self.changed()
            # the command cannot be watched: run it again after the interval
            await asyncio.sleep(max(0.0, started + interval - time.monotonic()))


def _names_filter(names: frozenset[str]) -> Callable[[object, str], bool]:
    def wanted(_change: object, path: str) -> bool:
        return Path(path).name in names

    return wanted


def _nearest_dir(path: Path) -> Path:
    d = path.parent
    while not d.is_dir() and d != d.parent:
        d = d.parent
    return d


def _wanted_names(path: Path, target: Path) -> frozenset[str]:
    """The entries of `target` whose changes matter: the file itself when `target` is its
    directory, else the next directory on its way."""
    if target == path.parent:
        return frozenset({path.name})
    return frozenset({path.relative_to(target).parts[0]})
