"""Figure: what the eviction bridge adds to an eviction of a pod without interceptors (the
evictions of every drain in a cluster with the bridge on), on a real control plane.

kube-apiserver calls the bridge's webhook (tests/integration/bridge/realbridge.py: the bridge
as the controllers' ServiceAccount on this host's loopback, registered by URL with its CA, two
annotate-and-wait interceptors configured), and the harness evicts pods one at a time, timing
each policy/v1 Eviction from request to answer, as a dry run (admission, the webhook included,
and the eviction's checks: the webhook's cost stands out) and for real (what a drain waits
for: the deletion adds some 100 ms of kube-apiserver's own here). Side by side, in alternating
rounds on the same control plane: evictions with the webhook registered and with it removed
(each phase starts once a dry-run probe eviction shows the API server calling it, or no longer
calling it). The bridge runs in the harness's process, not as `nodeagent run`: a subprocess
would need the webhook's Service, which a control plane without a pod network cannot reach.
The figure is the ratio of the medians, and the milliseconds added, for both.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from pathlib import Path
from typing import Any

from nodeagent.kube.resources import PODS, Obj
from nodeagent_testbed.controlplane.build import Binaries
from tests.bench.backends import RealBench, open_backend
from tests.bench.workload import EXIT_ANNOTATION
from tests.clusters import RealBackend, create_pod
from tests.conftest import Kubectl
from tests.integration.bridge.realbridge import (
    EVICTION,
    RealBridge,
    register,
    served,
    unregister,
)

ROUNDS = 4  # alternating phases of each kind
PER_PHASE = 25  # evictions timed per phase
NAMESPACE = "default"
WEBHOOK = "nodeagent-eviction-bridge"


def pod(name: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": {"app": "web"},  # the configured interceptor selects app=db
            "annotations": {EXIT_ANNOTATION: "0"},
        },
        "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "busybox"}]},
    }


async def timed_evictions(bench: RealBench, names: list[str], *, dry_run: bool) -> list[float]:
    """Seconds each eviction took, one after another. A dry run (``deleteOptions.dryRun``, as
    ``kubectl drain --dry-run=server`` sends it) goes through admission, the webhook included,
    and the eviction's checks, but deletes nothing: the webhook's cost apart from the pod's
    deletion, which takes kube-apiserver some 100 ms here whoever asks."""
    out = []
    for name in names:
        body: Obj = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}}
        if dry_run:
            body["deleteOptions"] = {"dryRun": ["All"]}
        path = PODS.path(NAMESPACE, name, "eviction")
        started = time.perf_counter()
        await bench.kube._call("evict", PODS, "POST", path, body=body)  # the harness: a dry run
        out.append(time.perf_counter() - started)
    return out


async def until_not_called(kubectl: Kubectl, bridge: RealBridge, probe: str) -> None:
    """Until a dry-run eviction of ``probe`` no longer reaches the bridge (the API server has
    seen the webhook configuration go)."""
    body = json.dumps({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": probe}})
    url = f"/api/v1/namespaces/{NAMESPACE}/pods/{probe}/eviction?dryRun=All"
    async with asyncio.timeout(60):
        while True:
            before = bridge.answered
            await kubectl.ok("create", "--raw", url, "-f", "-", stdin=body)
            if bridge.answered == before:
                return


def _summary(seconds: list[float]) -> dict[str, float]:
    ms = sorted(s * 1000 for s in seconds)
    return {
        "median_ms": round(statistics.median(ms), 2),
        "mean_ms": round(statistics.fmean(ms), 2),
        "p90_ms": round(ms[int(len(ms) * 0.9) - 1], 2),
    }


async def measure(bench: RealBench, workdir: Path) -> dict[str, Any]:
    names = [f"web-{i}" for i in range(2 * ROUNDS * PER_PHASE)]
    for name in ["probe", *names]:
        await create_pod(bench.kube, pod(name))
    cluster = RealBackend(bench.kubeconfig, bench.node_names, bench.plane.dir / "pki")
    (workdir / "kubectl").mkdir(parents=True, exist_ok=True)
    kubectl = Kubectl(bench.kubeconfig, workdir / "kubectl")
    timings: dict[str, list[float]] = {}
    answered = 0

    async def phase(kind: str, chunk: list[str]) -> None:
        for dry_run in (True, False):  # the same pods: first a dry run, then the eviction
            key = f"{kind}_webhook{'_dry_run' if dry_run else ''}"
            timings.setdefault(key, []).extend(await timed_evictions(bench, chunk, dry_run=dry_run))

    async with served(cluster, EVICTION) as bridge:
        chunks = iter(names[i : i + PER_PHASE] for i in range(0, len(names), PER_PHASE))
        for _ in range(ROUNDS):
            await phase("without", next(chunks))
            await register(bench.kube, kubectl, bridge, (NAMESPACE, "probe"))
            before = bridge.answered
            await phase("with", next(chunks))
            answered += bridge.answered - before
            await unregister(bench.kube, WEBHOOK)
            await until_not_called(kubectl, bridge, "probe")
    out: dict[str, Any] = {
        "evictions_per_kind": ROUNDS * PER_PHASE,
        "bridge_answers_with_webhook": answered,
    }
    for suffix in ("", "_dry_run"):
        with_ = out[f"with_webhook{suffix}"] = _summary(timings[f"with_webhook{suffix}"])
        without = out[f"without_webhook{suffix}"] = _summary(timings[f"without_webhook{suffix}"])
        out[f"added_ms_median{suffix}"] = round(with_["median_ms"] - without["median_ms"], 2)
        out[f"ratio_median{suffix}"] = round(with_["median_ms"] / without["median_ms"], 3)
    return out


async def run(workdir: Path, binaries: Binaries | None) -> dict[str, Any]:
    """The figure on a real control plane (the simulated one has no admission webhooks)."""
    if binaries is None:
        return {"skipped": "needs the real control plane (--backend real or both)"}
    progress: dict[str, Any] = {}
    async with open_backend("real", 3, workdir / "real", binaries, progress) as bench:
        assert isinstance(bench, RealBench)
        return {"real": await measure(bench, workdir)}
