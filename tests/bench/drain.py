"""Figures 1 and 2: draining one node with 110 pods, nodeagent vs `kubectl drain`, and the API
requests each needs per drained pod.

Both tools get an identical fresh simulated cluster (same seed, same exit times). The simulated
cluster runs in this process (its store is read directly for exact timestamps); nodeagent runs
as a real `nodeagent run` subprocess with production defaults, kubectl as the real binary.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from nodeagent.sim.cluster import SimCluster
from nodeagent.sim.store import Change, Obj
from tests.bench import common
from tests.bench.workload import (
    DRAIN_PLAN,
    DRAINED_NODE,
    EXIT_ANNOTATION,
    NAMESPACE,
    POD_COUNT,
    Workload,
    group_of,
)
from tests.simutil import install_crds

NODES = 4  # node-1 is drained; the others take the replacements
MAINTENANCE = "bench-drain"
TIMEOUT = 900.0


def _pods(sim: SimCluster) -> list[Obj]:
    return sim.store.list(sim.store.resource("", "v1", "pods"), NAMESPACE)


def _on_node(sim: SimCluster) -> list[Obj]:
    return [p for p in _pods(sim) if (p.get("spec") or {}).get("nodeName") == DRAINED_NODE]


def _running(p: Obj) -> bool:
    return (p.get("status") or {}).get("phase") == "Running" and not p["metadata"].get(
        "deletionTimestamp"
    )


def _set_unschedulable(sim: SimCluster, node: str, value: bool) -> None:
    nodes = sim.store.resource("", "v1", "nodes")

    def fn(o: Obj) -> None:
        spec = o.setdefault("spec", {})
        if value:
            spec["unschedulable"] = True
        else:
            spec.pop("unschedulable", None)

    sim.store.mutate(nodes, None, node, fn)


async def prepare(sim: SimCluster, workload: Workload) -> None:
    """All 110 pods Running on node-1 with their exit times, the other nodes schedulable, every
    budget's status current."""
    install_crds(sim)
    store = sim.store
    others = [n for n in sim.node_names if n != DRAINED_NODE]
    for n in others:
        _set_unschedulable(sim, n, True)
    for doc in workload.manifests():
        rt = store.type_of(doc["apiVersion"], doc["kind"])
        store.create(rt, doc["metadata"].get("namespace"), doc)
    await common.until(
        sim, lambda: sum(_running(p) for p in _on_node(sim)) == POD_COUNT, timeout=120
    )
    pods_rt = store.resource("", "v1", "pods")
    by_group: dict[str, list[Obj]] = {}
    for p in _on_node(sim):
        by_group.setdefault(str(group_of(p)), []).append(p)
    for g in workload.groups:
        pods = sorted(by_group[g.name], key=lambda p: p["metadata"]["name"])
        assert len(pods) == g.count, (g.name, len(pods))
        for p, seconds in zip(pods, workload.exit_times[g.name], strict=True):

            def annotate(o: Obj, s: float = seconds) -> None:
                o["metadata"].setdefault("annotations", {})[EXIT_ANNOTATION] = str(s)

            store.mutate(pods_rt, NAMESPACE, p["metadata"]["name"], annotate)
    for n in others:
        _set_unschedulable(sim, n, False)
    pdbs = store.resource("policy", "v1", "poddisruptionbudgets")

    def settled() -> bool:
        for pdb in store.list(pdbs, NAMESPACE):
            st = pdb.get("status") or {}
            if st.get("observedGeneration") != pdb["metadata"].get("generation"):
                return False
            if st.get("currentHealthy") != st.get("expectedPods"):
                return False
        return True

    await common.until(sim, settled, timeout=60)


def maintenance_body(drain_plan: list[dict[str, Any]] | None) -> dict[str, Any]:
    spec_plan = {"drainPlan": drain_plan} if drain_plan is not None else {}
    return {
        "apiVersion": "nodeagent.io/v1alpha1",
        "kind": "NodeMaintenance",
        "metadata": {"name": MAINTENANCE},
        "spec": {
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {
                        "matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": [DRAINED_NODE]}
                        ]
                    }
                ]
            },
            "stage": "Drain",
            **spec_plan,
            "reason": "benchmark",
        },
    }


class Progress:
    """Timestamps of the drain as the store commits it."""

    def __init__(self, t0: float) -> None:
        self.t0 = t0
        self.pods_gone: list[float] = []
        self.drained_at: float | None = None
        self.entries: list[tuple[float, str]] = []  # (t, drainTargets' last entry)
        self.cordoned_at: float | None = None

    def __call__(self, t: float, change: Change) -> None:
        kind, rkey, _, new = change
        if rkey == ("", "pods"):
            if kind == "DELETED" and (new.get("spec") or {}).get("nodeName") == DRAINED_NODE:
                self.pods_gone.append(t - self.t0)
        elif rkey == ("", "nodes"):
            if (
                self.cordoned_at is None
                and new["metadata"]["name"] == DRAINED_NODE
                and (new.get("spec") or {}).get("unschedulable")
            ):
                self.cordoned_at = t - self.t0
        elif rkey == ("nodeagent.io", "nodemaintenances"):
            if self.drained_at is None and common.condition_true(new, "Drained"):
                self.drained_at = t - self.t0
            for ns in (new.get("status") or {}).get("nodeStatuses") or []:
                targets = ns.get("drainTargets") or []
                if targets:
                    last = f"{targets[-1].get('podType')}<={targets[-1].get('podPriority')}"
                    if not self.entries or self.entries[-1][1] != last:
                        self.entries.append((round(t - self.t0, 3), last))


async def _wait_agent_leading(sim: SimCluster, timeout: float = 60) -> None:
    leases = sim.store.resource("coordination.k8s.io", "v1", "leases")
    wanted = {"pods", "nodes", "nodemaintenances", "evictionrequests"}

    def ready() -> bool:
        lease = sim.store.find(leases, "kube-system", "nodeagent-controllers")
        if lease is None or not (lease.get("spec") or {}).get("holderIdentity"):
            return False
        return wanted <= {w.rt.plural for w in sim.store.watches}

    await common.until(sim, ready, timeout=timeout)
    await asyncio.sleep(1.0)  # the controllers start their workers once the informers synced


async def drain_nodeagent(
    workload: Workload, workdir: Path, drain_plan: list[dict[str, Any]] | None
) -> dict[str, Any]:
    """`drain_plan`: the NodeMaintenance's spec.drainPlan (None: KEP-4212's default entries
    only, where every pod of this workload falls into the first entry)."""
    async with SimCluster(nodes=NODES, kubeconfig=workdir / "kubeconfig") as sim:
        await prepare(sim, workload)
        assert sim.kubeconfig is not None
        cfg = common.agent_config(sim.kubeconfig, "node-2")
        async with common.run_agent(workdir, cfg, "agent") as agent:
            await _wait_agent_leading(sim)
            sampler = common.Sampler(agent.ps).start()
            before = common.snapshot(sim)
            before_refused = common.refused_evictions(sim)
            nms = sim.store.resource("nodeagent.io", "v1alpha1", "nodemaintenances")
            t0 = time.monotonic()
            progress = Progress(t0)
            with common.Recorder(sim, progress):
                sim.store.create(nms, None, maintenance_body(drain_plan))
                await common.until(sim, lambda: progress.drained_at is not None, timeout=TIMEOUT)
            await sampler.stop()
            requests = common.requests_since(sim, before, common.PYTHON_CLIENT)
            refused = common.refused_evictions(sim, before_refused)
            left = len(_on_node(sim))
            # the EvictionRequests are deleted once Evicted, some after Drained: that is
            # work of the drain too
            cleanup = await common.eviction_requests_gone(sim, timeout=60)
            with_cleanup = common.requests_since(sim, before, common.PYTHON_CLIENT)
    assert progress.drained_at is not None
    return {
        "seconds": round(progress.drained_at, 3),
        "last_pod_gone_seconds": round(max(progress.pods_gone, default=0.0), 3),
        "cordoned_seconds": progress.cordoned_at,
        "pods_drained": len(progress.pods_gone),
        "pods_left_on_node": left,
        "requests": requests,
        "requests_per_pod": round(requests["total"] / POD_COUNT, 2),
        "cleanup_seconds_after_drained": cleanup,
        "requests_with_cleanup": with_cleanup,
        "requests_per_pod_with_cleanup": round(with_cleanup["total"] / POD_COUNT, 2),
        "evictions_refused": refused,
        "entries_started_at": progress.entries,
        "agent_cpu_seconds": round(sampler.cpu_seconds, 2),
        "agent_peak_rss_mib": common.mib(max(sampler.rss, default=None)),
        "agent_log_tail": agent.tail(1500) if left else "",
    }


async def drain_kubectl(workload: Workload, workdir: Path) -> dict[str, Any]:
    kubectl = common.kubectl_path()
    home = workdir / "kubectl-home"
    home.mkdir(parents=True, exist_ok=True)
    async with SimCluster(nodes=NODES, kubeconfig=workdir / "kubeconfig") as sim:
        await prepare(sim, workload)
        env = {**os.environ, "KUBECONFIG": str(sim.kubeconfig), "HOME": str(home)}
        base = [kubectl, "--cache-dir", str(home / "cache")]
        # a warm discovery cache, as on any machine that used kubectl before
        warm = await asyncio.create_subprocess_exec(
            *base, "get", "nodes", env=env, stdout=asyncio.subprocess.DEVNULL
        )
        await warm.wait()
        before = common.snapshot(sim)
        before_refused = common.refused_evictions(sim)
        log = workdir / "kubectl-drain.log"
        t0 = time.monotonic()
        progress = Progress(t0)
        with common.Recorder(sim, progress), log.open("wb") as out:
            proc = await asyncio.create_subprocess_exec(
                *base,
                "drain",
                DRAINED_NODE,
                "--ignore-daemonsets",
                "--delete-emptydir-data",
                "--force",
                f"--timeout={int(TIMEOUT)}s",
                env=env,
                stdout=out,
                stderr=out,
            )
            code = await proc.wait()
            t_exit = time.monotonic() - t0
        requests = common.requests_since(sim, before, common.KUBECTL)
        refused = common.refused_evictions(sim, before_refused)
        left = len(_on_node(sim))
    text = log.read_text()
    return {
        "seconds": round(t_exit, 3),
        "last_pod_gone_seconds": round(max(progress.pods_gone, default=0.0), 3),
        "cordoned_seconds": progress.cordoned_at,
        "exit_code": code,
        "pods_drained": len(progress.pods_gone),
        "pods_left_on_node": left,
        "requests": requests,
        "requests_per_pod": round(requests["total"] / POD_COUNT, 2),
        "evictions_refused": refused,
        "refusals_logged": text.count("would violate the pod's disruption budget"),
        "client_side_throttling_logged": text.count("client-side throttling"),
        "log_tail": text[-1500:] if code else "",
    }


async def run(seed: int, workdir: Path | None = None) -> dict[str, Any]:
    workload = Workload.generate(seed)
    with contextlib.ExitStack() as stack:
        if workdir is None:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="na-bench-")))
        ordered = await drain_nodeagent(workload, workdir / "nodeagent-ordered", DRAIN_PLAN)
        default = await drain_nodeagent(workload, workdir / "nodeagent-default", None)
        kubectl = await drain_kubectl(workload, workdir / "kubectl")
    cp = workload.critical_path()
    flat = workload.flat_bound()
    return {
        "seed": seed,
        "pods": POD_COUNT,
        "groups": [
            {
                "name": g.name,
                "kind": g.kind,
                "pods": g.count,
                "priority": g.priority,
                "pdb": g.pdb,
                "emptyDir": g.empty_dir,
                "exit_seconds": workload.exit_times[g.name],
            }
            for g in workload.groups
        ],
        "drain_plan": DRAIN_PLAN,
        "drain_plan_entries": workload.describe_entries(),
        "critical_path_seconds": round(cp, 3),
        "flat_bound_seconds": round(flat, 3),
        "nodeagent": ordered,
        "nodeagent_default_plan": default,
        "kubectl": kubectl,
        "ratios": {
            "nodeagent_vs_critical_path": round(ordered["seconds"] / cp, 3),
            "nodeagent_vs_kubectl": round(ordered["seconds"] / kubectl["seconds"], 3),
            "nodeagent_default_plan_vs_flat_bound": round(default["seconds"] / flat, 3),
            "nodeagent_default_plan_vs_kubectl": round(default["seconds"] / kubectl["seconds"], 3),
            "kubectl_vs_flat_bound": round(kubectl["seconds"] / flat, 3),
        },
    }
