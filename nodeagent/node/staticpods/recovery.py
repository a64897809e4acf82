"""Recovery after a crash: for each journal entry that is not `stashed` (or whose payload is
gone), look at where its file is. If the rename happened, finish the bookkeeping (roll forward);
if not, roll back. Recovery never performs the rename itself, so it never makes a decision the
crashed caller had not made. With `dry_run` it only says what it would do."""

from __future__ import annotations

import logging

from nodeagent.model.staticpods.journal import JournalEntry, State
from nodeagent.model.staticpods.manifests import MAX_MANIFEST_BYTES, sha256_of
from nodeagent.model.staticpods.outcomes import RecoveryAction
from nodeagent.node.staticpods.journalfiles import JournalFiles

__all__ = ["recover"]

log = logging.getLogger(__name__)


def recover(files: JournalFiles, dry_run: bool) -> list[RecoveryAction]:
    """Finish or roll back every interrupted move; what was done and what needs a human. The
    caller holds the lock (shared for a dry run)."""
    s = files.stash
    scan = files.scan()
    actions = [RecoveryAction("problem", s.path, p) for p in scan.problems]
    actions += _remove_temporary(files, scan.temporary, dry_run)
    for entry in sorted(scan.entries, key=lambda e: e.id):
        action = _recover_entry(files, entry, dry_run)
        if action is not None:
            actions.append(action)
    for action in actions:
        if action.action == "problem":
            log.error("static pod stash %s: %s", s.path, action.message)
        elif not dry_run:
            log.warning("static pod stash %s: %s", s.path, action)
    return actions


def _remove_temporary(
    files: JournalFiles, temporary: list[str], dry_run: bool
) -> list[RecoveryAction]:
    s = files.stash
    actions: list[RecoveryAction] = []
    for name in temporary:
        if not dry_run:
            s.unlink(name)
            files.step("recover.temporary-removed")
        actions.append(
            RecoveryAction(
                "removed-temporary",
                s.path / name,
                f"removed {name}, left behind by an interrupted write",
            )
        )
    if temporary and not dry_run:
        s.fsync()
        files.step("recover.temporary-synced")
    return actions


def _recover_entry(
    files: JournalFiles, entry: JournalEntry, dry_run: bool
) -> RecoveryAction | None:
    has_payload = files.stash.exists(entry.payload_name)
    if entry.state is State.STASHED:
        return None if has_payload else _recover_missing_payload(files, entry, dry_run)
    if entry.state is State.STASHING:
        if has_payload:
            return _finish_stashing(files, entry, dry_run)
        return _undo_stashing(files, entry, dry_run)
    if has_payload:
        return _recover_restoring_with_payload(files, entry, dry_run)
    return _recover_restoring_without_payload(files, entry, dry_run)


def _undo_stashing(files: JournalFiles, entry: JournalEntry, dry_run: bool) -> RecoveryAction:
    """The rename never happened: the manifest is where it was."""
    m = files.manifests
    original = entry.original_name
    if not dry_run:
        files.delete_entry(entry, "recover.rollback")
    where = m.path / original
    if m.exists(original):
        msg = f"{where} was not moved aside (interrupted before the move)"
    else:
        msg = (
            f"{where} was not moved aside (interrupted before the move), and is no "
            "longer in the manifest directory: it was removed by someone else"
        )
    return RecoveryAction("rolled-back", where, msg)


def _finish_stashing(files: JournalFiles, entry: JournalEntry, dry_run: bool) -> RecoveryAction:
    """The manifest reached the stash: make that durable and record it as `stashed`."""
    m, s = files.manifests, files.stash
    payload = s.path / entry.payload_name
    if dry_run:
        return RecoveryAction(
            "rolled-forward", payload, f"would finish moving {entry.original_path} aside"
        )
    if s.same_file(entry.payload_name, m, entry.original_name):
        m.unlink(entry.original_name)  # a link-based move stopped half way
        files.step("recover.stash.original-removed")
    files.sync_both("recover.stash")
    data, _ = files.read_payload(entry)
    sha = sha256_of(data)
    if sha != entry.sha256:
        log.warning(
            "%s changed while it was being moved aside (sha256 %s, journal %s)",
            entry.original_path,
            sha,
            entry.sha256,
        )
    files.write_entry(entry.with_state(State.STASHED, sha256=sha, size=len(data)), "recover.stash")
    return RecoveryAction(
        "rolled-forward",
        payload,
        f"finished moving {entry.original_path} aside to {payload}",
    )


def _recover_restoring_with_payload(
    files: JournalFiles, entry: JournalEntry, dry_run: bool
) -> RecoveryAction:
    """Back under the manifest's name too (a link-based move stopped half way): finish;
    otherwise the rename never happened: roll back to `stashed`."""
    m, s = files.manifests, files.stash
    assert entry.restore_name is not None
    where = m.path / entry.restore_name
    if s.same_file(entry.payload_name, m, entry.restore_name):
        if not dry_run:
            s.unlink(entry.payload_name)
            files.step("recover.restore.payload-removed")
            _finish_restoring(files, entry, "recover.restore")
        return RecoveryAction("rolled-forward", where, f"finished restoring {where}")
    if not dry_run:
        files.write_entry(entry.with_state(State.STASHED, restore_name=None), "recover.rollback")
    payload = s.path / entry.payload_name
    return RecoveryAction(
        "rolled-back",
        payload,
        f"{entry.original_path} was not restored (interrupted before the move); it stays "
        f"in the stash at {payload}",
    )


def _recover_restoring_without_payload(
    files: JournalFiles, entry: JournalEntry, dry_run: bool
) -> RecoveryAction:
    """The rename happened if the manifest is back: finish; if it is nowhere, say so."""
    m, s = files.manifests, files.stash
    assert entry.restore_name is not None
    where = m.path / entry.restore_name
    if m.exists(entry.restore_name):
        if not dry_run:
            _finish_restoring(files, entry, "recover.restore")
        return RecoveryAction("rolled-forward", where, f"finished restoring {where}")
    return RecoveryAction(
        "problem",
        where,
        f"journal entry {s.path / entry.entry_name}: the manifest is neither at {where} nor "
        f"at {s.path / entry.payload_name}; it was removed by someone else. The entry is kept "
        "for inspection.",
    )


def _finish_restoring(files: JournalFiles, entry: JournalEntry, step: str) -> None:
    """The manifest is back: make that durable, then drop its entry."""
    files.sync_both(step)
    files.delete_entry(entry, step)


def _recover_missing_payload(
    files: JournalFiles, entry: JournalEntry, dry_run: bool
) -> RecoveryAction:
    """A `stashed` entry without its payload: fine if an identical copy is back in place (the
    stashed copy was being dropped), else a problem for a human."""
    m, s = files.manifests, files.stash
    where = m.path / entry.original_name
    try:
        data, _ = m.read_regular(entry.original_name, MAX_MANIFEST_BYTES)
    except OSError:
        data = None
    if data is not None and sha256_of(data) == entry.sha256:
        if not dry_run:
            m.fsync()
            files.delete_entry(entry, "recover.identical")
        return RecoveryAction(
            "rolled-forward", where, f"{where} is back in place; dropped its journal entry"
        )
    return RecoveryAction(
        "problem",
        s.path / entry.payload_name,
        f"journal entry {s.path / entry.entry_name}: the stashed manifest "
        f"{s.path / entry.payload_name} is missing and {where} does not hold it; it was "
        "removed by someone else. The entry is kept for inspection.",
    )
