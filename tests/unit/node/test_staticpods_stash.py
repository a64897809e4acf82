"""The stash: moving manifests aside and back with a journal; recovery; bad inputs."""

from __future__ import annotations

import hashlib
import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from nodeagent.model.staticpods.journal import ENTRY_SUFFIX, JournalEntry, Owner, State
from nodeagent.model.staticpods.outcomes import ManifestChanged, ReadOnlyStash, StashUnavailable
from nodeagent.node.staticpods.fsops import DirHandle, Mover, StepHook, link_move, move_noreplace
from nodeagent.node.staticpods.restore import restore_after_reboot, restore_by_hand
from nodeagent.node.staticpods.stash import Stash
from tests.unit.node.staticpod_fixtures import (
    NODE,
    OWNER,
    assert_invariant,
    control_plane,
    manifests,
    other_filesystem,
    pod_yaml,
    read_only,
    remountable,
)

BOOT = "11111111-2222-3333-4444-555555555555"


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    m = tmp_path / "manifests"
    m.mkdir()
    return m, tmp_path / "manifests.nodeagent-stash"


def test_round_trip_is_byte_identical_and_journaled(dirs: tuple[Path, Path]) -> None:
    m, s = dirs
    originals = control_plane(m)
    now = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
    with Stash(m, s, boot_id=BOOT, now=lambda: now) as stash:
        assert s.is_dir() and (s.stat().st_mode & 0o777) == 0o700
        entry = stash.stash(manifests(m)["kube-apiserver.yaml"], OWNER)
        assert not (m / "kube-apiserver.yaml").exists()
        assert entry.state is State.STASHED
        assert entry.original_path == str(m.resolve() / "kube-apiserver.yaml")
        assert entry.sha256 == hashlib.sha256(originals["kube-apiserver.yaml"]).hexdigest()
        assert (entry.maintenance, entry.shutdown, entry.boot_id) == ("maint-a", False, BOOT)
        assert (entry.pod_namespace, entry.pod_name) == ("kube-system", "kube-apiserver-node-1")
        assert entry.stashed_at == "2025-01-02T03:04:05Z"
        assert entry.id.startswith("20250102T030405000000Z-")
        journal = json.loads((s / entry.entry_name).read_text())
        assert journal["state"] == "stashed" and journal["version"] == 1
        assert (s / entry.payload_name).read_bytes() == originals["kube-apiserver.yaml"]
        assert_invariant(m, s, originals)
        (result,) = stash.restore_all()
        assert result.outcome == "restored" and result.ok
        assert result.path == m.resolve() / "kube-apiserver.yaml"
    assert_invariant(m, s, originals)
    assert {p.name for p in s.iterdir()} == {".lock"}
    assert {p.name: p.read_bytes() for p in m.iterdir()} == originals


def test_file_mode_and_owner_survive(dirs: tuple[Path, Path]) -> None:
    m, s = dirs
    control_plane(m)
    (m / "etcd.yaml").chmod(0o640)
    with Stash(m, s, boot_id=BOOT) as stash:
        stash.stash(manifests(m)["etcd.yaml"], OWNER)
        stash.restore_all()
    assert (m / "etcd.yaml").stat().st_mode & 0o777 == 0o640


def test_restore_never_overwrites_a_file_that_reappeared(dirs: tuple[Path, Path]) -> None:
    m, s = dirs
    originals = control_plane(m)
    with Stash(m, s, boot_id=BOOT) as stash:
        entry = stash.stash(manifests(m)["etcd.yaml"], OWNER)
        (m / "etcd.yaml").write_bytes(b"# a new etcd manifest\n")
        (result,) = stash.restore_all()
        assert result.outcome == "conflict" and not result.ok
        assert str(m.resolve() / "etcd.yaml") in result.message
        assert str(s.absolute() / entry.payload_name) in result.message
        assert (m / "etcd.yaml").read_bytes() == b"# a new etcd manifest\n"
        assert (s / entry.payload_name).read_bytes() == originals["etcd.yaml"]
        # again: still kept, still reported
        assert stash.restore_all()[0].outcome == "conflict"
        (m / "etcd.yaml").unlink()
        assert stash.restore_all()[0].outcome == "restored"
    assert (m / "etcd.yaml").read_bytes() == originals["etcd.yaml"]


def test_restore_never_replaces_a_symlink_or_directory(dirs: tuple[Path, Path]) -> None:
    m, s = dirs
    originals = control_plane(m)
    with Stash(m, s, boot_id=BOOT) as stash:
        stash.stash(manifests(m)["etcd.yaml"], OWNER)
        stash.stash(manifests(m)["kube-apiserver.yaml"], OWNER)
        (m / "etcd.yaml").symlink_to(m / "kube-scheduler.json")
        (m / "kube-apiserver.yaml").mkdir()
        results = stash.restore_all()
    assert [r.outcome for r in results] == ["conflict", "conflict"]
    assert (m / "etcd.yaml").is_symlink() and (m / "kube-apiserver.yaml").is_dir()
    assert len(list(s.glob("*.manifest"))) == 2
    assert originals


def test_identical_file_back_in_place_drops_the_stashed_copy(dirs: tuple[Path, Path]) -> None:
    m, s = dirs
    originals = control_plane(m)
    with Stash(m, s, boot_id=BOOT) as stash:
        stash.stash(manifests(m)["etcd.yaml"], OWNER)
        (m / "etcd.yaml").write_bytes(originals["etcd.yaml"])
        (result,) = stash.restore_all()
    assert result.outcome == "identical"
    assert_invariant(m, s, originals)
    assert not list(s.glob("*.manifest"))


def test_restore_race_with_a_file_appearing_is_a_conflict(dirs: tuple[Path, Path]) -> None:
    m, s = dirs
    originals = control_plane(m)

    def racing_mover(
        src_dir: DirHandle, src: str, dst_dir: DirHandle, dst: str, step: StepHook
    ) -> None:
        if dst_dir.path == m.resolve():
            (m / dst).write_bytes(b"# written by someone else just now\n")
        move_noreplace(src_dir, src, dst_dir, dst, step)

    with Stash(m, s, boot_id=BOOT, mover=racing_mover) as stash:
        entry = stash.stash(manifests(m)["etcd.yaml"], OWNER)
        (result,) = stash.restore_all()
    assert result.outcome == "conflict"
    assert (m / "etcd.yaml").read_bytes() == b"# written by someone else just now\n"
    assert (s / entry.payload_name).read_bytes() == originals["etcd.yaml"]
    with Stash(m, s) as stash:
        (item,) = stash.contents().entries
    assert item.entry.state is State.STASHED


@pytest.mark.parametrize("mover", [move_noreplace, link_move])
def test_both_movers_round_trip(dirs: tuple[Path, Path], mover: Mover) -> None:
    m, s = dirs
    originals = control_plane(m)
    with Stash(m, s, boot_id=BOOT, mover=mover) as stash:
        for manifest in manifests(m).values():
            stash.stash(manifest, OWNER)
        assert not list(m.iterdir())
        assert_invariant(m, s, originals)
        assert all(r.outcome == "restored" for r in stash.restore_all())
    assert {p.name: p.read_bytes() for p in m.iterdir()} == originals


def test_changed_manifest_is_not_moved(dirs: tuple[Path, Path]) -> None:
    m, s = dirs
    originals = control_plane(m)
    seen = manifests(m)["etcd.yaml"]
    (m / "etcd.yaml").write_bytes(originals["etcd.yaml"] + b"# edited\n")
    with Stash(m, s, boot_id=BOOT) as stash:
        with pytest.raises(ManifestChanged, match=r"etcd\.yaml changed since it was read"):
            stash.stash(seen, OWNER)
        (m / "etcd.yaml").unlink()
        with pytest.raises(ManifestChanged, match=r"etcd\.yaml cannot be read any more"):
            stash.stash(seen, OWNER)
    assert {p.name for p in s.iterdir()} == {".lock"}


def test_manifest_vanishing_during_the_move_leaves_no_entry(dirs: tuple[Path, Path]) -> None:
    m, s = dirs
    control_plane(m)

    def vanishing(
        src_dir: DirHandle, src: str, dst_dir: DirHandle, dst: str, step: StepHook
    ) -> None:
        os.unlink(src, dir_fd=src_dir.fd)
        move_noreplace(src_dir, src, dst_dir, dst, step)

    with Stash(m, s, boot_id=BOOT, mover=vanishing) as stash:
        with pytest.raises(ManifestChanged, match="vanished"):
            stash.stash(manifests(m)["etcd.yaml"], OWNER)
        assert stash.contents().entries == ()
    assert {p.name for p in s.iterdir()} == {".lock"}


def test_manifest_outside_the_directory_is_refused(dirs: tuple[Path, Path], tmp_path: Path) -> None:
    m, s = dirs
    other = tmp_path / "other"
    other.mkdir()
    control_plane(other)
    with Stash(m, s, boot_id=BOOT) as stash, pytest.raises(ValueError, match="not in the manifest"):
        stash.stash(manifests(other)["etcd.yaml"], OWNER)


# --- unusable stash directories -------------------------------------------------------------


def test_read_only_stash_is_a_clear_error_and_touches_nothing(dirs: tuple[Path, Path]) -> None:
    m, s = dirs
    originals = control_plane(m)
    s.mkdir()
    with read_only(s):
        with pytest.raises(ReadOnlyStash, match=rf"stash directory {s} is not writable") as e:
            Stash(m, s, boot_id=BOOT).open()
        assert "no manifest was moved" in str(e.value)
        assert list(s.iterdir()) == []
    assert {p.name: p.read_bytes() for p in m.iterdir()} == originals


def test_stash_turning_read_only_while_open_moves_nothing(tmp_path: Path) -> None:
    root = tmp_path / "fs"
    root.mkdir()
    with remountable(root) as set_read_only:
        m, s = root / "manifests", root / "stash"
        m.mkdir()
        originals = control_plane(m)
        with Stash(m, s, boot_id=BOOT) as stash:
            stash.stash(manifests(m)["etcd.yaml"], OWNER)
            before = {p.name: p.read_bytes() for p in s.iterdir()}
            set_read_only(True)
            try:
                with pytest.raises(ReadOnlyStash, match=str(s)):
                    stash.stash(manifests(m)["kube-apiserver.yaml"], OWNER)
                with pytest.raises(ReadOnlyStash, match=str(s)):
                    stash.restore_all()
                assert {p.name: p.read_bytes() for p in s.iterdir()} == before
                assert sorted(p.name for p in m.iterdir()) == [
                    "kube-apiserver.yaml",
                    "kube-scheduler.json",
                ]
                # looking still works
                assert len(stash.contents().entries) == 1
                dry = restore_by_hand(m, s, dry_run=True)
                assert [r.outcome for r in dry.results] == ["would-restore"]
            finally:
                set_read_only(False)
        assert_invariant(m, s, originals)


def test_missing_read_only_parent_cannot_hold_a_stash(tmp_path: Path) -> None:
    parent = tmp_path / "ro"
    parent.mkdir()
    m = parent / "manifests"
    m.mkdir()
    with read_only(parent), pytest.raises(ReadOnlyStash, match="cannot create stash directory"):
        Stash(m, parent / "stash", boot_id=BOOT).open()


def test_stash_on_another_file_system_is_refused(tmp_path: Path) -> None:
    m = tmp_path / "manifests"
    m.mkdir()
    originals = control_plane(m)
    with other_filesystem(tmp_path / "mnt") as mnt:
        s = mnt / "stash"
        with pytest.raises(StashUnavailable, match="is not on the file system") as e:
            Stash(m, s, boot_id=BOOT).open()
        assert "staticPods.stashDir" in str(e.value)
        assert not s.exists(), "nothing may be created on the wrong file system"
        s.mkdir()
        with pytest.raises(StashUnavailable, match="is not on the file system"):
            Stash(m, s, boot_id=BOOT).open()
    assert {p.name: p.read_bytes() for p in m.iterdir()} == originals


@pytest.mark.parametrize("where", ["inside", "deeper", "above", "same", "symlink", "file"])
def test_bad_stash_locations(tmp_path: Path, where: str) -> None:
    # inside only under a dot name, which the kubelet skips (`.nodeagent-stash`, the default)
    m = tmp_path / "manifests"
    m.mkdir()
    s = {
        "inside": m / "stash",
        "deeper": m / ".a" / "stash",
        "above": tmp_path,
        "same": m,
        "symlink": tmp_path / "s",
        "file": tmp_path / "f",
    }[where]
    if where == "symlink":
        (tmp_path / "real").mkdir()
        s.symlink_to(tmp_path / "real")
    if where == "file":
        s.write_text("")
    with pytest.raises(StashUnavailable):
        Stash(m, s, boot_id=BOOT).open()
    assert list(m.iterdir()) == []  # nothing made inside the manifest directory either


def test_missing_manifest_directory(tmp_path: Path) -> None:
    with pytest.raises(StashUnavailable, match=r"manifest directory .* cannot be used"):
        Stash(tmp_path / "nope", tmp_path / "s", boot_id=BOOT).open()
    assert not (tmp_path / "s").exists()


# --- the journal and recovery -----------------------------------------------------------------


def test_corrupt_journal_entry_is_reported_and_left_alone(dirs: tuple[Path, Path]) -> None:
    m, s = dirs
    originals = control_plane(m)
    with Stash(m, s, boot_id=BOOT) as stash:
        bad = stash.stash(manifests(m)["etcd.yaml"], OWNER)
        stash.stash(manifests(m)["kube-apiserver.yaml"], OWNER)
        (s / bad.entry_name).write_text("{ not json")
        actions = stash.recover()
        assert [a.action for a in actions] == ["problem"]
        assert str(s.absolute() / bad.entry_name) in actions[0].message
        results = stash.restore_all()
        assert [r.entry.original_name for r in results] == ["kube-apiserver.yaml"]
        assert (s / bad.payload_name).read_bytes() == originals["etcd.yaml"]
        assert (s / bad.entry_name).read_text() == "{ not json"
        assert stash.contents().problems


def test_orphan_payload_is_reported_and_left_alone(dirs: tuple[Path, Path]) -> None:
    m, s = dirs
    control_plane(m)
    with Stash(m, s, boot_id=BOOT) as stash:
        entry = stash.stash(manifests(m)["etcd.yaml"], OWNER)
        (s / entry.entry_name).unlink()
        (problem,) = stash.recover()
        assert "without a journal entry" in problem.message
        assert stash.restore_all() == []
    assert (s / entry.payload_name).exists()


def _entry(s: Path, m: Path, state: State, restore_name: str | None = None) -> JournalEntry:
    e = JournalEntry(
        id="20250101T000000000000Z-0badcafe",
        state=state,
        original_path=str(m.resolve() / "etcd.yaml"),
        sha256=hashlib.sha256(pod_yaml("etcd")).hexdigest(),
        size=len(pod_yaml("etcd")),
        maintenance="m",
        shutdown=False,
        boot_id=BOOT,
        node=NODE,
        pod_namespace="kube-system",
        pod_name="etcd-node-1",
        stashed_at="2025-01-01T00:00:00Z",
        restore_name=restore_name,
    )
    (s / e.entry_name).write_bytes(e.to_bytes())
    return e


@pytest.mark.parametrize(
    ("state", "payload", "target", "action", "in_m", "in_s"),
    [
        # stashing, not moved yet: roll back
        (State.STASHING, None, "file", "rolled-back", True, False),
        # stashing, moved: roll forward
        (State.STASHING, "file", None, "rolled-forward", False, True),
        # stashing with a link-based move half done: roll forward
        (State.STASHING, "file", "link", "rolled-forward", False, True),
        # restoring, not moved yet: roll back
        (State.RESTORING, "file", None, "rolled-back", False, True),
        # restoring, moved: roll forward
        (State.RESTORING, None, "file", "rolled-forward", True, False),
        # restoring with a link-based move half done: roll forward
        (State.RESTORING, "file", "link", "rolled-forward", True, False),
        # restoring but someone else's file is at the name: roll back, keep both
        (State.RESTORING, "file", "other", "rolled-back", True, True),
        # stashed, payload gone but an identical file is back: drop the entry
        (State.STASHED, None, "file", "rolled-forward", True, False),
    ],
)
def test_recovery_cases(
    dirs: tuple[Path, Path],
    state: State,
    payload: str | None,
    target: str | None,
    action: str,
    in_m: bool,
    in_s: bool,
) -> None:
    m, s = dirs
    s.mkdir(mode=0o700)
    e = _entry(s, m, state, "etcd.yaml" if state is State.RESTORING else None)
    if payload:
        (s / e.payload_name).write_bytes(pod_yaml("etcd"))
    if target == "file":
        (m / "etcd.yaml").write_bytes(pod_yaml("etcd"))
    elif target == "link":
        os.link(s / e.payload_name, m / "etcd.yaml")
    elif target == "other":
        (m / "etcd.yaml").write_bytes(b"# other\n")
    (s / (e.entry_name + ".tmp")).write_bytes(b"{half")
    with Stash(m, s, boot_id=BOOT) as stash:
        dry = stash.recover(dry_run=True)
        assert (s / (e.entry_name + ".tmp")).exists(), "a dry run changes nothing"
        actions = stash.recover()
        assert [a.action for a in dry] == [a.action for a in actions]
        assert [a.action for a in actions] == ["removed-temporary", action]
        assert stash.recover() == []  # idempotent
        listing = stash.contents()
    assert (m / "etcd.yaml").exists() == in_m
    assert bool(listing.entries) == in_s
    if in_s:
        (item,) = listing.entries
        assert item.entry.state is State.STASHED
        assert item.payload.read_bytes() == pod_yaml("etcd")
    if target != "other" and in_m:
        assert (m / "etcd.yaml").read_bytes() == pod_yaml("etcd")
        assert (m / "etcd.yaml").stat().st_nlink == 1


@pytest.mark.parametrize("state", [State.STASHED, State.RESTORING])
def test_recovery_never_deletes_an_entry_whose_manifest_is_lost(
    dirs: tuple[Path, Path], state: State
) -> None:
    m, s = dirs
    s.mkdir()
    e = _entry(s, m, state, "etcd.yaml" if state is State.RESTORING else None)
    with Stash(m, s, boot_id=BOOT) as stash:
        (problem,) = stash.recover()
    assert problem.action == "problem"
    assert "removed by someone else" in problem.message
    assert (s / e.entry_name).exists()


def test_stashing_entry_whose_manifest_vanished_is_rolled_back_and_reported(
    dirs: tuple[Path, Path],
) -> None:
    m, s = dirs
    s.mkdir()
    _entry(s, m, State.STASHING)
    with Stash(m, s, boot_id=BOOT) as stash:
        (action,) = stash.recover()
    assert action.action == "rolled-back"
    assert "removed by someone else" in action.message
    assert not list(s.glob("*" + ENTRY_SUFFIX))


def test_journal_entry_parsing_rejects_bad_fields() -> None:
    good = json.loads(
        JournalEntry(
            id="20250101T000000000000Z-0badcafe",
            state=State.STASHED,
            original_path="/etc/kubernetes/manifests/etcd.yaml",
            sha256="0" * 64,
            size=1,
            maintenance="m",
            shutdown=True,
            boot_id=BOOT,
            node=NODE,
            pod_namespace="kube-system",
            pod_name="etcd-node-1",
            stashed_at="2025-01-01T00:00:00Z",
        ).to_bytes()
    )
    assert JournalEntry.from_bytes(json.dumps(good).encode(), "x").shutdown is True
    for field, value in [
        ("version", 2),
        ("id", "../x"),
        ("state", "lost"),
        ("sha256", "abc"),
        ("original_path", "relative/etcd.yaml"),
        ("size", -1),
        ("shutdown", "yes"),
        ("maintenance", ""),
        ("restore_name", "../../etc/passwd"),
    ]:
        with pytest.raises(ValueError, match="x: "):
            JournalEntry.from_bytes(json.dumps({**good, field: value}).encode(), "x")
    with pytest.raises(ValueError, match="restoring needs restore_name"):
        JournalEntry.from_bytes(json.dumps({**good, "state": "restoring"}).encode(), "x")


# --- start-up and by hand --------------------------------------------------------------------


def test_restore_after_reboot_puts_back_only_earlier_shutdowns(dirs: tuple[Path, Path]) -> None:
    m, s = dirs
    originals = control_plane(m)
    found = manifests(m)
    with Stash(m, s, boot_id="old-boot") as stash:
        stash.stash(found["etcd.yaml"], Owner("shutdown-old", shutdown=True, node=NODE))
        stash.stash(found["kube-apiserver.yaml"], Owner("admin", shutdown=False, node=NODE))
    with Stash(m, s, boot_id="new-boot") as stash:
        stash.stash(found["kube-scheduler.json"], Owner("shutdown-new", shutdown=True, node=NODE))
    report = restore_after_reboot(m, s, boot_id="new-boot")
    assert [(r.entry.original_name, r.outcome) for r in report.results] == [
        ("etcd.yaml", "restored")
    ]
    assert sorted(e.original_name for e in report.kept) == [
        "kube-apiserver.yaml",
        "kube-scheduler.json",
    ]
    assert report.ok
    assert (m / "etcd.yaml").read_bytes() == originals["etcd.yaml"]
    assert_invariant(m, s, originals)
    text = "\n".join(report.lines())
    assert "restored" in text and "kept" in text


def test_restore_after_reboot_without_a_stash(tmp_path: Path) -> None:
    report = restore_after_reboot(tmp_path, tmp_path / "none", boot_id=BOOT)
    assert report.ok and report.results == []
    assert not (tmp_path / "none").exists()


def test_restore_by_hand_dry_run_then_for_real(dirs: tuple[Path, Path]) -> None:
    m, s = dirs
    originals = control_plane(m)
    with Stash(m, s, boot_id=BOOT) as stash:
        for manifest in manifests(m).values():
            stash.stash(manifest, OWNER)
    before = {p.name: p.read_bytes() for p in s.iterdir()}
    dry = restore_by_hand(m, s, dry_run=True)
    assert [r.outcome for r in dry.results] == ["would-restore"] * 3
    assert all(line.startswith("would-restore") for line in dry.lines())
    assert {p.name: p.read_bytes() for p in s.iterdir()} == before
    assert list(m.iterdir()) == []
    real = restore_by_hand(m, s)
    assert [r.outcome for r in real.results] == ["restored"] * 3 and real.ok
    assert {p.name: p.read_bytes() for p in m.iterdir()} == originals


def test_replaced_manifest_directory_is_noticed(dirs: tuple[Path, Path]) -> None:
    m, s = dirs
    control_plane(m)
    with Stash(m, s, boot_id=BOOT) as stash:
        found = manifests(m)
        m.rename(m.with_name("old-manifests"))
        m.mkdir()
        with pytest.raises(StashUnavailable, match="was replaced or removed"):
            stash.stash(found["etcd.yaml"], OWNER)
    assert sorted(p.name for p in m.with_name("old-manifests").iterdir()) == [
        "etcd.yaml",
        "kube-apiserver.yaml",
        "kube-scheduler.json",
    ]


def test_recovery_removes_a_write_probe_a_kill_left_behind(dirs: tuple[Path, Path]) -> None:
    m, s = dirs
    control_plane(m)
    with Stash(m, s, boot_id=BOOT):
        pass
    (s / ".probe-4242-deadbeef").write_bytes(b"")  # killed between create and unlink
    with Stash(m, s, boot_id=BOOT) as stash:
        actions = stash.recover()
    assert [a.action for a in actions] == ["removed-temporary"]
    assert {p.name for p in s.iterdir()} == {".lock"}
