"""A real node whose kubelet runs Graceful Node Shutdown (shutdownGracePeriod 30 s, critical 10 s),
the set-up nodeagent recommends against: the agent says so (a Warning Event on the Node), its
logind drop-in keeps winning over the kubelet's `99-kubelet.conf` across kubelet restarts, and
at `systemctl reboot` the kubelet terminates the pods itself (no budget, no order), which is what
GNS costs: shown here as it happens, counted in the bench (tests/bench, the GNS figure)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from nodeagent.kube.resources import EVENTS, PODS, Resource
from nodeagent.model.kubelet_shutdown import EVENT_ON
from nodeagent_testbed.nspawn import REBOOT_EXIT, Container
from tests.clusters import CONTROLLERS_ACCOUNT, ClusterView
from tests.e2e.node import install_package, kind_of, running
from tests.realnode.conftest import NODE, RealNode
from tests.realnode.workloads import WORKLOADS, create_on_node, node_pods

pytestmark = [pytest.mark.realnode, pytest.mark.timeout(600)]

BUDGET = 120


@pytest.fixture
def kubelet_gns() -> tuple[int, int]:
    return (30, 10)


async def kubelet_lock_pid(c: Container) -> int | None:
    """The pid holding the kubelet's delay lock in the node's logind, if any."""
    return next((pid for _, who, *_, pid in await c.inhibitors() if who == "kubelet"), None)


async def kubelet_lock_other_than(c: Container, pid: int | None) -> int:
    """Wait until a kubelet other than `pid` holds its lock; logind signals no new lock, so
    ask it (each question a D-Bus call in the node)."""
    async with asyncio.timeout(60):
        while (holder := await kubelet_lock_pid(c)) in (None, pid):  # noqa: ASYNC110
            await asyncio.sleep(0.2)  # logind signals no new lock: ask again
    assert holder is not None
    return holder


def terminated_by_kubelet(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(
        c.get("type") == "DisruptionTarget" and c.get("reason") == "TerminationByKubelet"
        for c in conditions
    )


async def test_gns_on_is_reported_our_delay_wins_and_the_kubelet_kills_the_pods(
    real_node: RealNode, deb: Path
) -> None:
    n, c = real_node, real_node.container
    account = await n.backend.service_account(CONTROLLERS_ACCOUNT, also_roles=["nodeagent-node"])
    await asyncio.to_thread(
        install_package, c, deb, account, {"shutdown": {"budget": BUDGET, "safetyMargin": 5}}
    )
    events = ClusterView(n.kube, [EVENTS])
    await events.start()
    try:
        await c.boot()
        # the agent tells the operator: a Warning Event on its Node
        await events.until(
            lambda: any(
                e["reason"] == EVENT_ON
                and e["type"] == "Warning"
                and e["involvedObject"].get("name") == NODE
                for e in events.list(EVENTS, "default")
            ),
            timeout=60,
        )
    finally:
        await events.stop()
    assert await c.inhibit_delay_max_usec() == BUDGET * 1_000_000
    # the kubelet restarted writes its 99-kubelet.conf again, reloads logind, checks the delay
    # and only then takes its lock: once the new kubelet's lock is there, the reload is done;
    # ours still wins
    before = await kubelet_lock_other_than(c, None)
    await c.exec("systemctl", "restart", "kubelet")
    await kubelet_lock_other_than(c, before)
    assert await c.inhibit_delay_max_usec() == BUDGET * 1_000_000

    await create_on_node(n, WORKLOADS)
    await n.view.until(
        lambda: (
            sorted(kind_of(p) for p in node_pods(n.view, NODE) if running(p))
            == ["daemonset", "high", "high", "low", "low"]
        ),
        timeout=120,
    )
    last: dict[str, dict[str, Any]] = {}

    def record(event: str, resource: Resource, new: dict[str, Any]) -> None:
        if resource == PODS and new["spec"].get("nodeName") == NODE:
            last[new["metadata"]["uid"]] = new

    n.view.listen(record)
    await c.exec("systemctl", "reboot")
    assert await c.wait_exit(timeout=BUDGET + 30) == REBOOT_EXIT
    # what GNS costs: the kubelet terminated every pod below the critical priority itself, the
    # DaemonSet pod with the Default ones (plan order has it after them), none evicted; the
    # critical `high` pods come later (its second group), when our drain may have them first
    killed = sorted(kind_of(p) for p in last.values() if terminated_by_kubelet(p))
    assert [k for k in killed if k != "high"] == ["daemonset", "low", "low"], killed
