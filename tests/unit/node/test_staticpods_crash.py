"""Crash safety: SIGKILL the stash at every step boundary in turn, recover, check the invariant.

A child process (fork) moves three manifests aside and back. Its step hook (a constructor
argument of the Stash) reports each step boundary on a pipe and waits for the parent's go; at
the k-th boundary the parent kills it with SIGKILL instead. Then recovery runs (itself killed
at each of its own step boundaries in a second round) and the invariant must hold: every
manifest, byte-identical, either in the manifest directory or in the stash with its journal
entry; never both, never neither.
"""

from __future__ import annotations

import os
import shutil
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from nodeagent.node.staticpods.fsops import Mover, link_move, move_noreplace
from nodeagent.node.staticpods.stash import Stash
from tests.unit.node.staticpod_fixtures import OWNER, assert_invariant, control_plane, manifests

BOOT = "crash-test-boot"
Work = Callable[[Stash, Path], None]


def stash_then_restore(stash: Stash, m: Path) -> None:
    for manifest in manifests(m).values():
        stash.stash(manifest, OWNER)
    results = stash.restore_all()
    assert all(r.outcome == "restored" for r in results), results


def recover_only(stash: Stash, m: Path) -> None:
    stash.recover()


class Child:
    """A forked process running `work` on a Stash whose step hook blocks on the parent."""

    def __init__(self, m: Path, s: Path, mover: Mover, work: Work) -> None:
        steps_r, steps_w = os.pipe()
        go_r, go_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: never returns into pytest
            code = 1
            try:
                os.close(steps_r)
                os.close(go_w)

                def hook(step: str) -> None:
                    os.write(steps_w, step.encode() + b"\n")
                    if os.read(go_r, 1) != b"g":
                        os._exit(3)

                with Stash(m, s, boot_id=BOOT, on_step=hook, mover=mover) as stash:
                    work(stash, m)
                code = 0
            except BaseException:
                import traceback

                traceback.print_exc()
            finally:
                os._exit(code)
        os.close(steps_w)
        os.close(go_r)
        self.pid = pid
        self.steps = os.fdopen(steps_r, "rb")
        self.go = go_w

    def run(self, kill_at: int | None) -> tuple[list[str], bool]:
        """Let the child run, killing it at step boundary `kill_at` (1-based). Returns the
        steps seen and whether it was killed."""
        seen: list[str] = []
        killed = False
        try:
            while line := self.steps.readline():
                seen.append(line.decode().strip())
                if len(seen) == kill_at:
                    os.kill(self.pid, signal.SIGKILL)
                    killed = True
                    break
                os.write(self.go, b"g")
        finally:
            _, status = os.waitpid(self.pid, 0)
            self.steps.close()
            os.close(self.go)
        if killed:
            assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
        else:
            assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, "child failed"
        return seen, killed


def fresh(tmp_path: Path, name: str) -> tuple[Path, Path, dict[str, bytes]]:
    base = tmp_path / name
    if base.exists():
        shutil.rmtree(base)
    m = base / "manifests"
    m.mkdir(parents=True)
    return m, base / "stash", control_plane(m)


@pytest.mark.parametrize("mover", [move_noreplace, link_move], ids=["renameat2", "link"])
def test_sigkill_at_every_step_boundary(tmp_path: Path, mover: Mover) -> None:
    m, s, originals = fresh(tmp_path, "dry")
    all_steps, killed = Child(m, s, mover, stash_then_restore).run(kill_at=None)
    assert not killed
    assert {p.name: p.read_bytes() for p in m.iterdir()} == originals
    # every kind of boundary is there, for each of the three manifests
    for step in (
        "stash.intent.entry-written",
        "stash.intent.entry-renamed",
        "stash.intent.entry-synced",
        "stash.moved",
        "stash.stash-dir-synced",
        "stash.manifest-dir-synced",
        "stash.commit.entry-synced",
        "restore.intent.entry-synced",
        "restore.moved",
        "restore.manifest-dir-synced",
        "restore.done.entry-removed",
        "restore.done.entry-synced",
    ):
        assert all_steps.count(step) == 3, step
    if mover is link_move:
        assert all_steps.count("stash.move-linked") == 3
        assert all_steps.count("restore.move-linked") == 3

    recovery_kills = 0
    for k in range(1, len(all_steps) + 1):
        m, s, originals = fresh(tmp_path, "run")
        seen, killed = Child(m, s, mover, stash_then_restore).run(kill_at=k)
        assert killed and seen[-1] == all_steps[k - 1]
        # a second crash, during recovery, at each of its own step boundaries
        recovery_steps, _ = _copy_and_run(tmp_path, m, s, mover, kill_at=None)
        for j in range(1, len(recovery_steps) + 1):
            m2, s2 = _copy(tmp_path, m, s, "again")
            _, killed_again = Child(m2, s2, mover, recover_only).run(kill_at=j)
            assert killed_again
            recovery_kills += 1
            _recover_and_check(m2, s2, originals, f"after step {k} and recovery step {j}")
        _recover_and_check(m, s, originals, f"after step {k} ({all_steps[k - 1]})")
        # and the stash works on afterwards: everything comes back, byte-identical
        with Stash(m, s, boot_id=BOOT) as stash:
            assert all(r.outcome == "restored" for r in stash.restore_all())
        assert {p.name: p.read_bytes() for p in m.iterdir()} == originals
        assert {p.name for p in s.iterdir()} <= {".lock"}
    assert recovery_kills > 0


def _copy(tmp_path: Path, m: Path, s: Path, name: str) -> tuple[Path, Path]:
    """A copy of a crashed state (hard links kept as hard links: a half-done link move)."""
    base = tmp_path / name
    if base.exists():
        shutil.rmtree(base)
    base.mkdir()
    m2, s2 = base / "manifests", base / "stash"
    m2.mkdir()
    s2.mkdir(mode=0o700)
    copied: dict[tuple[int, int], Path] = {}
    for src_dir, dst_dir in ((s, s2), (m, m2)):
        if not src_dir.exists():
            continue
        for p in sorted(src_dir.iterdir()):
            st = p.stat()
            key = (st.st_dev, st.st_ino)
            if key in copied:
                os.link(copied[key], dst_dir / p.name)
            else:
                shutil.copy2(p, dst_dir / p.name)
                copied[key] = dst_dir / p.name
    return m2, s2


def _copy_and_run(
    tmp_path: Path, m: Path, s: Path, mover: Mover, kill_at: int | None
) -> tuple[list[str], bool]:
    m2, s2 = _copy(tmp_path, m, s, "probe")
    return Child(m2, s2, mover, recover_only).run(kill_at=kill_at)


def _recover_and_check(m: Path, s: Path, originals: dict[str, bytes], when: str) -> None:
    if not s.exists():
        s.mkdir(mode=0o700)
    with Stash(m, s, boot_id=BOOT) as stash:
        actions = stash.recover()
        assert not [a for a in actions if a.action == "problem"], (when, actions)
        assert stash.recover() == [], f"recovery is not idempotent {when}"
    try:
        assert_invariant(m, s, originals)
    except AssertionError as e:
        raise AssertionError(f"invariant broken {when}: {e}") from e
