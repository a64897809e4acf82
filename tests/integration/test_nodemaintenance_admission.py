"""KEP-4212's admission of NodeMaintenances on the real control plane
(packaging/kubernetes/nodemaintenance-policy.yaml): the creator must be allowed to delete every
node the maintenance selects. A user allowed to create NodeMaintenances, but to delete only
node-2, may drain node-2 by name and nothing else; an admin may drain any node; node agents
are left to their own policy."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import pytest

from nodeagent.kube.client import KubeClient
from nodeagent.kube.errors import AlreadyExists, Forbidden
from nodeagent.kube.resources import NODEMAINTENANCES, Resource
from nodeagent.model import shutdown
from nodeagent.node.boot import read_boot_id
from tests.clusters import REPO, TestCluster, apply_files, until_policy_refuses

pytestmark = pytest.mark.backends("real")

Obj = dict[str, Any]
POLICY = "nodeagent-nodemaintenance-admission"
POLICY_FILE = REPO / "packaging" / "kubernetes" / "nodemaintenance-policy.yaml"
SERVICEACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount", namespaced=True)
CLUSTERROLES = Resource(
    "rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False
)


def by_name(name: str, *nodes: str) -> Obj:
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": list(nodes)}]}
    return _maintenance(name, {"nodeSelectorTerms": [term]})


def by_label(name: str) -> Obj:
    expr = {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}
    return _maintenance(name, {"nodeSelectorTerms": [{"matchExpressions": [expr]}]})


def _maintenance(name: str, selector: Obj) -> Obj:
    return {
        "apiVersion": "nodeagent.io/v1alpha1",
        "kind": "NodeMaintenance",
        "metadata": {"name": name},
        "spec": {"nodeSelector": selector, "stage": "Idle"},
    }


async def maintainer(backend: TestCluster, admin: KubeClient) -> Path:
    """A user (a ServiceAccount of namespace default) who may create NodeMaintenances and
    delete node-2, nothing more."""
    roles = {
        "test-maintainer": [
            {
                "apiGroups": ["nodeagent.io"],
                "resources": ["nodemaintenances"],
                "verbs": ["create", "get", "list", "watch", "update", "patch"],
            }
        ],
        "test-delete-node-2": [
            {"apiGroups": [""], "resources": ["nodes"], "resourceNames": ["node-2"],
             "verbs": ["delete"]}
        ],
    }  # fmt: skip
    for name, rules in roles.items():
        with contextlib.suppress(AlreadyExists):
            await admin.create(
                CLUSTERROLES,
                {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                 "metadata": {"name": name}, "rules": rules},
            )  # fmt: skip
    with contextlib.suppress(AlreadyExists):
        await admin.create(
            SERVICEACCOUNTS, {"metadata": {"name": "maintainer", "namespace": "default"}}, "default"
        )
    path: Path = await backend.service_account("maintainer", "default", also_roles=list(roles))
    return path


async def test_a_maintenance_drains_only_nodes_its_creator_may_delete(
    backend: TestCluster,
) -> None:
    await backend.install_crds()
    admin = backend.client(max_workers=2)
    await asyncio.to_thread(apply_files, backend.kubeconfig, [POLICY_FILE])
    user_kubeconfig = await maintainer(backend, admin)
    user = backend.client(user_kubeconfig, max_workers=2)

    def attempt(api: Any) -> None:
        from kubernetes import client as k8s

        k8s.CustomObjectsApi(api).create_cluster_custom_object(
            "nodeagent.io", "v1alpha1", "nodemaintenances", by_name("probe", "node-3"),
            dry_run="All",
        )  # fmt: skip

    await asyncio.to_thread(until_policy_refuses, user_kubeconfig, POLICY, attempt, 30)

    # node-2 by name: allowed
    await user.create(NODEMAINTENANCES, by_name("drain-node-2", "node-2"))
    # node-3 by name, node-2 and node-3, or nodes by label: refused, naming why
    for body, why in (
        (by_name("drain-node-3", "node-3"), "here the nodes it names"),
        (by_name("drain-both", "node-2", "node-3"), "here the nodes it names"),
        (by_label("drain-linux"), "here all nodes"),
    ):
        with pytest.raises(Forbidden) as refused:
            await user.create(NODEMAINTENANCES, body)
        assert POLICY in str(refused.value), refused.value
        assert "needs permission to delete each node it selects" in str(refused.value)
        assert why in str(refused.value)
    # widening its own maintenance to a node it may not delete: refused too
    with pytest.raises(Forbidden):
        await user.patch(
            NODEMAINTENANCES,
            "drain-node-2",
            {"spec": {"nodeSelector": by_name("x", "node-3")["spec"]["nodeSelector"]}},
        )
    # an admin may drain any node, by label too
    await admin.create(NODEMAINTENANCES, by_label("admin-drain"))
    # node agents are kept by their own policy: a shutdown maintenance of node-1 is theirs
    agent = backend.client(await backend.service_account(node="node-1"), max_workers=2)
    own = shutdown.shutdown_maintenance("node-1", read_boot_id(), "reboot")
    await agent.create(NODEMAINTENANCES, own)
