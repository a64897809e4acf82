"""The shutdown's final phase on either cluster backend: the drain has not finished (a pod
under a PodDisruptionBudget that allows nothing is still there, no controller drains), so
`finalPhase.gracePeriod` before the release deadline node-1's agent deletes the pods left in the
kubelet's order, with the kubelet's grace caps, and the lock still goes by the deadline.
The agent runs with node-1's credentials (the admission policy enforced on the real server)."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

from nodeagent.config import FinalPhaseConfig, ShutdownConfig
from nodeagent.kube.resources import PDBS, PODS
from nodeagent.node.shutdown import ShutdownFlow
from tests.clusters import ClusterView, create_pod
from tests.integration.shutdown_cluster import ShutdownCluster, shutdown_cluster
from tests.netproxy import proxy_to

__all__ = ["shutdown_cluster"]  # the fixture

Obj = dict[str, Any]
BOOT = "7a6b5c4d-3e2f-1a0b-9c8d-7e6f5a4b3c2d"
# deadline 13 s after the shutdown starts; the phase from 5 s, the critical pods' from 9 s
CONFIG = ShutdownConfig(
    budget=14,
    safety_margin=1,
    api_unreachable_release_after=30,
    final_phase=FinalPhaseConfig(grace_period=8, critical_pods_grace_period=4),
)


def a_pod(name: str, namespace: str = "default", **extra: Any) -> Obj:
    spec: Obj = {"nodeName": "node-1", "terminationGracePeriodSeconds": 120}
    spec["containers"] = [{"name": "c", "image": "nginx"}]
    spec.update(extra.pop("spec", {}))
    md: Obj = {
        "name": name,
        "namespace": namespace,
        "labels": {"app": name},
        "annotations": {"sim.nodeagent.io/exit-seconds": "1", **extra.pop("annotations", {})},
    }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": spec}


async def test_final_phase_deletes_the_pods_left_in_the_kubelets_order(
    shutdown_cluster: ShutdownCluster,
) -> None:
    c = shutdown_cluster
    await c.kube.create(
        PDBS,
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "web"}}},
        },
    )
    await create_pod(c.kube, a_pod("web"))
    await create_pod(
        c.kube,
        a_pod("dns", "kube-system", spec={"priorityClassName": "system-cluster-critical"}),
    )
    await create_pod(c.kube, a_pod("agent", annotations={"nodeagent.io/drain": "skip"}))
    await create_pod(c.kube, a_pod("elsewhere", spec={"nodeName": "node-2"}))
    view = ClusterView(c.kube, [PODS])
    loop = asyncio.get_running_loop()
    deleted_at: dict[str, float] = {}
    gone_at: dict[str, float] = {}

    def seen(kind: str, _: object, pod: Obj) -> None:
        name = pod["metadata"]["name"]
        if pod["metadata"].get("deletionTimestamp"):
            deleted_at.setdefault(name, loop.time())
        if kind == "DELETED":
            gone_at.setdefault(name, loop.time())

    view.listen(seen)
    await view.start()
    try:
        flow = ShutdownFlow(c.agent, "node-1", BOOT, CONFIG)
        t0 = loop.time()
        async with asyncio.timeout(20):
            reason = await flow.on_shutdown("reboot")
        took = loop.time() - t0
        assert reason == "the shutdown budget is nearly spent"
        assert 12.5 <= took < 13.5, "released by the same deadline as without the phase"

        web = view.get(PODS, "web", "default")
        assert "web" in deleted_at and deleted_at["web"] - t0 >= 5.0 - 0.1
        # min(120, gracePeriod - criticalPodsGracePeriod)
        assert web is None or web["metadata"]["deletionGracePeriodSeconds"] == 4
        dns = view.get(PODS, "dns", "kube-system")
        assert "dns" in deleted_at
        # the critical pod after the others: once web was gone (or at its group's time)
        assert deleted_at["dns"] >= min(gone_at.get("web", float("inf")), t0 + 9.0 - 0.1)
        assert dns is None or dns["metadata"]["deletionGracePeriodSeconds"] <= 4
        for name in ("agent", "elsewhere"):
            assert name not in deleted_at, f"{name} must not be deleted"
    finally:
        await view.stop()


async def test_a_hung_api_server_in_the_final_phase_does_not_move_the_deadline(
    shutdown_cluster: ShutdownCluster, tmp_path: Path
) -> None:
    """The API server stops answering as the phase starts (a stopped process): the lock still
    goes at the deadline, not later, whatever the deletes in flight."""
    c = shutdown_cluster
    await create_pod(c.kube, a_pod("web"))
    cfg = dataclasses.replace(CONFIG, api_unreachable_release_after=60)
    async with proxy_to(c.account) as proxy:
        kubeconfig = proxy.kubeconfig(c.account, tmp_path / "agent-via-proxy.kubeconfig")
        client = c.backend.client(kubeconfig, request_timeout=60)
        flow = ShutdownFlow(client, "node-1", BOOT, cfg)
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        task = asyncio.create_task(flow.on_shutdown("reboot"))
        await c.until(lambda: len(c.maintenances()) == 1)
        await asyncio.sleep(max(0.0, t0 + 4.5 - loop.time()))  # the phase starts at 5 s
        proxy.hold()
        async with asyncio.timeout(20):
            reason = await task
        assert reason == "the shutdown budget is nearly spent"
        assert loop.time() - t0 < 13.5
        await client.close()
        proxy.resume()
