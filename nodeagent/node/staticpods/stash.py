"""The stash: static pod manifests moved out of the kubelet's directory, with a journal, so that
none is ever lost or duplicated.

Invariant: after a crash at any point (and `recover`), every manifest is, byte for byte, either
in the manifest directory, or in the stash directory with its journal entry; never both, never
neither. How:

- Nothing is ever copied or rewritten: a manifest only changes directory by rename(2) (never
  replacing a file: see `fsops.Mover`), between two directories on one file system
  (`directories`).
- Each move writes and fsyncs its journal entry (`journal`, `journalfiles`) before the rename
  and completes it after both directories are fsynced: `moveaside`, `moveback`.
- `recovery` finishes (rolls forward) or rolls back whatever a crash interrupted, from the
  entries and where the files are; every operation that changes the stash recovers first.
- Every operation holds a flock(2) on `<stash>/.lock` (exclusive to change), so the agent and
  `nodeagent restore-static-pods` can run at the same time.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from nodeagent.model.staticpods.journal import JournalEntry, Owner
from nodeagent.model.staticpods.manifests import Manifest
from nodeagent.model.staticpods.outcomes import (
    RecoveryAction,
    RestoreResult,
    Stashed,
    StashListing,
    StashUnavailable,
)
from nodeagent.model.times import Clock, utcnow
from nodeagent.node.boot import read_boot_id
from nodeagent.node.staticpods.directories import locked, open_directories
from nodeagent.node.staticpods.fsops import Mover, StepHook, move_noreplace
from nodeagent.node.staticpods.journalfiles import JournalFiles
from nodeagent.node.staticpods.moveaside import move_aside
from nodeagent.node.staticpods.moveback import move_back
from nodeagent.node.staticpods.recovery import recover

__all__ = ["Stash"]


def _no_step(_: str) -> None:
    pass


class Stash:
    """Moves manifests between `manifest_dir` and `stash_dir`. Use as a context manager (or call
    `open` and `close`); the methods are blocking and thread-safe between processes."""

    def __init__(
        self,
        manifest_dir: Path,
        stash_dir: Path,
        *,
        boot_id: str | None = None,
        on_step: StepHook | None = None,
        mover: Mover | None = None,
        now: Clock = utcnow,
    ) -> None:
        """`on_step` is called after every change on disk (for crash tests); `mover` moves files
        without replacing (default: renameat2 RENAME_NOREPLACE, else link and unlink)."""
        self._manifest_path = manifest_dir
        self._stash_path = stash_dir
        self._boot_id = boot_id
        self._on_step: StepHook = on_step if on_step is not None else _no_step
        self._mover: Mover = mover if mover is not None else move_noreplace
        self._now = now
        self._open: JournalFiles | None = None

    @property
    def manifest_dir(self) -> Path:
        return self._open.manifests.path if self._open is not None else self._manifest_path

    @property
    def stash_dir(self) -> Path:
        return self._open.stash.path if self._open is not None else self._stash_path

    @property
    def boot_id(self) -> str:
        if self._boot_id is None:
            try:
                self._boot_id = read_boot_id()
            except OSError as e:
                raise StashUnavailable(f"cannot read the boot id: {e}") from e
        return self._boot_id

    # --- opening -----------------------------------------------------------------------------

    def __enter__(self) -> Stash:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def open(self, *, create: bool = True, writable: bool = True) -> None:
        """Check the two directories and open them. Raises StashUnavailable (ReadOnlyStash)
        with a clear message; touches nothing then. `create` makes a missing stash directory
        (mode 0700)."""
        if self._open is not None:
            return
        m, s = open_directories(
            self._manifest_path, self._stash_path, create=create, writable=writable
        )
        self._open = JournalFiles(m, s, self._on_step)

    def close(self) -> None:
        if self._open is not None:
            self._open.manifests.close()
            self._open.stash.close()
        self._open = None

    def _files(self) -> JournalFiles:
        if self._open is None:
            raise RuntimeError("the stash is not open")
        return self._open

    # --- operations --------------------------------------------------------------------------

    def contents(self) -> StashListing:
        """What the stash holds (entries in any state) and what is wrong in it."""
        files = self._files()
        with locked(files.manifests, files.stash, shared=True):
            scan = files.scan()
        return StashListing(
            tuple(Stashed(e, files.stash.path / e.payload_name) for e in scan.entries),
            tuple(scan.problems),
        )

    def recover(self, *, dry_run: bool = False) -> list[RecoveryAction]:
        """Finish or roll back moves a crash interrupted; report what was done (or, with
        `dry_run`, what would be done) and what needs a human."""
        files = self._files()
        with locked(files.manifests, files.stash, shared=dry_run):
            return recover(files, dry_run)

    def stash(self, manifest: Manifest, owner: Owner) -> JournalEntry:
        """Move `manifest` into the stash. Raises ManifestChanged when the file is not the one
        that was read (nothing moved), StashError when the move fails (then either nothing
        was moved, or the move is finished by the next operation's recovery)."""
        files = self._files()
        m_path = files.manifests.path
        if manifest.path.parent != m_path and manifest.path.parent.resolve() != m_path:
            raise ValueError(f"{manifest.path} is not in the manifest directory {m_path}")
        with locked(files.manifests, files.stash):
            recover(files, dry_run=False)
            return move_aside(
                files, self._mover, manifest, owner, boot_id=self.boot_id, now=self._now
            )

    def restore_all(
        self,
        select: Callable[[JournalEntry], bool] | None = None,
        *,
        dry_run: bool = False,
    ) -> list[RestoreResult]:
        """Put every stashed manifest (that `select` accepts) back into the manifest directory.
        Never replaces a file: see RestoreResult.outcome. One failure does not stop the rest."""
        files = self._files()
        with locked(files.manifests, files.stash, shared=dry_run):
            if not dry_run:
                recover(files, dry_run=False)
            return move_back(files, self._mover, files.scan().entries, select, dry_run=dry_run)
