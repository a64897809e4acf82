"""The two API servers the benchmarks run on, behind one face.

`sim`: nodeagent's simulated cluster (`nodeagent_testbed.sim`), served over HTTP from this process.
`real`: kube-apiserver, kube-controller-manager, kube-scheduler, etcd and kwok built from upstream
(nodeagent_testbed.controlplane), a fresh control plane per measurement, with its audit log on.

What the figures measure is read the same way on both: timestamps from a watch
(`tests.clusters.ClusterView.listen`, the harness is a client like any other), and requests per
client by User-Agent within the measured window, which the simulated API server counts itself
and kube-apiserver writes to its audit log. The harness's own requests carry the User-Agent
`nodeagent-bench`, so they are never counted as the agent's (`nodeagent`) nor as kubectl's.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from nodeagent.kube.client import KubeClient
from nodeagent.kube.connection import load_api_client
from nodeagent.kube.errors import AlreadyExists, TooManyRequests, Unreachable
from nodeagent.kube.resources import (
    CRDS,
    EVICTIONREQUESTS,
    NODEMAINTENANCES,
    NODES,
    PODS,
    Obj,
    Resource,
)
from nodeagent.manifests import crd_documents
from nodeagent_testbed.controlplane.build import Binaries
from nodeagent_testbed.controlplane.cluster import ControlPlane
from nodeagent_testbed.controlplane.nodes import node_body
from nodeagent_testbed.sim.cluster import SimCluster
from tests.bench.common import AGENT
from tests.clusters import CONTROLLERS_ACCOUNT, ClusterView, RealBackend
from tests.clusters import NAMESPACE as AGENT_NAMESPACE

BACKENDS = ("sim", "real")
KUBECTL = "kubectl"
HARNESS = "nodeagent-bench"  # the harness's own requests
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
LEADER_LEASE = "nodeagent-controllers"  # in AGENT_NAMESPACE, as packaging/kubernetes has it


def harness_client(kubeconfig: Path, workers: int = 16) -> KubeClient:
    """A client whose requests are told apart from the agent's (same library) by User-Agent."""
    api = load_api_client(str(kubeconfig), connection_pool_maxsize=workers + 8)
    api.user_agent = f"{HARNESS}/1"
    return KubeClient(api, max_workers=workers)


def condition_true(obj: Obj | None, type_: str) -> bool:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == type_ and c.get("status") == "True":
            return True
    return False


# --- the audit log ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Request:
    agent: str  # the User-Agent's first word
    verb: str  # as the simulated API server counts: get list watch create update patch delete
    resource: str  # ... deletecollection, evict (create pods/eviction); discovery, nonresource
    code: int | None
    at: float  # requestReceivedTimestamp, seconds since the epoch


def _timestamp(value: str) -> float:
    return datetime.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def classify(event: dict[str, Any]) -> tuple[str, str]:
    """(verb, resource) of an audit event, named as the simulated API server names them."""
    verb = str(event.get("verb") or "get")
    ref = event.get("objectRef")
    if not ref:
        uri = str(event.get("requestURI") or "")
        return ("get", "discovery" if uri.startswith(("/api", "/apis")) else "nonresource")
    resource = str(ref.get("resource") or "")
    if verb == "create" and ref.get("subresource") == "eviction":
        return ("evict", resource)
    return (verb, resource)


class AuditLog:
    """kube-apiserver's audit log (JSON lines, one per request stage), read as it grows: every
    request (auditID) once, at its first stage, for the clients of interest only. Rotated files
    (lumberjack renames audit.log to audit-<time>.log) are followed by inode."""

    CHUNK = 64 * 2**20

    def __init__(self, path: Path, agents: Iterable[str]) -> None:
        self.path = path
        self.agents = tuple(agents)
        self._needles = [f'"userAgent":"{a}'.encode() for a in self.agents]
        self._read: dict[int, int] = {}  # inode -> bytes consumed
        self._seen: set[str] = set()
        self.requests: list[Request] = []

    def _files(self) -> list[Path]:
        stem, suffix = self.path.stem, self.path.suffix
        rotated = sorted(self.path.parent.glob(f"{stem}-*{suffix}"))
        return [*rotated, self.path] if self.path.exists() else rotated

    def read(self) -> None:
        for f in self._files():
            try:
                st = f.stat()
            except FileNotFoundError:
                continue
            pos = self._read.get(st.st_ino, 0)
            if st.st_size <= pos:
                continue
            with f.open("rb") as fh:
                fh.seek(pos)
                while True:
                    data = fh.read(self.CHUNK)
                    end = data.rfind(b"\n") + 1  # whole lines only
                    if end == 0:
                        break
                    fh.seek(pos + end)
                    pos += end
                    self._parse(data[:end])
            self._read[st.st_ino] = pos

    def _parse(self, data: bytes) -> None:
        for line in data.splitlines():
            if not any(n in line for n in self._needles):
                continue
            event = json.loads(line)
            audit_id = event.get("auditID")
            if audit_id in self._seen:
                continue
            self._seen.add(audit_id)
            agent = str(event.get("userAgent") or "unknown").split("/")[0]
            verb, resource = classify(event)
            code = (event.get("responseStatus") or {}).get("code")
            at = event.get("requestReceivedTimestamp") or event.get("stageTimestamp")
            self.requests.append(Request(agent, verb, resource, code, _timestamp(at)))


# --- the backends -------------------------------------------------------------------------------


@dataclass
class Mark:
    """The start of a measured window."""

    wall: float
    requests: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    responses: Counter[tuple[str, str, int]] = field(default_factory=Counter)


def _summary(by: Counter[str], refused: int, duplicates: int) -> dict[str, Any]:
    return {
        "total": sum(by.values()),
        "by": dict(sorted(by.items(), key=lambda kv: -kv[1])),
        "evictions_refused": refused,
        "duplicate_creates": duplicates,
    }


class Backend:
    """A cluster the harness measures on: admin kubeconfig, node names, the harness's client, and
    per-client request counts."""

    kind: str
    kubeconfig: Path
    node_names: list[str]
    kube: KubeClient
    progress: dict[str, Any]  # how far the set-up got (reported if it fails)
    server_cores: int
    """Cores the server processes can use at once: what their CPU time is divided by for the
    least time their work can take."""

    async def agent_kubeconfig(self) -> Path:
        """What `nodeagent run` authenticates with."""
        raise NotImplementedError

    def mark(self) -> Mark:
        raise NotImplementedError

    async def requests_since(self, mark: Mark, agent: str) -> dict[str, Any]:
        """Requests of `agent` (User-Agent's first word) from `mark` to now: total, by
        'verb resource', and evictions refused with 429."""
        raise NotImplementedError

    async def watches_opened(self, agent: str) -> set[str]:
        """The resources `agent` has opened a watch on so far (an informer's watch opens once
        its list is in: all of them open means synced)."""
        raise NotImplementedError

    def server_processes(self) -> dict[str, psutil.Process]:
        """The processes serving the cluster, for their CPU time and memory."""
        raise NotImplementedError

    async def create_pods(self, bodies: list[Obj]) -> None:
        """Create many pods (set-up, not measured)."""
        raise NotImplementedError

    async def wait_pods_running(self, total: int, timeout: float) -> None:
        """Until `total` pods are Running (set-up, not measured)."""
        raise NotImplementedError

    # --- the same on both ------------------------------------------------------------------

    def view(self, resources: Iterable[Resource]) -> ClusterView:
        return ClusterView(self.kube, resources)

    async def install_crds(self) -> None:
        for crd in crd_documents():
            with contextlib.suppress(AlreadyExists):
                await self.kube.create(CRDS, crd)
        names = {c["metadata"]["name"] for c in crd_documents()}
        view = self.view([CRDS])
        await view.start()
        try:
            await view.until(
                lambda: all(condition_true(view.get(CRDS, n), "Established") for n in names),
                timeout=60,
            )
        finally:
            await view.stop()
        for resource in (NODEMAINTENANCES, EVICTIONREQUESTS):
            await self._until_watchable(resource)
        with contextlib.suppress(AlreadyExists):
            await self.kube.create(NAMESPACES, {"metadata": {"name": AGENT_NAMESPACE}})

    async def _until_watchable(self, resource: Resource, timeout: float = 60) -> None:
        """kube-apiserver answers a watch of a new CRD's resource with 429 while its watch
        cache initializes: wait for that here rather than in every view."""
        async with asyncio.timeout(timeout):
            while True:
                try:
                    events = self.kube.watch(resource, timeout_seconds=1, allow_bookmarks=False)
                    async with contextlib.aclosing(events):
                        async for _ in events:
                            break
                    return
                except (TooManyRequests, Unreachable):
                    await asyncio.sleep(0.1)

    async def create_all(self, create: Iterable[Any], concurrency: int = 32) -> None:
        """Await the coroutines `create`, `concurrency` at a time."""
        sem = asyncio.Semaphore(concurrency)

        async def one(coro: Any) -> None:
            async with sem:
                await coro

        async with asyncio.TaskGroup() as tg:
            for coro in create:
                await sem.acquire()  # do not make 150,000 tasks at once
                sem.release()
                tg.create_task(one(coro))


class SimBench(Backend):
    kind = "sim"
    server_cores = 1  # one Python process, one interpreter lock

    def __init__(self, sim: SimCluster, progress: dict[str, Any]) -> None:
        assert sim.kubeconfig is not None
        self.progress = progress
        self.sim = sim
        self.kubeconfig = sim.kubeconfig
        self.node_names = list(sim.node_names)
        self.kube = harness_client(sim.kubeconfig)

    async def agent_kubeconfig(self) -> Path:
        return self.kubeconfig  # no authentication on the simulated server

    def mark(self) -> Mark:
        return Mark(
            time.time(), Counter(self.sim.stats.requests), Counter(self.sim.stats.responses)
        )

    async def requests_since(self, mark: Mark, agent: str) -> dict[str, Any]:
        by: Counter[str] = Counter()
        for (a, verb, resource), n in self.sim.stats.requests.items():
            d = n - mark.requests.get((a, verb, resource), 0)
            if a == agent and d:
                by[f"{verb} {resource}"] += d

        def since(key: tuple[str, str, int]) -> int:
            return self.sim.stats.responses.get(key, 0) - mark.responses.get(key, 0)

        return _summary(
            by, since(("evict", "pods", 429)), since(("create", "evictionrequests", 409))
        )

    async def watches_opened(self, agent: str) -> set[str]:
        return {
            r for (a, v, r), n in self.sim.stats.requests.items() if a == agent and v == "watch"
        }

    def server_processes(self) -> dict[str, psutil.Process]:
        return {"harness (simulated cluster)": psutil.Process()}

    async def create_pods(self, bodies: list[Obj]) -> None:
        store = self.sim.store
        rt = store.resource("", "v1", "pods")
        for i, body in enumerate(bodies):
            store.create(rt, body["metadata"]["namespace"], body)
            if i % 600 == 0:
                await asyncio.sleep(0)  # let the kubelets start what is there

    async def wait_pods_running(self, total: int, timeout: float) -> None:
        store = self.sim.store
        rt = store.resource("", "v1", "pods")
        changed = asyncio.Event()

        def running() -> int:
            return sum(
                1 for p in store.iter_kind(rt) if (p.get("status") or {}).get("phase") == "Running"
            )

        def wake(_: object) -> None:
            changed.set()

        store.listeners.append(wake)
        try:
            async with asyncio.timeout(timeout):
                while running() < total:
                    changed.clear()
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(0.5):
                            await changed.wait()
        finally:
            store.listeners.remove(wake)


class RealBench(Backend):
    kind = "real"
    server_cores = psutil.cpu_count() or 1  # Go processes, on every core (the agent's too)

    def __init__(
        self, plane: ControlPlane, node_names: list[str], progress: dict[str, Any]
    ) -> None:
        self.progress = progress
        self.plane = plane
        self.kubeconfig = plane.kubeconfig
        self.node_names = node_names
        self.kube = harness_client(plane.kubeconfig)
        self.audit = AuditLog(plane.audit_log, (AGENT, KUBECTL))
        self._agent_kubeconfig: Path | None = None

    async def agent_kubeconfig(self) -> Path:
        """The agent's ServiceAccount of packaging/kubernetes with a bound token: RBAC applies."""
        if self._agent_kubeconfig is None:
            rb = RealBackend(self.kubeconfig, self.node_names, self.plane.dir / "pki")
            self._agent_kubeconfig = await rb.service_account(CONTROLLERS_ACCOUNT)
        return self._agent_kubeconfig

    def mark(self) -> Mark:
        return Mark(time.time())

    async def _read_audit(self) -> None:
        await asyncio.sleep(0.3)  # the requests answered by now are written (blocking mode)
        await asyncio.to_thread(self.audit.read)

    async def requests_since(self, mark: Mark, agent: str) -> dict[str, Any]:
        end = time.time()
        await self._read_audit()
        by: Counter[str] = Counter()
        refused = duplicates = 0
        for r in self.audit.requests:
            if r.agent != agent or not mark.wall <= r.at <= end:
                continue
            by[f"{r.verb} {r.resource}"] += 1
            if r.verb == "evict" and r.code == 429:
                refused += 1
            if r.verb == "create" and r.resource == "evictionrequests" and r.code == 409:
                duplicates += 1
        return _summary(by, refused, duplicates)

    async def watches_opened(self, agent: str) -> set[str]:
        await asyncio.to_thread(self.audit.read)
        return {r.resource for r in self.audit.requests if r.agent == agent and r.verb == "watch"}

    def server_processes(self) -> dict[str, psutil.Process]:
        state = self.plane.state()
        assert state is not None
        return {name: psutil.Process(pid) for name, pid in state.pids.items()}

    async def create_pods(self, bodies: list[Obj]) -> None:
        async def one(body: Obj) -> None:
            await self.kube.create(PODS, body)
            self.progress["pods_created"] = self.progress.get("pods_created", 0) + 1

        await self.create_all(one(b) for b in bodies)

    async def wait_pods_running(self, total: int, timeout: float) -> None:
        """Polls the pods not yet Running (a field selector the API server evaluates) rather
        than watching 150,000 pods into the harness's memory. Every pod was created (or
        create_pods raised): none left means `total` Running."""
        async with asyncio.timeout(timeout):
            while True:
                left = len(
                    (await self.kube.list(PODS, field_selector="status.phase!=Running"))["items"]
                )
                self.progress["pods_running"] = total - left
                if not left:
                    return
                await asyncio.sleep(max(2.0, left / 2000))

    async def create_nodes(self, count: int, timeout: float) -> None:
        """kwok nodes node-1..count, as nodeagent_testbed.controlplane.nodes makes them (the pod
        CIDR from the index, valid past 255 nodes), and the wait until they are Ready."""

        def body(i: int) -> Obj:
            b = node_body(f"node-{i}", i)
            cidr = f"10.{i // 256}.{i % 256}.0/24"
            b["spec"] = {"podCIDR": cidr, "podCIDRs": [cidr]}
            return b

        view = self.view([NODES])
        await view.start()
        ready: set[str] = set()

        def on(_event: str, _r: Resource, node: Obj) -> None:
            if _node_ready(node):
                ready.add(node["metadata"]["name"])
                self.progress["nodes_ready"] = len(ready)

        view.listen(on)
        try:
            await self.create_all(self.kube.create(NODES, body(i)) for i in range(1, count + 1))
            for n in view.list(NODES):
                on("", NODES, n)
            await view.until(lambda: len(ready) >= count, timeout=timeout)
        finally:
            await view.stop()


def _node_ready(node: Obj) -> bool:
    """Ready, and no node.kubernetes.io taint (nodeagent_testbed.controlplane.nodes.ready, on a
    dict)."""
    conditions = (node.get("status") or {}).get("conditions") or []
    taints = (node.get("spec") or {}).get("taints") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions) and (
        not any(str(t.get("key", "")).startswith("node.kubernetes.io/") for t in taints)
    )


@contextlib.asynccontextmanager
async def open_backend(
    kind: str,
    nodes: int,
    workdir: Path,
    binaries: Binaries | None = None,
    progress: dict[str, Any] | None = None,
) -> AsyncIterator[Backend]:
    """A fresh cluster of `nodes` nodes `node-1`..`node-N` with nodeagent's CRDs. `progress`
    records how far the set-up got."""
    progress = {} if progress is None else progress
    progress["stage"] = "cluster"
    workdir.mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240 (a harness, not a server)
    if kind == "sim":
        async with SimCluster(nodes=nodes, kubeconfig=workdir / "kubeconfig") as sim:
            b = SimBench(sim, progress)
            try:
                await b.install_crds()
                yield b
            finally:
                await b.kube.close()
        return
    assert kind == "real" and binaries is not None
    plane = ControlPlane(workdir / "controlplane")
    real: RealBench | None = None
    try:
        await asyncio.to_thread(plane.up, 0, binaries, audit=True)
        progress["control_plane_up"] = True
        real = RealBench(plane, [f"node-{i}" for i in range(1, nodes + 1)], progress)
        await real.create_nodes(nodes, timeout=max(60.0, nodes * 0.1))
        await real.install_crds()
        yield real
    finally:
        if real is not None:
            await real.kube.close()
        await asyncio.to_thread(plane.down)  # its logs and audit log stay in workdir
