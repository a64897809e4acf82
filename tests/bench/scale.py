"""Figure 5: the controllers at scale. N nodes x 30 pods, one NodeMaintenance over 100 of them:
the agent's start-up (informers synced), time to `Drained`, its CPU and peak RSS, API requests,
and the simulated cluster's own CPU in the same window (is the simulation the bottleneck?).

Pods are bare pods bound to their nodes at creation (no scheduling, nothing recreates them), so
the drain's work is exactly 3,000 evictions whatever the cluster size; what grows with N is
what the agent caches and watches. Exit times are seeded (log-normal, median 0.5 s, at most 3 s).
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from pathlib import Path
from typing import Any

import psutil

from nodeagent.sim.cluster import SimCluster
from nodeagent.sim.store import Change, Obj
from tests.bench import common
from tests.simutil import install_crds

POOL_LABEL = "bench.nodeagent.io/pool"
MAINTENANCE = "bench-scale"
NAMESPACE = "default"


def _pod(name: str, node: str, exit_seconds: float) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": {"app": "scale"},
            "annotations": {"sim.nodeagent.io/exit-seconds": str(exit_seconds)},
        },
        "spec": {
            "nodeName": node,
            "containers": [{"name": "app", "image": "registry.example/app:1"}],
            "terminationGracePeriodSeconds": 30,
        },
    }


async def prepare(
    sim: SimCluster, pods_per_node: int, maintained: int, seed: int
) -> tuple[list[str], float]:
    """Returns the names of the maintained nodes and the slowest exit time among their pods."""
    install_crds(sim)
    store = sim.store
    rng = random.Random(seed)
    nodes_rt = store.resource("", "v1", "nodes")
    pods_rt = store.resource("", "v1", "pods")
    maintained_nodes = sim.node_names[:maintained]
    for n in maintained_nodes:
        store.mutate(
            nodes_rt,
            None,
            n,
            lambda o: o["metadata"].setdefault("labels", {}).__setitem__(POOL_LABEL, "maint"),
        )
    slowest = 0.0
    chosen = set(maintained_nodes)
    for i, node in enumerate(sim.node_names):
        for j in range(pods_per_node):
            exit_seconds = round(min(3.0, max(0.05, rng.lognormvariate(-0.69, 0.8))), 2)
            if node in chosen:
                slowest = max(slowest, exit_seconds)
            store.create(pods_rt, NAMESPACE, _pod(f"app-{i + 1}-{j}", node, exit_seconds))
        if i % 20 == 0:
            await asyncio.sleep(0)  # let the kubelets start what is there
    total = len(sim.node_names) * pods_per_node

    def all_running() -> bool:
        return (
            sum(
                1
                for p in store.iter_kind(pods_rt)
                if (p.get("status") or {}).get("phase") == "Running"
            )
            == total
        )

    await common.until(sim, all_running, timeout=600)
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


async def _wait_synced(sim: SimCluster, timeout: float) -> None:
    leases = sim.store.resource("coordination.k8s.io", "v1", "leases")
    wanted = {"pods", "nodes", "nodemaintenances", "evictionrequests"}

    def ready() -> bool:
        lease = sim.store.find(leases, "kube-system", "nodeagent-controllers")
        if lease is None or not (lease.get("spec") or {}).get("holderIdentity"):
            return False
        # an informer's watch opens once its list is in: all of them open means synced
        return wanted <= {w.rt.plural for w in sim.store.watches}

    await common.until(sim, ready, timeout=timeout)


async def run_one(
    nodes: int,
    workdir: Path,
    pods_per_node: int = 30,
    maintained: int = 100,
    seed: int = 1,
    profile: bool = False,
) -> dict[str, Any]:
    """`profile`: record the agent with py-spy during the drain (collapsed stacks in workdir)."""
    me = psutil.Process()
    t_setup = time.monotonic()
    async with SimCluster(nodes=nodes, kubeconfig=workdir / "kubeconfig") as sim:
        maintained_nodes, slowest = await prepare(sim, pods_per_node, maintained, seed)
        setup_seconds = time.monotonic() - t_setup
        assert sim.kubeconfig is not None
        cfg = common.agent_config(sim.kubeconfig, sim.node_names[-1])
        t_start = time.monotonic()
        async with common.run_agent(workdir, cfg, f"agent-{nodes}") as agent:
            sampler = common.Sampler(agent.ps, interval=0.2).start()
            await _wait_synced(sim, timeout=600)
            synced = time.monotonic() - t_start
            await asyncio.sleep(2.0)  # the informers' first events, the workers start
            rss_synced = agent.ps.memory_info().rss
            cpu_sync = sampler._cpu()
            sim_cpu0 = sum(me.cpu_times()[:2])
            before = common.snapshot(sim)
            drained_at: float | None = None
            pods_gone = 0
            chosen = set(maintained_nodes)
            t0 = time.monotonic()

            def on(t: float, change: Change) -> None:
                nonlocal drained_at, pods_gone
                kind, rkey, _, new = change
                if rkey == ("", "pods") and kind == "DELETED":
                    if (new.get("spec") or {}).get("nodeName") in chosen:
                        pods_gone += 1
                elif (
                    rkey == ("nodeagent.io", "nodemaintenances")
                    and drained_at is None
                    and common.condition_true(new, "Drained")
                ):
                    drained_at = t - t0

            nms = sim.store.resource("nodeagent.io", "v1alpha1", "nodemaintenances")
            async with common.py_spy(agent.proc.pid, workdir / f"agent-{nodes}.stacks", profile):
                with common.Recorder(sim, on):
                    sim.store.create(nms, None, _maintenance())
                    await common.until(sim, lambda: drained_at is not None, timeout=1800)
            sim_cpu = sum(me.cpu_times()[:2]) - sim_cpu0
            await sampler.stop()
            agent_drain_cpu = sampler.cpu1 - cpu_sync
            requests = common.requests_since(sim, before, common.PYTHON_CLIENT)
            cleanup = await common.eviction_requests_gone(sim, timeout=300)
            with_cleanup = common.requests_since(sim, before, common.PYTHON_CLIENT)
            peak = common.peak_rss(agent.proc.pid)
    assert drained_at is not None
    drained_pods = maintained * pods_per_node
    return {
        "nodes": nodes,
        "pods": nodes * pods_per_node,
        "maintained_nodes": maintained,
        "drained_pods": pods_gone,
        "setup_seconds": round(setup_seconds, 1),
        "agent_sync_seconds": round(synced, 2),
        "agent_rss_synced_mib": common.mib(rss_synced),
        "agent_peak_rss_mib": common.mib(peak),
        "agent_cpu_sync_seconds": round(cpu_sync - sampler.cpu0, 2),
        "drained_seconds": round(drained_at, 2),
        "slowest_exit_seconds": slowest,
        "agent_cpu_drain_seconds": round(agent_drain_cpu, 2),
        "agent_cpu_drain_share": round(agent_drain_cpu / drained_at, 2),
        "sim_cpu_drain_seconds": round(sim_cpu, 2),
        "sim_cpu_drain_share": round(sim_cpu / drained_at, 2),
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


async def run(
    sizes: list[int], workdir: Path, seed: int = 1, profile: bool = False
) -> dict[str, Any]:
    rows = []
    for n in sizes:
        rows.append(await run_one(n, workdir / f"n{n}", seed=seed, profile=profile))
    fields = (
        "agent_sync_seconds",
        "agent_rss_synced_mib",
        "agent_peak_rss_mib",
        "agent_cpu_sync_seconds",
        "drained_seconds",
        "agent_cpu_drain_seconds",
        "sim_cpu_drain_seconds",
    )
    return {
        "runs": rows,
        "growth_exponent": {f: growth(rows, f) for f in fields} if len(rows) > 1 else {},
    }
