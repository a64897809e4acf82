"""Figure 5: the controllers at scale. N nodes x 30 pods, one NodeMaintenance over M of them
(by default all N, so the maintenance grows with the cluster; `--scale-maintained` fixes M):
the agent's start-up (informers synced), time to `Drained`, its CPU and peak RSS, API requests,
and the API server's own CPU in the same window (is the server the bottleneck?), on the
simulated cluster and on a real control plane with kwok nodes.

Pods are bare pods bound to their nodes at creation (no scheduling, nothing recreates them), so
the drain's work is exactly 3,000 evictions whatever the cluster size; what grows with N is
what the agent caches and watches. Exit times are seeded (log-normal, median 0.5 s, at most 3 s).
The harness watches only the NodeMaintenance, the EvictionRequests and the Lease: it does not
cache the cluster's pods itself.
"""

from __future__ import annotations

import asyncio
import math
import random
import sys
import time
from pathlib import Path
from typing import Any

import psutil

from nodeagent.kube.resources import EVICTIONREQUESTS, LEASES, NODEMAINTENANCES, NODES, PODS, Obj
from nodeagent_testbed.controlplane.build import Binaries
from tests.bench import common
from tests.bench.backends import Backend, condition_true, open_backend
from tests.bench.drain import agent_config, eviction_requests_gone, wait_agent_leading

POOL_LABEL = "bench.nodeagent.io/pool"
MAINTENANCE = "bench-scale"
NAMESPACE = "default"
REST_WINDOW = 5.0  # seconds the servers' own load is sampled before the agent starts


def _pod(name: str, node: str, exit_seconds: float, maintained: bool) -> Obj:
    labels = {"app": "scale"}
    if maintained:
        labels[POOL_LABEL] = "maint"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": labels,
            "annotations": {"sim.nodeagent.io/exit-seconds": str(exit_seconds)},
        },
        "spec": {
            "nodeName": node,
            "containers": [{"name": "app", "image": "registry.example/app:1"}],
            "terminationGracePeriodSeconds": 30,
        },
    }


async def prepare(
    b: Backend, pods_per_node: int, maintained: int, seed: int
) -> tuple[list[str], float]:
    """Returns the names of the maintained nodes and the slowest exit time among their pods."""
    rng = random.Random(seed)
    b.progress["stage"] = "pods"
    maintained_nodes = b.node_names[:maintained]
    for n in maintained_nodes:
        await b.kube.patch(NODES, n, {"metadata": {"labels": {POOL_LABEL: "maint"}}})
    slowest = 0.0
    chosen = set(maintained_nodes)
    bodies = []
    for i, node in enumerate(b.node_names):
        for j in range(pods_per_node):
            exit_seconds = round(min(3.0, max(0.05, rng.lognormvariate(-0.69, 0.8))), 2)
            if node in chosen:
                slowest = max(slowest, exit_seconds)
            bodies.append(_pod(f"app-{i + 1}-{j}", node, exit_seconds, node in chosen))
    await b.create_pods(bodies)
    b.progress["stage"] = "pods running"
    await b.wait_pods_running(len(bodies), timeout=3600)
    return maintained_nodes, slowest


def _maintenance() -> Obj:
    return {
        "apiVersion": "nodeagent.io/v1alpha1",
        "kind": "NodeMaintenance",
        "metadata": {"name": MAINTENANCE},
        "spec": {
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": POOL_LABEL, "operator": "In", "values": ["maint"]}
                        ]
                    }
                ]
            },
            "stage": "Drain",
            "reason": "benchmark",
        },
    }


def _cpu(procs: dict[str, psutil.Process]) -> dict[str, float]:
    out = {}
    for name, p in procs.items():
        try:
            t = p.cpu_times()
        except psutil.Error:
            continue
        out[name] = float(t.user + t.system)
    return out


def _rss_mib(procs: dict[str, psutil.Process]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for name, p in procs.items():
        try:
            out[name] = common.mib(p.memory_info().rss)
        except psutil.Error:
            out[name] = None
    return out


async def run_one(
    backend: str,
    nodes: int,
    workdir: Path,
    pods_per_node: int = 30,
    maintained: int | None = None,
    seed: int = 1,
    profile: bool = False,
    binaries: Binaries | None = None,
    progress: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """`profile`: record the agent with py-spy during the drain (collapsed stacks in workdir).
    `progress`: how far it got, for the report if it fails."""
    maintained = nodes if maintained is None else min(maintained, nodes)
    progress = {} if progress is None else progress
    t_setup = time.monotonic()
    async with open_backend(backend, nodes, workdir, binaries, progress) as b:
        _, slowest = await prepare(b, pods_per_node, maintained, seed)
        setup_seconds = time.monotonic() - t_setup
        # the servers' own load with everything in place and no agent (on the real server:
        # kwok renewing every node's Lease every 10 s, as kubelets do)
        servers = b.server_processes()
        rest0, t_rest = _cpu(servers), time.monotonic()
        await asyncio.sleep(REST_WINDOW)
        rest1, rest_seconds = _cpu(servers), time.monotonic() - t_rest
        server_rest = sum(rest1[k] - v for k, v in rest0.items() if k in rest1) / rest_seconds
        progress["stage"] = "agent start"
        view = b.view([NODEMAINTENANCES, EVICTIONREQUESTS, LEASES])
        await view.start()
        try:
            cfg = agent_config(await b.agent_kubeconfig(), b.node_names[-1])
            t_start = time.monotonic()
            async with common.run_agent(workdir, cfg, f"agent-{nodes}") as agent:
                sampler = common.Sampler(agent.ps, interval=0.2).start()
                await wait_agent_leading(b, view, timeout=1800)
                synced = time.monotonic() - t_start
                progress["stage"] = "drain"
                await asyncio.sleep(2.0)  # the informers' first events, the workers start
                rss_synced = agent.ps.memory_info().rss
                cpu_sync = sampler._cpu()
                server_cpu0 = _cpu(servers)
                mark = b.mark()
                drained_at: float | None = None
                t0 = time.monotonic()

                def on(_event: str, resource: Any, obj: Obj) -> None:
                    nonlocal drained_at
                    if (
                        resource == NODEMAINTENANCES
                        and drained_at is None
                        and condition_true(obj, "Drained")
                    ):
                        drained_at = time.monotonic() - t0

                view.listen(on)
                stacks = workdir / f"agent-{nodes}.stacks"
                async with common.py_spy(agent.proc.pid, stacks, profile):
                    await b.kube.create(NODEMAINTENANCES, _maintenance())
                    await view.until(lambda: drained_at is not None, timeout=1800)
                server_cpu1 = _cpu(servers)
                await sampler.stop()
                agent_drain_cpu = sampler.cpu1 - cpu_sync
                requests = await b.requests_since(mark, common.AGENT)
                left = await b.kube.list(PODS, NAMESPACE, label_selector=f"{POOL_LABEL}=maint")
                cleanup = await eviction_requests_gone(view, timeout=300)
                with_cleanup = await b.requests_since(mark, common.AGENT)
                peak = common.peak_rss(agent.proc.pid)
                server_rss = _rss_mib(servers)
        finally:
            await view.stop()
    assert drained_at is not None
    server_cores = b.server_cores
    drained_pods = maintained * pods_per_node
    server_cpu = {
        k: round(server_cpu1[k] - v, 2) for k, v in server_cpu0.items() if k in server_cpu1
    }
    return {
        "backend": backend,
        "nodes": nodes,
        "pods": nodes * pods_per_node,
        "maintained_nodes": maintained,
        "drained_pods": drained_pods - len(left["items"]),
        "setup_seconds": round(setup_seconds, 1),
        "agent_sync_seconds": round(synced, 2),
        "agent_rss_synced_mib": common.mib(rss_synced),
        "agent_peak_rss_mib": common.mib(peak),
        "agent_cpu_sync_seconds": round(cpu_sync - sampler.cpu0, 2),
        "drained_seconds": round(drained_at, 2),
        "slowest_exit_seconds": slowest,
        # the bound: nothing can be drained before its slowest pod has exited
        "drained_vs_bound": round(drained_at / slowest, 1) if slowest else None,
        "agent_cpu_drain_seconds": round(agent_drain_cpu, 2),
        "agent_cpu_drain_share": round(agent_drain_cpu / drained_at, 2),
        # sim: this process (the simulated cluster and the harness); real: the control plane
        "server_cpu_drain_seconds": round(sum(server_cpu.values()), 2),
        "server_cpu_drain_share": round(sum(server_cpu.values()) / drained_at, 2),
        "server_cpu_drain_seconds_by_process": server_cpu,
        # what the servers' work alone sets as the least time of this drain
        "server_cpu_ms_per_pod": round(1000 * sum(server_cpu.values()) / drained_pods, 2),
        "server_cores": server_cores,
        "server_floor_seconds": round(sum(server_cpu.values()) / server_cores, 1),
        "server_cpu_share_at_rest": round(server_rest, 3),
        "server_rss_mib_after_drain": server_rss,
        "requests": requests,
        "requests_per_pod": round(requests["total"] / drained_pods, 2),
        "cleanup_seconds_after_drained": cleanup,
        "requests_per_pod_with_cleanup": round(with_cleanup["total"] / drained_pods, 2),
    }


def growth(rows: list[dict[str, Any]], field: str) -> float | None:
    """Exponent k in metric ~ nodes^k between the smallest and the largest run (1: linear,
    0: flat)."""
    a, b = rows[0], rows[-1]
    if not a.get(field) or not b.get(field) or a["nodes"] == b["nodes"]:
        return None
    return round(math.log(b[field] / a[field]) / math.log(b["nodes"] / a["nodes"]), 2)


FIELDS = (
    "agent_sync_seconds",
    "agent_rss_synced_mib",
    "agent_peak_rss_mib",
    "agent_cpu_sync_seconds",
    "drained_seconds",
    "agent_cpu_drain_seconds",
    "server_cpu_drain_seconds",
)


async def run_backend(
    backend: str,
    sizes: list[int],
    workdir: Path,
    maintained: int | None = None,
    seed: int = 1,
    profile: bool = False,
    binaries: Binaries | None = None,
) -> dict[str, Any]:
    """The sizes in order; a size that fails (e.g. a set-up that does not fit this machine) is
    reported with its error and ends the series (larger ones would fail too)."""
    rows: list[dict[str, Any]] = []
    failed: dict[str, Any] | None = None
    for n in sorted(sizes):
        t = time.monotonic()
        progress: dict[str, Any] = {}
        try:
            rows.append(
                await run_one(
                    backend,
                    n,
                    workdir / f"n{n}",
                    maintained=maintained,
                    seed=seed,
                    profile=profile,
                    binaries=binaries,
                    progress=progress,
                )
            )
        except Exception as e:  # reported, not raised: the figures so far stand
            failed = {
                "nodes": n,
                "error": f"{type(e).__name__}: {e}"[:500],
                "after_seconds": round(time.monotonic() - t, 1),
                "progress": progress,
            }
            print(f"[bench] scale on {backend} at {n} nodes failed: {failed}", file=sys.stderr)
            break
    out: dict[str, Any] = {
        "runs": rows,
        "growth_exponent": {f: growth(rows, f) for f in FIELDS} if len(rows) > 1 else {},
    }
    if failed is not None:
        out["failed"] = failed
    return out


async def run(
    sizes: dict[str, list[int]],
    workdir: Path,
    maintained: int | None = None,
    seed: int = 1,
    profile: bool = False,
    binaries: Binaries | None = None,
) -> dict[str, Any]:
    """`sizes`: the node counts per backend; `maintained`: the maintenance's nodes (None: all)."""
    return {
        backend: await run_backend(
            backend, ns, workdir / backend, maintained, seed, profile, binaries
        )
        for backend, ns in sizes.items()
    }
