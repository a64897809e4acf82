"""The mission end to end: the agent installed from the Debian package in a container with real
systemd-logind; `systemctl reboot` drains the node in plan order (Default pods by priority, then
DaemonSet pods, then the static pod's manifest), the container reboots only after Drained=True,
and after the reboot the node is uncordoned and the manifest is back, byte-identical."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from nodeagent.kube.client import KubeClient
from nodeagent.kube.resources import (
    DAEMONSETS,
    DEPLOYMENTS,
    NODEMAINTENANCES,
    NODES,
    PDBS,
    PODS,
    Resource,
)
from tests.clusters import ClusterView, TestCluster
from tests.e2e.container import REBOOT_EXIT, Container, agent_kubeconfig, require_tools

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
MANIFEST_DIR = "/etc/kubernetes/manifests"
ETCD = b"""apiVersion: v1
kind: Pod
metadata:
  name: etcd
  namespace: kube-system
  annotations: {sim.nodeagent.io/exit-seconds: "1"}
spec:
  priorityClassName: system-node-critical
  containers:
  - {name: etcd, image: registry.k8s.io/etcd:3.5.15-0}
"""
WORKLOADS = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: low, namespace: default}
spec:
  replicas: 2
  selector: {matchLabels: {app: low}}
  template:
    metadata: {labels: {app: low}, annotations: {sim.nodeagent.io/exit-seconds: "1"}}
    spec: {containers: [{name: c, image: nginx}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: high, namespace: kube-system}
spec:
  replicas: 2
  selector: {matchLabels: {app: high}}
  template:
    metadata: {labels: {app: high}, annotations: {sim.nodeagent.io/exit-seconds: "1"}}
    spec:
      priorityClassName: system-cluster-critical
      containers: [{name: c, image: nginx}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: high, namespace: kube-system}
spec:
  maxUnavailable: 1
  selector: {matchLabels: {app: high}}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: logs, namespace: default}
spec:
  selector: {matchLabels: {app: logs}}
  template:
    metadata: {labels: {app: logs}, annotations: {sim.nodeagent.io/exit-seconds: "1"}}
    spec: {containers: [{name: c, image: busybox}]}
"""


KINDS = {"Deployment": DEPLOYMENTS, "DaemonSet": DAEMONSETS, "PodDisruptionBudget": PDBS}


@pytest.fixture(scope="module")
def deb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require_tools()
    out = tmp_path_factory.mktemp("deb")
    subprocess.run([str(ROOT / "packaging/debian/build-deb"), str(out)], check=True)
    (package,) = out.glob("nodeagent_*.deb")
    return package


def install_package(c: Container, deb: Path, kubeconfig: Path) -> None:
    c.run_offline("dpkg", "-i", f"/pkg/{deb.name}", binds=(f"{deb.parent}:/pkg",))
    etc = c.path("/etc/nodeagent")
    (etc / "kubeconfig").write_text(yaml.safe_dump(agent_kubeconfig(kubeconfig)))
    (etc / "config.yaml").write_text(yaml.safe_dump({
        "nodeName": "node-1",
        "kube": {"kubeconfig": "/etc/nodeagent/kubeconfig"},
        "shutdown": {"budget": 120, "safetyMargin": 5},
        "staticPods": {"manifestDir": MANIFEST_DIR},
        "leader": {"leaseDuration": 4, "renewDeadline": 3, "retryPeriod": 0.5},
        "eviction": {"backoffBase": 0.5, "backoffCap": 2},
        "observability": {"listen": "127.0.0.1:0"},
    }))


@pytest.fixture
async def container(tmp_path: Path, deb: Path) -> AsyncIterator[Container]:
    c = await asyncio.to_thread(Container.copy_of_base, tmp_path, "nodeagent-reboot")
    manifests = c.path(MANIFEST_DIR)
    manifests.mkdir(parents=True)
    (manifests / "etcd.yaml").write_bytes(ETCD)
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
async def node(backend: TestCluster, container: Container, deb: Path) -> AsyncIterator[Node]:
    await backend.install_crds()
    agent_config = await backend.service_account()
    await asyncio.to_thread(install_package, container, deb, agent_config)
    kube = backend.client()
    view = ClusterView(kube, [NODES, PODS, NODEMAINTENANCES])
    await view.start()
    try:
        yield Node(backend, container, kube, view)
    finally:
        await view.stop()


async def schedule_everything_on_node_1(n: Node) -> None:
    for name in ("node-2", "node-3"):
        await n.kube.patch(NODES, name, {"spec": {"unschedulable": True}})
    await n.view.until(lambda: all(
        (n.view.get(NODES, x) or {}).get("spec", {}).get("unschedulable")
        for x in ("node-2", "node-3")))
    for doc in yaml.safe_load_all(WORKLOADS):
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


async def test_reboot_drains_in_plan_order_and_comes_back(node: Node) -> None:
    n, c = node, node.container
    await schedule_everything_on_node_1(n)
    await n.view.until(lambda: sorted(kind_of(p) for p in node_1_pods(n) if running(p))
                       == ["daemonset", "high", "high", "low", "low", "static"], timeout=30)
    await uncordon(n, "node-2", "node-3")
    etcd_file = c.path(MANIFEST_DIR) / "etcd.yaml"

    # record when each pod of node-1 starts terminating, and when Drained turns True
    leaving: list[tuple[float, str]] = []
    drained_at: list[float] = []
    seen: set[str] = set()

    def record(event: str, resource: Resource, new: dict[str, Any]) -> None:
        if resource == PODS and new["spec"].get("nodeName") == "node-1":
            uid = new["metadata"]["uid"]
            if (event == "DELETED" or new["metadata"].get("deletionTimestamp")) and uid not in seen:
                seen.add(uid)
                leaving.append((time.monotonic(), kind_of(new)))
        if resource == NODEMAINTENANCES and not drained_at:
            conds = (new.get("status") or {}).get("conditions") or []
            if any(x["type"] == "Drained" and x["status"] == "True" for x in conds):
                drained_at.append(time.monotonic())

    n.view.listen(record)
    await c.boot()
    assert (await c.exec("systemctl", "is-active", "nodeagent")).strip() == "active"
    await c.exec("systemctl", "reboot")
    assert await c.wait_exit(timeout=120) == REBOOT_EXIT
    rebooted_at = time.monotonic()

    assert drained_at and drained_at[0] <= rebooted_at, "rebooted before Drained=True"
    order = [k for _, k in leaving]
    assert order == ["low", "low", "high", "high", "daemonset", "static"], order
    assert not etcd_file.exists(), "the static pod's manifest was moved aside"

    # the reboot: the manifest is back before anything else, the maintenance completes
    await c.boot()
    assert etcd_file.read_bytes() == ETCD
    await n.view.until(lambda: not (n.view.get(NODES, "node-1") or {})["spec"].get(
        "unschedulable"), timeout=60)
    await n.view.until(lambda: any(kind_of(p) == "static" and running(p)
                                   for p in node_1_pods(n)), timeout=30)
    await n.view.until(lambda: not n.view.list(NODEMAINTENANCES), timeout=30)
