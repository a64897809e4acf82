"""The stash: static pod manifests moved out of the kubelet's directory, with a journal, so that
none is ever lost or duplicated.

Invariant: after a crash at any point (and `recover`), every manifest is, byte for byte, either
in the manifest directory, or in the stash directory with its journal entry; never both, never
neither. How:

- Nothing is ever copied or rewritten: a manifest only changes directory by rename(2) (never
  replacing a file: see `fsops.Mover`), between two directories on one file system.
- Moving aside: the journal entry (state `stashing`) is written and fsynced first, then the
  manifest is renamed into the stash, both directories are fsynced, then the entry says
  `stashed`. Restoring: the entry says `restoring`, the manifest is renamed back, both
  directories are fsynced, then the entry is removed.
- `recover` looks at each entry that is not `stashed` and at where its file is: if the rename
  happened it finishes the bookkeeping (rolls forward), if not it rolls back. It never performs
  the rename itself, so it never makes a decision the crashed caller had not made.
- Restoring never replaces a file that reappeared under the manifest's name: the manifest then
  stays in the stash and the result says so (if the two are byte-identical, the stashed copy is
  dropped instead, as keeping both would change nothing).
- Every operation holds an exclusive flock(2) on `<stash>/.lock`, so the agent and
  `nodeagent restore-static-pods` can run at the same time.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import logging
import os
import secrets
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from nodeagent.model.times import Clock, format_time, utcnow
from nodeagent.node.boot import read_boot_id
from nodeagent.node.staticpods.fsops import (
    DirHandle,
    Mover,
    StepHook,
    move_noreplace,
)
from nodeagent.node.staticpods.journal import (
    ENTRY_SUFFIX,
    PAYLOAD_SUFFIX,
    JournalEntry,
    JournalError,
    State,
)
from nodeagent.node.staticpods.manifests import MAX_MANIFEST_BYTES, FileId, Manifest

__all__ = [
    "ManifestChanged",
    "Owner",
    "ReadOnlyStash",
    "RecoveryAction",
    "RestoreOutcome",
    "RestoreResult",
    "Stash",
    "StashError",
    "StashListing",
    "StashUnavailable",
    "Stashed",
]

log = logging.getLogger(__name__)

LOCK_NAME = ".lock"
_TMP = ".tmp"
_PROBE_PREFIX = ".probe-"  # a file made and removed to check the stash is writable


class StashError(Exception):
    """A stash operation failed; the message names the file or directory and what was kept."""


class StashUnavailable(StashError):
    """The stash cannot be used at all (missing directory, other file system, ...)."""


class ReadOnlyStash(StashUnavailable):
    """The stash directory cannot be written; nothing was touched."""


class ManifestChanged(StashError):
    """The manifest changed or vanished after it was read; it was not moved."""


@dataclass(frozen=True)
class Owner:
    """Why a manifest is moved aside."""

    maintenance: str
    shutdown: bool  # the maintenance is the agent's own shutdown maintenance
    node: str


@dataclass(frozen=True)
class Stashed:
    entry: JournalEntry
    payload: Path


@dataclass(frozen=True)
class StashListing:
    entries: tuple[Stashed, ...]
    problems: tuple[str, ...]  # unreadable entries, payloads without an entry


RestoreOutcome = Literal[
    "restored",  # renamed back into the manifest directory
    "identical",  # an identical file was back already; the stashed copy was dropped
    "conflict",  # another file is there under the name; ours stays in the stash
    "would-restore",  # dry run
    "would-drop-identical",  # dry run
    "error",
]


@dataclass(frozen=True)
class RestoreResult:
    entry: JournalEntry
    outcome: RestoreOutcome
    path: Path  # the manifest's path in the manifest directory
    message: str

    @property
    def ok(self) -> bool:
        return self.outcome not in ("conflict", "error")

    def __str__(self) -> str:
        return f"{self.outcome}: {self.message}"


@dataclass(frozen=True)
class RecoveryAction:
    action: Literal["rolled-forward", "rolled-back", "removed-temporary", "problem"]
    path: Path
    message: str

    def __str__(self) -> str:
        return f"{self.action}: {self.message}"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


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
        self._on_step = on_step
        self._mover: Mover = mover if mover is not None else move_noreplace
        self._now = now
        self._m: DirHandle | None = None
        self._s: DirHandle | None = None

    # --- opening -----------------------------------------------------------------------------

    @property
    def manifest_dir(self) -> Path:
        return self._m.path if self._m is not None else self._manifest_path

    @property
    def stash_dir(self) -> Path:
        return self._s.path if self._s is not None else self._stash_path

    @property
    def boot_id(self) -> str:
        if self._boot_id is None:
            try:
                self._boot_id = read_boot_id()
            except OSError as e:
                raise StashUnavailable(f"cannot read the boot id: {e}") from e
        return self._boot_id

    def __enter__(self) -> Stash:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def open(self, *, create: bool = True, writable: bool = True) -> None:
        """Check the two directories and open them. Raises StashUnavailable (ReadOnlyStash)
        with a clear message; touches nothing then. `create` makes a missing stash directory
        (mode 0700)."""
        if self._m is not None:
            return
        m_path = self._resolve_dir(self._manifest_path, "manifest directory")
        s_path = self._stash_path.absolute()
        # beside the manifest directory, or in it under a dot name (which the kubelet and our
        # scan skip); never the manifest directory itself, above it, or deeper in it
        hidden_inside = s_path.parent == m_path and s_path.name.startswith(".")
        if (
            s_path == m_path
            or s_path in m_path.parents
            or (m_path in s_path.parents and not hidden_inside)
        ):
            raise StashUnavailable(
                f"stash directory {s_path} must be beside the manifest directory {m_path} or "
                "directly in it under a name that starts with a dot"
            )
        m = DirHandle(m_path)
        try:
            s = self._open_stash_dir(m, s_path, create=create, writable=writable)
        except BaseException:
            m.close()
            raise
        self._m, self._s = m, s

    def close(self) -> None:
        for handle in (self._m, self._s):
            if handle is not None:
                handle.close()
        self._m = self._s = None

    @staticmethod
    def _resolve_dir(path: Path, what: str) -> Path:
        try:
            resolved = path.resolve(strict=True)
        except OSError as e:
            raise StashUnavailable(f"{what} {path} cannot be used: {e.strerror or e}") from e
        if not resolved.is_dir():
            raise StashUnavailable(f"{what} {path} is not a directory")
        return resolved

    def _open_stash_dir(
        self, m: DirHandle, s_path: Path, *, create: bool, writable: bool
    ) -> DirHandle:
        m_dev = os.fstat(m.fd).st_dev
        try:
            st = os.lstat(s_path)
        except FileNotFoundError:
            st = None
        except OSError as e:
            raise StashUnavailable(f"stash directory {s_path}: {e.strerror or e}") from e
        if st is None:
            if not create:
                raise StashUnavailable(f"stash directory {s_path} does not exist")
            self._create_stash_dir(s_path, m_dev, m.path)
        elif stat.S_ISLNK(st.st_mode):
            raise StashUnavailable(
                f"stash directory {s_path} is a symbolic link; give the real path"
            )
        elif not stat.S_ISDIR(st.st_mode):
            raise StashUnavailable(f"stash directory {s_path} is not a directory")
        s = DirHandle(s_path)
        try:
            s_dev = os.fstat(s.fd).st_dev
            if s_dev != m_dev:
                raise StashUnavailable(_other_fs(s_path, s_dev, m.path, m_dev))
            if writable:
                self._probe_writable(s)
        except BaseException:
            s.close()
            raise
        return s

    @staticmethod
    def _create_stash_dir(s_path: Path, m_dev: int, m_path: Path) -> None:
        parent = s_path.parent
        try:
            parent_dev = parent.stat().st_dev
        except OSError as e:
            raise StashUnavailable(f"stash directory {s_path}: {parent}: {e.strerror}") from e
        if parent_dev != m_dev:
            raise StashUnavailable(_other_fs(s_path, parent_dev, m_path, m_dev))
        try:
            s_path.mkdir(mode=0o700)
        except FileExistsError:
            return  # made by a concurrent process
        except OSError as e:
            if e.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
                raise ReadOnlyStash(
                    f"cannot create stash directory {s_path}: {e.strerror}; nothing was moved"
                ) from e
            raise StashUnavailable(f"cannot create stash directory {s_path}: {e.strerror}") from e
        with DirHandle(parent) as p:
            p.fsync()
        log.info("created stash directory %s", s_path)

    @staticmethod
    def _probe_writable(s: DirHandle) -> None:
        probe = f"{_PROBE_PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
        try:
            fd = os.open(
                probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600, dir_fd=s.fd
            )
        except OSError as e:
            raise ReadOnlyStash(
                f"stash directory {s.path} is not writable ({e.strerror}); no manifest was "
                "moved or restored"
            ) from e
        os.close(fd)
        with contextlib.suppress(FileNotFoundError):  # a recovery may have cleaned it up
            s.unlink(probe)

    def _dirs(self) -> tuple[DirHandle, DirHandle]:
        if self._m is None or self._s is None:
            raise RuntimeError("the stash is not open")
        return self._m, self._s

    @contextlib.contextmanager
    def _locked(self, *, shared: bool = False) -> Iterator[None]:
        """flock(2) on `<stash>/.lock`: exclusive to change, shared to look. Looking never
        creates the lock file (a dry run changes nothing), and works in a read-only stash."""
        m, s = self._dirs()
        for handle, what in ((m, "manifest directory"), (s, "stash directory")):
            if not handle.is_current():
                raise StashUnavailable(
                    f"{what} {handle.path} was replaced or removed since it was opened; "
                    "open the stash again"
                )
        try:
            if shared:
                fd = os.open(LOCK_NAME, os.O_RDONLY | os.O_CLOEXEC, dir_fd=s.fd)
            else:
                fd = os.open(LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600, dir_fd=s.fd)
        except OSError as e:
            if shared:
                yield  # no lock file: nothing has ever changed this stash under a lock
                return
            raise ReadOnlyStash(
                f"cannot open the lock file in stash directory {s.path} ({e.strerror}); "
                "nothing was changed"
            ) from e
        try:
            fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _step(self, name: str) -> None:
        if self._on_step is not None:
            self._on_step(name)

    # --- journal files -----------------------------------------------------------------------

    def _write_entry(self, entry: JournalEntry, step: str) -> None:
        _, s = self._dirs()
        tmp = entry.entry_name + _TMP
        if s.exists(tmp):
            s.unlink(tmp)
        s.write_durable(tmp, entry.to_bytes())
        self._step(step + ".entry-written")
        s.replace(tmp, entry.entry_name)
        self._step(step + ".entry-renamed")
        s.fsync()
        self._step(step + ".entry-synced")

    def _delete_entry(self, entry: JournalEntry, step: str) -> None:
        _, s = self._dirs()
        s.unlink(entry.entry_name)
        self._step(step + ".entry-removed")
        s.fsync()
        self._step(step + ".entry-synced")

    def _read_entry(self, name: str) -> JournalEntry:
        _, s = self._dirs()
        where = str(s.path / name)
        try:
            data, _ = s.read_regular(name, 1 << 20)
        except OSError as e:
            raise JournalError(f"{where}: cannot be read: {e.strerror or e}") from e
        entry = JournalEntry.from_bytes(data, where)
        if entry.entry_name != name:
            raise JournalError(f"{where}: holds the entry of {entry.id}")
        return entry

    def _read_payload(self, entry: JournalEntry) -> tuple[bytes, os.stat_result]:
        _, s = self._dirs()
        return s.read_regular(entry.payload_name, MAX_MANIFEST_BYTES)

    def _scan(self) -> tuple[list[JournalEntry], list[str], list[str]]:
        """(entries, problems, temporary files) of the stash directory."""
        _, s = self._dirs()
        entries: list[JournalEntry] = []
        problems: list[str] = []
        temporary: list[str] = []
        names = s.names()
        ids: set[str] = set()
        for name in names:
            # unfinished journal writes, and write probes a kill left behind
            if name.endswith(_TMP) or name.startswith(_PROBE_PREFIX):
                temporary.append(name)
            elif name.endswith(ENTRY_SUFFIX):
                try:
                    entry = self._read_entry(name)
                except JournalError as e:
                    problems.append(f"{e}; the entry and its manifest are left alone")
                    ids.add(name[: -len(ENTRY_SUFFIX)])
                    continue
                entries.append(entry)
                ids.add(entry.id)
        for name in names:
            if name.endswith(PAYLOAD_SUFFIX) and name[: -len(PAYLOAD_SUFFIX)] not in ids:
                problems.append(
                    f"{s.path / name}: a stashed manifest without a journal entry; left alone "
                    "(move it back by hand if it belongs in the manifest directory)"
                )
        return entries, problems, temporary

    # --- reading -----------------------------------------------------------------------------

    def contents(self) -> StashListing:
        """What the stash holds (entries in any state) and what is wrong in it."""
        _, s = self._dirs()
        with self._locked(shared=True):
            entries, problems, _ = self._scan()
        return StashListing(
            tuple(Stashed(e, s.path / e.payload_name) for e in entries), tuple(problems)
        )

    # --- recovery ----------------------------------------------------------------------------

    def recover(self, *, dry_run: bool = False) -> list[RecoveryAction]:
        """Finish or roll back moves a crash interrupted; report what was done (or, with
        `dry_run`, what would be done) and what needs a human."""
        with self._locked(shared=dry_run):
            return self._recover(dry_run)

    def _recover(self, dry_run: bool) -> list[RecoveryAction]:
        _, s = self._dirs()
        entries, problems, temporary = self._scan()
        actions = [RecoveryAction("problem", s.path, p) for p in problems]
        for name in temporary:
            if not dry_run:
                s.unlink(name)
                self._step("recover.temporary-removed")
            actions.append(
                RecoveryAction(
                    "removed-temporary",
                    s.path / name,
                    f"removed {name}, left behind by an interrupted write",
                )
            )
        if temporary and not dry_run:
            s.fsync()
            self._step("recover.temporary-synced")
        for entry in sorted(entries, key=lambda e: e.id):
            action = self._recover_entry(entry, dry_run)
            if action is not None:
                actions.append(action)
        for action in actions:
            if action.action == "problem":
                log.error("static pod stash %s: %s", s.path, action.message)
            elif not dry_run:
                log.warning("static pod stash %s: %s", s.path, action)
        return actions

    def _recover_entry(self, entry: JournalEntry, dry_run: bool) -> RecoveryAction | None:
        m, s = self._dirs()
        payload = s.path / entry.payload_name
        has_payload = s.exists(entry.payload_name)
        if entry.state is State.STASHED:
            if has_payload:
                return None
            return self._recover_missing_payload(entry, dry_run)
        if entry.state is State.STASHING:
            original = entry.original_name
            if not has_payload:
                # the rename never happened: the manifest is where it was
                if not dry_run:
                    self._delete_entry(entry, "recover.rollback")
                where = m.path / original
                if m.exists(original):
                    msg = f"{where} was not moved aside (interrupted before the move)"
                else:
                    msg = (
                        f"{where} was not moved aside (interrupted before the move), and is no "
                        "longer in the manifest directory: it was removed by someone else"
                    )
                return RecoveryAction("rolled-back", where, msg)
            if dry_run:
                return RecoveryAction(
                    "rolled-forward", payload, f"would finish moving {entry.original_path} aside"
                )
            if s.same_file(entry.payload_name, m, original):
                m.unlink(original)  # a link-based move stopped half way
                self._step("recover.stash.original-removed")
            m.fsync()
            s.fsync()
            self._step("recover.stash.synced")
            data, _ = self._read_payload(entry)
            sha = _sha256(data)
            if sha != entry.sha256:
                log.warning(
                    "%s changed while it was being moved aside (sha256 %s, journal %s)",
                    entry.original_path,
                    sha,
                    entry.sha256,
                )
            self._write_entry(
                entry.with_state(State.STASHED, sha256=sha, size=len(data)), "recover.stash"
            )
            return RecoveryAction(
                "rolled-forward",
                payload,
                f"finished moving {entry.original_path} aside to {payload}",
            )
        # RESTORING
        assert entry.restore_name is not None
        target = entry.restore_name
        where = m.path / target
        if has_payload:
            if s.same_file(entry.payload_name, m, target):
                if not dry_run:
                    s.unlink(entry.payload_name)  # a link-based move stopped half way
                    self._step("recover.restore.payload-removed")
                    self._finish_restore(entry, "recover.restore")
                return RecoveryAction("rolled-forward", where, f"finished restoring {where}")
            if not dry_run:
                self._write_entry(
                    entry.with_state(State.STASHED, restore_name=None), "recover.rollback"
                )
            return RecoveryAction(
                "rolled-back",
                payload,
                f"{entry.original_path} was not restored (interrupted before the move); it stays "
                f"in the stash at {payload}",
            )
        if m.exists(target):
            if not dry_run:
                self._finish_restore(entry, "recover.restore")
            return RecoveryAction("rolled-forward", where, f"finished restoring {where}")
        return RecoveryAction(
            "problem",
            where,
            f"journal entry {s.path / entry.entry_name}: the manifest is neither at {where} nor "
            f"at {payload}; it was removed by someone else. The entry is kept for inspection.",
        )

    def _recover_missing_payload(self, entry: JournalEntry, dry_run: bool) -> RecoveryAction:
        m, s = self._dirs()
        where = m.path / entry.original_name
        try:
            data, _ = m.read_regular(entry.original_name, MAX_MANIFEST_BYTES)
        except OSError:
            data = None
        if data is not None and _sha256(data) == entry.sha256:
            # an identical copy was back in place and the stashed copy was being dropped
            if not dry_run:
                m.fsync()
                self._delete_entry(entry, "recover.identical")
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

    def _finish_restore(self, entry: JournalEntry, step: str) -> None:
        m, s = self._dirs()
        m.fsync()
        s.fsync()
        self._step(step + ".synced")
        self._delete_entry(entry, step)

    # --- moving aside ------------------------------------------------------------------------

    def stash(self, manifest: Manifest, owner: Owner) -> JournalEntry:
        """Move `manifest` into the stash. Raises ManifestChanged when the file is not the one
        that was read (nothing moved), StashError when the move fails (then either nothing
        was moved, or the move is finished by the next operation's recovery)."""
        m, s = self._dirs()
        name = manifest.path.name
        if manifest.path.parent != m.path and manifest.path.parent.resolve() != m.path:
            raise ValueError(f"{manifest.path} is not in the manifest directory {m.path}")
        with self._locked():
            self._recover(dry_run=False)
            try:
                content, st = m.read_regular(name, MAX_MANIFEST_BYTES)
            except OSError as e:
                raise ManifestChanged(
                    f"{manifest.path} cannot be read any more ({e.strerror or e}); not moved"
                ) from e
            if FileId.of(st) != manifest.file_id or _sha256(content) != manifest.sha256:
                raise ManifestChanged(f"{manifest.path} changed since it was read; not moved")
            now = self._now()
            entry = JournalEntry(
                id=self._new_id(now),
                state=State.STASHING,
                original_path=str(m.path / name),
                sha256=manifest.sha256,
                size=len(content),
                maintenance=owner.maintenance,
                shutdown=owner.shutdown,
                boot_id=self.boot_id,
                node=owner.node,
                pod_namespace=manifest.namespace,
                pod_name=manifest.mirror_name(owner.node),
                stashed_at=format_time(now),
            )
            try:
                self._write_entry(entry, "stash.intent")
            except OSError as e:
                with contextlib.suppress(OSError):
                    s.unlink(entry.entry_name + _TMP)
                raise StashError(
                    f"cannot write the journal entry in {s.path} ({e.strerror or e}); "
                    f"{manifest.path} was not moved"
                ) from e
            try:
                self._mover(
                    m, name, s, entry.payload_name, lambda step: self._step("stash.move-" + step)
                )
            except OSError as e:
                if not s.exists(entry.payload_name):
                    self._delete_entry(entry, "stash.rollback")
                if isinstance(e, FileNotFoundError):
                    raise ManifestChanged(f"{manifest.path} vanished; not moved") from e
                raise StashError(
                    f"cannot move {manifest.path} to {s.path} ({e.strerror or e})"
                ) from e
            self._step("stash.moved")
            try:
                s.fsync()
                self._step("stash.stash-dir-synced")
                m.fsync()
                self._step("stash.manifest-dir-synced")
                data, pst = self._read_payload(entry)
                sha = _sha256(data)
                if sha != entry.sha256 or (pst.st_dev, pst.st_ino) != (st.st_dev, st.st_ino):
                    log.warning(
                        "%s was replaced while it was being moved aside; the journal records "
                        "what was moved (sha256 %s)",
                        manifest.path,
                        sha,
                    )
                entry = entry.with_state(State.STASHED, sha256=sha, size=len(data))
                self._write_entry(entry, "stash.commit")
            except OSError as e:
                raise StashError(
                    f"{manifest.path} was moved to {s.path / entry.payload_name} but the journal "
                    f"could not be completed ({e.strerror or e}); the next operation finishes it"
                ) from e
            log.info(
                "moved static pod manifest %s aside to %s (maintenance %s)",
                manifest.path,
                s.path / entry.payload_name,
                owner.maintenance,
            )
            return entry

    def _new_id(self, now: datetime) -> str:
        _, s = self._dirs()
        stamp = now.astimezone(UTC).strftime("%Y%m%dT%H%M%S%fZ")
        while True:
            entry_id = f"{stamp}-{secrets.token_hex(4)}"
            names = (
                entry_id + ENTRY_SUFFIX,
                entry_id + PAYLOAD_SUFFIX,
                entry_id + ENTRY_SUFFIX + _TMP,
            )
            if not any(s.exists(n) for n in names):
                return entry_id

    # --- restoring ---------------------------------------------------------------------------

    def restore_all(
        self,
        select: Callable[[JournalEntry], bool] | None = None,
        *,
        dry_run: bool = False,
    ) -> list[RestoreResult]:
        """Put every stashed manifest (that `select` accepts) back into the manifest directory.
        Never replaces a file: see RestoreResult.outcome. One failure does not stop the rest."""
        with self._locked(shared=dry_run):
            if not dry_run:
                self._recover(dry_run=False)
            entries, _, _ = self._scan()
            results: list[RestoreResult] = []
            # newest first: of two versions of one manifest moved aside, the one written last
            # goes back, and the older one stays in the stash as a conflict
            for entry in sorted(entries, key=lambda e: e.id, reverse=True):
                if select is not None and not select(entry):
                    continue
                if entry.state is not State.STASHED:
                    results.append(
                        self._result(entry, "error", "an interrupted move; recovery finishes it")
                    )
                    continue
                try:
                    results.append(self._restore(entry, dry_run))
                except OSError as e:
                    results.append(
                        self._result(
                            entry,
                            "error",
                            f"cannot restore {self.stash_dir / entry.payload_name} to "
                            f"{self.manifest_dir / entry.original_name}: {e.strerror or e}",
                        )
                    )
            for r in results:
                if r.outcome in ("restored", "identical"):
                    log.info("static pod manifest %s", r)
                elif not r.ok:
                    log.warning("static pod manifest %s", r)
            return results

    def _result(self, entry: JournalEntry, outcome: RestoreOutcome, message: str) -> RestoreResult:
        return RestoreResult(entry, outcome, self.manifest_dir / entry.original_name, message)

    def _restore(self, entry: JournalEntry, dry_run: bool) -> RestoreResult:
        m, s = self._dirs()
        target = entry.original_name
        where = m.path / target
        payload = s.path / entry.payload_name
        data, _ = self._read_payload(entry)
        sha = _sha256(data)
        note = (
            ""
            if sha == entry.sha256
            else f" (its content changed while it was stashed: sha256 {sha}, moved aside as "
            f"{entry.sha256})"
        )
        present = m.lstat(target)
        if present is not None:
            same = False
            if stat.S_ISREG(present.st_mode):
                with contextlib.suppress(OSError):
                    same = _sha256(m.read_regular(target, MAX_MANIFEST_BYTES)[0]) == sha
            if not same:
                return self._result(
                    entry,
                    "conflict",
                    f"{where} exists again and differs from the manifest moved aside; both are "
                    f"kept: ours stays at {payload}. Remove one of them, then run `nodeagent "
                    "restore-static-pods`.",
                )
            if dry_run:
                return self._result(
                    entry,
                    "would-drop-identical",
                    f"{where} is back already, identical to {payload}",
                )
            s.unlink(entry.payload_name)
            self._step("restore.identical.payload-removed")
            s.fsync()
            self._step("restore.identical.synced")
            self._delete_entry(entry, "restore.identical")
            return self._result(
                entry, "identical", f"{where} was back already, identical; dropped {payload}"
            )
        if dry_run:
            return self._result(entry, "would-restore", f"would move {payload} to {where}{note}")
        restoring = entry.with_state(State.RESTORING, restore_name=target)
        self._write_entry(restoring, "restore.intent")
        try:
            self._mover(
                s,
                entry.payload_name,
                m,
                target,
                lambda step: self._step("restore.move-" + step),
            )
        except FileExistsError:
            self._write_entry(entry, "restore.rollback")
            return self._result(
                entry,
                "conflict",
                f"{where} appeared while restoring; both are kept: ours stays at {payload}",
            )
        except OSError:
            if s.exists(entry.payload_name) and not m.exists(target):
                self._write_entry(entry, "restore.rollback")
            raise
        self._step("restore.moved")
        m.fsync()
        self._step("restore.manifest-dir-synced")
        s.fsync()
        self._step("restore.stash-dir-synced")
        self._delete_entry(restoring, "restore.done")
        return self._result(entry, "restored", f"moved {payload} back to {where}{note}")


def _other_fs(s_path: Path, s_dev: int, m_path: Path, m_dev: int) -> str:
    return (
        f"stash directory {s_path} (device {os.major(s_dev)}:{os.minor(s_dev)}) is not on the "
        f"file system of the manifest directory {m_path} (device {os.major(m_dev)}:"
        f"{os.minor(m_dev)}); rename(2) cannot move manifests between them atomically. Put the "
        "stash directory on the same file system (staticPods.stashDir)."
    )
