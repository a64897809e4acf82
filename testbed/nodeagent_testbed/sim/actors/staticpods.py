"""Static pod manifests, read as the kubelet's file source reads its directory, and the mirror
pods that represent them in the API."""

from __future__ import annotations

import copy
import hashlib
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from nodeagent_testbed.sim.store import Obj, now_iso

log = logging.getLogger(__name__)

SUFFIXES = (".yaml", ".yml", ".json")
MIRROR = "kubernetes.io/config.mirror"
HASH = "kubernetes.io/config.hash"
SOURCE = "kubernetes.io/config.source"
SEEN = "kubernetes.io/config.seen"
BUILTIN_PRIORITY = {"system-node-critical": 2000001000, "system-cluster-critical": 2000000000}


class ManifestError(ValueError):
    pass


@dataclass(frozen=True)
class Manifest:
    path: Path
    hash: str
    pod: Obj = field(compare=False)  # the manifest's pod, namespace defaulted

    @property
    def namespace(self) -> str:
        return str(self.pod["metadata"]["namespace"])


def parse_manifest(content: bytes, node_name: str, path: Path) -> Manifest:
    """One Pod from a YAML or JSON file, as the kubelet accepts it."""
    try:
        pod = yaml.safe_load(content)
    except yaml.YAMLError as e:
        raise ManifestError(f"not YAML or JSON: {e}") from e
    except (RecursionError, UnicodeDecodeError) as e:
        raise ManifestError(f"not a usable manifest: {type(e).__name__}") from e
    if not isinstance(pod, dict):
        raise ManifestError("the file does not hold an object")
    if pod.get("apiVersion") != "v1" or pod.get("kind") != "Pod":
        raise ManifestError(
            f"want apiVersion v1 kind Pod, got {pod.get('apiVersion')!r} {pod.get('kind')!r}"
        )
    m = pod.get("metadata")
    if not isinstance(m, dict) or not m.get("name"):
        raise ManifestError("metadata.name: Required value")
    containers = (pod.get("spec") or {}).get("containers")
    if (
        not isinstance(containers, list)
        or not containers
        or not all(isinstance(c, dict) and c.get("name") and c.get("image") for c in containers)
    ):
        raise ManifestError("spec.containers: every container needs a name and an image")
    m["namespace"] = m.get("namespace") or "default"
    digest = hashlib.md5(content + b"\0" + node_name.encode(), usedforsecurity=False)
    return Manifest(path, digest.hexdigest(), pod)


def scan(
    directory: Path, node_name: str, reported: dict[Path, bytes]
) -> dict[tuple[str, str], Manifest]:
    """The manifests of `directory` by mirror pod key. Dot files, other suffixes and
    subdirectories are skipped; unreadable or invalid files are logged (once per content in
    `reported`) and skipped."""
    out: dict[tuple[str, str], Manifest] = {}
    try:
        paths = sorted(directory.iterdir())
    except OSError as e:
        log.warning("cannot read static pod directory %s: %s", directory, e)
        return out
    for path in paths:
        if path.name.startswith(".") or path.suffix not in SUFFIXES or not path.is_file():
            continue
        try:
            content = path.read_bytes()
            manifest = parse_manifest(content, node_name, path)
        except (OSError, ManifestError) as e:
            if reported.get(path) != (marker := str(e).encode()):
                log.warning("ignoring static pod manifest %s: %s", path, e)
                reported[path] = marker
            continue
        reported.pop(path, None)
        key = (manifest.namespace, mirror_name(manifest, node_name))
        if key in out:
            log.warning(
                "ignoring static pod manifest %s: pod %s/%s is already defined in %s",
                path,
                key[0],
                key[1],
                out[key].path,
            )
            continue
        out[key] = manifest
    return out


def mirror_name(manifest: Manifest, node_name: str) -> str:
    return f"{manifest.pod['metadata']['name']}-{node_name.lower()}"


def mirror_pod(manifest: Manifest, node: Obj) -> Obj:
    """The mirror pod for `manifest` on `node`, owned by the Node."""
    pod = copy.deepcopy(manifest.pod)
    node_name = node["metadata"]["name"]
    m = pod["metadata"]
    m["name"] = mirror_name(manifest, node_name)
    for k in ("uid", "resourceVersion", "generateName", "ownerReferences"):
        m.pop(k, None)
    m["annotations"] = {
        **(m.get("annotations") or {}),
        HASH: manifest.hash,
        MIRROR: manifest.hash,
        SEEN: now_iso(),
        SOURCE: "file",
    }
    m["ownerReferences"] = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "name": node_name,
            "uid": node["metadata"]["uid"],
            "controller": True,
        }
    ]
    spec: dict[str, Any] = pod.setdefault("spec", {})
    spec["nodeName"] = node_name
    priority = BUILTIN_PRIORITY.get(spec.get("priorityClassName") or "")
    if priority is not None:
        spec["priority"] = priority
    pod.pop("status", None)
    return pod


def is_mirror(pod: Obj) -> bool:
    return MIRROR in (pod["metadata"].get("annotations") or {})
