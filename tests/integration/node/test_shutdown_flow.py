"""The node-side shutdown flow against the simulated cluster (no logind: the guard's part)."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from nodeagent.config import ShutdownConfig
from nodeagent.kube.client import KubeClient, load_api_client
from nodeagent.model import shutdown as model
from nodeagent.node.shutdown import ShutdownFlow
from nodeagent.sim.cluster import SimCluster, write_kubeconfig
from tests.simutil import install_crds, until

BOOT = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
CONFIG = ShutdownConfig(budget=60, safety_margin=5, api_unreachable_release_after=0.5)


@pytest.fixture
async def kube(sim: SimCluster) -> AsyncIterator[KubeClient]:
    install_crds(sim)
    async with KubeClient(load_api_client(str(sim.kubeconfig)), max_workers=4) as client:
        yield client


def maintenances(sim: SimCluster) -> list[dict[str, object]]:
    return sim.store.list(sim.store.resource("nodeagent.io", "v1alpha1", "nodemaintenances"))


def mark_drained(sim: SimCluster, name: str) -> None:
    rt = sim.store.resource("nodeagent.io", "v1alpha1", "nodemaintenances")

    def drained(nm: dict[str, object]) -> None:
        nm["status"] = {
            "conditions": [
                {
                    "type": "Drained",
                    "status": "True",
                    "reason": "Drained",
                    "message": "test",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ]
        }

    sim.store.mutate(rt, None, name, drained, "status")


async def test_shutdown_creates_the_maintenance_and_waits_for_drained(
    sim: SimCluster, kube: KubeClient
) -> None:
    flow = ShutdownFlow(kube, "node-1", BOOT, CONFIG)
    task = asyncio.create_task(flow.on_shutdown("reboot"))
    await until(sim, lambda: len(maintenances(sim)) == 1)
    (nm,) = maintenances(sim)
    assert nm["spec"]["stage"] == "Drain"
    assert nm["spec"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] == [
        "node-1"
    ]
    assert model.is_ours(nm, "node-1") and model.boot_of(nm) == BOOT
    assert "reboot" in nm["spec"]["reason"]
    # still holding: nothing says Drained
    done, _ = await asyncio.wait({task}, timeout=0.3)
    assert not done
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    mark_drained(sim, nm["metadata"]["name"])
    assert await asyncio.wait_for(task, 1.0) == "the node is drained"
    assert loop.time() - t0 < 1.0


async def test_a_second_start_adopts_this_boots_maintenance(
    sim: SimCluster, kube: KubeClient
) -> None:
    first = ShutdownFlow(kube, "node-1", BOOT, CONFIG)
    task = asyncio.create_task(first.on_shutdown("poweroff"))
    await until(sim, lambda: len(maintenances(sim)) == 1)
    task.cancel()
    (nm,) = maintenances(sim)
    second = ShutdownFlow(kube, "node-1", BOOT, CONFIG)
    mark_drained(sim, nm["metadata"]["name"])
    # a second maintenance would never be drained: returning proves the first was adopted
    assert await asyncio.wait_for(second.on_shutdown("poweroff"), 5) == "the node is drained"
    assert len(maintenances(sim)) == 1
    assert second.maintenance == nm["metadata"]["name"]


async def test_cancel_completes_and_a_new_shutdown_gets_a_new_maintenance(
    sim: SimCluster, kube: KubeClient
) -> None:
    flow = ShutdownFlow(kube, "node-1", BOOT, CONFIG)
    task = asyncio.create_task(flow.on_shutdown("reboot"))
    await until(sim, lambda: len(maintenances(sim)) == 1)
    task.cancel()
    await flow.on_cancel()
    assert [m["spec"]["stage"] for m in maintenances(sim)] == ["Complete"]
    task = asyncio.create_task(flow.on_shutdown("reboot"))
    await until(sim, lambda: len(maintenances(sim)) == 2)
    assert sorted(m["spec"]["stage"] for m in maintenances(sim)) == ["Complete", "Drain"]
    task.cancel()


async def test_budget_bounds_the_wait(sim: SimCluster, kube: KubeClient) -> None:
    cfg = dataclasses.replace(CONFIG, budget=1.0, safety_margin=0.5)
    flow = ShutdownFlow(kube, "node-1", BOOT, cfg)
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    reason = await asyncio.wait_for(flow.on_shutdown("reboot"), 5)
    assert reason == "the shutdown budget is nearly spent"
    assert 0.5 <= loop.time() - t0 < 1.5


async def test_logind_granting_less_than_the_budget_wins(sim: SimCluster, kube: KubeClient) -> None:
    flow = ShutdownFlow(kube, "node-1", BOOT, CONFIG, delay_max=lambda: 5.4)
    reason = await asyncio.wait_for(flow.on_shutdown("reboot"), 5)
    assert reason == "the shutdown budget is nearly spent"


async def test_unreachable_api_server_releases_within_the_bound(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once closed
    kubeconfig = tmp_path / "kubeconfig"
    write_kubeconfig(kubeconfig, f"http://127.0.0.1:{port}")
    async with KubeClient(load_api_client(str(kubeconfig)), connect_timeout=0.2) as client:
        flow = ShutdownFlow(client, "node-1", BOOT, CONFIG)
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        reason = await asyncio.wait_for(flow.on_shutdown("reboot"), 5)
        assert reason == "the API server could not be reached"
        assert loop.time() - t0 < CONFIG.api_unreachable_release_after + 1.0
