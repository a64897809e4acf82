"""What the upstream API tests build alike: pods pinned to a node, a budget over an app."""

from __future__ import annotations

from nodeagent.kube.client import KubeClient
from nodeagent.kube.resources import PDBS, Obj
from tests.clusters import create_pod

__all__ = ["budget", "pinned_pod"]


async def pinned_pod(
    admin: KubeClient,
    name: str,
    node: str = "node-1",
    responders: tuple[tuple[str, int], ...] = (),
    **labels: str,
) -> Obj:
    """A bare pod on `node`, naming `responders` (name, priority) as its eviction responders."""
    return await create_pod(
        admin,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": labels},
            "spec": {
                "nodeName": node,
                "evictionResponders": [{"name": n, "priority": p} for n, p in responders],
                "containers": [{"name": "c", "image": "busybox"}],
            },
        },
    )


async def budget(admin: KubeClient, app: str, min_available: int) -> Obj:
    """A PodDisruptionBudget named `app` over the pods labelled `app: <app>`."""
    return await admin.create(
        PDBS,
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": app, "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": app}}, "minAvailable": min_available},
        },
    )
