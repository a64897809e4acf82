"""Static pod manifests as the kubelet reads them (pure: the files are read by
:mod:`nodeagent.node.staticpods.manifestfiles`), and the mapping to the mirror pods that stand
for them in the API.

The kubelet reads the files of its directory whose names end in `.yaml`, `.yml` or `.json` and
do not start with a dot; each holds one v1 Pod. Its mirror pod is named
`<metadata.name>-<node name in lower case>`, in `metadata.namespace` (default `default`).

Every problem is reported against the file it is about, and never stops the others from being
read: a directory of ten manifests with one broken file yields nine manifests and one problem.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

__all__ = [
    "DEFAULT_NAMESPACE",
    "MAX_MANIFEST_BYTES",
    "SUFFIXES",
    "FileId",
    "Manifest",
    "ManifestError",
    "ManifestProblem",
    "ScanResult",
    "is_manifest_name",
    "mirror_pod_name",
    "parse_manifest",
    "sha256_of",
]

SUFFIXES = (".yaml", ".yml", ".json")
DEFAULT_NAMESPACE = "default"
MAX_MANIFEST_BYTES = 10 * 1024 * 1024
"""The kubelet's limit on a static pod file (`maxConfigLength`)."""


class ManifestError(ValueError):
    """A manifest file cannot be used; the message names the file and says why."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


def sha256_of(content: bytes) -> str:
    """The hex SHA-256 of a manifest's bytes: how a manifest, and its journal entry, name its
    content."""
    return hashlib.sha256(content).hexdigest()


def is_manifest_name(name: str) -> bool:
    """Whether the kubelet reads a directory entry of this name as a manifest."""
    return not name.startswith(".") and name.endswith(SUFFIXES)


def mirror_pod_name(pod_name: str, node_name: str) -> str:
    """The kubelet's mirror pod name for a static pod (`generatePodName`)."""
    return f"{pod_name}-{node_name.lower()}"


@dataclass(frozen=True, slots=True)
class FileId:
    """Which version of a file we read: a file replaced or rewritten gets another id."""

    dev: int
    ino: int
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, st: os.stat_result) -> FileId:
        return cls(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


@dataclass(frozen=True)
class Manifest:
    """One readable, parsable static pod manifest."""

    path: Path
    name: str  # metadata.name of the pod
    namespace: str
    sha256: str
    file_id: FileId
    content: bytes = field(repr=False, compare=False)
    pod: Mapping[str, Any] = field(repr=False, compare=False)

    def mirror_name(self, node_name: str) -> str:
        return mirror_pod_name(self.name, node_name)

    def mirror_key(self, node_name: str) -> tuple[str, str]:
        """(namespace, mirror pod name)."""
        return self.namespace, self.mirror_name(node_name)


@dataclass(frozen=True)
class ManifestProblem:
    """A file the kubelet would look at that we cannot use. `pod` is (namespace, name) when the
    file could be parsed (a symlink to a good manifest), so a pod's problem can be found."""

    path: Path
    reason: str
    pod: tuple[str, str] | None = None

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


@dataclass(frozen=True)
class ScanResult:
    directory: Path
    manifests: tuple[Manifest, ...] = ()
    problems: tuple[ManifestProblem, ...] = ()

    def by_mirror_key(self, node_name: str) -> dict[tuple[str, str], Manifest]:
        """Manifests by (namespace, mirror pod name); of two files defining one pod the kubelet
        keeps the first in name order, and so do we."""
        out: dict[tuple[str, str], Manifest] = {}
        for m in self.manifests:
            out.setdefault(m.mirror_key(node_name), m)
        return out

    def problem_for(self, namespace: str, pod_name: str) -> ManifestProblem | None:
        """The problem of a file that defines pod `namespace/pod_name` (metadata.name)."""
        for p in self.problems:
            if p.pod == (namespace, pod_name):
                return p
        return None


def parse_manifest(path: Path, content: bytes, file_id: FileId) -> Manifest:
    """One v1 Pod from YAML or JSON (JSON is YAML). Raises ManifestError naming `path`."""
    try:
        pod = yaml.safe_load(content)
    except yaml.YAMLError as e:
        raise ManifestError(path, f"not valid YAML or JSON: {_one_line(e)}") from e
    except UnicodeDecodeError as e:
        raise ManifestError(path, f"not valid UTF-8 text: {e}") from e
    except RecursionError as e:
        raise ManifestError(path, "nested too deeply to be a Pod") from e
    if not isinstance(pod, dict):
        raise ManifestError(path, "does not hold a Pod object")
    if pod.get("apiVersion") != "v1" or pod.get("kind") != "Pod":
        raise ManifestError(
            path,
            f"does not hold a Pod: apiVersion {pod.get('apiVersion')!r}, kind {pod.get('kind')!r} "
            "(want v1 Pod)",
        )
    meta = pod.get("metadata")
    if not isinstance(meta, dict):
        raise ManifestError(path, "the pod has no metadata, so no name")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise ManifestError(path, "the pod has no metadata.name")
    namespace = meta.get("namespace") or DEFAULT_NAMESPACE
    if not isinstance(namespace, str):
        raise ManifestError(path, f"metadata.namespace must be a string, not {namespace!r}")
    return Manifest(
        path=path,
        name=name,
        namespace=namespace,
        sha256=sha256_of(content),
        file_id=file_id,
        content=content,
        pod=pod,
    )


def _one_line(e: Exception) -> str:
    return " ".join(str(e).split())
