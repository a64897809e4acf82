"""The logind drop-in that raises `InhibitDelayMaxSec` to the shutdown budget.

logind caps every delay lock at `InhibitDelayMaxSec` (5 s by default). We write
`/etc/systemd/logind.conf.d/zz-nodeagent.conf`, ask systemd to send logind SIGHUP (logind
re-reads its configuration on SIGHUP), and read `InhibitDelayMaxUSec` back until it holds.

How logind reads drop-ins (systemd.syntax(7), "Configuration Directories and Precedence"):
every `*.conf` in `/etc/systemd/logind.conf.d`, `/run/systemd/logind.conf.d`,
`/usr/local/lib/systemd/logind.conf.d` and `/usr/lib/systemd/logind.conf.d`; a file name in an
earlier directory hides the same name in later ones; the survivors are applied sorted by file
name, so the last one that sets a key wins. `zz-` sorts after the kubelet's `99-kubelet.conf`
and Ubuntu's unattended-upgrades drop-in; when the value still does not hold, the report names
the files that sort after ours and set the key, or a same-named file that hides ours.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from nodeagent.logind.bus import Bus, BusError
from nodeagent.logind.manager import Logind
from nodeagent.logind.names import (
    LOGIND_UNIT,
    SYSTEMD_MANAGER,
    SYSTEMD_NAME,
    SYSTEMD_PATH,
)
from nodeagent.model.backoff import JitteredBackoff

__all__ = [
    "DropinFile",
    "DropinResult",
    "effective_dropins",
    "ensure_dropin",
    "render_dropin",
    "search_dirs_for",
    "write_if_changed",
]

log = logging.getLogger(__name__)

KEY = "InhibitDelayMaxSec"
# re-read InhibitDelayMaxUSec after the reload at 50 ms, 100 ms, ... up to 2 s apart
DROPIN_POLL = JitteredBackoff(base=0.05, cap=2.0, jitter=0.0)
_DIR_SUFFIX = ("etc", "systemd", "logind.conf.d")
# below the root, in precedence order (an earlier directory hides the same file name later)
_SEARCH_DIRS = (
    ("etc", "systemd", "logind.conf.d"),
    ("run", "systemd", "logind.conf.d"),
    ("usr", "local", "lib", "systemd", "logind.conf.d"),
    ("usr", "lib", "systemd", "logind.conf.d"),
)


def budget_usec(budget: float) -> int:
    return round(budget * 1_000_000)


def render_dropin(budget: float) -> str:
    """The drop-in's content. Whole seconds are written as `600s`, anything else exactly in µs."""
    usec = budget_usec(budget)
    value = f"{usec // 1_000_000}s" if usec % 1_000_000 == 0 else f"{usec}us"
    return (
        "# Written by nodeagent: lets its shutdown delay lock hold the machine for the\n"
        "# configured shutdown budget. Changes here are overwritten.\n"
        f"[Login]\n{KEY}={value}\n"
    )


def search_dirs_for(dropin: Path) -> tuple[Path, ...]:
    """The drop-in directories logind reads, for the root our drop-in lives under.

    `/etc/systemd/logind.conf.d/x.conf` gives the host's directories; a host root mounted
    elsewhere (`/host/etc/systemd/logind.conf.d/x.conf` in a DaemonSet) gives them under
    `/host`. A drop-in elsewhere is searched in its own directory first.
    """
    parent = dropin.parent
    dirs: list[Path] = []
    if parent.parts[-3:] == _DIR_SUFFIX:
        root = parent.parent.parent.parent
        dirs = [root.joinpath(*d) for d in _SEARCH_DIRS]
    else:
        dirs = [parent, *(Path("/").joinpath(*d) for d in _SEARCH_DIRS)]
    out: list[Path] = []
    for d in dirs:
        if d not in out:
            out.append(d)
    return tuple(out)


def write_if_changed(path: Path, content: str) -> bool:
    """Atomically replace `path` with `content` unless it already has it. True if written.

    tmp file in the same directory, fsync, rename(2), fsync of the directory: a crash leaves
    either the old or the new file, never a torn one. The tmp name does not end in `.conf`,
    so logind never reads it.
    """
    data = content.encode()
    try:
        if path.read_bytes() == data:
            return False
    except FileNotFoundError:
        pass
    path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fchmod(fd, 0o644)
            os.fsync(fd)
        finally:
            os.close(fd)
        tmp.replace(path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    dfd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
    return True


@dataclass(frozen=True)
class DropinFile:
    path: Path
    value: str | None  # what it sets InhibitDelayMaxSec to (None: does not set it)
    masked: bool = False  # empty or a link to /dev/null: hides files of the same name


def _setting(path: Path) -> tuple[str | None, bool]:
    """(InhibitDelayMaxSec value set in [Login], whether the file masks its name)."""
    try:
        if path.is_symlink() and str(path.readlink()) == "/dev/null":
            return None, True
        text = path.read_text(errors="replace")
    except OSError as e:
        log.warning("cannot read logind drop-in %s: %s", path, e)
        return None, False
    if not text.strip():
        return None, True
    section = ""
    value: str | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
        elif section == "Login" and "=" in line:
            key, _, val = line.partition("=")
            if key.strip() == KEY:
                value = val.strip()
    return value, False


def effective_dropins(search_dirs: Sequence[Path]) -> tuple[DropinFile, ...]:
    """The drop-ins logind applies, in the order it applies them (the last setting wins)."""
    chosen: dict[str, Path] = {}
    for d in search_dirs:
        try:
            entries = sorted(d.iterdir())
        except FileNotFoundError:
            continue
        except OSError as e:
            log.warning("cannot list %s: %s", d, e)
            continue
        for p in entries:
            if p.name.endswith(".conf") and p.name not in chosen:
                chosen[p.name] = p
    out = []
    for name in sorted(chosen):
        value, masked = _setting(chosen[name])
        out.append(DropinFile(chosen[name], value, masked))
    return tuple(out)


@dataclass(frozen=True)
class DropinResult:
    """What `ensure_dropin` did and found; `describe()` says it in one message."""

    path: Path
    budget: float
    expected_usec: int
    actual_usec: int | None
    holds: bool
    written: bool = False
    reload_requested: bool = False
    error: str | None = None
    files: tuple[DropinFile, ...] = ()  # effective drop-ins, in the order logind applies them
    suspects: tuple[DropinFile, ...] = field(default=())  # the ones that probably win over ours

    def describe(self) -> str:
        actual = "unknown" if self.actual_usec is None else f"{self.actual_usec / 1e6:g}s"
        if self.holds:
            msg = (
                f"logind InhibitDelayMaxSec is {actual} as configured"
                f" ({'written' if self.written else 'unchanged'}: {self.path})"
            )
            return f"{msg}; but {self.error}" if self.error else msg
        parts = [
            f"logind InhibitDelayMaxSec is {actual}, not the configured"
            f" {self.expected_usec / 1e6:g}s from {self.path}"
        ]
        if self.error:
            parts.append(f"error: {self.error}")
        if self.suspects:
            names = ", ".join(
                f"{f.path} (masks ours)" if f.masked else f"{f.path} ({KEY}={f.value})"
                for f in self.suspects
            )
            parts.append(f"probably overridden by {names}")
        elif self.files:
            parts.append(
                "no other drop-in sets it after ours; logind may not have reloaded"
                " (an old systemd-logind without SIGHUP reload needs a restart)"
            )
        if self.files:
            parts.append(
                "drop-ins in the order logind applies them: "
                + ", ".join(str(f.path) for f in self.files)
            )
        return "; ".join(parts)


def _suspects(ours: Path, files: Sequence[DropinFile]) -> tuple[DropinFile, ...]:
    out = []
    for f in files:
        if f.path.name == ours.name and f.path != ours:
            out.append(DropinFile(f.path, f.value, masked=True))
        elif f.path.name > ours.name and f.value is not None:
            out.append(f)
    return tuple(out)


async def ensure_dropin(
    bus: Bus,
    budget: float,
    path: Path,
    *,
    search_dirs: Sequence[Path] | None = None,
    poll: JitteredBackoff = DROPIN_POLL,
    deadline: float = 10.0,
) -> DropinResult:
    """Write the drop-in if needed, have logind reload, and check that the value holds.

    Never raises for a failed step: the result says what happened (and `describe()` says it
    for a log line or a status condition).
    """
    expected = budget_usec(budget)
    dirs = tuple(search_dirs) if search_dirs is not None else search_dirs_for(path)
    report = _Reporter(path, budget, dirs)
    written, error = await _write(path, budget)
    try:
        actual = await Logind(bus).inhibit_delay_max_usec()
    except BusError as e:
        return await report(None, written=written, error=f"cannot read InhibitDelayMaxUSec: {e}")
    if actual == expected or error is not None:
        return await report(actual, written=written, error=error)
    try:
        await _ask_systemd_to_reload_logind(bus)
    except BusError as e:
        return await report(
            actual, written=written, error=f"asking systemd to reload logind failed: {e}"
        )
    log.info("asked systemd to send SIGHUP to %s (InhibitDelayMaxUSec was %d)", LOGIND_UNIT, actual)
    try:
        actual = await _read_back(bus, expected, poll, deadline)
    except BusError as e:
        return await report(
            None,
            written=written,
            reload_requested=True,
            error=f"cannot read InhibitDelayMaxUSec after the reload: {e}",
        )
    return await report(actual, written=written, reload_requested=True)


async def _write(path: Path, budget: float) -> tuple[bool, str | None]:
    """(whether the drop-in was written, why it could not be)."""
    try:
        return await asyncio.to_thread(write_if_changed, path, render_dropin(budget)), None
    except OSError as e:
        return False, f"cannot write {path}: {e}"


async def _ask_systemd_to_reload_logind(bus: Bus) -> None:
    # whom="main", not "all" (as DESIGN.md first had it): logind re-reads logind.conf and its
    # drop-ins in the SIGHUP handler of its main process; "all" would also signal any other
    # process in the unit's cgroup, for which SIGHUP's default action is to terminate. "main"
    # is also what `systemctl reload` signals for a Type=notify-reload service (logind's
    # handler reports RELOADING=1/READY=1 on systemd versions that use that type).
    reply = await bus.call(
        SYSTEMD_NAME,
        SYSTEMD_PATH,
        SYSTEMD_MANAGER,
        "KillUnit",
        "ssi",
        [LOGIND_UNIT, "main", int(signal.SIGHUP)],
    )
    reply.close_fds()


async def _read_back(bus: Bus, expected: int, poll: JitteredBackoff, deadline: float) -> int:
    """InhibitDelayMaxUSec once it is `expected`, or as it is when `deadline` seconds passed."""
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline
    attempt = 0
    while True:
        actual = await Logind(bus).inhibit_delay_max_usec()
        if actual == expected:
            return actual
        remaining = end - loop.time()
        if remaining <= 0:
            return actual
        attempt += 1
        await asyncio.sleep(min(poll.delay(attempt), remaining))


@dataclass(frozen=True)
class _Reporter:
    """Makes and logs the result of one `ensure_dropin`."""

    path: Path
    budget: float
    search_dirs: tuple[Path, ...]

    async def __call__(
        self,
        actual: int | None,
        *,
        written: bool,
        reload_requested: bool = False,
        error: str | None = None,
    ) -> DropinResult:
        files = await asyncio.to_thread(effective_dropins, self.search_dirs)
        expected = budget_usec(self.budget)
        holds = actual == expected
        result = DropinResult(
            path=self.path,
            budget=self.budget,
            expected_usec=expected,
            actual_usec=actual,
            holds=holds,
            written=written,
            reload_requested=reload_requested,
            error=error,
            files=files,
            suspects=() if holds else _suspects(self.path, files),
        )
        if holds:
            log.info("%s", result.describe())
        else:
            log.warning("%s", result.describe())
        return result
