"""kwok nodes named as the simulated cluster names them (`node-1` ...), and the wait until the
control plane can run pods on them."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from kubernetes import client

from nodeagent_testbed.controlplane.kubeapi import api_client, watch_stream

KWOK_ANNOTATION = "kwok.x-k8s.io/node"
# kwok's node-initialize stage fills in the rest of the status
CAPACITY = {"cpu": "4", "memory": "16Gi", "pods": "110", "ephemeral-storage": "100Gi"}


def node_body(name: str, index: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {KWOK_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "type": "kwok",
            },
        },
        "spec": {"podCIDR": f"10.{index}.0.0/16", "podCIDRs": [f"10.{index}.0.0/16"]},
        "status": {"capacity": dict(CAPACITY), "allocatable": dict(CAPACITY)},
    }


def api(kubeconfig: Path) -> client.ApiClient:
    return api_client(kubeconfig)


def create_nodes(
    kubeconfig: Path, count: int, prefix: str = "node-", leave: frozenset[str] = frozenset()
) -> None:
    """The nodes but those in `leave` (a real kubelet registers them), and the default
    ServiceAccounts pods need: the controller-manager makes them too, but only seconds after it
    starts (it adopts these)."""
    with api(kubeconfig) as c:
        core = client.CoreV1Api(c)
        for i in range(1, count + 1):
            if f"{prefix}{i}" in leave:
                continue
            core.create_node(client.V1Node.model_validate(node_body(f"{prefix}{i}", i)))
        for ns in ("default", "kube-system"):
            try:
                account = client.V1ServiceAccount.model_validate({"metadata": {"name": "default"}})
                core.create_namespaced_service_account(ns, account)
            except client.ApiException as e:
                if e.status != 409:
                    raise


def name_of(node: client.V1Node) -> str:
    assert node.metadata is not None and node.metadata.name is not None
    return node.metadata.name


def list_version(listed: client.V1NodeList | client.V1ServiceAccountList) -> str | None:
    assert listed.metadata is not None
    return listed.metadata.resource_version


def ready(node: client.V1Node) -> bool:
    """Ready, and the node lifecycle controller took the not-ready taint off (pods can go)."""
    conditions = (node.status and node.status.conditions) or []
    taints = (node.spec and node.spec.taints) or []
    return any(c.type == "Ready" and c.status == "True" for c in conditions) and not any(
        t.key.startswith("node.kubernetes.io/") for t in taints
    )


def wait_settled(kubeconfig: Path, count: int, timeout: float) -> None:
    """Until `count` nodes are Ready and the default ServiceAccount exists (pods need it)."""
    deadline = time.monotonic() + timeout
    with api(kubeconfig) as c:
        core = client.CoreV1Api(c)
        seen: dict[str, bool] = {}
        listed = core.list_node()
        for n in listed.items:
            seen[name_of(n)] = ready(n)
        rv = list_version(listed)
        while sum(seen.values()) < count:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"nodes not Ready after {timeout:.0f} s: {seen}")
            for ev in watch_stream(
                core.list_node, resource_version=rv, timeout_seconds=max(1, int(left))
            ):
                n = ev["object"]
                rv = n.metadata.resource_version
                seen[name_of(n)] = ready(n)
                if sum(seen.values()) >= count:
                    break
        field = "metadata.name=default"
        accounts = core.list_namespaced_service_account("default", field_selector=field)
        if not accounts.items:
            for ev in watch_stream(
                core.list_namespaced_service_account,
                "default",
                field_selector=field,
                resource_version=list_version(accounts),
                timeout_seconds=max(1, int(deadline - time.monotonic())),
            ):
                if ev["type"] == "ADDED":
                    break
            else:
                raise TimeoutError("the default ServiceAccount never appeared")


def wait_node_ready(kubeconfig: Path, name: str, timeout: float) -> None:
    """Until the node `name` (a real kubelet registers it) is Ready."""
    deadline = time.monotonic() + timeout
    field = f"metadata.name={name}"
    with api(kubeconfig) as c:
        core = client.CoreV1Api(c)
        listed = core.list_node(field_selector=field)
        if any(ready(n) for n in listed.items):
            return
        rv = list_version(listed)
        while (left := deadline - time.monotonic()) > 0:
            for ev in watch_stream(
                core.list_node,
                field_selector=field,
                resource_version=rv,
                timeout_seconds=max(1, int(left)),
            ):
                rv = ev["object"].metadata.resource_version
                if ready(ev["object"]):
                    return
        raise TimeoutError(f"node {name} not Ready after {timeout:.0f} s")
