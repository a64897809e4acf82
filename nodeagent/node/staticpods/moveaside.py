"""Moving one manifest aside into the stash: journal entry `stashing` written and fsynced
first, then the rename, then both directories fsynced, then the entry says `stashed`. A crash
between two steps leaves what `recovery` finishes or rolls back."""

from __future__ import annotations

import contextlib
import logging
import os
from datetime import datetime

from nodeagent.model.staticpods.journal import JournalEntry, Owner, State
from nodeagent.model.staticpods.manifests import MAX_MANIFEST_BYTES, FileId, Manifest, sha256_of
from nodeagent.model.staticpods.outcomes import ManifestChanged, StashError
from nodeagent.model.times import Clock, format_time
from nodeagent.node.staticpods.fsops import Mover
from nodeagent.node.staticpods.journalfiles import TMP_SUFFIX, JournalFiles

__all__ = ["move_aside"]

log = logging.getLogger(__name__)


def move_aside(
    files: JournalFiles,
    mover: Mover,
    manifest: Manifest,
    owner: Owner,
    *,
    boot_id: str,
    now: Clock,
) -> JournalEntry:
    """Move `manifest` (in the manifest directory, as read) into the stash; its entry, as
    committed. Raises ManifestChanged when the file is not the one that was read (nothing
    moved), StashError when the move fails (then either nothing was moved, or the move is
    finished by the next recovery). The caller holds the lock."""
    content, st = _read_unchanged(files, manifest)
    entry = _new_entry(files, manifest, owner, len(content), boot_id=boot_id, now=now())
    _write_intent(files, entry, manifest)
    _move(files, mover, entry, manifest)
    entry = _commit(files, entry, manifest, st)
    log.info(
        "moved static pod manifest %s aside to %s (maintenance %s)",
        manifest.path,
        files.stash.path / entry.payload_name,
        owner.maintenance,
    )
    return entry


def _read_unchanged(files: JournalFiles, manifest: Manifest) -> tuple[bytes, os.stat_result]:
    """The manifest's bytes and stat, if it is still the file that was read."""
    try:
        content, st = files.manifests.read_regular(manifest.path.name, MAX_MANIFEST_BYTES)
    except OSError as e:
        raise ManifestChanged(
            f"{manifest.path} cannot be read any more ({e.strerror or e}); not moved"
        ) from e
    if FileId.of(st) != manifest.file_id or sha256_of(content) != manifest.sha256:
        raise ManifestChanged(f"{manifest.path} changed since it was read; not moved")
    return content, st


def _new_entry(
    files: JournalFiles,
    manifest: Manifest,
    owner: Owner,
    size: int,
    *,
    boot_id: str,
    now: datetime,
) -> JournalEntry:
    return JournalEntry(
        id=files.new_id(now),
        state=State.STASHING,
        original_path=str(files.manifests.path / manifest.path.name),
        sha256=manifest.sha256,
        size=size,
        maintenance=owner.maintenance,
        shutdown=owner.shutdown,
        boot_id=boot_id,
        node=owner.node,
        pod_namespace=manifest.namespace,
        pod_name=manifest.mirror_name(owner.node),
        stashed_at=format_time(now),
    )


def _write_intent(files: JournalFiles, entry: JournalEntry, manifest: Manifest) -> None:
    """The entry in state `stashing`, durable before the manifest moves."""
    try:
        files.write_entry(entry, "stash.intent")
    except OSError as e:
        with contextlib.suppress(OSError):
            files.stash.unlink(entry.entry_name + TMP_SUFFIX)
        raise StashError(
            f"cannot write the journal entry in {files.stash.path} ({e.strerror or e}); "
            f"{manifest.path} was not moved"
        ) from e


def _move(files: JournalFiles, mover: Mover, entry: JournalEntry, manifest: Manifest) -> None:
    """Rename the manifest into the stash; if it did not move, drop the entry."""
    m, s = files.manifests, files.stash
    try:
        mover(
            m,
            manifest.path.name,
            s,
            entry.payload_name,
            lambda step: files.step("stash.move-" + step),
        )
    except OSError as e:
        if not s.exists(entry.payload_name):
            files.delete_entry(entry, "stash.rollback")
        if isinstance(e, FileNotFoundError):
            raise ManifestChanged(f"{manifest.path} vanished; not moved") from e
        raise StashError(f"cannot move {manifest.path} to {s.path} ({e.strerror or e})") from e
    files.step("stash.moved")


def _commit(
    files: JournalFiles, entry: JournalEntry, manifest: Manifest, st: os.stat_result
) -> JournalEntry:
    """Make the move durable, then record it (state `stashed`) with what was really moved."""
    try:
        files.stash.fsync()
        files.step("stash.stash-dir-synced")
        files.manifests.fsync()
        files.step("stash.manifest-dir-synced")
        data, pst = files.read_payload(entry)
        sha = sha256_of(data)
        if sha != entry.sha256 or (pst.st_dev, pst.st_ino) != (st.st_dev, st.st_ino):
            log.warning(
                "%s was replaced while it was being moved aside; the journal records "
                "what was moved (sha256 %s)",
                manifest.path,
                sha,
            )
        entry = entry.with_state(State.STASHED, sha256=sha, size=len(data))
        files.write_entry(entry, "stash.commit")
    except OSError as e:
        raise StashError(
            f"{manifest.path} was moved to {files.stash.path / entry.payload_name} but the "
            f"journal could not be completed ({e.strerror or e}); the next operation finishes it"
        ) from e
    return entry
