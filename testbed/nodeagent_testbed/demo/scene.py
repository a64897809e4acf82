"""What the demo puts on the simulated cluster: priority classes, workloads with disruption
budgets, two DaemonSets, a bare pod and one static pod (an etcd-like manifest) on node-1.

Exit times (`sim.nodeagent.io/exit-seconds`) make each pod take a short but visible time to
stop once it is asked to; `speed` divides them.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import yaml

from nodeagent.config import LeaderConfig
from nodeagent_testbed.demo.readiness import READY_AFTER
from nodeagent_testbed.sim.actors.kubelet import EXIT_SECONDS
from nodeagent_testbed.sim.cluster import SimCluster

NODE = "node-1"
STATIC_MANIFEST_NAME = "etcd.yaml"

PRIORITY_CLASSES: list[dict[str, Any]] = [
    {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        "description": description,
    }
    for name, value, description in (
        ("batch", 100, "batch jobs: first to go"),
        ("standard", 1000, "ordinary services"),
        ("important", 100000, "services that should stay longest among user workloads"),
    )
]

# name, namespace, replicas, priority class, exit seconds, PDB spec; their pods become Ready
# READY_AFTER_SECONDS after they start, so the budgets hold evictions back for a moment
_DEPLOYMENTS: tuple[tuple[str, str, int, str, float, dict[str, Any]], ...] = (
    ("web", "default", 4, "standard", 1.0, {"maxUnavailable": 1}),
    ("api", "default", 3, "important", 1.0, {"minAvailable": 2}),
    ("coredns", "kube-system", 2, "system-cluster-critical", 0.5, {"minAvailable": 1}),
)
READY_AFTER_SECONDS = 1.0
# name, namespace, priority class, exit seconds
_DAEMONSETS: tuple[tuple[str, str, str, float], ...] = (
    ("log-agent", "default", "standard", 0.8),
    ("kube-proxy", "kube-system", "system-node-critical", 0.8),
)

DAEMONSET_COUNT = len(_DAEMONSETS)

STATIC_POD_MANIFEST = """\
# an etcd-like static pod: the kubelet runs it from this file, nodeagent moves the file aside
# when the drain reaches Static<=2000001000 and puts it back after the reboot
apiVersion: v1
kind: Pod
metadata:
  name: etcd
  namespace: kube-system
  labels: {app: etcd, component: etcd, tier: control-plane}
  annotations:
    sim.nodeagent.io/exit-seconds: "%(exit)s"
spec:
  priorityClassName: system-node-critical
  hostNetwork: true
  containers:
  - name: etcd
    image: registry.k8s.io/etcd:3.6.4-0
    command: [etcd, --data-dir=/var/lib/etcd]
"""


@dataclass(frozen=True)
class Expectation:
    """How many pods run where once the scene has settled."""

    on_node: int  # on node-1
    elsewhere: int  # on each other node


def _exit(seconds: float, speed: float) -> str:
    return f"{seconds / speed:.2f}"


def _template(
    app: str, priority_class: str, exit_seconds: float, speed: float, image: str
) -> dict[str, Any]:
    return {
        "metadata": {
            "labels": {"app": app},
            "annotations": {EXIT_SECONDS: _exit(exit_seconds, speed)},
        },
        "spec": {
            "priorityClassName": priority_class,
            "terminationGracePeriodSeconds": 30,
            "containers": [{"name": app, "image": image}],
        },
    }


def workloads(speed: float) -> list[dict[str, Any]]:
    """Every object the scene creates (after the priority classes), in creation order."""
    out: list[dict[str, Any]] = []
    for name, ns, replicas, pc, exit_s, pdb in _DEPLOYMENTS:
        template = _template(name, pc, exit_s, speed, f"example.com/{name}:1.0")
        template["metadata"]["annotations"][READY_AFTER] = _exit(READY_AFTER_SECONDS, speed)
        out.append(
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": name, "namespace": ns},
                "spec": {
                    "replicas": replicas,
                    "selector": {"matchLabels": {"app": name}},
                    "template": template,
                },
            }
        )
        out.append(
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": name, "namespace": ns},
                "spec": {**pdb, "selector": {"matchLabels": {"app": name}}},
            }
        )
    out.append(
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {"name": "db", "namespace": "default"},
            "spec": {
                "replicas": 2,
                "serviceName": "db",
                "selector": {"matchLabels": {"app": "db"}},
                "template": _template("db", "important", 1.0, speed, "postgres:17"),
            },
        }
    )
    for name, ns, pc, exit_s in _DAEMONSETS:
        out.append(
            {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "metadata": {"name": name, "namespace": ns},
                "spec": {
                    "selector": {"matchLabels": {"app": name}},
                    "template": _template(name, pc, exit_s, speed, f"example.com/{name}:1.0"),
                },
            }
        )
    batch = _template("batch-report", "batch", 0.5, speed, "example.com/report:1.0")
    out.append(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "batch-report", "namespace": "default", **batch["metadata"]},
            "spec": batch["spec"],
        }
    )
    return out


def expectation() -> Expectation:
    deployments = sum(replicas for _, _, replicas, _, _, _ in _DEPLOYMENTS)
    statefulset, bare, static = 2, 1, 1
    return Expectation(
        on_node=deployments + statefulset + bare + static + len(_DAEMONSETS),
        elsewhere=len(_DAEMONSETS),
    )


def static_manifest(speed: float) -> str:
    return STATIC_POD_MANIFEST % {"exit": _exit(1.5, speed)}


def install_crds(sim: SimCluster) -> None:
    """nodeagent's CRDs, as `kubectl apply -f <(nodeagent manifests crds)` would, and the
    namespace of its leader-election Lease, as packaging/kubernetes makes it."""
    sim.install_crds()
    namespaces = sim.store.resource("", "v1", "namespaces")
    sim.store.create(namespaces, None, {"metadata": {"name": LeaderConfig().namespace}})


def create(sim: SimCluster, objects: list[dict[str, Any]]) -> None:
    store = sim.store
    for obj in objects:
        rt = store.type_of(obj["apiVersion"], obj["kind"])
        namespace = obj["metadata"].get("namespace") if rt.namespaced else None
        store.create(rt, namespace, copy.deepcopy(obj))


def set_unschedulable(sim: SimCluster, node: str, value: bool) -> None:
    nodes = sim.store.resource("", "v1", "nodes")

    def cordon(n: dict[str, Any]) -> None:
        if value:
            n.setdefault("spec", {})["unschedulable"] = True
        else:
            n.setdefault("spec", {}).pop("unschedulable", None)

    sim.store.mutate(nodes, None, node, cordon)


def describe() -> list[str]:
    """One line per workload, for the set-up part of the output."""
    lines = []
    for name, ns, replicas, pc, _, pdb in _DEPLOYMENTS:
        budget = ", ".join(f"{k} {v}" for k, v in pdb.items())
        lines.append(
            f"Deployment {ns}/{name}: {replicas} replicas, {pc}, PDB {budget}, "
            f"Ready {READY_AFTER_SECONDS:g}s after start"
        )
    lines.append("StatefulSet default/db: 2 replicas, important")
    for name, ns, pc, _ in _DAEMONSETS:
        lines.append(f"DaemonSet {ns}/{name}: {pc}")
    lines.append("Pod default/batch-report (no controller): batch")
    return lines


def manifest_summary(text: str) -> str:
    pod = yaml.safe_load(text)
    spec = pod.get("spec") or {}
    return f"{pod['metadata']['namespace']}/{pod['metadata']['name']} ({spec['priorityClassName']})"
