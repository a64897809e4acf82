"""Figures 1 and 2: draining one node with 110 pods, nodeagent vs `kubectl drain`, and the API
requests each needs per drained pod, on the simulated cluster and on a real control plane.

Every drain gets an identical fresh cluster (same seed, same exit times). nodeagent runs as a
real `nodeagent run` subprocess with production defaults, kubectl as the real binary. Timestamps
come from the harness's watch (ClusterView.listen) on both backends; requests are counted per
client by the backend (tests/bench/backends.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from nodeagent.kube.errors import AlreadyExists
from nodeagent.kube.resources import (
    DEPLOYMENTS,
    EVICTIONREQUESTS,
    EVICTIONS,
    LEASES,
    NODEMAINTENANCES,
    NODES,
    PDBS,
    PODS,
    STATEFULSETS,
    UPSTREAM_EVICTIONREQUESTS,
    Obj,
    Resource,
)
from nodeagent_testbed.controlplane.build import Binaries
from tests.bench import common
from tests.bench.backends import (
    KUBECTL,
    LEADER_LEASE,
    Backend,
    condition_true,
    open_backend,
)
from tests.bench.workload import (
    DRAIN_PLAN,
    DRAINED_NODE,
    EXIT_ANNOTATION,
    NAMESPACE,
    POD_COUNT,
    Workload,
    group_of,
)
from tests.clusters import NAMESPACE as AGENT_NAMESPACE
from tests.clusters import PRIORITY_CLASSES, ClusterView, create_pod

NODES_COUNT = 4  # node-1 is drained; the others take the replacements
MAINTENANCE = "bench-drain"
TIMEOUT = 900.0
KINDS: dict[str, Resource] = {
    "PriorityClass": PRIORITY_CLASSES,
    "Deployment": DEPLOYMENTS,
    "StatefulSet": STATEFULSETS,
    "PodDisruptionBudget": PDBS,
    "Pod": PODS,
}
WATCHED = [PODS, NODES, PDBS, NODEMAINTENANCES, EVICTIONREQUESTS, LEASES]
# the real control plane serves the upstream EvictionRequest API too (the sim does not)
WATCHED_UPSTREAM = [*WATCHED, UPSTREAM_EVICTIONREQUESTS, EVICTIONS]


def pod_requests(requests: dict[str, Any]) -> int:
    """The requests about the pods themselves (their EvictionRequests, evictions and reads),
    as opposed to those of the maintenance (its status, Events, the cordon) and the leader's
    Lease, which do not grow with the number of pods."""
    by: dict[str, int] = requests.get("by") or {}
    return sum(n for verb, n in by.items() if verb.split()[-1] in ("evictionrequests", "pods"))


def _on_node(view: ClusterView) -> list[Obj]:
    return [
        p
        for p in view.list(PODS, NAMESPACE)
        if (p.get("spec") or {}).get("nodeName") == DRAINED_NODE
    ]


def _running(p: Obj) -> bool:
    return (p.get("status") or {}).get("phase") == "Running" and not p["metadata"].get(
        "deletionTimestamp"
    )


async def _set_unschedulable(b: Backend, node: str, value: bool) -> None:
    await b.kube.patch(NODES, node, {"spec": {"unschedulable": True if value else None}})


async def prepare(b: Backend, view: ClusterView, workload: Workload) -> None:
    """All 110 pods Running on node-1 with their exit times, the other nodes schedulable, every
    budget's status current. Through the API on both backends (the real scheduler places the
    Deployments' and the StatefulSet's pods: the other nodes are cordoned meanwhile)."""
    others = [n for n in b.node_names if n != DRAINED_NODE]
    for n in others:
        await _set_unschedulable(b, n, True)
    docs = workload.manifests()
    for doc in sorted(docs, key=lambda d: d["kind"] != "PriorityClass"):
        with contextlib.suppress(AlreadyExists):
            if doc["kind"] == "Pod":
                # admission may not have seen the PriorityClass yet: retried
                await create_pod(b.kube, doc, timeout=30)
            else:
                await b.kube.create(KINDS[doc["kind"]], doc)
    await view.until(lambda: sum(_running(p) for p in _on_node(view)) == POD_COUNT, timeout=180)
    by_group: dict[str, list[Obj]] = {}
    for p in _on_node(view):
        by_group.setdefault(str(group_of(p)), []).append(p)
    for g in workload.groups:
        pods = sorted(by_group[g.name], key=lambda p: p["metadata"]["name"])
        assert len(pods) == g.count, (g.name, len(pods))
        for p, seconds in zip(pods, workload.exit_times[g.name], strict=True):
            patch = {"metadata": {"annotations": {EXIT_ANNOTATION: str(seconds)}}}
            await b.kube.patch(PODS, p["metadata"]["name"], patch, NAMESPACE)
    for n in others:
        await _set_unschedulable(b, n, False)

    def settled() -> bool:
        pdbs = view.list(PDBS, NAMESPACE)
        if len(pdbs) != sum(1 for g in workload.groups if g.pdb is not None):
            return False
        for pdb in pdbs:
            st = pdb.get("status") or {}
            if st.get("observedGeneration") != pdb["metadata"].get("generation"):
                return False
            if st.get("currentHealthy") != st.get("expectedPods"):
                return False
        annotated = [
            p for p in _on_node(view) if EXIT_ANNOTATION in p["metadata"].get("annotations", {})
        ]
        return len(annotated) == POD_COUNT

    await view.until(settled, timeout=120)


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
    """Timestamps of the drain as the harness's watch sees it (ClusterView.listen)."""

    def __init__(self, t0: float) -> None:
        self.t0 = t0
        self.pods_gone: list[float] = []
        self.drained_at: float | None = None
        self.entries: list[tuple[float, str]] = []  # (t, drainTargets' last entry)
        self.cordoned_at: float | None = None
        # A budget's chain, step by step: a pod it guards is evicted (seen terminating), the
        # control plane replaces it and the budget allows a disruption again (its status), the
        # tool evicts the next one. Per step: (eviction -> allowed again, allowed -> eviction).
        self.chain_steps: list[tuple[float, float]] = []
        self._evicting: set[str] = set()  # pods seen terminating
        self._last_eviction: dict[str, float] = {}  # budget (its pods' app label) -> t
        self._allowed_again: dict[str, float] = {}  # budget -> t it went from 0 to more
        self._allows: dict[str, int] = {}  # budget -> disruptionsAllowed last seen

    def __call__(self, event: str, resource: Resource, obj: Obj) -> None:
        t = time.monotonic() - self.t0
        if resource == PDBS:
            name = obj["metadata"]["name"]
            allowed = (obj.get("status") or {}).get("disruptionsAllowed") or 0
            if allowed > 0 and self._allows.get(name, 0) == 0:
                self._allowed_again[name] = t
            self._allows[name] = allowed
        if resource == PODS:
            md = obj["metadata"]
            on_node = (obj.get("spec") or {}).get("nodeName") == DRAINED_NODE
            if on_node and md.get("deletionTimestamp") and md["uid"] not in self._evicting:
                self._evicting.add(md["uid"])
                budget = (md.get("labels") or {}).get("app", "")
                before = self._last_eviction.get(budget)
                again = self._allowed_again.get(budget)
                if before is not None and again is not None and again > before:
                    self.chain_steps.append((again - before, t - again))
                if budget in self._allows:
                    self._last_eviction[budget] = t
            if event == "DELETED" and on_node:
                self.pods_gone.append(t)
        elif resource == NODES:
            if (
                self.cordoned_at is None
                and obj["metadata"]["name"] == DRAINED_NODE
                and (obj.get("spec") or {}).get("unschedulable")
            ):
                self.cordoned_at = round(t, 3)
        elif resource == NODEMAINTENANCES:
            if self.drained_at is None and condition_true(obj, "Drained"):
                self.drained_at = t
            for ns in (obj.get("status") or {}).get("nodeStatuses") or []:
                targets = ns.get("drainTargets") or []
                if targets:
                    last = f"{targets[-1].get('podType')}<={targets[-1].get('podPriority')}"
                    if not self.entries or self.entries[-1][1] != last:
                        self.entries.append((round(t, 3), last))


def chain_summary(steps: list[tuple[float, float]]) -> dict[str, Any]:
    """Medians of the budgets' chain steps (Progress.chain_steps), in ms."""
    if not steps:
        return {"steps": 0}
    return {
        "steps": len(steps),
        "evicted_to_allowed_ms_median": round(1000 * statistics.median(a for a, _ in steps)),
        "allowed_to_evicted_ms_median": round(1000 * statistics.median(b for _, b in steps)),
    }


async def wait_agent_leading(b: Backend, view: ClusterView, timeout: float = 120) -> None:
    """The agent holds the controllers' Lease and its informers watch (their lists are in)."""
    wanted = {"pods", "nodes", "nodemaintenances", "evictionrequests"}
    async with asyncio.timeout(timeout):
        while True:
            lease = view.get(LEASES, LEADER_LEASE, AGENT_NAMESPACE)
            held = bool(((lease or {}).get("spec") or {}).get("holderIdentity"))
            if held and wanted <= await b.watches_opened(common.AGENT):
                break
            await asyncio.sleep(0.1)


def agent_config(kubeconfig: Path, node: str, api: str = "auto") -> dict[str, Any]:
    """Production defaults; the leader Lease where packaging/kubernetes puts it (its RBAC
    allows that one on the real server). The agent runs with the controllers' credentials,
    which may not write Node status: its own node's conditions are off (a DaemonSet agent
    keeps them, with its own role)."""
    return common.agent_config(
        kubeconfig,
        node,
        extra={
            "leader": {"namespace": AGENT_NAMESPACE, "leaseName": LEADER_LEASE},
            "nodeConditions": False,
            "eviction": {"api": api},
        },
    )


async def eviction_requests_gone(
    view: ClusterView, timeout: float, kinds: tuple[Resource, ...] = (EVICTIONREQUESTS,)
) -> float | None:
    """Wait until no EvictionRequest is left (the controller deletes them once Evicted; the
    collector removes upstream ones with their pod); seconds waited, or None if some were
    still there after `timeout`."""
    t0 = time.monotonic()
    try:
        await view.until(lambda: not any(view.list(k) for k in kinds), timeout=timeout)
    except TimeoutError:
        return None
    return round(time.monotonic() - t0, 2)


async def drain_nodeagent(
    backend: str,
    workload: Workload,
    workdir: Path,
    drain_plan: list[dict[str, Any]] | None,
    binaries: Binaries | None,
    api: str = "auto",
) -> dict[str, Any]:
    """`drain_plan`: the NodeMaintenance's spec.drainPlan (None: KEP-4212's default entries
    only, where every pod of this workload falls into the first entry). `api`: the agent's
    `eviction.api` (auto: the upstream EvictionRequest API where served, the real server)."""
    kinds = (EVICTIONREQUESTS, UPSTREAM_EVICTIONREQUESTS) if backend == "real" else ()
    async with open_backend(backend, NODES_COUNT, workdir, binaries) as b:
        view = b.view(WATCHED_UPSTREAM if backend == "real" else WATCHED)
        await view.start()
        try:
            await prepare(b, view, workload)
            cfg = agent_config(await b.agent_kubeconfig(), "node-2", api)
            async with common.run_agent(workdir, cfg, "agent") as agent:
                await wait_agent_leading(b, view)
                await asyncio.sleep(1.0)  # the controllers start their workers once synced
                sampler = common.Sampler(agent.ps).start()
                mark = b.mark()
                t0 = time.monotonic()
                progress = Progress(t0)
                view.listen(progress)
                await b.kube.create(NODEMAINTENANCES, maintenance_body(drain_plan))
                await view.until(lambda: progress.drained_at is not None, timeout=TIMEOUT)
                await sampler.stop()
                requests = await b.requests_since(mark, common.AGENT)
                left = len(_on_node(view))
                # the EvictionRequests are deleted once Evicted, some after Drained: that is
                # work of the drain too
                cleanup = await eviction_requests_gone(view, 60, kinds or (EVICTIONREQUESTS,))
                with_cleanup = await b.requests_since(mark, common.AGENT)
        finally:
            await view.stop()
    assert progress.drained_at is not None
    return {
        "eviction_api": "upstream" if backend == "real" and api == "auto" else "nodeagent",
        "seconds": round(progress.drained_at, 3),
        "last_pod_gone_seconds": round(max(progress.pods_gone, default=0.0), 3),
        "cordoned_seconds": progress.cordoned_at,
        "pods_drained": len(progress.pods_gone),
        "pods_left_on_node": left,
        "requests": requests,
        "requests_per_pod": round(requests["total"] / POD_COUNT, 2),
        "pod_requests_per_pod": round(pod_requests(requests) / POD_COUNT, 2),
        "cleanup_seconds_after_drained": cleanup,
        "requests_with_cleanup": with_cleanup,
        "requests_per_pod_with_cleanup": round(with_cleanup["total"] / POD_COUNT, 2),
        "evictions_refused": requests["evictions_refused"],
        "entries_started_at": progress.entries,
        "budget_chain": chain_summary(progress.chain_steps),
        "agent_cpu_seconds": round(sampler.cpu_seconds, 2),
        "agent_peak_rss_mib": common.mib(max(sampler.rss, default=None)),
        "agent_log_tail": agent.tail(1500) if left else "",
    }


async def drain_kubectl(
    backend: str, workload: Workload, workdir: Path, binaries: Binaries | None
) -> dict[str, Any]:
    kubectl = common.kubectl_path()
    home = workdir / "kubectl-home"
    home.mkdir(parents=True, exist_ok=True)
    async with open_backend(backend, NODES_COUNT, workdir, binaries) as b:
        view = b.view(WATCHED)
        await view.start()
        try:
            await prepare(b, view, workload)
            env = {**os.environ, "KUBECONFIG": str(b.kubeconfig), "HOME": str(home)}
            base = [kubectl, "--cache-dir", str(home / "cache")]
            # a warm discovery cache, as on any machine that used kubectl before
            warm = await asyncio.create_subprocess_exec(
                *base, "get", "nodes", env=env, stdout=asyncio.subprocess.DEVNULL
            )
            await warm.wait()
            mark = b.mark()
            log = workdir / "kubectl-drain.log"
            t0 = time.monotonic()
            progress = Progress(t0)
            view.listen(progress)
            with log.open("wb") as out:
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
            requests = await b.requests_since(mark, KUBECTL)
            left = len(_on_node(view))
        finally:
            await view.stop()
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
        "evictions_refused": requests["evictions_refused"],
        "budget_chain": chain_summary(progress.chain_steps),
        "refusals_logged": text.count("would violate the pod's disruption budget"),
        "client_side_throttling_logged": text.count("client-side throttling"),
        "log_tail": text[-1500:] if code else "",
    }


async def run_backend(
    backend: str, workload: Workload, workdir: Path, binaries: Binaries | None
) -> dict[str, Any]:
    ordered = await drain_nodeagent(
        backend, workload, workdir / "nodeagent-ordered", DRAIN_PLAN, binaries
    )
    default = await drain_nodeagent(
        backend, workload, workdir / "nodeagent-default", None, binaries
    )
    kubectl = await drain_kubectl(backend, workload, workdir / "kubectl", binaries)
    cp = workload.critical_path()
    flat = workload.flat_bound()
    out: dict[str, Any] = {}
    if backend == "real":
        # the real server serves lifecycle.k8s.io: the drains above went through it; the same
        # ordered drain through our CRD, side by side
        crd = await drain_nodeagent(
            backend, workload, workdir / "nodeagent-crd", DRAIN_PLAN, binaries, api="nodeagent"
        )
        out["nodeagent_crd"] = crd
        out["upstream_vs_crd"] = {
            "seconds": round(ordered["seconds"] / crd["seconds"], 3),
            "requests_per_pod": round(
                ordered["requests_per_pod_with_cleanup"] / crd["requests_per_pod_with_cleanup"], 3
            ),
        }
    return {
        **out,
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


async def run(
    seed: int,
    workdir: Path | None = None,
    backends: tuple[str, ...] = ("sim",),
    binaries: Binaries | None = None,
) -> dict[str, Any]:
    """The workload and its bounds, and per backend the three drains and their ratios."""
    workload = Workload.generate(seed)
    out: dict[str, Any] = {
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
        "critical_path_seconds": round(workload.critical_path(), 3),
        "flat_bound_seconds": round(workload.flat_bound(), 3),
    }
    with contextlib.ExitStack() as stack:
        if workdir is None:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="na-bench-")))
        for backend in backends:
            try:
                out[backend] = await run_backend(backend, workload, workdir / backend, binaries)
            except Exception as e:  # reported: the other backend's figures stand
                out[backend] = {"error": f"{type(e).__name__}: {e}"[:2000]}
                print(
                    f"[bench] drain on {backend} failed: {out[backend]['error']}", file=sys.stderr
                )
    return out
