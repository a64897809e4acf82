"""A whole simulated cluster: storage, API server, actors; served on 127.0.0.1."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import signal
from collections.abc import Coroutine, Mapping
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web

from nodeagent_testbed.sim import admission, lifecycle
from nodeagent_testbed.sim.actors import build_actors
from nodeagent_testbed.sim.actors.kubelet import Kubelet, KubeletRouter
from nodeagent_testbed.sim.faults import Faults, Stats
from nodeagent_testbed.sim.server import DEFAULT_BOOKMARK_INTERVAL, ApiServer
from nodeagent_testbed.sim.store import HISTORY_MAX, Store

log = logging.getLogger(__name__)


class SimCluster:
    """Start with `async with SimCluster(nodes=3) as sim:`; `sim.url` and `sim.kubeconfig`."""

    def __init__(
        self,
        nodes: int = 3,
        static_pod_dirs: Mapping[str, Path] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        kubeconfig: Path | None = None,
        bookmark_interval: float = DEFAULT_BOOKMARK_INTERVAL,
        history_size: int = HISTORY_MAX,
        lifecycle_api: bool = False,
    ) -> None:
        """`lifecycle_api`: serve `lifecycle.k8s.io/v1alpha1` (KEP-4563), as kube-apiserver
        v1.37 does with the alpha gate EvictionRequestAPI on; by default not, as a v1.37
        cluster with its default gates (the sim then exercises our CRD's path, the real
        control plane, which turns the gate on, the upstream one)."""
        self.store = Store(history_size=history_size)
        admission.install(self.store)
        if not lifecycle_api:
            for rt in lifecycle.TYPES:
                self.store.unregister_group_plural(rt.group, rt.plural)
        self.faults = Faults()
        self.stats = Stats()
        self.server = ApiServer(self.store, self.faults, self.stats, bookmark_interval)
        self.node_names = [f"node-{i}" for i in range(1, nodes + 1)]
        dirs = dict(static_pod_dirs or {})
        unknown = set(dirs) - set(self.node_names)
        if unknown:
            raise ValueError(f"--static-pod-dir names unknown nodes: {', '.join(sorted(unknown))}")
        self.router = KubeletRouter(self.store)
        self.kubelets = {
            n: Kubelet(self.store, n, dirs.get(n), self.router) for n in self.node_names
        }
        self.actors = build_actors(self.store)
        self.host, self.port = host, port
        self.kubeconfig = kubeconfig
        self._runner: web.AppRunner | None = None
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def start(self) -> None:
        self._runner = web.AppRunner(self.server.app(), handler_cancellation=True, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, reuse_address=True)
        await site.start()
        self.port = int(self._runner.addresses[0][1])
        for actor in self.actors:
            self._spawn(actor.run())
        for kubelet in self.kubelets.values():
            await kubelet.ensure_node()  # nodes exist once start() returns
            self._spawn(kubelet.run())
        if self.kubeconfig is not None:
            write_kubeconfig(self.kubeconfig, self.url)
        log.info("simulated cluster serving on %s with nodes %s", self.url, self.node_names)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coro)
        task.add_done_callback(_report_crash)
        self._tasks.append(task)

    async def stop(self) -> None:
        self.store.drop_watches()
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t
        self._tasks.clear()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def install_crds(self) -> None:
        """nodeagent's CRDs, as `kubectl apply -f <(nodeagent manifests crds)` would."""
        from nodeagent.manifests import crd_documents

        crds = self.store.resource("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        for doc in crd_documents():
            self.store.create(crds, None, copy.deepcopy(doc))

    async def __aenter__(self) -> SimCluster:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


def _report_crash(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("simulated actor crashed", exc_info=task.exception())


def kubeconfig_dict(url: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "nodeagent-sim", "cluster": {"server": url}}],
        "users": [{"name": "nodeagent-sim", "user": {"token": "nodeagent-sim"}}],
        "contexts": [
            {
                "name": "nodeagent-sim",
                "context": {
                    "cluster": "nodeagent-sim",
                    "user": "nodeagent-sim",
                    "namespace": "default",
                },
            }
        ],
        "current-context": "nodeagent-sim",
        "preferences": {},
    }


def write_kubeconfig(path: Path, url: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(yaml.safe_dump(kubeconfig_dict(url), sort_keys=False))
    tmp.chmod(0o600)
    tmp.replace(path)


async def serve(cluster: SimCluster, *, crds: bool = True) -> None:
    """Serve until SIGINT or SIGTERM (`crds`: with nodeagent's CRDs installed)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await cluster.start()
    if crds:
        cluster.install_crds()
    # one line on stdout that scripts and tests can wait for
    print(f"serving {cluster.url} kubeconfig={cluster.kubeconfig}", flush=True)
    try:
        await stop.wait()
    finally:
        await cluster.stop()
