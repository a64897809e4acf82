"""The node-side shutdown flow against either cluster backend (no logind: the guard's part).
Its bounds (budget, margin, logind's limit, a restart) are timed on a fake clock in
tests/unit/node/test_shutdown_timing.py; here the unreachable bound is measured in real time
because the client's real sockets and threads are what it is about.

The flow runs as the agent's ServiceAccount; the test plays the NodeMaintenance controller
(marking the maintenance drained) as admin and reads through a ClusterView."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from nodeagent.config import ShutdownConfig
from nodeagent.model import shutdown as model
from nodeagent.node.shutdown import ShutdownFlow
from tests.integration.shutdown_cluster import ShutdownCluster, shutdown_cluster
from tests.netproxy import proxy_to

__all__ = ["shutdown_cluster"]  # the fixture

BOOT = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
CONFIG = ShutdownConfig(budget=60, safety_margin=5, api_unreachable_release_after=0.5)


async def cancel(task: asyncio.Task[str]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def test_shutdown_creates_the_maintenance_and_waits_for_drained(
    shutdown_cluster: ShutdownCluster,
) -> None:
    c = shutdown_cluster
    flow = ShutdownFlow(c.agent, "node-1", BOOT, CONFIG)
    task = asyncio.create_task(flow.on_shutdown("reboot"))
    await c.until(lambda: len(c.maintenances()) == 1)
    (nm,) = c.maintenances()
    assert nm["spec"]["stage"] == "Drain"
    assert nm["spec"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] == [
        "node-1"
    ]
    assert model.is_ours(nm, "node-1") and model.boot_of(nm) == BOOT
    assert "reboot" in nm["spec"]["reason"]
    # still holding once it watches the maintenance: nothing says Drained
    await c.requests.until(lambda: c.requests.total("watch", "nodemaintenances") >= 1)
    assert not task.done()
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    await c.mark_drained(nm["metadata"]["name"])
    async with asyncio.timeout(1.0):
        assert await task == "the node is drained"
    assert loop.time() - t0 < 1.0


async def test_a_second_start_adopts_this_boots_maintenance(
    shutdown_cluster: ShutdownCluster,
) -> None:
    c = shutdown_cluster
    first = ShutdownFlow(c.agent, "node-1", BOOT, CONFIG)
    task = asyncio.create_task(first.on_shutdown("poweroff"))
    await c.until(lambda: len(c.maintenances()) == 1)
    await cancel(task)
    (nm,) = c.maintenances()
    second = ShutdownFlow(c.agent, "node-1", BOOT, CONFIG)
    await c.mark_drained(nm["metadata"]["name"])
    # a second maintenance would never be drained: returning proves the first was adopted
    async with asyncio.timeout(10):
        assert await second.on_shutdown("poweroff") == "the node is drained"
    await c.caught_up(nm["metadata"]["name"])
    assert len(c.maintenances()) == 1
    assert second.maintenance == nm["metadata"]["name"]


async def test_cancel_completes_and_a_new_shutdown_gets_a_new_maintenance(
    shutdown_cluster: ShutdownCluster,
) -> None:
    """One maintenance per node and boot (the admission policy holds node agents to it): the
    second shutdown of the boot replaces the Complete one under the same name."""
    c = shutdown_cluster
    flow = ShutdownFlow(c.agent, "node-1", BOOT, CONFIG)
    task = asyncio.create_task(flow.on_shutdown("reboot"))
    await c.until(lambda: len(c.maintenances()) == 1)
    first = c.maintenances()[0]["metadata"]
    await cancel(task)
    await flow.on_cancel()
    await c.until(lambda: c.stages() == ["Complete"])
    task = asyncio.create_task(flow.on_shutdown("reboot"))
    await c.until(
        lambda: [m["metadata"]["uid"] for m in c.maintenances()] not in ([], [first["uid"]])
    )
    (second,) = c.maintenances()
    assert second["metadata"]["name"] == first["name"] and second["spec"]["stage"] == "Drain"
    await cancel(task)


async def test_unreachable_api_server_releases_within_the_bound(
    shutdown_cluster: ShutdownCluster, tmp_path: Path
) -> None:
    """The node's way to the API server goes through a proxy that stops listening (nothing
    there: connections are refused)."""
    c = shutdown_cluster
    async with proxy_to(c.account) as proxy:
        kubeconfig = proxy.kubeconfig(c.account, tmp_path / "agent-via-proxy.kubeconfig")
        client = c.backend.client(kubeconfig, connect_timeout=0.2)
        await proxy.stop_listening()
        flow = ShutdownFlow(client, "node-1", BOOT, CONFIG)
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        async with asyncio.timeout(10):
            reason = await flow.on_shutdown("reboot")
        assert reason == "the API server could not be reached"
        assert loop.time() - t0 < CONFIG.api_unreachable_release_after + 1.0


async def test_a_hung_api_server_releases_within_the_bound(
    shutdown_cluster: ShutdownCluster, tmp_path: Path
) -> None:
    """The API server accepts connections but never answers (a stopped process): each request
    hangs, which counts as unreachable from the last answer. Closing the client does not wait
    for the hung requests either."""
    c = shutdown_cluster
    async with proxy_to(c.account) as proxy:
        kubeconfig = proxy.kubeconfig(c.account, tmp_path / "agent-via-proxy.kubeconfig")
        client = c.backend.client(kubeconfig, request_timeout=60)
        proxy.hold()
        flow = ShutdownFlow(client, "node-1", BOOT, CONFIG)
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        async with asyncio.timeout(10):
            reason = await flow.on_shutdown("reboot")
        assert reason == "the API server could not be reached"
        assert loop.time() - t0 < CONFIG.api_unreachable_release_after + 1.0
        t1 = loop.time()
        await client.close()
        assert loop.time() - t1 < 0.5
        proxy.resume()
