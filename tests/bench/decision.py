"""The NodeMaintenance decision at scale, measured side by side in one run: N nodes x 30
realistic pods (`cache.realistic_pod`, kept as the informers keep them,
`kube.cache_transforms`), one maintenance in Drain over every node, every pod's
EvictionRequest in place (the middle of a drain, the decision's heaviest state). Per N, the
median time of:

- **afresh**: a decision that derives everything again (no `Recall`; the pod and request
  memos the controller keeps are on, as before the incremental decision);
- **incremental**: the controller's way, with its `Recall`, where one pod of one node was
  replaced since the last decision (an informer event: what the next decision has to take in).

Both decide the same inputs and must agree; the growth exponents over N tell how each scales.
"""

from __future__ import annotations

import datetime
import math
import statistics
import time
from typing import Any

from nodeagent.kube.cache_transforms import lean_pod
from nodeagent.kube.resources import Obj
from nodeagent.model.bodies import as_eviction_request, as_maintenance
from nodeagent.model.draintargets.pods import PodInfoMemo
from nodeagent.model.interceptors.requests import EvictionRequestView
from nodeagent.model.memo import ObjectMemo, Recall
from nodeagent.model.nodemaintenance.decide import decide
from nodeagent.model.nodemaintenance.inputs import Inputs
from tests.bench.cache import realistic_pod

SIZES = (125, 250, 500)
PODS_PER_NODE = 30
RUNS = 15


def _world(nodes: int) -> tuple[dict[str, Obj], dict[str, tuple[Obj, ...]], Obj]:
    node_objs: dict[str, Obj] = {
        f"node-{i}": {
            "metadata": {"name": f"node-{i}", "labels": {"pool": "m"}, "resourceVersion": "1"},
            "spec": {"unschedulable": True},
        }
        for i in range(nodes)
    }
    pods: dict[str, list[Obj]] = {n: [] for n in node_objs}
    for i in range(nodes * PODS_PER_NODE):
        pod = realistic_pod(i)
        node = f"node-{i % nodes}"
        pod["spec"]["nodeName"] = node
        pods[node].append(lean_pod(pod))
    nm: Obj = {
        "apiVersion": "nodeagent.io/v1alpha1",
        "kind": "NodeMaintenance",
        "metadata": {
            "name": "m",
            "uid": "m-uid",
            "generation": 1,
            "resourceVersion": "5",
            "finalizers": ["nodeagent.io/maintenance"],
        },
        "spec": {
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["m"]}]}
                ]
            },
            "stage": "Drain",
            "reason": "bench",
        },
    }
    return node_objs, {n: tuple(p) for n, p in pods.items()}, nm


def _median_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 2)


def measure(nodes: int, runs: int = RUNS) -> dict[str, Any]:
    node_objs, pods, nm = _world(nodes)
    pod_info, request_view = PodInfoMemo(), ObjectMemo(EvictionRequestView.from_obj)
    now = datetime.datetime.now(datetime.UTC)

    def inputs(requests: dict[str, Obj], recall: Recall | None) -> Inputs:
        return Inputs(
            maintenance=as_maintenance(nm),
            maintenances=[as_maintenance(nm)],
            nodes=node_objs,
            pods=pods,
            eviction_requests={k: as_eviction_request(v) for k, v in requests.items()},
            now=now,
            pod_info=pod_info,
            request_view=request_view,
            recall=recall,
        )

    first = decide(inputs({}, None))
    requests: dict[str, Obj] = {}
    for c in first.create_evictions:
        meta = {
            **c.body["metadata"],
            "resourceVersion": "7",
            "uid": "er-" + c.body["metadata"]["name"],
        }
        requests[meta["name"]] = {**c.body, "metadata": meta}
    nm["status"] = first.status or {}

    recall = Recall()
    decide(inputs(requests, recall))  # the controller's Recall, warm
    afresh: list[float] = []
    incremental: list[float] = []
    for run in range(runs):
        # one pod of one node replaced, as an informer event replaces it
        node = f"node-{run % nodes}"
        changed = list(pods[node])
        changed[0] = {
            **changed[0],
            "metadata": {**changed[0]["metadata"], "labels": {"run": str(run)}},
        }
        pods[node] = tuple(changed)
        started = time.perf_counter()
        remembered = decide(inputs(requests, recall))
        incremental.append(time.perf_counter() - started)
        started = time.perf_counter()
        fresh = decide(inputs(requests, None))
        afresh.append(time.perf_counter() - started)
        if remembered != fresh:
            raise AssertionError(f"{nodes} nodes: the incremental decision differs from afresh")
    return {
        "nodes": nodes,
        "pods": nodes * PODS_PER_NODE,
        "requests": len(requests),
        "runs": runs,
        "afresh_ms": _median_ms(afresh),
        "incremental_ms": _median_ms(incremental),
        "afresh_vs_incremental": round(
            statistics.median(afresh) / statistics.median(incremental), 1
        ),
    }


def run(sizes: tuple[int, ...] = SIZES) -> dict[str, Any]:
    out = [measure(n) for n in sizes]
    lo, hi = out[0], out[-1]

    def exponent(key: str) -> float | None:
        if hi["nodes"] == lo["nodes"] or lo[key] <= 0:
            return None
        return round(math.log(hi[key] / lo[key]) / math.log(hi["nodes"] / lo["nodes"]), 2)

    return {
        "sizes": out,
        "growth_exponent": {
            "afresh_ms": exponent("afresh_ms"),
            "incremental_ms": exponent("incremental_ms"),
        },
    }


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))
