"""Where the kubelet's static pod manifests are, and where we put them aside.

The manifest directory comes from configuration, else from the running kubelet (its
`--pod-manifest-path` flag, else `staticPodPath` in its `--config-dir` drop-ins or the file its
`--config` flag names, as the kubelet itself lets flags win over drop-ins over the file), else
`/etc/kubernetes/manifests`. The stash directory sits inside it, `<manifest dir>/.nodeagent-stash`:
the kubelet skips dot entries, and a move into it stays on the manifest directory's mount (the
DaemonSet and the unit give the agent that one directory; rename(2) cannot cross mounts).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import yaml

__all__ = [
    "DEFAULT_MANIFEST_DIR",
    "KUBEADM_KUBELET_CONFIG",
    "STASH_NAME",
    "KubeletConfigUnreadable",
    "KubeletProcess",
    "ManifestDirChoice",
    "StaticPodPaths",
    "default_stash_dir",
    "find_manifest_dir",
    "kubelet_config_files",
    "kubelet_processes",
    "manifest_dir_of_kubelet",
    "read_kubelet_config",
    "static_pod_paths",
]

log = logging.getLogger(__name__)

DEFAULT_MANIFEST_DIR = Path("/etc/kubernetes/manifests")
KUBEADM_KUBELET_CONFIG = Path("/var/lib/kubelet/config.yaml")
"""Read when no kubelet runs (at boot, before it starts): where kubeadm puts its config."""
STASH_NAME = ".nodeagent-stash"
_MAX_CONFIG_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class KubeletProcess:
    pid: int
    cmdline: tuple[str, ...]
    cwd: Path | None = None  # to resolve a relative --config path


@dataclass(frozen=True)
class ManifestDirChoice:
    path: Path | None  # None: the kubelet runs with static pods turned off
    source: str  # for logs and the CLI: where the answer came from


def kubelet_processes() -> list[KubeletProcess]:
    """Running processes named `kubelet`, oldest first."""
    found: list[tuple[float, KubeletProcess]] = []
    for proc in psutil.process_iter(["pid", "name", "cmdline", "create_time"]):
        try:
            info = proc.info
            cmdline = info.get("cmdline") or []
            if info.get("name") != "kubelet" and not (
                cmdline and Path(cmdline[0]).name == "kubelet"
            ):
                continue
            try:
                cwd: Path | None = Path(proc.cwd())
            except (psutil.Error, OSError):
                cwd = None
            found.append(
                (info.get("create_time") or 0.0, KubeletProcess(info["pid"], tuple(cmdline), cwd))
            )
        except (psutil.Error, OSError):
            continue  # gone or not ours to look at
    return [p for _, p in sorted(found, key=lambda item: item[0])]


def _flag(cmdline: Sequence[str], name: str) -> str | None:
    """The last value of `--name=value` / `--name value` (pflag: the last one wins)."""
    value: str | None = None
    args = list(cmdline)
    for i, arg in enumerate(args):
        if arg == "--":
            break
        for prefix in ("--", "-"):
            if arg == prefix + name and i + 1 < len(args):
                value = args[i + 1]
            elif arg.startswith(prefix + name + "="):
                value = arg[len(prefix + name) + 1 :]
    return value


class KubeletConfigUnreadable(Exception):
    """A kubelet config file that cannot be read or is no YAML; the text names the file."""


def read_kubelet_config(path: Path) -> object:
    """The YAML document of a kubelet config file (None when empty). Raises
    KubeletConfigUnreadable."""
    try:
        with path.open("rb") as f:
            data = f.read(_MAX_CONFIG_BYTES + 1)
        if len(data) > _MAX_CONFIG_BYTES:
            raise KubeletConfigUnreadable(f"kubelet config {path} is too large to read")
        return yaml.safe_load(data)
    except (OSError, yaml.YAMLError) as e:
        detail = " ".join(str(e).split())
        raise KubeletConfigUnreadable(f"cannot read kubelet config {path}: {detail}") from None


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


def _absolute(value: str, cwd: Path | None) -> Path:
    path = Path(value)
    if not path.is_absolute() and cwd is not None:
        path = cwd / path
    return path


def kubelet_config_files(proc: KubeletProcess) -> list[Path]:
    """The files a kubelet process reads its configuration from, in the order it applies them
    (later wins): the `--config` file, then the `--config-dir` drop-ins (`*.conf`, sorted)."""
    files: list[Path] = []
    config = _flag(proc.cmdline, "config")
    if config:
        files.append(_absolute(config, proc.cwd))
    config_dir = _flag(proc.cmdline, "config-dir")
    if config_dir:
        drop_ins = _absolute(config_dir, proc.cwd)
        with contextlib.suppress(OSError):
            files += sorted(p for p in drop_ins.iterdir() if p.name.endswith(".conf"))
    return files


def manifest_dir_of_kubelet(proc: KubeletProcess) -> ManifestDirChoice | None:
    """The static pod directory a kubelet process reads, or None if it does not say."""
    flag = _flag(proc.cmdline, "pod-manifest-path")
    if flag is not None:
        where = f"kubelet --pod-manifest-path (pid {proc.pid})"
        return ManifestDirChoice(_absolute(flag, proc.cwd) if flag else None, where)
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
