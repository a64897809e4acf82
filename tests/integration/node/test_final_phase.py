"""The shutdown's final phase on either cluster backend: the drain has not finished (a pod
under a PodDisruptionBudget that allows nothing is still there, no NodeMaintenance controller
drains), so `finalPhase.gracePeriod` before the release deadline the controllers delete the
pods left on node-1 in the kubelet's order, with the kubelet's grace caps, as node-1's agent
asked in its shutdown maintenance, and the lock still goes by the deadline. The agent runs with
node-1's credentials, the final phase with the controllers' (node agents may read no pods; the
admission policies are enforced on the real server)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from nodeagent.config import FinalPhaseConfig, ShutdownConfig
from nodeagent.controllers.final_phase import FinalPhaseController
from nodeagent.kube.controller import SharedInformers
from nodeagent.kube.events import EventRecorder
from nodeagent.kube.resources import EVENTS, NODEMAINTENANCES, NODES, PDBS, PODS
from nodeagent.model.final_phase import FinalPhase, annotation
from nodeagent.model.names import FINAL_PHASE_ANNOTATION
from nodeagent.model.shutdown import shutdown_maintenance
from nodeagent.node.boot import read_boot_id
from nodeagent.node.shutdown import ShutdownFlow
from tests.clusters import CONTROLLERS_ACCOUNT, ClusterView, create_pod
from tests.integration.shutdown_cluster import ShutdownCluster, shutdown_cluster
from tests.netproxy import proxy_to
from tests.tasks import cancel_and_wait

__all__ = ["shutdown_cluster"]  # the fixture

Obj = dict[str, Any]
# this host's: the simulated kubelets report it (kwok's report none), and the controllers
# carry out a final phase only for the boot the node's kubelet reports
BOOT = read_boot_id()
BOOT_ID = BOOT[:36]  # its kernel part, what a kubelet reports
MADE_UP_BOOT = "5d6c7b8a-9999-8888-7777-666655554444"
# deadline 13 s after the shutdown starts; the phase from 5 s, the critical pods' from 9 s
CONFIG = ShutdownConfig(
    budget=14,
    safety_margin=1,
    api_unreachable_release_after=30,
    final_phase=FinalPhaseConfig(grace_period=8, critical_pods_grace_period=4),
)


def deleting(view: ClusterView, name: str, namespace: str = "default") -> bool:
    """The pod is being deleted, or gone."""
    pod = view.get(PODS, name, namespace) or {"metadata": {"deletionTimestamp": "gone"}}
    return bool(pod["metadata"].get("deletionTimestamp"))


@contextlib.asynccontextmanager
async def leader(c: ShutdownCluster) -> AsyncIterator[FinalPhaseController]:
    """The controllers' part, with the controllers' credentials, until the block ends (a leader
    killed: nothing it held in memory survives)."""
    account = await c.backend.service_account(CONTROLLERS_ACCOUNT)
    client = c.backend.client(account, max_workers=4)
    informers = SharedInformers(client)
    controller = FinalPhaseController(client, informers, EventRecorder(client, "nodeagent"))
    tasks = [asyncio.create_task(informers.run()), asyncio.create_task(controller.run())]
    try:
        async with asyncio.timeout(10):
            await controller.wait_synced()
        yield controller
    finally:
        await cancel_and_wait(tasks)


@pytest.fixture
async def final_phase(shutdown_cluster: ShutdownCluster) -> AsyncIterator[FinalPhaseController]:
    async with leader(shutdown_cluster) as controller:
        yield controller


# deadline 23 s after the shutdown starts; the phase from 5 s, the critical pods' from 20 s
LONG = dataclasses.replace(
    CONFIG,
    budget=24,
    final_phase=FinalPhaseConfig(grace_period=18, critical_pods_grace_period=3),
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
    shutdown_cluster: ShutdownCluster, final_phase: FinalPhaseController
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
    view = ClusterView(c.kube, [PODS, EVENTS])
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
        (nm,) = c.maintenances()
        assert FINAL_PHASE_ANNOTATION in nm["metadata"]["annotations"]
        said = [e["message"] for e in view.list(EVENTS) if e.get("reason") == "FinalPhase"]
        assert any("deleting the pods left" in m for m in said), said
    finally:
        await view.stop()


async def test_a_hung_api_server_in_the_final_phase_does_not_move_the_deadline(
    shutdown_cluster: ShutdownCluster, final_phase: FinalPhaseController, tmp_path: Path
) -> None:
    """The API server stops answering the agent as the phase starts (a stopped process): the
    lock still goes at the deadline, not later, whatever the controllers do meanwhile."""
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
        pods = ClusterView(c.kube, [PODS])
        await pods.start()
        try:  # the phase starts (at 5 s) when the controllers delete the pods left
            await pods.until(lambda: deleting(pods, "web"))
        finally:
            await pods.stop()
        proxy.hold()
        async with asyncio.timeout(20):
            reason = await task
        assert reason == "the shutdown budget is nearly spent"
        assert loop.time() - t0 < 13.5
        await client.close()
        proxy.resume()


async def still_there(c: ShutdownCluster, view: ClusterView, pod: str) -> None:
    """`pod` is not being deleted, as of a change made after the decisions of interest: the
    view shows a label set now, and with it anything the leader did before."""
    await c.kube.patch(PODS, pod, {"metadata": {"labels": {"seen": "yes"}}}, "default")

    def current() -> Obj:
        return view.get(PODS, pod, "default") or {"metadata": {}}

    await view.until(lambda: "seen" in (current()["metadata"].get("labels") or {}))
    assert not current()["metadata"].get("deletionTimestamp")


async def test_a_final_phase_is_honoured_only_on_a_shutdown_maintenance(
    shutdown_cluster: ShutdownCluster, final_phase: FinalPhaseController
) -> None:
    """An admin's maintenance of node-1 carrying the annotation (a phase that has started), and
    one whose annotation is not JSON: a Warning Event each, and no pod is deleted."""
    c = shutdown_cluster
    await create_pod(c.kube, a_pod("web"))
    started = annotation(datetime.now(UTC) + timedelta(seconds=30), FinalPhase(0, 60, 10))
    view = ClusterView(c.kube, [PODS, EVENTS])
    await view.start()
    try:
        for name, value in (("admins", started), ("garbled", "{")):
            nm = shutdown_maintenance("node-1", BOOT, "reboot")
            nm["metadata"] = {"name": name, "annotations": {FINAL_PHASE_ANNOTATION: value}}
            await c.kube.create(NODEMAINTENANCES, nm)

        def refused() -> set[str]:
            return {
                e["involvedObject"]["name"]
                for e in view.list(EVENTS)
                if e.get("reason") == "FinalPhaseInvalid"
            }

        await view.until(lambda: refused() == {"admins", "garbled"})
        said = {e["message"] for e in view.list(EVENTS) if e.get("reason") == "FinalPhaseInvalid"}
        assert any("honoured only on a node's shutdown maintenance" in m for m in said), said
        assert any(f"annotation {FINAL_PHASE_ANNOTATION}: not JSON" in m for m in said), said
        await still_there(c, view, "web")
    finally:
        await view.stop()


async def test_no_final_phase_on_demand_for_a_boot_the_kubelet_does_not_report(
    shutdown_cluster: ShutdownCluster, final_phase: FinalPhaseController
) -> None:
    """The attack: node-1's agent, with its own credentials, makes a shutdown maintenance of a
    boot it made up whose final phase is near, with no shutdown under way. Its kubelet
    reports another boot: a ShutdownIgnored Warning, and no pod is deleted."""
    c = shutdown_cluster
    await c.kube.patch_status(NODES, "node-1", {"status": {"nodeInfo": {"bootID": BOOT_ID}}})
    await create_pod(c.kube, a_pod("web"))
    view = ClusterView(c.kube, [PODS, EVENTS])
    await view.start()
    try:
        nm = shutdown_maintenance("node-1", MADE_UP_BOOT, "reboot")
        # from 10 s on: the leader's informers see the Node's report first, whatever the order
        # of their watches
        phase = FinalPhase(0, 20, 5)
        nm["metadata"]["annotations"][FINAL_PHASE_ANNOTATION] = annotation(
            datetime.now(UTC) + timedelta(seconds=30), phase
        )
        await c.agent.create(NODEMAINTENANCES, nm)
        name = nm["metadata"]["name"]

        def ignored() -> list[str]:
            return [
                e["message"]
                for e in view.list(EVENTS)
                if e.get("reason") == "ShutdownIgnored" and e["involvedObject"]["name"] == name
            ]

        await view.until(lambda: bool(ignored()))
        assert f"the kubelet reports another boot ({BOOT_ID})" in ignored()[0]
        await still_there(c, view, "web")
    finally:
        await view.stop()


async def test_a_new_leader_carries_on_a_final_phase_begun_by_one_killed(
    shutdown_cluster: ShutdownCluster,
) -> None:
    """The leader is killed once it has deleted the first group; a new one (empty memory) reads
    the request again and deletes the critical pod at its time; the lock goes by the deadline.
    A longer phase than CONFIG's: the first leader must be killed before the critical pods'
    time comes, whatever the load on the machine (15 s between the two groups)."""
    c = shutdown_cluster
    await create_pod(c.kube, a_pod("web", annotations={"sim.nodeagent.io/exit-seconds": "30"}))
    await create_pod(
        c.kube,
        a_pod("dns", "kube-system", spec={"priorityClassName": "system-cluster-critical"}),
    )
    view = ClusterView(c.kube, [PODS])
    await view.start()

    try:
        flow = ShutdownFlow(c.agent, "node-1", BOOT, LONG)
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        shutdown = asyncio.create_task(flow.on_shutdown("reboot"))
        async with leader(c):
            await view.until(lambda: deleting(view, "web"))
        assert not deleting(view, "dns", "kube-system"), "the critical pod waits for its time"
        async with leader(c):
            await view.until(lambda: deleting(view, "dns", "kube-system"))
            assert loop.time() - t0 >= 20.0 - 0.1  # web is still terminating: at the group's time
        async with asyncio.timeout(30):
            assert await shutdown == "the shutdown budget is nearly spent"
        assert loop.time() - t0 < 23.5
    finally:
        await view.stop()
