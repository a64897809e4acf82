"""The KEP-5683 Node conditions and the Node Events of a shutdown, on either cluster backend:
whole agents (nodeagent.app), node-1's with node-1's credentials (a token bound to its pod,
the admission policy enforced on the real server) and a simulated logind on a private
dbus-daemon, the controllers' with the controllers' credentials. `systemctl reboot` drains
node-1; the shutdown is then called off, which completes the maintenance. The test reads the
Node and its Events through a ClusterView and records every state of the conditions seen."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from nodeagent.app import Agent
from nodeagent.config import ShutdownConfig, from_mapping
from nodeagent.kube.resources import EVENTS, NODES, PODS, Resource
from nodeagent.model.nodeconditions import (
    DRAIN_IN_PROGRESS,
    DRAINED,
    GRACEFUL_SHUTDOWN,
    MAINTENANCE_IN_PROGRESS,
    MAINTENANCE_PLANNED,
)
from nodeagent_testbed.fakelogind import FakeLogind
from tests.clusters import CONTROLLERS_ACCOUNT, ClusterView, create_pod
from tests.integration.shutdown_cluster import ShutdownCluster, shutdown_cluster
from tests.tasks import cancel_and_wait

__all__ = ["shutdown_cluster"]  # the fixture

Obj = dict[str, Any]
OURS = (MAINTENANCE_IN_PROGRESS, DRAIN_IN_PROGRESS, DRAINED, GRACEFUL_SHUTDOWN)


def said(node: Obj | None) -> dict[str, str]:
    conditions = ((node or {}).get("status") or {}).get("conditions") or []
    return {c["type"]: c["status"] for c in conditions if c["type"] in (*OURS, MAINTENANCE_PLANNED)}


@contextlib.asynccontextmanager
async def running(*agents: Agent) -> AsyncIterator[None]:
    tasks = [asyncio.create_task(a.run()) for a in agents]
    try:
        yield
    finally:
        await cancel_and_wait(tasks)


def node_agent(account: Path, config: ShutdownConfig, **extra: object) -> Agent:
    """node-1's agent as the DaemonSet runs it, but with the fake logind and no static pods."""
    return Agent(
        from_mapping(
            {
                "nodeName": "node-1",
                "runControllers": False,
                "kube": {"kubeconfig": str(account)},
                "shutdown": {
                    "dbusAddress": config.dbus_address,
                    "manageDropin": False,
                    "logindDropin": str(config.logind_dropin),
                    "budget": 120,
                    "safetyMargin": 5,
                    "completeAfterReboot": False,
                },
                "staticPods": {"enabled": False},
                "observability": {"listen": "127.0.0.1:0"},
                **extra,
            }
        ),
        env={},
    )


async def controllers_agent(c: ShutdownCluster) -> Agent:
    account = await c.backend.service_account(CONTROLLERS_ACCOUNT)
    return Agent(
        from_mapping(
            {
                "runNodeAgent": False,
                "kube": {"kubeconfig": str(account)},
                "leader": {"leaseDuration": 2.0, "renewDeadline": 1.5, "retryPeriod": 0.25},
                "eviction": {"backoffBase": 0.2, "backoffCap": 1.0},
                "observability": {"listen": "127.0.0.1:0"},
            }
        ),
        env={"POD_NAME": "nodeagent-controllers-0"},
    )


async def work_on_node_1(c: ShutdownCluster, count: int) -> None:
    for i in range(count):
        await create_pod(
            c.kube,
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"work-{i}",
                    "namespace": "default",
                    "annotations": {"sim.nodeagent.io/exit-seconds": "1"},
                },
                "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "nginx"}]},
            },
        )


def node_events(view: ClusterView) -> list[Obj]:
    return [
        e
        for e in view.list(EVENTS)
        if e["involvedObject"].get("kind") == "Node"
        and e["involvedObject"].get("name") == "node-1"
        and (e.get("source") or {}).get("component") == "nodeagent"
    ]


async def test_a_shutdown_drain_shows_on_the_node_and_is_cleared_after(
    shutdown_cluster: ShutdownCluster, fake: FakeLogind, config: ShutdownConfig
) -> None:
    c = shutdown_cluster
    view = ClusterView(c.kube, [NODES, EVENTS, PODS])
    await view.start()
    states: list[dict[str, str]] = []

    def seen(kind: str, resource: Resource, obj: Obj) -> None:
        if resource == NODES and obj["metadata"]["name"] == "node-1":
            state = said(obj)
            if not states or states[-1] != state:
                states.append(state)

    view.listen(seen)
    try:
        await work_on_node_1(c, 3)
        agent = node_agent(c.account, config)
        async with running(agent, await controllers_agent(c)):
            lock = await fake.lock_taken(timeout=30)
            assert said(view.get(NODES, "node-1")) == {}, "an untouched node gets no conditions"
            fake.emit_shutdown(True, type="reboot")
            await view.until(lambda: said(view.get(NODES, "node-1")).get(DRAINED) == "True", 60)
            # the drain released the lock
            await fake.lock_released(timeout=30, inhibitor=lock)
            draining = {
                MAINTENANCE_IN_PROGRESS: "True",
                DRAIN_IN_PROGRESS: "True",
                GRACEFUL_SHUTDOWN: "True",
            }
            assert draining in states, states
            assert said(view.get(NODES, "node-1")) == {
                MAINTENANCE_IN_PROGRESS: "True",
                DRAIN_IN_PROGRESS: "False",
                DRAINED: "True",
                GRACEFUL_SHUTDOWN: "True",
            }
            assert not [p for p in view.list(PODS, "default") if p["spec"]["nodeName"] == "node-1"]
            # the shutdown is called off: the agent completes its maintenance, the controller
            # uncordons, and the conditions are False again
            fake.emit_shutdown(False)
            cleared = dict.fromkeys(OURS, "False")
            await view.until(lambda: said(view.get(NODES, "node-1")) == cleared, 30)
            assert not view.get(NODES, "node-1")["spec"].get("unschedulable")  # type: ignore[index]
            # the Events, each once, in order
            wanted = ["Cordoned", "Draining", "Drained", "Restored"]
            await view.until(lambda: len(node_events(view)) >= len(wanted), 10)
            # client-go style names: <object>.<hex nanoseconds>..., in the order recorded
            events = sorted(node_events(view), key=lambda e: e["metadata"]["name"])
            assert [e["reason"] for e in events] == wanted
            assert all(e["count"] == 1 and e["type"] == "Normal" for e in events)
            assert all(e["metadata"]["namespace"] == "default" for e in events)
            assert "nodeagent-shutdown-node-1-" in events[0]["message"]
            assert events[-1]["message"].endswith("the node is schedulable again")
        # the kubelet's conditions were left alone
        ready = [
            cond
            for cond in view.get(NODES, "node-1")["status"]["conditions"]  # type: ignore[index]
            if cond["type"] == "Ready"
        ]
        assert ready and ready[0]["status"] == "True"
    finally:
        await view.stop()


async def test_turned_off_the_agent_writes_no_condition_and_no_event(
    shutdown_cluster: ShutdownCluster, fake: FakeLogind, config: ShutdownConfig
) -> None:
    c = shutdown_cluster
    view = ClusterView(c.kube, [NODES, EVENTS])
    await view.start()
    cordons: list[bool] = []

    def seen(kind: str, resource: Resource, obj: Obj) -> None:
        if resource == NODES and obj["metadata"]["name"] == "node-1":
            cordoned = bool(obj["spec"].get("unschedulable"))
            if not cordons or cordons[-1] != cordoned:
                cordons.append(cordoned)

    view.listen(seen)
    try:
        await work_on_node_1(c, 1)
        agent = node_agent(c.account, config, nodeConditions=False)
        async with running(agent, await controllers_agent(c)):
            lock = await fake.lock_taken(timeout=30)
            fake.emit_shutdown(True, type="reboot")
            await fake.lock_released(timeout=60, inhibitor=lock)
            fake.emit_shutdown(False)
            # cordoned for the drain, and uncordoned once the maintenance completed
            await view.until(lambda: cordons[-2:] == [True, False], 30)
            assert said(view.get(NODES, "node-1")) == {}
            assert node_events(view) == []
    finally:
        await view.stop()
