"""Reboot windows and gates with the real NodeMaintenanceController, on both backends.

Reboots are asked for as node agents ask for them (trigger reboot, each with its own node's
credentials); the test plays the evicting side. The Prometheus gate is read from a real HTTP
server that answers like Prometheus. The window test runs the controller on a clock shifted
so that the window closes a few seconds after the drain began: the decision at the window's
edge comes from its own requeue, nothing polls.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from nodeagent.config import NodeMaintenanceConfig
from nodeagent.config.schema import GatesConfig, PrometheusGateConfig
from nodeagent.kube.resources import NODEMAINTENANCES
from nodeagent.model import shutdown as model
from nodeagent.model.drainslots import DrainLimit
from tests.clusters import TestCluster
from tests.integration.controllers.test_nodemaintenance import Env, cordoned
from tests.integration.controllers.test_nodemaintenance_limit import (
    BOOT,
    NEXT_BOOT,
    _env,
    blocked_by,
    node_agent,
    reports_boot,
)
from tests.prometheusserver import PrometheusServer, alert, prometheus_server

CLOSES = datetime(2024, 5, 1, 14, 0, tzinfo=UTC)  # a Wednesday
WINDOW = {"days": ["Wed"], "start": "12:00", "end": "14:00", "timeZone": "UTC"}
BEFORE_CLOSING = 12.0  # seconds of the window left when the controller starts


@pytest.fixture
async def prometheus() -> AsyncIterator[PrometheusServer]:
    async with prometheus_server() as server:
        yield server


@pytest.fixture
async def gated(backend: TestCluster, prometheus: PrometheusServer) -> AsyncIterator[Env]:
    settings = NodeMaintenanceConfig(
        max_draining_nodes=DrainLimit(count=1),
        gates=GatesConfig(
            prometheus=PrometheusGateConfig(url=prometheus.url, interval=0.3, timeout=0.3)
        ),
    )
    async for env in _env(backend, settings, with_evictions=False):
        yield env


@pytest.fixture
async def windowed(backend: TestCluster) -> AsyncIterator[Env]:
    settings = NodeMaintenanceConfig(
        max_draining_nodes=DrainLimit(count=1), reboot_windows=(WINDOW,), window_end="Stop"
    )
    shift = CLOSES - timedelta(seconds=BEFORE_CLOSING) - datetime.now(UTC)
    async for env in _env(
        backend, settings, with_evictions=False, clock=lambda: datetime.now(UTC) + shift
    ):
        yield env


async def ask_reboot(env: Env, node: str) -> str:
    """`node`'s agent asks for its reboot, with its own credentials."""
    body = model.shutdown_maintenance(node, BOOT, "reboot", trigger=model.TRIGGER_REBOOT)
    await (await node_agent(env, node)).create(NODEMAINTENANCES, body)
    return str(body["metadata"]["name"])


def message(env: Env, nm: str, node: str) -> str:
    return str(env.node_status(nm, node).get("drainMessage") or "")


async def test_the_second_reboot_is_admitted_only_once_the_gate_opens(
    gated: Env, prometheus: PrometheusServer
) -> None:
    env = gated
    for node in ("node-1", "node-2"):
        await reports_boot(env, node, BOOT)
        await env.bare_pod(f"{node}-web", node)
    first = await ask_reboot(env, "node-1")
    await env.until(lambda: env.requested() == {"node-1-web"})  # read the gate: open
    second = await ask_reboot(env, "node-2")
    await env.until(lambda: "Waiting for a drain slot" in blocked_by(env, second))
    # the first node drains; an alert fires while it reboots
    await env.evict("node-1-web")
    await env.until(lambda: (env.condition(first, "Drained") or {}).get("status") == "True")
    prometheus.alerts = [alert("EtcdNoLeader"), alert("Watchdog", "pending")]
    gate_message = "Waiting for gate prometheus: 2 alerts active: EtcdNoLeader, Watchdog"
    await env.until(lambda: message(env, second, "node-2") == gate_message)
    await reports_boot(env, "node-1", NEXT_BOOT)  # node-1 is back: its slot is free
    await env.until(lambda: "another boot" in message(env, first, "node-1"))
    assert message(env, second, "node-2") == gate_message
    assert "node-2-web" not in env.requested() and not cordoned(env, "node-2")
    # the alerts resolve: the next read opens the gate, and node-2 is admitted
    prometheus.alerts = []
    await env.until(lambda: "node-2-web" in env.requested())
    await env.until(lambda: cordoned(env, "node-2"))


async def test_a_gate_that_cannot_be_evaluated_holds_the_fleet_and_says_so(
    gated: Env, prometheus: PrometheusServer
) -> None:
    env = gated
    await reports_boot(env, "node-1", BOOT)
    await env.bare_pod("node-1-web", "node-1")
    prometheus.status, prometheus.body = 200, b"<html>not prometheus</html>"
    reboot = await ask_reboot(env, "node-1")
    garbage = (
        f"Waiting for gate prometheus: {prometheus.url}/api/v1/alerts answered HTTP 200 with "
        "no JSON (not Prometheus's API)"
    )
    await env.until(lambda: message(env, reboot, "node-1") == garbage)
    await env.until(
        lambda: any(
            e.get("reason") == "GateUnavailable" and e.get("type") == "Warning"
            for e in env.events(reboot)
        )
    )
    assert "node-1-web" not in env.requested()
    prometheus.body = None
    await env.until(lambda: "node-1-web" in env.requested())


async def test_a_window_closing_mid_drain_with_stop_gives_the_slot_back_and_uncordons(
    windowed: Env,
) -> None:
    env = windowed
    await reports_boot(env, "node-1", BOOT)
    await env.bare_pod("node-1-web", "node-1")
    await env.bare_pod("node-2-web", "node-2")
    reboot = await ask_reboot(env, "node-1")
    await env.until(lambda: env.requested() == {"node-1-web"})
    await env.until(lambda: cordoned(env, "node-1"))
    reached = env.targets(reboot, "node-1")
    assert reached
    await env.maintenance("upgrade", ["node-2"])  # an admin's: waits for node-1's slot
    await env.until(lambda: "Waiting for a drain slot" in blocked_by(env, "upgrade"))
    # the window closes (its edge is the reboot's requeue): node-1 stops
    await env.until(
        lambda: (
            message(env, reboot, "node-1")
            == "Waiting for the reboot window (next: 2024-05-08T12:00:00Z)"
        ),
        timeout=BEFORE_CLOSING + 30,
    )
    await env.until(lambda: not cordoned(env, "node-1"))
    await env.until(lambda: env.requested() == {"node-2-web"})  # the slot went to node-2
    assert env.targets(reboot, "node-1") == reached  # kept: it resumes there
    assert env.pod("default", "node-1-web") is not None
    assert any(e.get("reason") == "DrainStopped" for e in env.events(reboot))
