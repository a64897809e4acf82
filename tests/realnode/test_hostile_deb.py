"""Hostile cases on a real node, `.deb` install: the kubelet restarted in the middle of the drain,
containerd stopped in the middle of the drain (nothing on the node can stop a pod any more: the
shutdown still goes by its bound), and static pod manifests put back while the kubelet is down
(it runs them again when it starts)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from watchfiles import awatch

from nodeagent.kube.resources import NODEMAINTENANCES, PODS, Resource
from nodeagent.model.names import NODE_LABEL
from nodeagent_testbed.nspawn import REBOOT_EXIT
from tests.e2e.node import kind_of
from tests.realnode.conftest import NODE, RealNode
from tests.realnode.workloads import ETCD, SCHEDULER, deb_node_with_pods, static_pods_running

pytestmark = [pytest.mark.realnode, pytest.mark.timeout(600)]


def leaving_pods(n: RealNode) -> tuple[list[str], asyncio.Event]:
    """The kinds of node-1's pods in the order they start leaving, and an event set at the
    first."""
    order: list[str] = []
    first = asyncio.Event()
    seen: set[str] = set()

    def record(event: str, resource: Resource, new: dict[str, Any]) -> None:
        if resource != PODS or new["spec"].get("nodeName") != NODE:
            return
        uid = new["metadata"]["uid"]
        if (event == "DELETED" or new["metadata"].get("deletionTimestamp")) and uid not in seen:
            seen.add(uid)
            order.append(kind_of(new))
            first.set()

    n.view.listen(record)
    return order, first


async def test_kubelet_restarted_mid_drain(real_node: RealNode, deb: Path) -> None:
    n, c = real_node, real_node.container
    manifests = await deb_node_with_pods(n, deb, budget=180)
    order, first = leaving_pods(n)
    await c.exec("systemctl", "reboot")
    await first.wait()
    await c.exec("systemctl", "restart", "kubelet")
    assert await c.wait_exit(timeout=240) == REBOOT_EXIT
    assert order[:5] == ["low", "low", "high", "high", "daemonset"], order
    assert sorted(order[5:]) == ["static", "static"], order
    await c.boot()
    assert (manifests / "etcd.yaml").read_bytes() == ETCD
    assert (manifests / "kube-scheduler.yaml").read_bytes() == SCHEDULER
    await static_pods_running(n)


async def test_containerd_stopped_mid_drain_the_shutdown_goes_by_its_bound(
    real_node: RealNode, deb: Path
) -> None:
    n, c = real_node, real_node.container
    budget = 45
    manifests = await deb_node_with_pods(n, deb, budget=budget)
    _, first = leaving_pods(n)
    started = time.monotonic()
    await c.exec("systemctl", "reboot")
    await first.wait()
    # containerd stopped for good (a kill would have systemd start it again in 5 s): its shims
    # keep the containers running, and the kubelet cannot stop one any more
    await c.exec("systemctl", "stop", "containerd")
    assert await c.wait_exit(timeout=budget + 30) == REBOOT_EXIT
    took = time.monotonic() - started
    assert took <= budget + 5, f"the shutdown was held {took:.1f} s, past its {budget} s budget"
    # the drain could not finish: the lock went by the bound, not because Drained
    nm = next(iter(n.view.list(NODEMAINTENANCES, **{NODE_LABEL: NODE})))
    conds = (nm.get("status") or {}).get("conditions") or []
    assert not any(x["type"] == "Drained" and x["status"] == "True" for x in conds)
    # no manifest lost: each in place or put back at boot, before the kubelet starts
    await c.boot()
    assert (manifests / "etcd.yaml").read_bytes() == ETCD
    assert (manifests / "kube-scheduler.yaml").read_bytes() == SCHEDULER
    await static_pods_running(n)


async def until_exists(*paths: Path, timeout: float = 60) -> None:
    """Until every path exists, woken by the directory's changes (watchfiles; a timeout of
    its own re-checks, for a change between the first check and the watch's start)."""
    async with asyncio.timeout(timeout):
        async for _ in awatch(paths[0].parent, yield_on_timeout=True, rust_timeout=1000):
            if all(p.exists() for p in paths):
                return


MAINTENANCE = {
    "apiVersion": "nodeagent.io/v1alpha1",
    "kind": "NodeMaintenance",
    "metadata": {"name": "by-hand"},
    "spec": {
        "stage": "Drain",
        "reason": "test",
        "nodeSelector": {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [NODE]}]}
            ]
        },
    },
}


async def test_manifests_put_back_while_the_kubelet_is_down(real_node: RealNode, deb: Path) -> None:
    n, c = real_node, real_node.container
    manifests = await deb_node_with_pods(n, deb, budget=180)
    await n.kube.create(NODEMAINTENANCES, MAINTENANCE)

    def drained() -> bool:
        nm = n.view.get(NODEMAINTENANCES, "by-hand") or {}
        conds = (nm.get("status") or {}).get("conditions") or []
        return any(x["type"] == "Drained" and x["status"] == "True" for x in conds)

    await n.view.until(drained, timeout=120)
    assert not (manifests / "etcd.yaml").exists()
    await c.exec("systemctl", "stop", "kubelet")
    await n.kube.patch(NODEMAINTENANCES, "by-hand", {"spec": {"stage": "Complete"}})
    # the agent moves the files back (a rename each); nothing in the cluster shows it
    await until_exists(manifests / "etcd.yaml", manifests / "kube-scheduler.yaml")
    assert (manifests / "etcd.yaml").read_bytes() == ETCD
    assert (manifests / "kube-scheduler.yaml").read_bytes() == SCHEDULER
    await c.exec("systemctl", "start", "kubelet")
    await static_pods_running(n)
