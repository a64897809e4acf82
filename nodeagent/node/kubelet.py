"""The running kubelet as nodeagent reads it: its processes, their flags and the files they
read their configuration from (the static pods' directory and the Graceful Node Shutdown check
both ask)."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil
import yaml

__all__ = [
    "KUBEADM_KUBELET_CONFIG",
    "KubeletConfigUnreadable",
    "KubeletProcess",
    "absolute",
    "flag",
    "kubelet_config_files",
    "kubelet_processes",
    "read_kubelet_config",
]

KUBEADM_KUBELET_CONFIG = Path("/var/lib/kubelet/config.yaml")
"""Read when no kubelet runs (at boot, before it starts): where kubeadm puts its config."""
_MAX_CONFIG_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class KubeletProcess:
    pid: int
    cmdline: tuple[str, ...]
    cwd: Path | None = None  # to resolve a relative --config path


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


def flag(cmdline: Sequence[str], name: str) -> str | None:
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


def absolute(value: str, cwd: Path | None) -> Path:
    """`value` resolved against a process's working directory, as the kubelet resolves it."""
    path = Path(value)
    if not path.is_absolute() and cwd is not None:
        path = cwd / path
    return path


def kubelet_config_files(proc: KubeletProcess) -> list[Path]:
    """The files a kubelet process reads its configuration from, in the order it applies them
    (later wins): the `--config` file, then the `--config-dir` drop-ins (`*.conf`, sorted)."""
    files: list[Path] = []
    config = flag(proc.cmdline, "config")
    if config:
        files.append(absolute(config, proc.cwd))
    config_dir = flag(proc.cmdline, "config-dir")
    if config_dir:
        drop_ins = absolute(config_dir, proc.cwd)
        with contextlib.suppress(OSError):
            files += sorted(p for p in drop_ins.iterdir() if p.name.endswith(".conf"))
    return files
