"""Build `helm` from its upstream Go module for the chart's tests, cached by what pins it.

`scripts/helm/` is a small Go module of ours (no upstream source) requiring
`helm.sh/helm/v3`; the binary is built once into `<cache>/helm/<version>-<key>/helm` (the cache
of nodeagent_testbed.controlplane.build, keyed by a hash of go.mod and go.sum), with the version
and the Kubernetes version helm assumes set as helm's Makefile sets them (`helm template` checks
the chart's kubeVersion against the latter).
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from pathlib import Path

from nodeagent_testbed.controlplane.build import ROOT, BuildError, cache_root, go_command

MODULE = ROOT / "scripts" / "helm"

__all__ = ["BuildError", "ensure_helm", "helm_version"]


def _required(module: str) -> str:
    text = (MODULE / "go.mod").read_text()
    match = re.search(rf"^(?:require)?\s*{re.escape(module)} (v\S+)", text, re.M)
    if match is None:
        raise BuildError(f"{MODULE / 'go.mod'}: no {module} requirement")
    return match.group(1)


def helm_version() -> str:
    return _required("helm.sh/helm/v3")


def _cache_key() -> str:
    h = hashlib.sha256()
    for name in ("go.mod", "go.sum"):
        h.update(name.encode() + b"\0" + (MODULE / name).read_bytes())
    return h.hexdigest()[:16]


def ensure_helm(log: bool = True) -> Path:
    """The helm binary of the pinned version, built if the cache lacks it."""
    target = cache_root().parent / "helm" / f"{helm_version()}-{_cache_key()}" / "helm"
    if target.is_file():
        return target
    go = go_command()
    # helm's Makefile: the Kubernetes version it assumes is client-go's v0.X.Y as 1.X
    minor = _required("k8s.io/client-go").lstrip("v").split(".")[1]
    ldflags = " ".join(
        [
            "-s -w",
            f"-X helm.sh/helm/v3/internal/version.version={helm_version()}",
            "-X helm.sh/helm/v3/internal/version.gitTreeState=clean",
            *(
                f"-X helm.sh/helm/v3/pkg/{pkg}.k8sVersion{part}={value}"
                for pkg in ("chartutil", "lint/rules")
                for part, value in (("Major", "1"), ("Minor", minor))
            ),
        ]
    )
    partial = target.with_name("helm.partial")
    partial.parent.mkdir(parents=True, exist_ok=True)
    if log:
        print(f"helm: building {helm_version()} (first time only)", flush=True)
    env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=mod -buildvcs=false"}
    cmd = [go, "build", "-trimpath", "-ldflags", ldflags, "-o", str(partial)]
    done = subprocess.run(
        [*cmd, "helm.sh/helm/v3/cmd/helm"], cwd=MODULE, env=env, capture_output=True, text=True
    )
    if done.returncode != 0 or not partial.is_file():
        raise BuildError(f"go build of helm in {MODULE} failed:\n{done.stderr[-4000:]}")
    partial.replace(target)
    return target


if __name__ == "__main__":
    print(ensure_helm())
