"""Where the kubelet's static pod manifests are, and where we put them aside.

The manifest directory comes from configuration, else from the running kubelet (its
`--pod-manifest-path` flag, else `staticPodPath` in its `--config-dir` drop-ins or the file its
`--config` flag names, as the kubelet itself lets flags win over drop-ins over the file), else
`/etc/kubernetes/manifests`. The stash directory sits inside it, `<manifest dir>/.nodeagent-stash`:
the kubelet skips dot entries, and a move into it stays on the manifest directory's mount (the
DaemonSet and the unit give the agent that one directory; rename(2) cannot cross mounts).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from nodeagent.node.kubelet import (
    KUBEADM_KUBELET_CONFIG,
    KubeletConfigUnreadable,
    KubeletProcess,
    absolute,
    flag,
    kubelet_config_files,
    kubelet_processes,
    read_kubelet_config,
)

__all__ = [
    "DEFAULT_MANIFEST_DIR",
    "STASH_NAME",
    "ManifestDirChoice",
    "StaticPodPaths",
    "default_stash_dir",
    "find_manifest_dir",
    "manifest_dir_of_kubelet",
    "static_pod_paths",
]

log = logging.getLogger(__name__)

DEFAULT_MANIFEST_DIR = Path("/etc/kubernetes/manifests")
STASH_NAME = ".nodeagent-stash"


@dataclass(frozen=True)
class ManifestDirChoice:
    path: Path | None  # None: the kubelet runs with static pods turned off
    source: str  # for logs and the CLI: where the answer came from


def _read_yaml(path: Path) -> dict[str, Any] | None:
    try:
        doc = read_kubelet_config(path)
    except KubeletConfigUnreadable as e:
        log.warning("%s", e)
        return None
    return doc if isinstance(doc, dict) else None


def _static_pod_path(path: Path) -> str | None:
    """`staticPodPath` of a KubeletConfiguration file, resolved against its directory as the
    kubelet resolves relative paths in config files; None when the file does not set it."""
    doc = _read_yaml(path)
    if doc is None or "staticPodPath" not in doc:
        return None
    value = doc["staticPodPath"]
    if not isinstance(value, str):
        return None
    if value and not Path(value).is_absolute():
        value = str(path.parent / value)
    return value


def manifest_dir_of_kubelet(proc: KubeletProcess) -> ManifestDirChoice | None:
    """The static pod directory a kubelet process reads, or None if it does not say."""
    given = flag(proc.cmdline, "pod-manifest-path")
    if given is not None:
        where = f"kubelet --pod-manifest-path (pid {proc.pid})"
        return ManifestDirChoice(absolute(given, proc.cwd) if given else None, where)
    value: str | None = None
    where = ""
    for config_path in kubelet_config_files(proc):
        found = _static_pod_path(config_path)
        if found is not None:
            value, where = found, f"staticPodPath in {config_path} (kubelet pid {proc.pid})"
    if value is None:
        return None
    return ManifestDirChoice(Path(value) if value else None, where)


def find_manifest_dir(
    configured: Path | None,
    processes: Callable[[], Iterable[KubeletProcess]] = kubelet_processes,
    kubelet_config: Path = KUBEADM_KUBELET_CONFIG,
) -> ManifestDirChoice:
    """Configuration, else the running kubelet, else (no kubelet running, as at boot before it
    starts) `staticPodPath` in kubeadm's kubelet config file, else the default directory."""
    if configured is not None:
        return ManifestDirChoice(configured, "configuration")
    try:
        procs = list(processes())
    except (psutil.Error, OSError) as e:
        log.warning("cannot look for a running kubelet: %s", e)
        procs = []
    for proc in procs:
        choice = manifest_dir_of_kubelet(proc)
        if choice is not None:
            return choice
    if procs:
        return ManifestDirChoice(
            DEFAULT_MANIFEST_DIR, f"default (kubelet pid {procs[0].pid} names no static pod path)"
        )
    if kubelet_config.is_file():
        value = _static_pod_path(kubelet_config)
        if value is not None:
            where = f"staticPodPath in {kubelet_config} (no running kubelet)"
            return ManifestDirChoice(Path(value) if value else None, where)
    return ManifestDirChoice(DEFAULT_MANIFEST_DIR, "default (no running kubelet found)")


@dataclass(frozen=True)
class StaticPodPaths:
    manifest_dir: Path
    stash_dir: Path
    source: str  # where the manifest directory came from


def static_pod_paths(
    manifest_dir: Path | None,
    stash_dir: Path | None,
    processes: Callable[[], Iterable[KubeletProcess]] = kubelet_processes,
    kubelet_config: Path = KUBEADM_KUBELET_CONFIG,
) -> StaticPodPaths | None:
    """Both directories from configuration (`StaticPodConfig.manifest_dir`, `.stash_dir`, either
    may be None) and discovery; None when the kubelet runs with static pods turned off."""
    choice = find_manifest_dir(manifest_dir, processes, kubelet_config)
    if choice.path is None:
        return None
    stash = stash_dir if stash_dir is not None else default_stash_dir(choice.path)
    return StaticPodPaths(choice.path, stash, choice.source)


def default_stash_dir(manifest_dir: Path) -> Path:
    """`<manifest dir>/.nodeagent-stash`, inside the manifest directory."""
    return manifest_dir / STASH_NAME
