"""Fixtures of the real-node tests: a real control plane whose node-1 is a real kubelet with
containerd in a systemd-nspawn container (nodeagent_testbed.realnode.node), node-2 and node-3
kwok's.

They run where `NODEAGENT_TEST_NODE=real` (CI sets it; `scripts/test --node real`); elsewhere
each test is skipped saying so. Asked for, a node that cannot be set up is an error, never a
skip."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from nodeagent.kube.client import KubeClient
from nodeagent.kube.resources import EVICTIONS, NODEMAINTENANCES, NODES, PODS
from nodeagent_testbed.controlplane.cluster import ClusterError, ControlPlane, etcd_prefix
from nodeagent_testbed.nspawn import Container
from nodeagent_testbed.realnode.container import prepared_node
from nodeagent_testbed.realnode.node import NO_GNS
from tests.clusters import ClusterView, RealBackend

NODE = "node-1"


def wanted() -> bool:
    return os.environ.get("NODEAGENT_TEST_NODE") == "real"


def require_real_node() -> None:
    if not wanted():
        pytest.skip("real-node tests run with NODEAGENT_TEST_NODE=real (scripts/test --node real)")
    if os.geteuid() != 0:
        pytest.fail("real-node tests boot systemd-nspawn: they need root", pytrace=False)


@pytest.fixture
async def real_cluster(
    tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[RealBackend]:
    """A real control plane (on the session's etcd) whose node-1 is left for a real kubelet."""
    require_real_node()
    real = request.getfixturevalue("real_plane")  # tests/conftest.py: binaries, one etcd
    plane = ControlPlane(tmp_path / "controlplane")
    try:
        await asyncio.to_thread(
            plane.up, 3, real.binaries, real.etcd_url, etcd_prefix(), False, frozenset({NODE})
        )
    except (ClusterError, TimeoutError) as e:
        await asyncio.to_thread(plane.down)
        pytest.fail(f"the real control plane did not start: {e}", pytrace=False)
    backend = RealBackend(plane.kubeconfig, [NODE, "node-2", "node-3"], plane.dir / "pki")
    try:
        yield backend
    finally:
        await backend.close_clients()
        await asyncio.to_thread(plane.down)


@pytest.fixture
def kubelet_gns() -> tuple[int, int]:
    """The kubelet's shutdownGracePeriod and shutdownGracePeriodCriticalPods (override per
    module): off, the recommended set-up."""
    return NO_GNS


@pytest.fixture
def agent_image() -> bool:
    """Whether node-1 gets nodeagent's image (override per module: a DaemonSet install)."""
    return False


@pytest.fixture
async def node_container(
    tmp_path: Path, real_cluster: RealBackend, kubelet_gns: tuple[int, int], agent_image: bool
) -> AsyncIterator[Container]:
    """node-1's container, prepared but not booted: the test installs the agent first. One real
    node on the host at a time: nodeagent_testbed.realnode.container holds a host-wide lock from
    before the container exists until after the sweep."""
    async with prepared_node(
        tmp_path, NODE, real_cluster.kubeconfig, real_cluster.pki_dir, kubelet_gns, agent_image
    ) as c:
        yield c


@dataclass
class RealNode:
    backend: RealBackend
    container: Container
    kube: KubeClient
    view: ClusterView


@pytest.fixture
async def real_node(
    real_cluster: RealBackend, node_container: Container
) -> AsyncIterator[RealNode]:
    await real_cluster.install_crds()
    kube = real_cluster.client()
    # Evictions: the real control plane serves lifecycle.k8s.io, and the drain goes through it
    view = ClusterView(kube, [NODES, PODS, NODEMAINTENANCES, EVICTIONS])
    await view.start()
    try:
        yield RealNode(real_cluster, node_container, kube, view)
    finally:
        await view.stop()
