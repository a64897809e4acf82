"""Helpers for the static pod stash tests: manifests, the invariant, special mounts."""

from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest

from nodeagent.model.staticpods.journal import ENTRY_SUFFIX, PAYLOAD_SUFFIX, Owner, State
from nodeagent.model.staticpods.manifests import Manifest
from nodeagent.node.staticpods.directories import LOCK_NAME
from nodeagent.node.staticpods.fsops import DirHandle
from nodeagent.node.staticpods.manifestfiles import scan_manifest_dir
from nodeagent.node.staticpods.stash import Stash

NODE = "node-1"
OWNER = Owner("maint-a", shutdown=False, node=NODE)


def pod_yaml(name: str, extra: str = "") -> bytes:
    return (
        f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: kube-system\n"
        f"spec:\n  priorityClassName: system-node-critical\n"
        f"  containers: [{{name: {name}, image: registry.k8s.io/{name}:v1}}]\n{extra}"
    ).encode()


def control_plane(directory: Path) -> dict[str, bytes]:
    """Three manifests with distinct content, as a control-plane node has them."""
    files = {
        "etcd.yaml": pod_yaml("etcd", "# etcd\n"),
        "kube-apiserver.yaml": pod_yaml("kube-apiserver", "# " + "x" * 5000 + "\n"),
        "kube-scheduler.json": (
            b'{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "kube-scheduler", '
            b'"namespace": "kube-system"}, "spec": {"containers": []}}\n'
        ),
    }
    for name, data in files.items():
        (directory / name).write_bytes(data)
    return files


def manifests(directory: Path) -> dict[str, Manifest]:
    with DirHandle(directory) as d:
        return {m.path.name: m for m in scan_manifest_dir(d).manifests}


def assert_invariant(m_dir: Path, s_dir: Path, originals: Mapping[str, bytes]) -> None:
    """Every manifest, byte-identical, either in the manifest directory or in the stash with
    its journal entry (state stashed); never both, never neither; nothing else anywhere."""
    in_m = {p.name: p.read_bytes() for p in m_dir.iterdir()}
    assert set(in_m) <= set(originals), f"unexpected files in {m_dir}: {set(in_m) - set(originals)}"
    with Stash(m_dir, s_dir) as stash:
        listing = stash.contents()
    assert listing.problems == ()
    stashed: dict[str, bytes] = {}
    for item in listing.entries:
        assert item.entry.state is State.STASHED, item.entry
        data = item.payload.read_bytes()
        assert hashlib.sha256(data).hexdigest() == item.entry.sha256
        assert item.entry.size == len(data)
        assert item.entry.original_name not in stashed, "stashed twice"
        stashed[item.entry.original_name] = data
    for name, data in originals.items():
        here, there = name in in_m, name in stashed
        assert here != there, f"{name}: in manifest dir {here}, in stash {there}"
        assert (in_m if here else stashed)[name] == data, f"{name} is not byte-identical"
    names = {p.name for p in s_dir.iterdir()}
    expected = {e.entry.id + ENTRY_SUFFIX for e in listing.entries} | {
        e.entry.id + PAYLOAD_SUFFIX for e in listing.entries
    }
    assert names - {LOCK_NAME} == expected, f"stray files in the stash: {names - expected}"


def _mount(*args: str) -> bool:
    return subprocess.run(["mount", *args], capture_output=True).returncode == 0


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[None]:
    """Make `path` read-only, even for root (a read-only bind mount)."""
    if os.geteuid() != 0:
        mode = path.stat().st_mode
        path.chmod(0o555)
        try:
            yield
        finally:
            path.chmod(mode)
        return
    if not _mount("--bind", "-o", "ro", str(path), str(path)):
        pytest.skip("cannot make a read-only bind mount here")
    try:
        yield
    finally:
        subprocess.run(["umount", str(path)], check=True)


@contextlib.contextmanager
def remountable(path: Path) -> Iterator[Callable[[bool], None]]:
    """`path` bind-mounted onto itself; the yielded function makes that mount read-only (True)
    or writable again (False), also for directories opened through it before."""
    if os.geteuid() != 0 or not _mount("--bind", str(path), str(path)):
        pytest.skip("cannot make bind mounts here")

    def set_read_only(ro: bool) -> None:
        assert _mount("-o", "remount,bind," + ("ro" if ro else "rw"), str(path))

    try:
        yield set_read_only
    finally:
        subprocess.run(["umount", str(path)], check=True)


@contextlib.contextmanager
def other_filesystem(path: Path) -> Iterator[Path]:
    """A tmpfs mounted at `path`: a file system other than the test directory's."""
    path.mkdir()
    if os.geteuid() != 0 or not _mount("-t", "tmpfs", "-o", "size=1m", "tmpfs", str(path)):
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield path
    finally:
        subprocess.run(["umount", str(path)], check=True)
