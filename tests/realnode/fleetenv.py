"""Three real nodes on one real control plane, for the fleet tests (tests/realnode/test_fleet.py)
and the fleet figure (tests/bench/fleet.py): node-1..3 each a real kubelet with containerd in a
systemd-nspawn container of its own network and cgroups (nodeagent_testbed.realnode.fleet), the
quorum workload (tests/realnode/quorum.py) one member a node, a static pod on each node, and, if
asked, nodeagent from the Debian package on each node running both parts: the controllers' leader
is one of the three nodes and moves as they reboot."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nodeagent.kube.client import KubeClient
from nodeagent.kube.resources import EVICTIONS, NODEMAINTENANCES, NODES, PODS
from nodeagent_testbed.controlplane.build import Binaries
from nodeagent_testbed.controlplane.cluster import ControlPlane, etcd_prefix
from nodeagent_testbed.realnode.fleet import HOST, FleetNode, fleet
from nodeagent_testbed.realnode.node import MANIFEST_DIR, NO_GNS
from tests.clusters import CONTROLLERS_ACCOUNT, ClusterView, RealBackend
from tests.e2e.node import KINDS, configure_agent, kind_of, running
from tests.realnode import quorum
from tests.realnode.workloads import serve_exiting_after, static_pod

NAMES = ("node-1", "node-2", "node-3")
# one static pod on every node, stopping 3 s after SIGTERM: the drain's last step takes that long
STATIC = static_pod("node-local", serve_exiting_after(3))
STATIC_FILE = "node-local.yaml"


@dataclass
class Fleet:
    backend: RealBackend
    plane: ControlPlane
    nodes: list[FleetNode]
    kube: KubeClient
    view: ClusterView

    @property
    def endpoints(self) -> list[str]:
        return [f"http://{n.address}:{quorum.CLIENT_PORT}" for n in self.nodes]

    def node(self, name: str) -> FleetNode:
        return next(n for n in self.nodes if n.name == name)

    def pods_on(self, node: str) -> list[dict[str, Any]]:
        return [p for p in self.view.list(PODS) if p["spec"].get("nodeName") == node]

    def quorum_ready(self) -> int:
        """Members Running, Ready and not terminating."""
        return sum(
            1
            for p in self.view.list(PODS)
            if (p["metadata"].get("labels") or {}).get("app") == quorum.APP
            and running(p)
            and any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in (p.get("status") or {}).get("conditions") or []
            )
        )

    def static_running(self, node: str) -> bool:
        return any(kind_of(p) == "static" and running(p) for p in self.pods_on(node))

    def settled(self) -> bool:
        """Every node Ready and schedulable, every member Ready, every static pod running."""
        for name in NAMES:
            node = self.view.get(NODES, name) or {}
            conditions = (node.get("status") or {}).get("conditions") or []
            if (node.get("spec") or {}).get("unschedulable") or not any(
                c["type"] == "Ready" and c["status"] == "True" for c in conditions
            ):
                return False
            if not self.static_running(name):
                return False
        return self.quorum_ready() == len(NAMES)


@contextlib.asynccontextmanager
async def real_fleet(
    where: Path,
    binaries: Binaries,
    etcd_url: str | None,
    deb: Path | None,
    settings: Mapping[str, Any] | None = None,
    gns: tuple[int, int] = NO_GNS,
) -> AsyncIterator[Fleet]:
    """The three nodes booted and settled with the quorum workload running; with `deb`, the
    agent on each (the controllers' account with the node role, `settings` over
    tests.e2e.node.configure_agent's defaults). The kubelets' Graceful Node Shutdown periods
    `gns` ((0, 0): off, as nodeagent wants it). `etcd_url`: the control plane's etcd (None:
    one of its own)."""
    plane = ControlPlane(where / "controlplane")
    await asyncio.to_thread(
        plane.up, 3, binaries, etcd_url, etcd_prefix(), False, frozenset(NAMES), (), HOST
    )
    backend = RealBackend(plane.kubeconfig, list(NAMES), plane.dir / "pki")
    try:
        await backend.install_crds()
        server = plane.server_at(HOST)
        async with fleet(where / "nodes", NAMES, server, backend.pki_dir, gns) as nodes:
            for n in nodes:
                manifests = n.container.path(MANIFEST_DIR)
                (manifests / STATIC_FILE).write_bytes(STATIC)
                if deb is not None:
                    await asyncio.to_thread(
                        n.container.run_offline,
                        "dpkg",
                        "-i",
                        f"/pkg/{deb.name}",
                        binds=(f"{deb.parent}:/pkg",),
                    )
            await asyncio.gather(*(n.start() for n in nodes))
            kube = backend.client()
            view = ClusterView(kube, [NODES, PODS, NODEMAINTENANCES, EVICTIONS])
            await view.start()
            f = Fleet(backend, plane, nodes, kube, view)
            try:
                await view.until(lambda: all(f.static_running(x) for x in NAMES), timeout=180)
                if deb is not None:
                    account = await backend.service_account(
                        CONTROLLERS_ACCOUNT, also_roles=["nodeagent-node"]
                    )
                    for n in nodes:
                        await asyncio.to_thread(
                            configure_agent, n.container, account, settings, n.name, server
                        )
                    await asyncio.gather(
                        *(n.container.exec("systemctl", "restart", "nodeagent") for n in nodes)
                    )
                for doc in [*quorum.members([(n.name, n.address) for n in nodes]), quorum.BUDGET]:
                    await kube.create(KINDS[doc["kind"]], doc)
                await view.until(f.settled, timeout=180)
                yield f
            finally:
                await view.stop()
    finally:
        await backend.close_clients()
        await asyncio.to_thread(plane.down)
