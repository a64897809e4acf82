"""Several real nodes on one control plane: each a real kubelet with containerd in a
systemd-nspawn container of its own (realnode.node), in a network namespace of its own on a host
bridge and a cgroup subtree of its own, so kubelets, host-network pods and pod addresses do not
collide (what worked, and the traps, are measured in shared/notes/multi-node.md).

The host is 10.77.0.1 on the bridge, node i (from 1) 10.77.0.(10+i) with pods in 10.244.i.0/24,
routed through it by the host and the other nodes. kube-apiserver must serve at the host's bridge
address (ControlPlane.up(address=HOST)): a node cannot reach the host's loopback.

A node that reboots (`systemctl reboot`, logind's Reboot) is booted again at once, as a machine's
firmware would, from the same root file system: its containerd images, hostPath data and static
pod manifests outlive the reboot. Each boot and each exit is recorded with its time.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from nodeagent_testbed.controlplane.build import ensure_built
from nodeagent_testbed.nspawn import REBOOT_EXIT, Container, node_rootfs, remove_cgroups
from nodeagent_testbed.realnode import images
from nodeagent_testbed.realnode.node import (
    NO_GNS,
    NSPAWN_ARGS,
    NodeNetwork,
    NodeSpec,
    one_node_at_a_time,
    prepare,
    prepare_host,
    sweep,
)

BRIDGE = "nafleet0"  # ours alone: teardown deletes it
HOST = "10.77.0.1"


def address(index: int) -> str:
    return f"10.77.0.{10 + index}"


def pod_subnet(index: int) -> str:
    return f"10.244.{index}.0/24"


def networks(count: int) -> list[NodeNetwork]:
    """Each node's place on the bridge: every other node's pods routed through that node."""
    everyone = range(1, count + 1)
    return [
        NodeNetwork(
            address(i),
            HOST,
            pod_subnet(i),
            tuple((pod_subnet(j), address(j)) for j in everyone if j != i),
        )
        for i in everyone
    ]


def _ip(*args: str, check: bool = True) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")


def bridge_up(count: int) -> None:
    """The bridge with the host's address, and a route to each node's pods through it."""
    bridge_down()
    _ip("link", "add", BRIDGE, "type", "bridge")
    _ip("addr", "add", f"{HOST}/24", "dev", BRIDGE)
    _ip("link", "set", BRIDGE, "up")
    for i in range(1, count + 1):
        _ip("route", "add", pod_subnet(i), "via", address(i), "dev", BRIDGE, "onlink")


def bridge_down() -> None:
    """The bridge gone, and the routes through it with it (nspawn's veths die with each node)."""
    if Path(f"/sys/class/net/{BRIDGE}").exists():
        _ip("link", "delete", BRIDGE)


@dataclass
class FleetNode:
    """One real node of the fleet: its container, booted again whenever it reboots."""

    name: str
    container: Container
    network: NodeNetwork
    boots: list[float] = field(default_factory=list)  # time.monotonic() once each boot is up
    exits: list[tuple[float, int]] = field(default_factory=list)  # (when, nspawn's status)
    # told of each exit as it is seen, before the node boots again (a measure's snapshot)
    on_exit: Callable[[FleetNode, int], None] | None = None
    _keeper: asyncio.Task[None] | None = None
    _stopping: bool = False

    @property
    def address(self) -> str:
        return self.network.address

    def reboots(self) -> int:
        return sum(1 for _, rc in self.exits if rc == REBOOT_EXIT)

    async def start(self) -> None:
        """Boot the node, and keep booting it again after each reboot until `stop`."""
        await self._boot()
        self._keeper = asyncio.create_task(self._keep_running(), name=f"keep {self.name}")

    async def _boot(self) -> None:
        await self.container.boot()
        self.boots.append(time.monotonic())

    async def _keep_running(self) -> None:
        while not self._stopping:
            proc = self.container.proc
            assert proc is not None
            rc = await proc.wait()
            self.exits.append((time.monotonic(), rc))
            if self.on_exit is not None:
                self.on_exit(self, rc)
            self.container.proc = self.container.pid = None
            if self._stopping or rc != REBOOT_EXIT:
                return  # powered off, or crashed: a test reads `exits`
            await self._boot()

    async def stop(self) -> None:
        self._stopping = True
        if self._keeper is not None:  # first, so that it boots nothing more
            self._keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._keeper
        await self.container.stop()


def _cgroup(name: str) -> str:
    return f"nodeagent-{name}"


@contextlib.asynccontextmanager
async def fleet(
    where: Path,
    names: Sequence[str],
    server: str,
    pki_dir: Path,
    gns: tuple[int, int] = NO_GNS,
) -> AsyncIterator[list[FleetNode]]:
    """The real nodes `names` in `where`, prepared but not booted, joining the API server at
    `server` (its URL at HOST) with node certificates of the CA in `pki_dir`. Holds the host's
    real-node lock from before the first container exists until after the last is swept; a
    leftover on the host is an AssertionError."""
    lock = await asyncio.to_thread(one_node_at_a_time)
    nodes: list[FleetNode] = []
    try:
        base = await asyncio.to_thread(node_rootfs)
        archives = [
            a
            for a in await asyncio.to_thread(images.ensure_images)
            if not a.name.startswith("nodeagent-")
        ]
        kubelet = ensure_built(log=False).path("kubelet")
        await asyncio.to_thread(prepare_host)
        await asyncio.to_thread(bridge_up, len(names))

        async def make(name: str, network: NodeNetwork) -> FleetNode:
            home = where / name
            home.mkdir(parents=True, exist_ok=True)
            c = await asyncio.to_thread(Container.copy_of_base, home, f"na-{name}", base)
            c.nspawn_args = (*NSPAWN_ARGS, f"--network-bridge={BRIDGE}")
            c.cgroup = _cgroup(name)
            spec = NodeSpec(name, server, pki_dir, kubelet, gns, network)
            await asyncio.to_thread(prepare, c.rootfs, spec, archives)
            c.path("/var/log/journal").mkdir(parents=True, exist_ok=True)
            return FleetNode(name, c, network)

        nodes = list(
            await asyncio.gather(
                *(make(n, net) for n, net in zip(names, networks(len(names)), strict=True))
            )
        )
    except BaseException:
        await _teardown(nodes, names)
        lock.close()
        raise
    try:
        yield nodes
    finally:
        left = await _teardown(nodes, names)
        lock.close()
        if left:
            raise AssertionError(f"the real nodes left behind: {left}")


async def _teardown(nodes: Sequence[FleetNode], names: Sequence[str]) -> list[str]:
    await asyncio.gather(*(n.stop() for n in nodes), return_exceptions=True)
    left: list[str] = []
    for name in names:
        left += await asyncio.to_thread(remove_cgroups, _cgroup(name))
    await asyncio.to_thread(bridge_down)
    left += await asyncio.to_thread(sweep)
    return left
