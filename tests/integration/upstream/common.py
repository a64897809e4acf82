"""What the upstream API tests build and read alike: pods pinned to a node, a budget over an
app, a pod's current Eviction."""

from __future__ import annotations

from nodeagent.kube.client import KubeClient
from nodeagent.kube.resources import EVICTIONS, PDBS, Obj
from nodeagent.model.lifecycle.succession import current
from tests.clusters import ClusterView, create_pod

__all__ = ["budget", "eviction_of", "evictions_of", "pinned_pod"]


def evictions_of(view: ClusterView, pod_uid: str, namespace: str = "default") -> list[Obj]:
    """Every Eviction of the pod of `pod_uid` the view holds."""
    return [
        e for e in view.list(EVICTIONS, namespace) if e["spec"]["target"]["pod"]["uid"] == pod_uid
    ]


def eviction_of(view: ClusterView, pod_uid: str, namespace: str = "default") -> Obj:
    """The pod's Eviction its requests mirror (the controller names it `pod-<N>-<pod name>`),
    or {}."""
    return dict(current(evictions_of(view, pod_uid, namespace)) or {})


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
