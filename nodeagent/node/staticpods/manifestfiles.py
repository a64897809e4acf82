"""The kubelet's manifest directory read as the kubelet reads it: each file a regular file, not
followed through a symbolic link, at most its size limit; parsed by
:mod:`nodeagent.model.staticpods.manifests`."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from nodeagent.model.staticpods.manifests import (
    MAX_MANIFEST_BYTES,
    FileId,
    Manifest,
    ManifestError,
    ManifestProblem,
    ScanResult,
    is_manifest_name,
    parse_manifest,
)
from nodeagent.node.staticpods.fsops import DirHandle

__all__ = ["read_manifest", "scan_manifest_dir"]


def _file_kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def _problem_through_symlink(directory: DirHandle, name: str, path: Path) -> ManifestProblem:
    try:
        target = os.readlink(name, dir_fd=directory.fd)
    except OSError:
        target = "?"
    reason = (
        f"is a symbolic link (to {target}); nodeagent moves only regular files, so it cannot "
        "stop this static pod: replace the link by the file it points to"
    )
    pod: tuple[str, str] | None = None
    try:
        content, st = directory.read_regular(name, MAX_MANIFEST_BYTES, follow=True)
        parsed = parse_manifest(path, content, FileId.of(st))
        pod = (parsed.namespace, parsed.name)
    except (OSError, ManifestError):
        pass  # a dangling or broken link: the reason above says enough
    return ManifestProblem(path, reason, pod)


def read_manifest(directory: DirHandle, name: str) -> Manifest:
    """Read and parse `name` in `directory`: a regular file, not followed through a symlink."""
    path = directory.path / name
    st = directory.lstat(name)
    if st is None:
        raise ManifestError(path, "does not exist (any more)")
    if stat.S_ISLNK(st.st_mode):
        raise ManifestError(path, _problem_through_symlink(directory, name, path).reason)
    if not stat.S_ISREG(st.st_mode):
        raise ManifestError(path, f"is {_file_kind(st.st_mode)}, not a regular file")
    try:
        content, fst = directory.read_regular(name, MAX_MANIFEST_BYTES)
    except OSError as e:
        raise ManifestError(path, f"cannot be read: {e.strerror or e}") from e
    return parse_manifest(path, content, FileId.of(fst))


def scan_manifest_dir(directory: DirHandle) -> ScanResult:
    """Every manifest the kubelet would read in `directory`, and a problem for each file it
    would look at that we cannot use. Raises OSError only if the directory cannot be listed."""
    manifests: list[Manifest] = []
    problems: list[ManifestProblem] = []
    for name in directory.names():
        if not is_manifest_name(name):
            continue
        path = directory.path / name
        st = directory.lstat(name)
        if st is None:
            continue  # removed since listing
        if stat.S_ISLNK(st.st_mode):
            problems.append(_problem_through_symlink(directory, name, path))
            continue
        try:
            manifests.append(read_manifest(directory, name))
        except ManifestError as e:
            problems.append(ManifestProblem(path, e.reason))
        except Exception as e:  # one file never stops the others: whatever it is, report it
            problems.append(ManifestProblem(path, f"cannot be used: {type(e).__name__}: {e}"))
    return ScanResult(directory.path, tuple(manifests), tuple(problems))
