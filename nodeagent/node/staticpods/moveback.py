"""Putting stashed manifests back into the manifest directory: the entry says `restoring`, the
manifest is renamed back, both directories are fsynced, then the entry is removed. Never
replaces a file that reappeared under the manifest's name: the manifest then stays in the stash
(a conflict), unless the two are byte-identical, when the stashed copy is dropped instead."""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from collections.abc import Callable, Iterable

from nodeagent.model.staticpods.journal import JournalEntry, State
from nodeagent.model.staticpods.manifests import MAX_MANIFEST_BYTES, sha256_of
from nodeagent.model.staticpods.outcomes import RestoreOutcome, RestoreResult
from nodeagent.node.staticpods.fsops import Mover
from nodeagent.node.staticpods.journalfiles import JournalFiles

__all__ = ["move_back"]

log = logging.getLogger(__name__)


def move_back(
    files: JournalFiles,
    mover: Mover,
    entries: Iterable[JournalEntry],
    select: Callable[[JournalEntry], bool] | None,
    *,
    dry_run: bool,
) -> list[RestoreResult]:
    """Put back every entry that `select` accepts; one failure does not stop the rest. The
    caller holds the lock (shared for a dry run)."""
    results: list[RestoreResult] = []
    # newest first: of two versions of one manifest moved aside, the one written last
    # goes back, and the older one stays in the stash as a conflict
    for entry in sorted(entries, key=lambda e: e.id, reverse=True):
        if select is not None and not select(entry):
            continue
        if entry.state is not State.STASHED:
            results.append(
                _result(files, entry, "error", "an interrupted move; recovery finishes it")
            )
            continue
        try:
            results.append(_move_back_one(files, mover, entry, dry_run))
        except OSError as e:
            results.append(
                _result(
                    files,
                    entry,
                    "error",
                    f"cannot restore {files.stash.path / entry.payload_name} to "
                    f"{files.manifests.path / entry.original_name}: {e.strerror or e}",
                )
            )
    for r in results:
        if r.outcome in ("restored", "identical"):
            log.info("static pod manifest %s", r)
        elif not r.ok:
            log.warning("static pod manifest %s", r)
    return results


def _result(
    files: JournalFiles, entry: JournalEntry, outcome: RestoreOutcome, message: str
) -> RestoreResult:
    return RestoreResult(entry, outcome, files.manifests.path / entry.original_name, message)


def _move_back_one(
    files: JournalFiles, mover: Mover, entry: JournalEntry, dry_run: bool
) -> RestoreResult:
    data, _ = files.read_payload(entry)
    sha = sha256_of(data)
    present = files.manifests.lstat(entry.original_name)
    if present is not None:
        return _something_in_place(files, entry, present, sha, dry_run)
    note = (
        ""
        if sha == entry.sha256
        else f" (its content changed while it was stashed: sha256 {sha}, moved aside as "
        f"{entry.sha256})"
    )
    if dry_run:
        where = files.manifests.path / entry.original_name
        payload = files.stash.path / entry.payload_name
        return _result(files, entry, "would-restore", f"would move {payload} to {where}{note}")
    return _rename_back(files, mover, entry, note)


def _something_in_place(
    files: JournalFiles, entry: JournalEntry, present: os.stat_result, sha: str, dry_run: bool
) -> RestoreResult:
    """A file is under the manifest's name again: drop our copy if identical (with sha256
    `sha`), else leave both (a conflict)."""
    m, s = files.manifests, files.stash
    where = m.path / entry.original_name
    payload = s.path / entry.payload_name
    same = False
    if stat.S_ISREG(present.st_mode):
        with contextlib.suppress(OSError):
            same = sha256_of(m.read_regular(entry.original_name, MAX_MANIFEST_BYTES)[0]) == sha
    if not same:
        return _result(
            files,
            entry,
            "conflict",
            f"{where} exists again and differs from the manifest moved aside; both are "
            f"kept: ours stays at {payload}. Remove one of them, then run `nodeagent "
            "restore-static-pods`.",
        )
    if dry_run:
        return _result(
            files, entry, "would-drop-identical", f"{where} is back already, identical to {payload}"
        )
    s.unlink(entry.payload_name)
    files.step("restore.identical.payload-removed")
    s.fsync()
    files.step("restore.identical.synced")
    files.delete_entry(entry, "restore.identical")
    return _result(
        files, entry, "identical", f"{where} was back already, identical; dropped {payload}"
    )


def _rename_back(
    files: JournalFiles, mover: Mover, entry: JournalEntry, note: str
) -> RestoreResult:
    """Record the intent (`restoring`), rename, make it durable, drop the entry."""
    m, s = files.manifests, files.stash
    target = entry.original_name
    where = m.path / target
    payload = s.path / entry.payload_name
    restoring = entry.with_state(State.RESTORING, restore_name=target)
    files.write_entry(restoring, "restore.intent")
    try:
        mover(s, entry.payload_name, m, target, lambda step: files.step("restore.move-" + step))
    except FileExistsError:
        files.write_entry(entry, "restore.rollback")
        return _result(
            files,
            entry,
            "conflict",
            f"{where} appeared while restoring; both are kept: ours stays at {payload}",
        )
    except OSError:
        if s.exists(entry.payload_name) and not m.exists(target):
            files.write_entry(entry, "restore.rollback")
        raise
    files.step("restore.moved")
    m.fsync()
    files.step("restore.manifest-dir-synced")
    s.fsync()
    files.step("restore.stash-dir-synced")
    files.delete_entry(restoring, "restore.done")
    return _result(files, entry, "restored", f"moved {payload} back to {where}{note}")
