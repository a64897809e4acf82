"""Coordinated reboot, node side (issue 35, item 1): real files watched with watchfiles, a real
dbus-daemon with the fake logind, either cluster backend over real HTTP.

The coordinator and the shutdown flow run with node-1's agent credentials (on the real control
plane the node agents' admission policy holds); the test plays the NodeMaintenance controller
(marking the request drained) as admin, and reads through a ClusterView."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from nodeagent.config import RebootConfig, ShutdownConfig
from nodeagent.kube.client import KubeClient
from nodeagent.kube.resources import NODEMAINTENANCES
from nodeagent.model import shutdown as model
from nodeagent.model.names import LABEL_TRIGGER
from nodeagent.node.coordinated_reboot import RebootCoordinator
from nodeagent.node.reboot import complete_previous_boots
from nodeagent.node.reboot_triggers import RebootTriggers
from nodeagent_testbed.fakelogind import FakeLogind
from tests.integration.logind.test_guard_with_cluster import BOOT, guarding
from tests.integration.shutdown_cluster import ShutdownCluster, shutdown_cluster
from tests.netproxy import proxy_to
from tests.tasks import cancel_and_wait
from tests.until import until

__all__ = ["shutdown_cluster"]  # the fixture

NAME = model.maintenance_name("node-1", BOOT, model.TRIGGER_REBOOT)
Obj = dict[str, Any]


@pytest.fixture
def reboot_config(tmp_path: Path) -> RebootConfig:
    run = tmp_path / "run"
    run.mkdir()
    return RebootConfig(
        enabled=True,
        sentinel=run / "reboot-required",
        request_file=run / "nodeagent" / "reboot-requested",
        check_interval=1.0,
        command_timeout=0.5,
    )


@dataclass
class Running:
    coordinator: RebootCoordinator
    task: asyncio.Task[None]


@contextlib.asynccontextmanager
async def coordinating(
    client: KubeClient, reboot: RebootConfig, shutdown: ShutdownConfig
) -> AsyncIterator[Running]:
    # every file written during the test counts: the boot began long before
    triggers = RebootTriggers(reboot, boot_started=time.time() - 3600)
    c = RebootCoordinator(client, "node-1", BOOT, reboot, shutdown, triggers=triggers)
    task = asyncio.create_task(c.run(), name="coordinated-reboot")
    try:
        async with asyncio.timeout(10):
            await triggers.ready.wait()
        yield Running(c, task)
    finally:
        await cancel_and_wait([task])


def requests(c: ShutdownCluster) -> list[Obj]:
    return [m for m in c.maintenances() if m["metadata"]["labels"].get(LABEL_TRIGGER) == "reboot"]


def live_request(c: ShutdownCluster) -> Obj | None:
    nms = [m for m in requests(c) if m["spec"]["stage"] == "Drain"]
    return nms[0] if len(nms) == 1 else None


async def seen_by(c: ShutdownCluster, running: Running) -> None:
    """Until the coordinator has seen every write made to the request so far (a mark written
    now comes back to it through its watch after all of them)."""
    await c.caught_up(NAME)
    mark = (c.view.get(NODEMAINTENANCES, NAME) or {})["metadata"]["annotations"]

    def seen() -> bool:
        req = running.coordinator.request or {"metadata": {}}
        return bool((req["metadata"].get("annotations") or {}) == mark)

    await until(seen, what="the coordinator saw the last write", timeout=10)


async def acted(running: Running, *expected: str) -> None:
    """Until the coordinator has done `expected`, in order. Its own state is waited for, not the
    cluster view's: a delete's watch event may reach the view before the call returns to the
    coordinator, and the view may not change again."""
    actions = running.coordinator.actions
    try:
        await until(lambda: actions == list(expected), timeout=20)
    except TimeoutError:
        raise AssertionError(f"coordinator did {actions}, not {list(expected)}") from None


async def test_sentinel_drained_reboot_and_the_lock_goes_at_once(
    shutdown_cluster: ShutdownCluster,
    fake: FakeLogind,
    config: ShutdownConfig,
    reboot_config: RebootConfig,
) -> None:
    """The spine: sentinel -> request -> Drained -> logind Reboot -> PrepareForShutdown -> the
    shutdown flow finds the node drained and lets go at once, with no shutdown maintenance."""
    c = shutdown_cluster
    assert reboot_config.sentinel is not None
    async with guarding(config, c.agent), coordinating(c.agent, reboot_config, config) as r:
        lock = await fake.lock_taken()
        reboot_config.sentinel.write_text("*** System restart required ***\n")
        await c.until(lambda: live_request(c) is not None)
        nm = live_request(c)
        assert nm is not None
        assert nm["metadata"]["name"] == NAME
        assert model.request_node(nm) == "node-1"
        assert "sentinel" in nm["spec"]["reason"]
        await seen_by(c, r)
        assert not fake.reboot_calls, "no reboot before the request is drained"
        await c.mark_drained(NAME)
        async with asyncio.timeout(10):
            await fake.reboot_called.wait()
        assert fake.reboot_calls == [False]
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        await fake.lock_released(timeout=2.0, inhibitor=lock)
        async with asyncio.timeout(2.0):
            await fake.rebooted.wait()
        assert loop.time() - t0 < 2.0
        await c.caught_up(NAME)
        assert [m["metadata"]["name"] for m in c.maintenances()] == [NAME], (
            "no shutdown maintenance: the node was drained for its reboot"
        )
        assert r.coordinator.actions == ["create", "reboot"]


async def test_sentinel_removed_before_drained_completes_the_request(
    shutdown_cluster: ShutdownCluster,
    fake: FakeLogind,
    config: ShutdownConfig,
    reboot_config: RebootConfig,
) -> None:
    c = shutdown_cluster
    assert reboot_config.sentinel is not None
    async with coordinating(c.agent, reboot_config, config) as r:
        reboot_config.sentinel.touch()
        await c.until(lambda: live_request(c) is not None)
        reboot_config.sentinel.unlink()
        await c.until(lambda: not requests(c))
        await acted(r, "create", "complete", "delete")
        assert not fake.reboot_calls


async def test_nodeagent_reboot_and_cancel(
    shutdown_cluster: ShutdownCluster,
    fake: FakeLogind,
    config: ShutdownConfig,
    reboot_config: RebootConfig,
) -> None:
    """The CLI, as a process of its own: its reason reaches the maintenance; --cancel
    completes the request."""
    c = shutdown_cluster
    cli = [sys.executable, "-m", "nodeagent", "reboot", "--request-file"]
    cli.append(str(reboot_config.request_file))
    async with coordinating(c.agent, reboot_config, config) as r:
        out = await _run(*cli, "--reason", "kernel 6.12 installed")
        assert "kubectl get nm" in out
        await c.until(lambda: live_request(c) is not None)
        nm = live_request(c)
        assert nm is not None
        assert "nodeagent reboot" in nm["spec"]["reason"]
        assert "kernel 6.12 installed" in nm["spec"]["reason"]
        out = await _run(*cli, "--cancel")
        assert "removed" in out
        await c.until(lambda: not requests(c))
        await acted(r, "create", "complete", "delete")
        assert not fake.reboot_calls


async def _run(*argv: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    async with asyncio.timeout(30):
        out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    return out.decode()


async def test_agent_killed_mid_drain_adopts_the_request(
    shutdown_cluster: ShutdownCluster,
    fake: FakeLogind,
    config: ShutdownConfig,
    reboot_config: RebootConfig,
) -> None:
    """The agent stops mid-drain (no clean-up: the coordinator has none) and starts again: it
    adopts the request (no second create), and reboots once it is drained."""
    c = shutdown_cluster
    assert reboot_config.sentinel is not None
    reboot_config.sentinel.touch()
    async with coordinating(c.agent, reboot_config, config) as first:
        await c.until(lambda: live_request(c) is not None)
        await seen_by(c, first)
    nm = live_request(c)
    assert nm is not None
    creates = c.requests.total("create", "nodemaintenances")
    async with coordinating(c.agent, reboot_config, config) as second:
        await seen_by(c, second)
        await c.mark_drained(NAME)
        async with asyncio.timeout(10):
            await fake.reboot_called.wait()
        assert second.coordinator.actions == ["reboot"]
    assert c.requests.total("create", "nodemaintenances") == creates == 1
    (after,) = requests(c)
    assert after["metadata"]["uid"] == nm["metadata"]["uid"]


async def test_request_deleted_by_an_admin_is_asked_again_only_while_required(
    shutdown_cluster: ShutdownCluster,
    fake: FakeLogind,
    config: ShutdownConfig,
    reboot_config: RebootConfig,
) -> None:
    c = shutdown_cluster
    assert reboot_config.sentinel is not None
    reboot_config.sentinel.touch()
    async with coordinating(c.agent, reboot_config, config) as r:
        await c.until(lambda: live_request(c) is not None)
        first = live_request(c)
        assert first is not None
        await c.kube.delete(NODEMAINTENANCES, NAME)

        def asked_again() -> bool:
            nm = live_request(c)
            return nm is not None and nm["metadata"]["uid"] != first["metadata"]["uid"]

        await c.until(asked_again)
        await seen_by(c, r)
        assert not fake.reboot_calls, "a deleted request reboots nothing"
        reboot_config.sentinel.unlink()
        await c.until(lambda: not requests(c))
        await acted(r, "create", "create", "complete", "delete")
        assert not fake.reboot_calls


async def test_no_reboot_while_the_api_server_hangs(
    shutdown_cluster: ShutdownCluster,
    fake: FakeLogind,
    config: ShutdownConfig,
    reboot_config: RebootConfig,
    tmp_path: Path,
) -> None:
    """The agent's way to the API server hangs (connections cut, new ones held): the request
    drained meanwhile reboots nothing until the agent reads it again."""
    c = shutdown_cluster
    assert reboot_config.sentinel is not None
    reboot_config.sentinel.touch()
    async with proxy_to(c.account) as proxy:
        kubeconfig = proxy.kubeconfig(c.account, tmp_path / "agent-via-proxy.kubeconfig")
        client = c.backend.client(kubeconfig)
        async with coordinating(client, reboot_config, config) as r:
            await c.until(lambda: live_request(c) is not None)
            await seen_by(c, r)
            proxy.hold()
            accepted = proxy.accepted
            proxy.cut()
            # the coordinator's watch broke: it asks again, and that hangs
            await proxy.until(lambda: proxy.accepted > accepted)
            await c.mark_drained(NAME)
            await c.caught_up(NAME)
            assert not fake.reboot_calls
            assert not r.coordinator._drained_seen
            proxy.resume()
            async with asyncio.timeout(20):
                await fake.reboot_called.wait()


@pytest.mark.parametrize(
    "command",
    [
        ["/nonexistent/reboot-needed"],
        [sys.executable, "-c", "import time; time.sleep(60)"],
        ["sh", "-c", "exit 3"],
    ],
    ids=["missing", "hangs", "fails"],
)
async def test_a_broken_sentinel_command_requires_nothing(
    shutdown_cluster: ShutdownCluster,
    fake: FakeLogind,
    config: ShutdownConfig,
    reboot_config: RebootConfig,
    command: list[str],
) -> None:
    """A command that cannot run, hangs (killed after commandTimeout) or fails counts as not
    required: two runs of it ask for nothing, while the request file still works."""
    c = shutdown_cluster
    cfg = _with(reboot_config, sentinel_command=tuple(command))
    async with coordinating(c.agent, cfg, config) as r:
        triggers = r.coordinator.triggers
        await until(lambda: triggers.command_runs >= 2, timeout=10)
        assert not triggers.current().required
        assert not requests(c)
        cfg.request_file.parent.mkdir(parents=True, exist_ok=True)
        cfg.request_file.write_text("by hand\n")
        await c.until(lambda: live_request(c) is not None)


async def test_sentinel_command_exit_0_asks_and_exit_1_calls_off(
    shutdown_cluster: ShutdownCluster,
    fake: FakeLogind,
    config: ShutdownConfig,
    reboot_config: RebootConfig,
    tmp_path: Path,
) -> None:
    c = shutdown_cluster
    flag = tmp_path / "needs-reboot"
    flag.touch()
    cfg = _with(reboot_config, sentinel_command=("test", "-e", str(flag)))
    async with coordinating(c.agent, cfg, config) as r:
        await c.until(lambda: live_request(c) is not None)
        assert "sentinel command" in (live_request(c) or {})["spec"]["reason"]
        flag.unlink()
        await c.until(lambda: not requests(c))
        await acted(r, "create", "complete", "delete")


def _with(cfg: RebootConfig, **changes: Any) -> RebootConfig:
    return dataclasses.replace(cfg, **changes)


async def test_a_sentinel_from_before_the_boot_asks_nothing_until_written_again(
    shutdown_cluster: ShutdownCluster,
    fake: FakeLogind,
    config: ShutdownConfig,
    reboot_config: RebootConfig,
) -> None:
    """The reboot did not clear the sentinel (it is older than the boot): no request, no loop;
    written again, it asks."""
    c = shutdown_cluster
    sentinel = reboot_config.sentinel
    assert sentinel is not None
    sentinel.touch()
    old = time.time() - 7200
    os.utime(sentinel, (old, old))
    triggers = RebootTriggers(reboot_config, boot_started=time.time() - 3600)
    coordinator = RebootCoordinator(
        c.agent, "node-1", BOOT, reboot_config, config, triggers=triggers
    )
    task = asyncio.create_task(coordinator.run())
    try:
        async with asyncio.timeout(10):
            await triggers.ready.wait()
            await coordinator.request_read.wait()
        assert not triggers.current().required
        sentinel.write_text("again\n")
        await c.until(lambda: live_request(c) is not None)
    finally:
        await cancel_and_wait([task])


NEXT_BOOT = "9a8b7c6d-5e4f-3021-1a2b-3c4d5e6f7a8b"


async def test_after_the_boot_the_earlier_boots_request_is_completed_and_deleted(
    shutdown_cluster: ShutdownCluster,
) -> None:
    """The node rebooted for its drained request: once Ready, the next boot's agent completes
    and deletes it (with the earlier boot's shutdown maintenance, if any); its own boot's
    request is left alone."""
    c = shutdown_cluster
    earlier = model.shutdown_maintenance(
        "node-1", BOOT, "reboot", trigger=model.TRIGGER_REBOOT, reason="sentinel"
    )
    await c.agent.create(NODEMAINTENANCES, earlier)
    await c.mark_drained(NAME)
    await c.agent.create(NODEMAINTENANCES, model.shutdown_maintenance("node-1", BOOT, "reboot"))
    mine = model.shutdown_maintenance(
        "node-1", NEXT_BOOT, "reboot", trigger=model.TRIGGER_REBOOT, reason="sentinel again"
    )
    await c.agent.create(NODEMAINTENANCES, mine)
    patches: list[str] = []

    def seen(kind: str, _resource: object, obj: Obj) -> None:
        if kind != "DELETED" and obj["spec"].get("stage") == "Complete":
            patches.append(obj["metadata"]["name"])

    c.view.listen(seen)
    async with asyncio.timeout(20):
        await complete_previous_boots(c.agent, "node-1", NEXT_BOOT)
    await c.caught_up(mine["metadata"]["name"])
    assert [m["metadata"]["name"] for m in c.maintenances()] == [mine["metadata"]["name"]]
    assert NAME in patches, "completed before it was deleted"
