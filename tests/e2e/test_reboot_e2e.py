"""The mission end to end: the agent installed from the Debian package in a container with real
systemd-logind; `systemctl reboot` drains the node in plan order (Default pods by priority, then
DaemonSet pods, then the static pod's manifest), the container reboots only after Drained=True,
and after the reboot the node is uncordoned and the manifest is back, byte-identical."""

from __future__ import annotations

import time
from typing import Any

import pytest

from nodeagent.kube.resources import NODEMAINTENANCES, NODES, PODS, Resource
from nodeagent_testbed.nspawn import REBOOT_EXIT
from tests.e2e.node import (
    MANIFEST_DIR,
    Node,
    agent_settings,
    container,
    kind_of,
    manifests,
    node,
    node_1_pods,
    running,
    schedule_on_node_1,
    uncordon,
)

pytestmark = pytest.mark.e2e

__all__ = ["agent_settings", "container", "manifests", "node"]  # fixtures

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


@pytest.fixture
def static_pods() -> dict[str, bytes]:
    return {"etcd.yaml": ETCD}


async def test_reboot_drains_in_plan_order_and_comes_back(node: Node) -> None:
    n, c = node, node.container
    await schedule_on_node_1(n, WORKLOADS)
    await n.view.until(
        lambda: (
            sorted(kind_of(p) for p in node_1_pods(n) if running(p))
            == ["daemonset", "high", "high", "low", "low", "static"]
        ),
        timeout=30,
    )
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
    # active (READY) means logind already waits as long as the drain may take, not its 5 s
    assert await c.inhibit_delay_max_usec() == 120_000_000
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
    await n.view.until(
        lambda: not (n.view.get(NODES, "node-1") or {})["spec"].get("unschedulable"), timeout=60
    )
    await n.view.until(
        lambda: any(kind_of(p) == "static" and running(p) for p in node_1_pods(n)), timeout=30
    )
    await n.view.until(lambda: not n.view.list(NODEMAINTENANCES), timeout=30)
