"""Webhook notifications from the real shutdown flow: a simulated logind on a private
dbus-daemon, either cluster backend over real HTTP, and a real HTTP server on loopback that
receives the webhooks. The whole agent (nodeagent.app) sends nodeBack after a reboot, then
drainStarted and lockReleased for a shutdown; a webhook that hangs never delays the lock's
release; one that answers 500 is asked a bounded number of times.

The agent runs as node-1's ServiceAccount; the test plays the NodeMaintenance controller
(marking the maintenance drained) as admin and reads through a ClusterView."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

from nodeagent.app import Agent
from nodeagent.config import NotificationsConfig, ShutdownConfig, Webhook, from_mapping
from nodeagent.kube.client import KubeClient
from nodeagent.kube.resources import NODEMAINTENANCES
from nodeagent.logind.guard import ShutdownGuard
from nodeagent.model import shutdown as model
from nodeagent.node.shutdown import ShutdownFlow
from nodeagent.notify import Webhooks
from nodeagent_testbed.fakelogind import DBusDaemon, FakeLogind
from tests.integration.logind.conftest import FAST_RECONNECT
from tests.integration.shutdown_cluster import ShutdownCluster, shutdown_cluster
from tests.webhookserver import Outcomes, WebhookServer, webhook_server

__all__ = ["shutdown_cluster"]  # the fixture

BOOT = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
EARLIER_BOOT = "aaaabbbb-cccc-dddd-eeee-ffff00001111"


@contextlib.asynccontextmanager
async def server() -> AsyncIterator[WebhookServer]:
    async with webhook_server() as s:
        yield s


@contextlib.asynccontextmanager
async def guarding(
    config: ShutdownConfig, client: KubeClient, *hooks: Webhook
) -> AsyncIterator[tuple[ShutdownGuard, Outcomes]]:
    """The guard and the flow as the agent wires them, sending to `hooks`."""
    outcomes = Outcomes()
    webhooks = Webhooks(NotificationsConfig(hooks), count=outcomes)
    flow = ShutdownFlow(client, "node-1", BOOT, config, notify=webhooks.notify)
    guard = ShutdownGuard(config, flow, reconnect=FAST_RECONNECT)
    tasks = [asyncio.create_task(guard.run()), asyncio.create_task(webhooks.run())]
    try:
        yield guard, outcomes
    finally:
        for task in tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def test_the_agent_notifies_node_back_drain_start_and_lock_release(
    shutdown_cluster: ShutdownCluster, fake: FakeLogind, daemon: DBusDaemon, tmp_path: Path
) -> None:
    c = shutdown_cluster
    # what a shutdown of an earlier boot left: the agent completes it once node-1 is Ready
    earlier = model.shutdown_maintenance("node-1", EARLIER_BOOT, "reboot")
    await c.kube.create(NODEMAINTENANCES, earlier)
    async with server() as s:
        slack = {"text": "${node}: ${event} (${reason})", "maintenance": "$maintenance"}
        config = from_mapping(
            {
                "nodeName": "node-1",
                "runControllers": False,
                "kube": {"kubeconfig": str(c.account)},
                "shutdown": {
                    "dbusAddress": daemon.address,
                    "manageDropin": False,
                    "recordFile": str(tmp_path / "shutdown.json"),
                },
                "staticPods": {"enabled": False},
                "observability": {"listen": "127.0.0.1:0"},
                "notifications": {
                    "webhooks": [
                        {"url": f"{s.url}/json"},
                        {"url": f"{s.url}/slack?channel=nodes", "template": slack},
                    ]
                },
            }
        )
        agent = Agent(config, env={})
        task = asyncio.create_task(agent.run())
        try:
            await s.until(lambda: len(s.received) == 2)
            (back,) = s.on("/json")
            assert back.json()["event"] == "nodeBack"
            assert back.json()["node"] == "node-1"
            assert back.json()["maintenance"] == earlier["metadata"]["name"]
            assert "Ready again" in back.json()["reason"]
            (back_slack,) = s.on("/slack?channel=nodes")
            assert back_slack.json() == {
                "text": f"node-1: nodeBack ({back.json()['reason']})",
                "maintenance": earlier["metadata"]["name"],
            }
            await c.until(lambda: not c.maintenances())

            lock = await fake.lock_taken()
            fake.emit_shutdown(True, type="reboot")
            await c.until(lambda: len(c.maintenances()) == 1)
            (nm,) = c.maintenances()
            name = nm["metadata"]["name"]
            await s.until(lambda: len(s.received) == 4)
            started = s.on("/json")[1].json()
            assert (started["event"], started["maintenance"]) == ("drainStarted", name)
            assert started["reason"] == nm["spec"]["reason"]
            assert lock.active, "a notification does not let the shutdown go"

            await c.mark_drained(name)
            await fake.lock_released(timeout=2.0, inhibitor=lock)
            await s.until(lambda: len(s.received) == 6)
            released = s.on("/json")[2].json()
            assert (released["event"], released["maintenance"]) == ("lockReleased", name)
            assert released["reason"] == "the node is drained"
            assert s.on("/slack?channel=nodes")[2].json()["text"] == (
                "node-1: lockReleased (the node is drained)"
            )
            # each webhook's worker counts a notification before it takes the next
            for event in ("nodeBack", "drainStarted"):
                labels = {"event": event, "result": "sent"}
                assert agent.registry.get_sample_value("nodeagent_notifications_total", labels) == 2
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def test_a_hanging_webhook_does_not_delay_the_lock_release(
    shutdown_cluster: ShutdownCluster, fake: FakeLogind, config: ShutdownConfig
) -> None:
    """The webhook accepts the request and never answers: the lock goes as soon as the node is
    drained, while the drainStarted notification still hangs (and lockReleased waits behind)."""
    c = shutdown_cluster
    async with server() as s:
        s.hang = True
        async with guarding(config, c.agent, Webhook(f"{s.url}/h", timeout=60)):
            lock = await fake.lock_taken()
            fake.emit_shutdown(True, type="reboot")
            await s.until(lambda: len(s.received) == 1)
            assert s.received[0].json()["event"] == "drainStarted"
            # the webhook may hear of the maintenance before the test's watch does
            await c.until(lambda: len(c.maintenances()) == 1)
            (nm,) = c.maintenances()
            loop = asyncio.get_running_loop()
            t0 = loop.time()
            await c.mark_drained(nm["metadata"]["name"])
            await fake.lock_released(timeout=1.0, inhibitor=lock)
            assert loop.time() - t0 < 1.0
            assert len(s.received) == 1, "lockReleased waits behind the hung request"


async def test_budget_release_is_told_and_a_failing_webhook_asked_a_bounded_number_of_times(
    shutdown_cluster: ShutdownCluster, fake: FakeLogind, config: ShutdownConfig
) -> None:
    c = shutdown_cluster
    budget = dataclasses.replace(config, budget=2.0, safety_margin=0.5)
    async with server() as s:
        s.statuses = [500] * 100
        async with guarding(budget, c.agent, Webhook(f"{s.url}/h", attempts=2)) as (_, out):
            lock = await fake.lock_taken()
            loop = asyncio.get_running_loop()
            t0 = loop.time()
            fake.emit_shutdown(True, type="poweroff")
            # nothing drains it: the budget ends the wait, the failing webhook does not add
            await fake.lock_released(timeout=3.0, inhibitor=lock)
            assert 1.5 <= loop.time() - t0 < 2.0
            await out.until(lambda: ("lockReleased", "failed") in out.seen)
    assert out.seen == [("drainStarted", "failed"), ("lockReleased", "failed")]
    assert [r.json()["event"] for r in s.received] == ["drainStarted"] * 2 + ["lockReleased"] * 2
    assert {r.json()["reason"] for r in s.received[2:]} == {"the shutdown budget is nearly spent"}
    assert s.statuses == [500] * 96
