"""The logind drop-in: written atomically, logind reloaded through systemd, value read back."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from nodeagent.logind.bus import Bus
from nodeagent.logind.dropin import (
    effective_dropins,
    ensure_dropin,
    render_dropin,
    search_dirs_for,
    write_if_changed,
)
from nodeagent_testbed.fakelogind import DBusDaemon, FakeLogind
from tests.integration.logind.conftest import RunGuard


@pytest.fixture
async def bus(daemon: DBusDaemon) -> AsyncIterator[Bus]:
    b = await Bus.connect(daemon.address)
    try:
        yield b
    finally:
        await b.close()


# small files on tmpfs: reading them inline is fine, these keep the async tests lint-clean
def _text(path: Path) -> str:
    return path.read_text()


def _stat(path: Path) -> os.stat_result:
    return path.stat()


def _names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.mark.parametrize("fake_options", [{"reload_delay": 0.2}])
async def test_written_reloaded_and_read_back(
    fake: FakeLogind, bus: Bus, dropin_path: Path
) -> None:
    result = await ensure_dropin(bus, 600, dropin_path)

    assert result.holds, result.describe()
    assert result.written and result.reload_requested and result.error is None
    assert result.actual_usec == result.expected_usec == 600_000_000
    assert "[Login]\nInhibitDelayMaxSec=600s\n" in _text(dropin_path)
    assert _stat(dropin_path).st_mode & 0o777 == 0o644
    assert _names(dropin_path.parent) == ["zz-nodeagent.conf"]  # no tmp file left
    # logind reloads on SIGHUP, sent to its main process only (see dropin.py)
    assert fake.kill_unit_calls == [("systemd-logind.service", "main", int(signal.SIGHUP))]
    assert fake.delay_max_usec == 600_000_000


async def test_unchanged_and_holding_does_nothing(
    fake: FakeLogind, bus: Bus, dropin_path: Path
) -> None:
    first = await ensure_dropin(bus, 600, dropin_path)
    assert first.holds
    mtime = _stat(dropin_path).st_mtime_ns
    second = await ensure_dropin(bus, 600, dropin_path)
    assert second.holds and not second.written and not second.reload_requested
    assert _stat(dropin_path).st_mtime_ns == mtime
    assert len(fake.kill_unit_calls) == 1


async def test_budget_change_rewrites(fake: FakeLogind, bus: Bus, dropin_path: Path) -> None:
    assert (await ensure_dropin(bus, 600, dropin_path)).holds
    result = await ensure_dropin(bus, 90.5, dropin_path)
    assert result.holds and result.written
    assert "InhibitDelayMaxSec=90500000us" in _text(dropin_path)
    assert fake.delay_max_usec == 90_500_000
    assert len(fake.kill_unit_calls) == 2


async def test_a_later_dropin_wins_and_is_named(
    fake: FakeLogind, bus: Bus, dropin_path: Path, conf_root: Path
) -> None:
    etc = conf_root / "etc/systemd/logind.conf.d"
    winner = _write(etc / "zzz-override.conf", "[Login]\nInhibitDelayMaxSec=30s\n")
    # sorts before ours: ours overrides it, not a suspect
    _write(
        conf_root / "usr/lib/systemd/logind.conf.d/99-kubelet.conf",
        "[Login]\nInhibitDelayMaxSec=45s\n",
    )
    # after ours but does not set the key: not a suspect
    _write(
        conf_root / "run/systemd/logind.conf.d/zzzz-other.conf", "[Login]\nKillUserProcesses=no\n"
    )

    result = await ensure_dropin(bus, 600, dropin_path, deadline=0.5)

    assert not result.holds
    assert result.actual_usec == 30_000_000
    assert [f.path for f in result.suspects] == [winner]
    assert [f.path.name for f in result.files] == [
        "99-kubelet.conf",
        "zz-nodeagent.conf",
        "zzz-override.conf",
        "zzzz-other.conf",
    ]
    text = result.describe()
    assert "is 30s, not the configured 600s" in text
    assert f"probably overridden by {winner} (InhibitDelayMaxSec=30s)" in text


async def test_logind_that_does_not_reload_is_reported(
    fake: FakeLogind, bus: Bus, dropin_path: Path
) -> None:
    fake.reloads_honoured = False
    result = await ensure_dropin(bus, 600, dropin_path, deadline=0.3)
    assert not result.holds and result.reload_requested
    assert result.actual_usec == 5_000_000 and result.suspects == ()
    assert "logind may not have reloaded" in result.describe()


async def test_unwritable_dropin_is_reported_not_raised(
    fake: FakeLogind, bus: Bus, conf_root: Path
) -> None:
    blocker = _write(conf_root / "etc/systemd/logind.conf.d", "a file where the dir should be")
    result = await ensure_dropin(bus, 600, blocker / "zz-nodeagent.conf")
    assert not result.holds and result.error is not None
    assert "cannot write" in result.describe()
    assert fake.kill_unit_calls == []


async def test_guard_ensures_the_dropin(
    fake: FakeLogind, run_guard: RunGuard, dropin_path: Path
) -> None:
    guard = await run_guard(manage_dropin=True, budget=120)
    async with asyncio.timeout(10):
        await guard.wait_until(lambda: guard.dropin_result is not None)
    assert guard.dropin_result is not None and guard.dropin_result.holds
    assert guard.inhibit_delay_max == 120.0
    assert _text(dropin_path).endswith("InhibitDelayMaxSec=120s\n")
    assert guard.lock_held


# -- the pure parts


def test_render() -> None:
    assert render_dropin(600).endswith("[Login]\nInhibitDelayMaxSec=600s\n")
    assert render_dropin(0.25).endswith("InhibitDelayMaxSec=250000us\n")


def test_search_dirs() -> None:
    assert search_dirs_for(Path("/etc/systemd/logind.conf.d/zz-nodeagent.conf")) == (
        Path("/etc/systemd/logind.conf.d"),
        Path("/run/systemd/logind.conf.d"),
        Path("/usr/local/lib/systemd/logind.conf.d"),
        Path("/usr/lib/systemd/logind.conf.d"),
    )
    # a host root mounted into a pod
    assert search_dirs_for(Path("/host/etc/systemd/logind.conf.d/zz.conf"))[1] == Path(
        "/host/run/systemd/logind.conf.d"
    )
    odd = search_dirs_for(Path("/opt/x/zz.conf"))
    assert odd[0] == Path("/opt/x") and Path("/etc/systemd/logind.conf.d") in odd


def test_precedence_and_masking(tmp_path: Path) -> None:
    etc, run, usr = (tmp_path / d for d in ("etc", "run", "usr"))
    _write(usr / "50-a.conf", "[Login]\nInhibitDelayMaxSec=1s\n")
    _write(etc / "50-a.conf", "[Login]\nInhibitDelayMaxSec=2s\n")  # hides usr's 50-a
    _write(run / "40-b.conf", "[Login]\n# InhibitDelayMaxSec=9s\n")
    _write(usr / "60-c.conf", "")  # empty: masks, sets nothing
    _write(usr / "README", "not a .conf")
    (run / "70-d.conf").symlink_to("/dev/null")
    files = effective_dropins([etc, run, usr])
    assert [(f.path.relative_to(tmp_path).as_posix(), f.value, f.masked) for f in files] == [
        ("run/40-b.conf", None, False),
        ("etc/50-a.conf", "2s", False),
        ("usr/60-c.conf", None, True),
        ("run/70-d.conf", None, True),
    ]


def test_write_if_changed(tmp_path: Path) -> None:
    path = tmp_path / "d" / "x.conf"
    assert write_if_changed(path, "a\n")
    assert not write_if_changed(path, "a\n")
    assert write_if_changed(path, "b\n")
    assert path.read_text() == "b\n"
    assert _names(path.parent) == ["x.conf"]
