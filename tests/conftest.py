"""Shared fixtures: a simulated cluster served over real HTTP, and real kubectl against it."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from nodeagent.sim.cluster import SimCluster


@pytest.fixture
async def sim(tmp_path: Path) -> AsyncIterator[SimCluster]:
    """Three nodes, served on a free port of 127.0.0.1, kubeconfig at `sim.kubeconfig`."""
    cluster = SimCluster(nodes=3, kubeconfig=tmp_path / "kubeconfig", bookmark_interval=0.5)
    async with cluster:
        yield cluster


@dataclass
class KubectlResult:
    code: int
    out: str
    err: str


def kubectl_path() -> str:
    found = shutil.which("kubectl", path=str(Path(sys.executable).parent)) or shutil.which(
        "kubectl"
    )
    if found is None:
        pytest.fail("kubectl not found: install the test extra (pip install -e '.[test]')")
    return found


class Kubectl:
    """Runs real kubectl without blocking the event loop the simulated cluster serves on."""

    def __init__(self, kubeconfig: Path, cache: Path) -> None:
        self.kubeconfig = kubeconfig
        self.cache = cache
        self.path = kubectl_path()

    async def run(
        self, *args: str, stdin: str | None = None, timeout: float = 120
    ) -> KubectlResult:
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig), "HOME": str(self.cache)}
        proc = await asyncio.create_subprocess_exec(
            self.path,
            "--cache-dir",
            str(self.cache / "cache"),
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
        )
        out, err = await asyncio.wait_for(
            proc.communicate(stdin.encode() if stdin is not None else None), timeout
        )
        assert proc.returncode is not None
        return KubectlResult(proc.returncode, out.decode(), err.decode())

    async def ok(self, *args: str, stdin: str | None = None, timeout: float = 120) -> str:
        r = await self.run(*args, stdin=stdin, timeout=timeout)
        assert r.code == 0, f"kubectl {' '.join(args)} failed ({r.code}): {r.err}{r.out}"
        return r.out


@pytest.fixture
def kubectl(sim: SimCluster, tmp_path: Path) -> Kubectl:
    assert sim.kubeconfig is not None
    home = tmp_path / "kubectl-home"
    home.mkdir()
    return Kubectl(sim.kubeconfig, home)
