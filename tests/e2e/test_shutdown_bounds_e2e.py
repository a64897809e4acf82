"""The shutdown guard's bounds, end to end against real logind (the agent from the .deb in
systemd-nspawn): a crash does not let a reboot through, a hung API server does not hold it past
its bound, an agent started during a pending shutdown is not killed by its start timeout, and a
small delay limit still gets the node cordoned and its maintenance made.

The times each run measured are printed (pytest -s shows them); the closing note quotes them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from nodeagent.kube.resources import NODEMAINTENANCES, NODES, PODS, Resource
from nodeagent_testbed.nspawn import REBOOT_EXIT, Container
from tests.clusters import TestCluster
from tests.e2e.node import (
    Node,
    agent_settings,
    container,
    manifests,
    node,
    node_1_pods,
    running,
    schedule_on_node_1,
    static_pods,
    uncordon,
)

__all__ = ["agent_settings", "container", "manifests", "node", "static_pods"]  # fixtures

pytestmark = pytest.mark.e2e


def slow_pods(exit_seconds: int) -> str:
    """Six pods that take `exit_seconds` to stop once deleted (within their 30 s grace), no
    budget: the drain lasts that long whatever else happens. (With a budget, a client killed in
    the middle of an eviction can leave the pod in the budget's disruptedPods: kube-apiserver
    then refuses evictions for two minutes.)"""
    return f"""
apiVersion: apps/v1
kind: Deployment
metadata: {{name: slow, namespace: default}}
spec:
  replicas: 6
  selector: {{matchLabels: {{app: slow}}}}
  template:
    metadata:
      labels: {{app: slow}}
      annotations: {{sim.nodeagent.io/exit-seconds: "{exit_seconds}"}}
    spec: {{containers: [{{name: c, image: nginx}}]}}
"""


def released_at(c: Container) -> float:
    """When the agent closed its lock, on the host's monotonic clock (the container shares the
    kernel, so the journal's monotonic timestamps are the host's)."""
    out = subprocess.run(
        [
            "journalctl",
            f"--directory={c.path('/var/log/journal')}",
            "-u",
            "nodeagent",
            "-o",
            "json",
            "--no-pager",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for line in out.splitlines():
        entry = json.loads(line)
        if "released the delay inhibitor lock" in str(entry.get("MESSAGE", "")):
            return int(entry["__MONOTONIC_TIMESTAMP"]) / 1e6
    raise AssertionError("the agent's journal does not say when it released its lock")


def say(what: str, **figures: float) -> None:
    print(f"\n[e2e figures] {what}: " + ", ".join(f"{k}={v:.2f}s" for k, v in figures.items()))


def drained(nm: dict[str, Any]) -> bool:
    conds = (nm.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Drained" and c["status"] == "True" for c in conds)


class Timeline:
    """When node-1's pods began leaving and when the maintenance reported Drained."""

    def __init__(self, n: Node) -> None:
        self.leaving: dict[str, float] = {}
        self.drained_at: float | None = None
        self.cordoned_at: float | None = None
        n.view.listen(self._record)

    def _record(self, event: str, resource: Resource, obj: dict[str, Any]) -> None:
        now = time.monotonic()
        if resource == PODS and obj["spec"].get("nodeName") == "node-1":
            if event == "DELETED" or obj["metadata"].get("deletionTimestamp"):
                self.leaving.setdefault(obj["metadata"]["uid"], now)
        elif resource == NODEMAINTENANCES and self.drained_at is None and drained(obj):
            self.drained_at = now
        elif (
            resource == NODES
            and obj["metadata"]["name"] == "node-1"
            and obj["spec"].get("unschedulable")
            and self.cordoned_at is None
        ):
            self.cordoned_at = now


async def slow_pods_on_node_1(n: Node, exit_seconds: int) -> None:
    await schedule_on_node_1(n, slow_pods(exit_seconds))
    await n.view.until(lambda: sum(running(p) for p in node_1_pods(n)) == 6, timeout=60)
    await uncordon(n, "node-2", "node-3")


async def agent_pid(c: Container) -> int:
    return int((await c.exec("systemctl", "show", "-p", "MainPID", "--value", "nodeagent")).strip())


async def test_a_crash_mid_drain_does_not_let_the_reboot_through(node: Node) -> None:
    n, c = node, node.container
    await slow_pods_on_node_1(n, exit_seconds=10)
    timeline = Timeline(n)
    await c.boot()
    first = await agent_pid(c)
    await c.exec("systemctl", "reboot")
    t0 = time.monotonic()
    await n.view.until(lambda: len(timeline.leaving) >= 1, timeout=30)
    await c.exec("kill", "-KILL", str(first))
    killed = time.monotonic()
    assert await c.wait_exit(timeout=120) == REBOOT_EXIT
    rebooted = time.monotonic()
    assert timeline.drained_at is not None and timeline.drained_at <= rebooted, (
        "the reboot went on before the node was drained"
    )
    assert len(timeline.leaving) == 6, "every pod left before the reboot"
    say(
        "SIGKILL mid-drain",
        kill_after_reboot_cmd=killed - t0,
        drained_after_kill=timeline.drained_at - killed,
        reboot_after_drained=rebooted - timeline.drained_at,
    )


@pytest.mark.backends("real")
@pytest.mark.parametrize("agent_settings", [{"shutdown": {"apiUnreachableReleaseAfter": 10}}])
async def test_a_hung_api_server_releases_within_its_bound(
    node: Node, backend: TestCluster, tmp_path: Path
) -> None:
    n, c = node, node.container
    await slow_pods_on_node_1(n, exit_seconds=60)
    timeline = Timeline(n)
    await c.boot()
    await c.exec("systemctl", "reboot")
    t0 = time.monotonic()
    await n.view.until(lambda: len(timeline.leaving) == 6, timeout=30)
    state = json.loads((tmp_path / "controlplane" / "state.json").read_text())
    apiserver = state["pids"]["kube-apiserver"]
    os.kill(apiserver, signal.SIGSTOP)  # accepts connections, answers nothing
    stopped = time.monotonic()
    try:
        code = await c.wait_exit(timeout=60)
    finally:
        os.kill(apiserver, signal.SIGCONT)
    rebooted = time.monotonic()
    assert code == REBOOT_EXIT
    released = released_at(c)
    say(
        "SIGSTOP of kube-apiserver",
        released_after_stop=released - stopped,
        reboot_after_stop=rebooted - stopped,
        reboot_after_cmd=rebooted - t0,
    )
    assert released - stopped < 10 + 2, "held past apiUnreachableReleaseAfter + 2 s"
    assert rebooted - t0 < 120


async def test_started_during_a_pending_shutdown_it_is_ready_and_drains(node: Node) -> None:
    n, c = node, node.container
    await slow_pods_on_node_1(n, exit_seconds=10)
    await c.boot()
    await c.exec("systemctl", "stop", "nodeagent")
    # someone else's delay lock keeps the shutdown pending while the agent is down
    await c.exec(
        "systemd-run",
        "--unit=other-inhibitor",
        "systemd-inhibit",
        "--what=shutdown",
        "--mode=delay",
        "--who=test",
        "--why=keeps the shutdown pending",
        "sleep",
        "3600",
    )
    await c.exec(
        "/bin/sh",
        "-c",
        "until systemd-inhibit --list | grep -q test; do sleep 0.1; done",
        timeout=30,
    )
    await c.exec("systemctl", "reboot", "--no-block")
    t0 = time.monotonic()
    await c.exec("systemctl", "start", "nodeagent", timeout=30)
    started = time.monotonic() - t0
    status = await c.exec("systemctl", "show", "-p", "StatusText", "--value", "nodeagent")
    assert "shutdown under way" in status, status
    await n.view.until(
        lambda: any(m["spec"]["stage"] == "Drain" for m in n.view.list(NODEMAINTENANCES)),
        timeout=30,
    )
    say("start during a pending shutdown", systemctl_start=started)
    await c.exec("systemctl", "stop", "other-inhibitor")
    assert await c.wait_exit(timeout=120) == REBOOT_EXIT


async def test_a_five_second_delay_limit_still_cordons_and_makes_the_maintenance(
    node: Node,
) -> None:
    n, c = node, node.container
    await slow_pods_on_node_1(n, exit_seconds=60)
    timeline = Timeline(n)
    # an override that sorts after nodeagent's drop-in wins
    override = c.path("/etc/systemd/logind.conf.d/zzz-override.conf")
    override.parent.mkdir(parents=True, exist_ok=True)
    override.write_text("[Login]\nInhibitDelayMaxSec=5\n")
    await c.boot()
    await c.exec("systemctl", "reboot")
    t0 = time.monotonic()
    assert await c.wait_exit(timeout=60) == REBOOT_EXIT
    rebooted = time.monotonic()
    assert timeline.cordoned_at is not None and timeline.cordoned_at < rebooted
    assert any(m["spec"]["stage"] == "Drain" for m in n.view.list(NODEMAINTENANCES))
    say(
        "InhibitDelayMaxSec=5",
        cordoned_after_cmd=timeline.cordoned_at - t0,
        reboot_after_cmd=rebooted - t0,
    )
    assert timeline.drained_at is None, "the drain lasts 30 s: the limit let the reboot go"
    assert rebooted - t0 < 5 + 1
