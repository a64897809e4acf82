"""A node for the end-to-end tests: the agent installed from the Debian package in a Debian
container with real systemd and logind (systemd-nspawn), its node `node-1` on the test's cluster
backend, static pod manifests in the container's /etc/kubernetes/manifests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from nodeagent.kube.client import KubeClient
from nodeagent.kube.resources import DAEMONSETS, DEPLOYMENTS, NODEMAINTENANCES, NODES, PDBS, PODS
from nodeagent_testbed.nspawn import Container
from tests.clusters import CONTROLLERS_ACCOUNT, ClusterView, TestCluster
from tests.e2e.container import agent_kubeconfig

ROOT = Path(__file__).resolve().parents[2]
MANIFEST_DIR = "/etc/kubernetes/manifests"


def install_package(
    c: Container, deb: Path, kubeconfig: Path, settings: Mapping[str, Any] | None = None
) -> None:
    """dpkg -i in the container, with an agent configuration for node-1; `settings`: sections
    merged over the defaults here."""
    c.run_offline("dpkg", "-i", f"/pkg/{deb.name}", binds=(f"{deb.parent}:/pkg",))
    configure_agent(c, kubeconfig, settings)


def configure_agent(
    c: Container,
    kubeconfig: Path,
    settings: Mapping[str, Any] | None = None,
    node: str = "node-1",
    server: str | None = None,
) -> None:
    """The installed agent's kubeconfig (files inlined; `server`: the API server's URL as the
    node reaches it, if not the kubeconfig's) and configuration for `node`; `settings`:
    sections merged over the defaults here."""
    etc = c.path("/etc/nodeagent")
    doc = agent_kubeconfig(kubeconfig)
    if server is not None:
        doc["clusters"][0]["cluster"]["server"] = server
    (etc / "kubeconfig").write_text(yaml.safe_dump(doc))
    config: dict[str, Any] = {
        "nodeName": node,
        "kube": {"kubeconfig": "/etc/nodeagent/kubeconfig"},
        "shutdown": {"budget": 120, "safetyMargin": 5},
        "staticPods": {"manifestDir": MANIFEST_DIR},
        "leader": {"leaseDuration": 4, "renewDeadline": 3, "retryPeriod": 0.5},
        "eviction": {"backoffBase": 0.5, "backoffCap": 2},
        "observability": {"listen": "127.0.0.1:0"},
    }
    for section, values in (settings or {}).items():
        config[section] = {**config.get(section, {}), **values}
    (etc / "config.yaml").write_text(yaml.safe_dump(config))


@pytest.fixture
def static_pods() -> dict[str, bytes]:
    """File name -> manifest in node-1's manifest directory at boot (override per module)."""
    return {}


@pytest.fixture
def agent_settings() -> dict[str, Any]:
    """Configuration sections over install_package's defaults (override per module)."""
    return {}


@pytest.fixture
async def container(
    tmp_path: Path, deb: Path, static_pods: dict[str, bytes]
) -> AsyncIterator[Container]:
    c = await asyncio.to_thread(Container.copy_of_base, tmp_path, "nodeagent-reboot")
    manifests = c.path(MANIFEST_DIR)
    manifests.mkdir(parents=True)
    for name, content in static_pods.items():
        (manifests / name).write_bytes(content)
    # a persistent journal: the agent's log outlives the container for a failed test
    c.path("/var/log/journal").mkdir(parents=True, exist_ok=True)
    try:
        yield c
    finally:
        await c.stop()


@pytest.fixture
def manifests(container: Container) -> Path:
    """node-1's static pod directory is the container's: the simulated kubelet (or, on the real
    backend, the mirror pod maker) reads what the agent inside moves."""
    return container.path(MANIFEST_DIR)


@dataclass
class Node:
    backend: TestCluster
    container: Container
    kube: KubeClient
    view: ClusterView


@pytest.fixture
async def node(
    backend: TestCluster, container: Container, deb: Path, agent_settings: dict[str, Any]
) -> AsyncIterator[Node]:
    await backend.install_crds()
    # one agent runs node-1's part and the controllers: the controllers' account with the
    # node role besides (the admission policy keeps only the node agents' account to a node)
    agent_config = await backend.service_account(CONTROLLERS_ACCOUNT, also_roles=["nodeagent-node"])
    await asyncio.to_thread(install_package, container, deb, agent_config, agent_settings)
    kube = backend.client()
    view = ClusterView(kube, [NODES, PODS, NODEMAINTENANCES])
    await view.start()
    try:
        yield Node(backend, container, kube, view)
    finally:
        await view.stop()
        # before the cluster goes (`backend` is torn down before `container`, on which its
        # manifest directory depends): the simulated server's shutdown otherwise waits a
        # minute for each watch the agent inside still holds
        await container.stop()


KINDS = {"Deployment": DEPLOYMENTS, "DaemonSet": DAEMONSETS, "PodDisruptionBudget": PDBS}


async def schedule_on_node_1(n: Node, workloads: str) -> None:
    """Create `workloads` (YAML) with node-2 and node-3 cordoned, so their pods land on node-1
    (uncordon them afterwards, for the replacements)."""
    for name in ("node-2", "node-3"):
        await n.kube.patch(NODES, name, {"spec": {"unschedulable": True}})
    await n.view.until(
        lambda: all(
            (n.view.get(NODES, x) or {}).get("spec", {}).get("unschedulable")
            for x in ("node-2", "node-3")
        )
    )
    for doc in yaml.safe_load_all(workloads):
        await n.kube.create(KINDS[doc["kind"]], doc)


async def uncordon(n: Node, *names: str) -> None:
    for name in names:
        await n.kube.patch(NODES, name, {"spec": {"unschedulable": None}})


def kind_of(pod: dict[str, Any]) -> str:
    if "kubernetes.io/config.mirror" in (pod["metadata"].get("annotations") or {}):
        return "static"
    owners = pod["metadata"].get("ownerReferences") or []
    if any(o["kind"] == "DaemonSet" for o in owners):
        return "daemonset"
    return str((pod["metadata"].get("labels") or {}).get("app"))


def running(p: dict[str, Any]) -> bool:
    return (p.get("status") or {}).get("phase") == "Running" and not p["metadata"].get(
        "deletionTimestamp"
    )


def node_1_pods(n: Node) -> list[dict[str, Any]]:
    return [p for p in n.view.list(PODS) if p["spec"].get("nodeName") == "node-1"]
