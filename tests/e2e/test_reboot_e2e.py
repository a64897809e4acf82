"""The mission end to end: the agent installed from the Debian package in a container with real
systemd-logind; `systemctl reboot` drains the node in plan order (Default pods by priority, then
DaemonSet pods, then the static pod's manifest), the container reboots only after Drained=True,
and after the reboot the node is uncordoned and the manifest is back, byte-identical."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from nodeagent.sim.cluster import SimCluster, kubeconfig_dict
from nodeagent.sim.store import Change
from tests.e2e.container import REBOOT_EXIT, Container, require_tools
from tests.simutil import install_crds, pods, running, until

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


@pytest.fixture(scope="module")
def deb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require_tools()
    out = tmp_path_factory.mktemp("deb")
    subprocess.run([str(ROOT / "packaging/debian/build-deb"), str(out)], check=True)
    (package,) = out.glob("nodeagent_*.deb")
    return package


def install_package(c: Container, deb: Path, url: str) -> None:
    c.run_offline("dpkg", "-i", f"/pkg/{deb.name}", binds=(f"{deb.parent}:/pkg",))
    etc = c.path("/etc/nodeagent")
    (etc / "kubeconfig").write_text(yaml.safe_dump(kubeconfig_dict(url)))
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
async def node(tmp_path: Path, deb: Path) -> AsyncIterator[tuple[SimCluster, Container]]:
    c = await asyncio.to_thread(Container.copy_of_base, tmp_path, "nodeagent-reboot")
    manifests = c.path(MANIFEST_DIR)
    manifests.mkdir(parents=True)
    (manifests / "etcd.yaml").write_bytes(ETCD)
    async with SimCluster(nodes=3, static_pod_dirs={"node-1": manifests},
                          kubeconfig=tmp_path / "kubeconfig") as sim:
        install_crds(sim)
        await asyncio.to_thread(install_package, c, deb, sim.url)
        try:
            yield sim, c
        finally:
            await c.stop()


def schedule_everything_on_node_1(sim: SimCluster) -> None:
    nodes = sim.store.resource("", "v1", "nodes")
    for n in ("node-2", "node-3"):
        sim.store.mutate(nodes, None, n, lambda o: o["spec"].__setitem__("unschedulable", True))
    for doc in yaml.safe_load_all(WORKLOADS):
        sim.store.create(sim.store.type_of(doc["apiVersion"], doc["kind"]),
                         doc["metadata"]["namespace"], doc)


def uncordon(sim: SimCluster, *names: str) -> None:
    nodes = sim.store.resource("", "v1", "nodes")
    for n in names:
        sim.store.mutate(nodes, None, n, lambda o: o["spec"].pop("unschedulable", None))


def kind_of(pod: dict[str, Any]) -> str:
    if "kubernetes.io/config.mirror" in (pod["metadata"].get("annotations") or {}):
        return "static"
    owners = pod["metadata"].get("ownerReferences") or []
    if any(o["kind"] == "DaemonSet" for o in owners):
        return "daemonset"
    return str((pod["metadata"].get("labels") or {}).get("app"))


def node_1_pods(sim: SimCluster) -> list[dict[str, Any]]:
    return [p for ns in ("default", "kube-system") for p in pods(sim, ns)
            if p["spec"].get("nodeName") == "node-1"]


async def test_reboot_drains_in_plan_order_and_comes_back(
    node: tuple[SimCluster, Container],
) -> None:
    sim, c = node
    schedule_everything_on_node_1(sim)
    await until(sim, lambda: sorted(kind_of(p) for p in node_1_pods(sim) if running(p))
                == ["daemonset", "high", "high", "low", "low", "static"], timeout=30)
    uncordon(sim, "node-2", "node-3")
    etcd_file = c.path(MANIFEST_DIR) / "etcd.yaml"

    # record when each pod of node-1 starts terminating, and when Drained turns True
    leaving: list[tuple[float, str]] = []
    drained_at: list[float] = []
    seen: set[str] = set()

    def record(change: Change) -> None:
        kind, key, _, new = change
        if key == ("", "pods") and new["spec"].get("nodeName") == "node-1":
            uid = new["metadata"]["uid"]
            if (kind == "DELETED" or new["metadata"].get("deletionTimestamp")) and uid not in seen:
                seen.add(uid)
                leaving.append((time.monotonic(), kind_of(new)))
        if key == ("nodeagent.io", "nodemaintenances") and not drained_at:
            conds = (new.get("status") or {}).get("conditions") or []
            if any(x["type"] == "Drained" and x["status"] == "True" for x in conds):
                drained_at.append(time.monotonic())

    sim.store.listeners.append(record)
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
    nodes = sim.store.resource("", "v1", "nodes")
    await until(sim, lambda: not sim.store.get(nodes, None, "node-1")["spec"].get(
        "unschedulable"), timeout=60)
    await until(sim, lambda: any(kind_of(p) == "static" and running(p)
                                 for p in node_1_pods(sim)), timeout=30)
    nm = sim.store.resource("nodeagent.io", "v1alpha1", "nodemaintenances")
    await until(sim, lambda: not sim.store.list(nm), timeout=30)
