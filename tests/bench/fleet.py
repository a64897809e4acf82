"""The fleet figure: three real nodes (tests/realnode/fleetenv.py: real kubelets with containerd
in systemd-nspawn, each with its own network and cgroups) running a three-member etcd under
`maxUnavailable: 1`, one member a node, and a static pod on each, all rebooted at once under
each of four set-ups, side by side in one run, each on a fresh control plane and fresh nodes:

- **nodeagent** (coordinated): the agent from the .deb on every node (both parts, so the
  controllers' leader is one of the three), `reboot.enabled`, `maxDrainingNodes: 1`, a
  podsReady gate on etcd; Debian's reboot-required sentinel written on the three at once;
- **nodeagent_reactive**: the same agents without `reboot`, a 60 s shutdown budget (the test's
  scale of the default 600 s), `systemctl reboot` on the three at once;
- **kubelet_gns**: no nodeagent; the kubelets' Graceful Node Shutdown 30 s / 10 s;
  `systemctl reboot` on the three at once;
- **kured_style**: no nodeagent, kured's way scripted (its lock is the script's one loop): for
  each node in turn `kubectl drain --ignore-daemonsets --delete-emptydir-data`, `systemctl
  reboot`, wait for the node to be back Ready, `kubectl uncordon`.

Per set-up, from one watch stamped as it arrives and a client writing to etcd throughout
(tests/realnode/quorum.py): `quorum_lost_s` (seconds etcd acknowledged no write beyond a leader
change's 1 s), `acknowledged_writes_lost` (acknowledged writes not read back at the end),
`undrained_reboots` (nodes that went down with pods still bound to them, neither evicted nor
deleted: running, static pods included since `kubectl drain` leaves mirror pods alone and their
containers die with the node, or terminated by the kubelet's GNS, which deletes none),
`undrained_pods` (those pods), `budget_violations` (times more etcd members were unavailable at
once than the budget allows), `most_members_unavailable`, and `seconds` from the trigger until
every node rebooted once and the fleet settled (every node Ready and schedulable, every member
Ready, every static pod running).
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from nodeagent.kube.resources import NODES, PODS, Resource
from nodeagent_testbed.controlplane.build import Binaries
from nodeagent_testbed.realnode.fleet import FleetNode
from nodeagent_testbed.realnode.node import NO_GNS
from tests.bench.gns import build_deb
from tests.e2e.node import kind_of
from tests.realnode import quorum
from tests.realnode.fleetenv import NAMES, Fleet, real_fleet

GATE = {"namespace": "default", "selector": {"matchLabels": {"app": quorum.APP}}}
COORDINATED: dict[str, Any] = {
    "shutdown": {"budget": 120, "safetyMargin": 5},
    "reboot": {"enabled": True},
    "nodeMaintenance": {"maxDrainingNodes": 1, "gates": {"podsReady": [GATE]}},
}
REACTIVE: dict[str, Any] = {
    "shutdown": {"budget": 60, "safetyMargin": 5},
    "nodeMaintenance": {"maxDrainingNodes": 1},
}
GNS = (30, 10)
ALLOWED_UNAVAILABLE = 1  # quorum.BUDGET


class Measure:
    """What the watch and the nodes' exits tell, stamped as they arrive."""

    def __init__(self, f: Fleet) -> None:
        self.f = f
        self.undrained: dict[str, list[str]] = {}  # node -> its pods running at its exit
        self.most_unavailable = 0
        self.violations = 0
        self._over = False

    def on_exit(self, node: FleetNode, rc: int) -> None:
        # still bound to the node, neither evicted nor deleted: running, or terminated by the
        # kubelet's GNS (which deletes none)
        left = [
            f"{kind_of(p)}:{p['metadata']['name']}"
            for p in self.f.pods_on(node.name)
            if not p["metadata"].get("deletionTimestamp")
        ]
        if left:
            self.undrained.setdefault(node.name, []).extend(left)

    def record(self, event: str, resource: Resource, new: dict[str, Any]) -> None:
        if resource != PODS:
            return
        unavailable = len(NAMES) - self.f.quorum_ready()
        self.most_unavailable = max(self.most_unavailable, unavailable)
        over = unavailable > ALLOWED_UNAVAILABLE
        if over and not self._over:
            self.violations += 1
        self._over = over


async def kured_style(f: Fleet, kubectl: str) -> None:
    """kured's loop, one node at a time: drain, reboot, back Ready, uncordon."""
    for n in f.nodes:
        await _kured_one(f, n, kubectl)


async def _kured_one(f: Fleet, n: FleetNode, kubectl: str) -> None:
    drain = await asyncio.create_subprocess_exec(
        kubectl,
        f"--kubeconfig={f.plane.kubeconfig}",
        "drain",
        n.name,
        "--ignore-daemonsets",
        "--delete-emptydir-data",
        "--timeout=600s",
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    if await drain.wait() != 0:
        raise RuntimeError(f"kubectl drain {n.name} failed")
    boots, before = len(n.boots), heartbeat(f, n)
    await n.container.exec("systemctl", "reboot")
    # back: booted again, and its kubelet's first status since (a kubelet reports its
    # status when it starts, then only on a change or every 5 minutes)
    await f.view.until(lambda: len(n.boots) > boots and heartbeat(f, n) != before, timeout=300)
    await f.kube.patch(NODES, n.name, {"spec": {"unschedulable": None}})


def heartbeat(f: Fleet, n: FleetNode) -> str | None:
    """The Ready condition's lastHeartbeatTime the node's kubelet last reported."""
    node = f.view.get(NODES, n.name) or {}
    for c in (node.get("status") or {}).get("conditions") or []:
        if c["type"] == "Ready":
            return str(c.get("lastHeartbeatTime"))
    return None


async def everyone(f: Fleet, *cmd: str) -> None:
    await asyncio.gather(*(n.container.exec(*cmd) for n in f.nodes))


async def one_setup(
    where: Path,
    binaries: Binaries,
    deb: Path | None,
    settings: dict[str, Any] | None,
    gns: tuple[int, int],
    trigger: Callable[[Fleet], Awaitable[None]],
) -> dict[str, Any]:
    async with real_fleet(where, binaries, None, deb, settings, gns) as f:
        m = Measure(f)
        f.view.listen(m.record)
        for n in f.nodes:
            n.on_exit = m.on_exit
        async with quorum.writing(f.endpoints) as writer:
            started = time.monotonic()
            await trigger(f)
            await f.view.until(lambda: all(n.reboots() >= 1 for n in f.nodes), timeout=900)
            await f.view.until(f.settled, timeout=300)
            ended = time.monotonic()
        read = await quorum.read_back(f.endpoints)
        return {
            "seconds": round(ended - started, 1),
            "quorum_lost_s": round(writer.quorum_lost_s(ended), 1),
            "longest_write_gap_s": round(writer.longest_gap(ended), 2),
            "acknowledged_writes": len(writer.acknowledged),
            "acknowledged_writes_lost": len(set(writer.acknowledged) - read),
            "undrained_reboots": len(m.undrained),
            "undrained_pods": m.undrained,
            "budget_violations": m.violations,
            "most_members_unavailable": m.most_unavailable,
            "reboots": {n.name: n.reboots() for n in f.nodes},
            "down_at_s": {n.name: [round(t - started, 1) for t, _ in n.exits] for n in f.nodes},
        }


async def run(workdir: Path, binaries: Binaries) -> dict[str, Any]:
    deb = await asyncio.to_thread(build_deb, workdir / "deb")
    kubectl = shutil.which("kubectl", path=str(Path(sys.executable).parent)) or "kubectl"

    async def sentinel(f: Fleet) -> None:
        await everyone(f, "touch", "/var/run/reboot-required")

    async def reboot(f: Fleet) -> None:
        await everyone(f, "systemctl", "reboot")

    async def kured(f: Fleet) -> None:
        await kured_style(f, kubectl)

    setups = {
        "nodeagent": (deb, COORDINATED, NO_GNS, sentinel),
        "nodeagent_reactive": (deb, REACTIVE, NO_GNS, reboot),
        "kubelet_gns": (None, None, GNS, reboot),
        "kured_style": (None, None, NO_GNS, kured),
    }
    out: dict[str, Any] = {"setups": {}}
    for name, (package, settings, gns, trigger) in setups.items():
        print(f"[bench] fleet: {name} ...", file=sys.stderr, flush=True)
        try:
            out["setups"][name] = await one_setup(
                workdir / name, binaries, package, settings, gns, trigger
            )
        except Exception as e:  # reported: the other set-ups stand
            out["setups"][name] = {"error": f"{type(e).__name__}: {e}"[:2000]}
    s = out["setups"]
    if "error" not in s["nodeagent"] and "error" not in s["kured_style"]:
        out["ratios"] = {
            "nodeagent_vs_kured_style_seconds": round(
                s["nodeagent"]["seconds"] / s["kured_style"]["seconds"], 2
            )
        }
    out["kubelet_gns_seconds"] = list(GNS)
    return out
