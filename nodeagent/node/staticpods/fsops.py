"""File system primitives for moving manifests safely: directory handles, fsync, and a rename
that never replaces an existing file.

Everything works on directory file descriptors (`*at` system calls), so a directory that is
renamed or swapped for a symlink while we work cannot redirect a move.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

__all__ = [
    "DirHandle",
    "Mover",
    "StepHook",
    "link_move",
    "move_noreplace",
    "rename_noreplace",
]

StepHook = Callable[[str], None]
"""Called with a step name after every change a move makes on disk (crash tests kill there)."""

_RENAME_NOREPLACE = 1
_O_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOFOLLOW


class DirHandle:
    """An open directory: `*at` operations relative to it and fsync of its entries."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = os.open(path, _O_DIR)

    def close(self) -> None:
        if self.fd >= 0:
            fd, self.fd = self.fd, -1
            os.close(fd)

    def __enter__(self) -> DirHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def is_current(self) -> bool:
        """Whether the path still names the directory we opened (not replaced or removed)."""
        try:
            st = self.path.lstat()
        except OSError:
            return False
        own = os.fstat(self.fd)
        return (st.st_dev, st.st_ino) == (own.st_dev, own.st_ino)

    def fsync(self) -> None:
        """Make the directory's entries (creations, renames, removals) durable."""
        os.fsync(self.fd)

    def names(self) -> list[str]:
        return sorted(os.listdir(self.fd))  # noqa: PTH208 (a directory fd)

    def lstat(self, name: str) -> os.stat_result | None:
        try:
            return os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def exists(self, name: str) -> bool:
        return self.lstat(name) is not None

    def read_regular(
        self, name: str, limit: int, *, follow: bool = False
    ) -> tuple[bytes, os.stat_result]:
        """The content of regular file `name` (not through a symlink unless `follow`; never a
        FIFO or device) and its stat; OSError otherwise. At most `limit` bytes are accepted."""
        flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
        fd = os.open(name, flags, dir_fd=self.fd)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise OSError(errno.EINVAL, "not a regular file", name)
            chunks: list[bytes] = []
            total = 0
            while True:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    break
                total += len(chunk)
                if total > limit:
                    raise OSError(errno.EFBIG, f"larger than {limit} bytes", name)
                chunks.append(chunk)
            return b"".join(chunks), st
        finally:
            os.close(fd)

    def write_durable(self, name: str, data: bytes, mode: int = 0o600) -> None:
        """Create `name` (which must not exist) with `data`, fsynced. Not atomic by itself:
        write to a temporary name and rename it into place."""
        fd = os.open(
            name,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            mode,
            dir_fd=self.fd,
        )
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        finally:
            os.close(fd)

    def unlink(self, name: str) -> None:
        os.unlink(name, dir_fd=self.fd)

    def replace(self, src: str, dst: str) -> None:
        """rename(2) within this directory, replacing `dst` (for our own journal files only)."""
        os.rename(src, dst, src_dir_fd=self.fd, dst_dir_fd=self.fd)

    def same_file(self, name: str, other: DirHandle, other_name: str) -> bool:
        a, b = self.lstat(name), other.lstat(other_name)
        return a is not None and b is not None and (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


class Mover(Protocol):
    """Moves `src` in `src_dir` to `dst` in `dst_dir` (same file system) without ever replacing
    an existing `dst`: FileExistsError then, FileNotFoundError when `src` is gone.

    Whatever happens, the file is afterwards under `src`, under `dst`, or (between the two steps
    of a link-based move, reported through `step`) under both names as one inode.
    """

    def __call__(
        self, src_dir: DirHandle, src: str, dst_dir: DirHandle, dst: str, step: StepHook
    ) -> None: ...


def _load_renameat2() -> Callable[..., int] | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


_renameat2 = _load_renameat2()


class NoReplaceUnsupported(OSError):
    """renameat2(RENAME_NOREPLACE) is not available for this file system or libc."""


def rename_noreplace(src_dir: DirHandle, src: str, dst_dir: DirHandle, dst: str) -> None:
    """renameat2(2) with RENAME_NOREPLACE: one atomic step that fails if `dst` exists."""
    if _renameat2 is None:
        raise NoReplaceUnsupported(errno.ENOSYS, "renameat2 is not available in libc")
    rc = _renameat2(src_dir.fd, os.fsencode(src), dst_dir.fd, os.fsencode(dst), _RENAME_NOREPLACE)
    if rc == 0:
        return
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
        raise NoReplaceUnsupported(err, os.strerror(err), dst)
    raise OSError(err, os.strerror(err), src if err == errno.ENOENT else dst)


def link_move(src_dir: DirHandle, src: str, dst_dir: DirHandle, dst: str, step: StepHook) -> None:
    """link(2) then unlink(2): never replaces `dst` (link fails with EEXIST), at the price of a
    moment where the file has both names. Recovery finishes such a move."""
    os.link(src, dst, src_dir_fd=src_dir.fd, dst_dir_fd=dst_dir.fd, follow_symlinks=False)
    step("linked")
    os.unlink(src, dir_fd=src_dir.fd)


def move_noreplace(
    src_dir: DirHandle, src: str, dst_dir: DirHandle, dst: str, step: StepHook
) -> None:
    """The default `Mover`: renameat2(RENAME_NOREPLACE), else `link_move` on file systems
    without it (NFS, old kernels)."""
    with contextlib.suppress(NoReplaceUnsupported):
        rename_noreplace(src_dir, src, dst_dir, dst)
        return
    link_move(src_dir, src, dst_dir, dst, step)
