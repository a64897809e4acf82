"""The two directories of a stash: checking and opening them (the manifest directory and the
stash directory beside it or hidden in it, on one file system, the stash writable), and the
lock every stash operation holds."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path

from nodeagent.model.staticpods.outcomes import ReadOnlyStash, StashUnavailable
from nodeagent.node.staticpods.fsops import DirHandle

__all__ = ["LOCK_NAME", "PROBE_PREFIX", "locked", "open_directories"]

log = logging.getLogger(__name__)

LOCK_NAME = ".lock"
PROBE_PREFIX = ".probe-"  # a file made and removed to check the stash is writable


def open_directories(
    manifest_path: Path, stash_path: Path, *, create: bool, writable: bool
) -> tuple[DirHandle, DirHandle]:
    """Check the two directories and open them: (manifest directory, stash directory). Raises
    StashUnavailable (ReadOnlyStash) with a clear message; touches nothing then. `create` makes
    a missing stash directory (mode 0700)."""
    m_path = _resolve_dir(manifest_path, "manifest directory")
    s_path = stash_path.absolute()
    _check_placement(m_path, s_path)
    m = DirHandle(m_path)
    try:
        s = _open_stash_dir(m, s_path, create=create, writable=writable)
    except BaseException:
        m.close()
        raise
    return m, s


@contextlib.contextmanager
def locked(m: DirHandle, s: DirHandle, *, shared: bool = False) -> Iterator[None]:
    """flock(2) on `<stash>/.lock`: exclusive to change, shared to look. Looking never
    creates the lock file (a dry run changes nothing), and works in a read-only stash."""
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


def _resolve_dir(path: Path, what: str) -> Path:
    try:
        resolved = path.resolve(strict=True)
    except OSError as e:
        raise StashUnavailable(f"{what} {path} cannot be used: {e.strerror or e}") from e
    if not resolved.is_dir():
        raise StashUnavailable(f"{what} {path} is not a directory")
    return resolved


def _check_placement(m_path: Path, s_path: Path) -> None:
    """Beside the manifest directory, or in it under a dot name (which the kubelet and our scan
    skip); never the manifest directory itself, above it, or deeper in it."""
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


def _open_stash_dir(m: DirHandle, s_path: Path, *, create: bool, writable: bool) -> DirHandle:
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
        _create_stash_dir(s_path, m_dev, m.path)
    elif stat.S_ISLNK(st.st_mode):
        raise StashUnavailable(f"stash directory {s_path} is a symbolic link; give the real path")
    elif not stat.S_ISDIR(st.st_mode):
        raise StashUnavailable(f"stash directory {s_path} is not a directory")
    s = DirHandle(s_path)
    try:
        s_dev = os.fstat(s.fd).st_dev
        if s_dev != m_dev:
            raise StashUnavailable(_other_fs(s_path, s_dev, m.path, m_dev))
        if writable:
            _probe_writable(s)
    except BaseException:
        s.close()
        raise
    return s


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


def _probe_writable(s: DirHandle) -> None:
    probe = f"{PROBE_PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600, dir_fd=s.fd)
    except OSError as e:
        raise ReadOnlyStash(
            f"stash directory {s.path} is not writable ({e.strerror}); no manifest was "
            "moved or restored"
        ) from e
    os.close(fd)
    with contextlib.suppress(FileNotFoundError):  # a recovery may have cleaned it up
        s.unlink(probe)


def _other_fs(s_path: Path, s_dev: int, m_path: Path, m_dev: int) -> str:
    return (
        f"stash directory {s_path} (device {os.major(s_dev)}:{os.minor(s_dev)}) is not on the "
        f"file system of the manifest directory {m_path} (device {os.major(m_dev)}:"
        f"{os.minor(m_dev)}); rename(2) cannot move manifests between them atomically. Put the "
        "stash directory on the same file system (staticPods.stashDir)."
    )
