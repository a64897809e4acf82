"""`nodeagent restore-static-pods`: restores by hand and lists what it did."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from nodeagent.cli import main
from nodeagent.model.staticpods.journal import Owner
from nodeagent.node.staticpods.stash import Stash
from tests.unit.node.staticpod_fixtures import OWNER, control_plane, manifests, read_only


def stash_all(m: Path, s: Path, boot_id: str = "boot-1", owner: Owner = OWNER) -> None:
    with Stash(m, s, boot_id=boot_id) as stash:
        for manifest in manifests(m).values():
            stash.stash(manifest, owner)


@pytest.fixture
def m(tmp_path: Path) -> Path:
    d = tmp_path / "manifests"
    d.mkdir()
    return d


def test_dry_run_then_restore(m: Path, capsys: pytest.CaptureFixture[str]) -> None:
    originals = control_plane(m)
    stash_all(m, m / ".nodeagent-stash")
    assert main(["restore-static-pods", "--manifest-dir", str(m), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"manifest directory: {m} (configuration)" in out
    assert f"stash directory: {m}/.nodeagent-stash" in out
    assert out.count("would-restore: would move") == 3
    assert "maintenance maint-a" in out
    assert [p.name for p in m.iterdir()] == [".nodeagent-stash"]  # (which the kubelet skips)

    assert main(["restore-static-pods", "--manifest-dir", str(m)]) == 0
    out = capsys.readouterr().out
    assert out.count("restored: moved") == 3
    assert {p.name: p.read_bytes() for p in m.iterdir() if p.is_file()} == originals

    assert main(["restore-static-pods", "--manifest-dir", str(m)]) == 0
    assert "nothing to restore" in capsys.readouterr().out


def test_conflict_exits_1_and_keeps_both(m: Path, capsys: pytest.CaptureFixture[str]) -> None:
    control_plane(m)
    s = m.parent / "elsewhere"
    stash_all(m, s)
    (m / "etcd.yaml").write_text("# new\n")
    assert main(["restore-static-pods", "--manifest-dir", str(m), "--stash-dir", str(s)]) == 1
    out = capsys.readouterr().out
    assert "conflict:" in out and "both are kept" in out
    assert out.count("restored:") == 2
    assert (m / "etcd.yaml").read_text() == "# new\n"


def test_after_reboot_restores_only_earlier_shutdowns(
    m: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    control_plane(m)
    stash_all(m, m.parent / "s", owner=Owner("shutdown", shutdown=True, node="node-1"))
    args = ["restore-static-pods", "--manifest-dir", str(m), "--stash-dir", str(m.parent / "s")]
    assert main([*args, "--after-reboot"]) == 0
    assert capsys.readouterr().out.count("restored:") == 3


def test_unusable_stash_exits_2(m: Path, capsys: pytest.CaptureFixture[str]) -> None:
    control_plane(m)
    s = m.parent / "s"
    stash_all(m, s)
    with read_only(s):
        code = main(["restore-static-pods", "--manifest-dir", str(m), "--stash-dir", str(s)])
    assert code == 2
    assert f"stash directory {s} is not writable" in capsys.readouterr().err
    assert list(m.iterdir()) == []


def test_as_a_command(m: Path) -> None:
    originals = control_plane(m)
    stash_all(m, m / ".nodeagent-stash")
    done = subprocess.run(
        [sys.executable, "-m", "nodeagent", "restore-static-pods", "--manifest-dir", str(m)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("restored:") == 3
    assert {p.name: p.read_bytes() for p in m.iterdir() if p.is_file()} == originals
