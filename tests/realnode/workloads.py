"""What the real-node tests run on node-1: static pods, workloads under budgets, a DaemonSet,
all from the images made locally (nodeagent_testbed.realnode.images; `imagePullPolicy: Never`: no
registry is reachable). Each container exits at once on SIGTERM, as a well-behaved server does."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import yaml

from nodeagent.kube.resources import NODES, PODS
from nodeagent_testbed.realnode.images import BUSYBOX
from nodeagent_testbed.realnode.node import MANIFEST_DIR
from tests.clusters import CONTROLLERS_ACCOUNT, ClusterView
from tests.e2e.node import KINDS, install_package, kind_of, running

# `sleep & wait` so the shell runs its TERM trap at once, not after the sleep
SERVE = ["sh", "-c", "trap 'exit 0' TERM; sleep 100000 & wait"]


def serve_exiting_after(seconds: float) -> list[str]:
    """SERVE, exiting `seconds` after SIGTERM (a server finishing its requests)."""
    return ["sh", "-c", f"trap 'sleep {seconds:g}; exit 0' TERM; sleep 100000 & wait"]


def _container(name: str, command: list[str] = SERVE) -> dict[str, Any]:
    return {"name": name, "image": BUSYBOX, "imagePullPolicy": "Never", "command": command}


def static_pod(name: str, command: list[str] = SERVE) -> bytes:
    doc = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "kube-system", "labels": {"component": name}},
        "spec": {
            "hostNetwork": True,
            "priorityClassName": "system-node-critical",
            # as kubeadm writes it: a file's pod skips admission, which would resolve the class,
            # so without this the kubelet sees priority 0 (its GNS stops it with the first group)
            "priority": 2000001000,
            "terminationGracePeriodSeconds": 5,
            "containers": [_container(name, command)],
        },
    }
    return yaml.safe_dump(doc, sort_keys=False).encode()


ETCD = static_pod("etcd")
SCHEDULER = static_pod("kube-scheduler")


def deployment(
    name: str, namespace: str, replicas: int, priority: str | None, command: list[str] = SERVE
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "terminationGracePeriodSeconds": 5,
        "containers": [_container("c", command)],
    }
    if priority:
        spec["priorityClassName"] = priority
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": spec},
        },
    }


def daemonset(command: list[str] = SERVE) -> dict[str, Any]:
    """DaemonSet `logs` in default, on node-1 only (kwok's nodes would run it too, and the
    tests count it)."""
    template = {
        "metadata": {"labels": {"app": "logs"}},
        "spec": {
            "terminationGracePeriodSeconds": 5,
            "containers": [_container("c", command)],
            "nodeSelector": {"kubernetes.io/hostname": "node-1"},
        },
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "logs", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "logs"}}, "template": template},
    }


WORKLOADS: list[dict[str, Any]] = [
    deployment("low", "default", 2, None),
    deployment("high", "kube-system", 2, "system-cluster-critical"),
    {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "high", "namespace": "kube-system"},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "high"}}},
    },
    daemonset(),
]


def node_pods(view: ClusterView, node: str) -> list[dict[str, Any]]:
    return [p for p in view.list(PODS) if p["spec"].get("nodeName") == node]


def evicted(pod: dict[str, Any]) -> bool:
    """The pod's deletion came through the Eviction API (kube-apiserver sets this condition)."""
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(
        c.get("type") == "DisruptionTarget" and c.get("reason") == "EvictionByEvictionAPI"
        for c in conditions
    )


async def create_on_node(
    n: Any, workloads: list[dict[str, Any]], node: str = "node-1", timeout: float = 60
) -> None:
    """Create `workloads` with the other nodes cordoned, so their pods land on `node`; uncordon
    them once those pods are placed (the drained pods' replacements go there)."""
    others = [x for x in ("node-1", "node-2", "node-3") if x != node]
    for name in others:
        await n.kube.patch(NODES, name, {"spec": {"unschedulable": True}})
    await n.view.until(
        lambda: all(
            (n.view.get(NODES, x) or {}).get("spec", {}).get("unschedulable") for x in others
        )
    )
    for doc in workloads:
        await n.kube.create(KINDS[doc["kind"]], doc)
    deployments = [d for d in workloads if d["kind"] == "Deployment"]
    apps = {d["metadata"]["name"] for d in deployments}
    wanted = sum(d["spec"].get("replicas", 0) for d in deployments)
    await n.view.until(
        lambda: (
            sum(
                1
                for p in node_pods(n.view, node)
                if (p["metadata"].get("labels") or {}).get("app") in apps
            )
            >= wanted
        ),
        timeout=timeout,
    )
    for name in others:
        await n.kube.patch(NODES, name, {"spec": {"unschedulable": None}})


def running_kinds(view: ClusterView, node: str = "node-1") -> list[str]:
    """What runs on `node`, by kind (tests.e2e.node.kind_of), sorted."""
    return sorted(kind_of(p) for p in node_pods(view, node) if running(p))


async def static_pods_running(n: Any, node: str = "node-1") -> None:
    """Until the real kubelet runs both static pods (their mirror pods Running)."""
    await n.view.until(
        lambda: sum(kind_of(p) == "static" and running(p) for p in node_pods(n.view, node)) == 2,
        timeout=180,
    )


async def deb_node_with_pods(
    n: Any, deb: Path, budget: int, more: dict[str, Any] | None = None
) -> Path:
    """node-1 booted with the agent from the Debian package (the controllers' account with the
    node role: it runs both parts; `more`: further settings), both static pods and WORKLOADS
    running; returns the manifest directory."""
    c = n.container
    manifests: Path = c.path(MANIFEST_DIR)
    (manifests / "etcd.yaml").write_bytes(ETCD)
    (manifests / "kube-scheduler.yaml").write_bytes(SCHEDULER)
    account = await n.backend.service_account(CONTROLLERS_ACCOUNT, also_roles=["nodeagent-node"])
    settings = {"shutdown": {"budget": budget, "safetyMargin": 5}, **(more or {})}
    await asyncio.to_thread(install_package, c, deb, account, settings)
    await c.boot()
    await static_pods_running(n)
    await create_on_node(n, WORKLOADS)
    await n.view.until(
        lambda: (
            running_kinds(n.view) == ["daemonset", "high", "high", "low", "low", "static", "static"]
        ),
        timeout=120,
    )
    return manifests
