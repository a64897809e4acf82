"""The shutdown guard and the node-side flow together: a simulated logind on a private
dbus-daemon, either cluster backend over real HTTP (issue: shutdown guard).

The flow runs as the agent's ServiceAccount; the test plays the NodeMaintenance controller
(marking the maintenance drained) as admin and reads through a ClusterView."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

from nodeagent.config import ShutdownConfig
from nodeagent.kube.client import KubeClient
from nodeagent.logind.guard import ShutdownGuard
from nodeagent.node.shutdown import ShutdownFlow
from nodeagent_testbed.fakelogind import FakeLogind
from tests.integration.logind.conftest import FAST_RECONNECT
from tests.integration.shutdown_cluster import ShutdownCluster, shutdown_cluster
from tests.netproxy import proxy_to

__all__ = ["shutdown_cluster"]  # the fixture

BOOT = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"


@contextlib.asynccontextmanager
async def guarding(
    config: ShutdownConfig, client: KubeClient
) -> AsyncIterator[tuple[ShutdownGuard, ShutdownFlow]]:
    flow = ShutdownFlow(client, "node-1", BOOT, config)
    guard = ShutdownGuard(config, flow, reconnect=FAST_RECONNECT)
    task = asyncio.create_task(guard.run())
    try:
        yield guard, flow
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_shutdown_becomes_a_maintenance_and_the_lock_goes_once_drained(
    shutdown_cluster: ShutdownCluster, fake: FakeLogind, config: ShutdownConfig
) -> None:
    c = shutdown_cluster
    async with guarding(config, c.agent):
        lock = await fake.lock_taken()
        fake.emit_shutdown(True, type="reboot")
        await c.until(lambda: len(c.maintenances()) == 1)
        (nm,) = c.maintenances()
        assert "reboot" in nm["spec"]["reason"]
        # once the flow watches the maintenance, nothing has said Drained
        await c.requests.until(lambda: c.requests.total("watch", "nodemaintenances") >= 1)
        assert lock.active, "still held: the maintenance is not drained"
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        await c.mark_drained(nm["metadata"]["name"])
        await fake.lock_released(timeout=1.0, inhibitor=lock)
        assert loop.time() - t0 < 1.0


async def test_cancel_completes_the_maintenance_and_takes_a_new_lock(
    shutdown_cluster: ShutdownCluster, fake: FakeLogind, config: ShutdownConfig
) -> None:
    c = shutdown_cluster
    async with guarding(config, c.agent) as (guard, _):
        first = await fake.lock_taken()
        fake.emit_shutdown(True)
        await c.until(lambda: len(c.maintenances()) == 1)
        fake.emit_shutdown(False)
        await c.until(lambda: c.stages() == ["Complete"])
        await guard.wait_lock()
        assert fake.active(), "a lock is held again"
        # the same lock may be kept while it was never released; either way one is held
        assert first.active or (await fake.lock_taken(after=first.id)).active


async def test_a_second_shutdown_of_the_boot_drains_again_under_the_boots_one_name(
    shutdown_cluster: ShutdownCluster, fake: FakeLogind, config: ShutdownConfig
) -> None:
    """One shutdown maintenance per node and boot (the admission policy refuses a second
    name): after a cancel, the next shutdown deletes the Complete one and creates it again."""
    c = shutdown_cluster
    async with guarding(config, c.agent):
        await fake.lock_taken()
        fake.emit_shutdown(True)
        await c.until(lambda: len(c.maintenances()) == 1)
        (first,) = c.maintenances()
        fake.emit_shutdown(False)
        await c.until(lambda: c.stages() == ["Complete"])
        fake.emit_shutdown(True)

        def drains_again() -> bool:
            nms = c.maintenances()
            return len(nms) == 1 and nms[0]["metadata"]["uid"] != first["metadata"]["uid"]

        await c.until(drains_again)
        (second,) = c.maintenances()
        assert second["metadata"]["name"] == first["metadata"]["name"]
        assert second["spec"]["stage"] == "Drain"


async def test_start_up_during_a_shutdown_acts_on_it(
    shutdown_cluster: ShutdownCluster, fake: FakeLogind, config: ShutdownConfig
) -> None:
    c = shutdown_cluster
    fake.emit_shutdown(True)  # logind is preparing before the agent starts
    async with guarding(config, c.agent):
        await c.until(lambda: len(c.maintenances()) == 1)


async def test_unreachable_api_server_releases_within_the_bound(
    shutdown_cluster: ShutdownCluster, fake: FakeLogind, config: ShutdownConfig, tmp_path: Path
) -> None:
    """The node's way to the API server goes through a proxy that stops listening (nothing
    there: connections are refused)."""
    c = shutdown_cluster
    bound = dataclasses.replace(config, api_unreachable_release_after=0.5)
    async with proxy_to(c.account) as proxy:
        kubeconfig = proxy.kubeconfig(c.account, tmp_path / "agent-via-proxy.kubeconfig")
        client = c.backend.client(kubeconfig, connect_timeout=0.2)
        await proxy.stop_listening()
        async with guarding(bound, client):
            lock = await fake.lock_taken()
            loop = asyncio.get_running_loop()
            t0 = loop.time()
            fake.emit_shutdown(True)
            await fake.lock_released(timeout=3.0, inhibitor=lock)
            assert loop.time() - t0 < 0.5 + 1.0
