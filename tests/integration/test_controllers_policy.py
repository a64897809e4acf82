"""The controllers' admission policy (packaging/kubernetes/controllers-policy.yaml) on the real
control plane: the controllers' ServiceAccount, with a token bound to a pod as the Deployment's
pods have it, may change of Pods, Nodes and NodeMaintenances only what the controllers write;
every other field is refused with a message naming the object and the field. With a token
bound to no pod (a Debian agent running the controllers and its node's part) it may also
create, complete and delete shutdown maintenances. The normal work under the policy is the
other controller tests' (the real backend installs it with the controllers' account)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
import yaml

from nodeagent.kube.client import KubeClient, PatchType
from nodeagent.kube.errors import Forbidden
from nodeagent.kube.resources import NODEMAINTENANCES, NODES, PODS
from nodeagent.model import shutdown as model
from nodeagent.model.names import CORDONED_BY_ANNOTATION, FINALIZER, MAINTENANCE_TAINT, NODE_LABEL
from tests.clusters import CONTROLLERS_ACCOUNT, CONTROLLERS_POLICY, REPO, TestCluster, create_pod

pytestmark = pytest.mark.backends("real")

Obj = dict[str, Any]
POLICY_FILE = REPO / "packaging" / "kubernetes" / "controllers-policy.yaml"
BOOT = "5d6c7b8a-1111-2222-3333-444455556666"
TAINT = f"{MAINTENANCE_TAINT['key']}:{MAINTENANCE_TAINT['effect']}"
# a lifecycle condition, as a node's part writes it (a strategic merge patch of Node status)
DRAINED = {
    "status": {
        "conditions": [{"type": "Drained", "status": "True", "reason": "Test", "message": "test"}]
    }
}


@dataclass
class Env:
    backend: TestCluster
    admin: KubeClient
    controllers: KubeClient  # a token bound to a pod on node-3, as the Deployment's


@pytest.fixture
async def env(backend: TestCluster) -> AsyncIterator[Env]:
    await backend.install_crds()
    account = await backend.service_account(CONTROLLERS_ACCOUNT, node="node-3")
    yield Env(backend, backend.client(), backend.client(account))


def version(obj: Obj) -> str:
    return str(obj["metadata"]["resourceVersion"])


async def refused(
    kube: KubeClient,
    write: str,
    resource: Any,
    name: str,
    patch: Obj,
    namespace: str | None = None,
    patch_type: PatchType = "merge",
) -> str:
    """The policy's message refusing the patch (`write`: patch or patch_status)."""
    with pytest.raises(Forbidden) as e:
        await getattr(kube, write)(resource, name, patch, namespace, patch_type=patch_type)
    assert CONTROLLERS_POLICY in str(e.value), e.value
    return str(e.value)


# -- Pods -------------------------------------------------------------------------------------


async def a_pod(env: Env) -> Obj:
    return await create_pod(
        env.admin,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "work", "namespace": "default", "labels": {"app": "work"}},
            "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "nginx"}]},
        },
    )


@pytest.mark.parametrize(
    ("patch", "patch_type", "field"),
    [
        (
            {"spec": {"containers": [{"name": "c", "image": "evil"}]}},
            "strategic",
            "spec.containers",
        ),
        ({"metadata": {"labels": {"app": "other"}}}, "merge", "metadata.labels"),
        ({"spec": {"activeDeadlineSeconds": 1}}, "merge", "spec.activeDeadlineSeconds"),
        ({"metadata": {"finalizers": ["example.com/keep"]}}, "merge", "metadata.finalizers"),
    ],
    ids=["image", "labels", "spec-other", "finalizers"],
)
async def test_pod_fields_but_annotations_are_refused(
    env: Env, patch: Obj, patch_type: PatchType, field: str
) -> None:
    pod = await a_pod(env)
    message = await refused(env.controllers, "patch", PODS, "work", patch, "default", patch_type)
    assert f"may not change {field} of Pod default/work" in message
    got = await env.admin.get(PODS, "work", "default")
    assert got["spec"] == pod["spec"] and got["metadata"]["labels"] == {"app": "work"}


async def test_pod_annotations_are_allowed(env: Env) -> None:
    """As an annotate-and-wait interceptor writes and withdraws its annotation (without its
    resourceVersion precondition: kwok may write the pod's status meanwhile)."""
    pod = await a_pod(env)
    for value in ("true", None):
        patch = {"metadata": {"uid": pod["metadata"]["uid"], "annotations": {"x/move": value}}}
        pod = await env.controllers.patch(PODS, "work", patch, "default")
        assert (pod["metadata"].get("annotations") or {}).get("x/move") == value


# -- Nodes ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("patch", "field"),
    [
        (
            {"metadata": {"labels": {"node-role.kubernetes.io/control-plane": ""}}},
            "metadata.labels",
        ),
        (
            {"metadata": {"annotations": {"example.com/owner": "me"}}},
            "metadata.annotations[example.com/owner]",
        ),
        (
            {"spec": {"taints": [{"key": "example.com/evil", "effect": "NoSchedule"}]}},
            f"spec.taints other than {TAINT}",
        ),
        (  # our key, but an effect that evicts: not ours
            {"spec": {"taints": [{"key": MAINTENANCE_TAINT["key"], "effect": "NoExecute"}]}},
            f"spec.taints other than {TAINT}",
        ),
        ({"spec": {"providerID": "kwok://elsewhere"}}, "spec.providerID"),
        # (a podCIDR, once set as on these nodes, the API server itself keeps)
    ],
    ids=["labels", "annotations", "taints", "taint-effect", "providerID"],
)
async def test_node_fields_are_refused(env: Env, patch: Obj, field: str) -> None:
    before = await env.admin.get(NODES, "node-1")
    message = await refused(env.controllers, "patch", NODES, "node-1", patch)
    assert f"may not change {field}" in message and "of Node node-1" in message
    after = await env.admin.get(NODES, "node-1")
    assert version(after) == version(before)


async def test_node_status_is_refused(env: Env) -> None:
    """Not even where the node role is bound to the account too (RBAC says no otherwise)."""
    account = await env.backend.service_account(
        CONTROLLERS_ACCOUNT, node="node-3", also_roles=["nodeagent-node"]
    )
    both = env.backend.client(account)
    message = await refused(both, "patch_status", NODES, "node-1", DRAINED, patch_type="strategic")
    assert "may not write the status of Node node-1" in message


async def test_cordon_and_maintenance_taint_are_allowed(env: Env) -> None:
    """As the NodeMaintenance controller cordons and the DaemonSet interceptor taints (other
    taints stay), and back."""
    other = {"key": "example.com/gpu", "effect": "NoSchedule"}
    node = await env.admin.patch(NODES, "node-1", {"spec": {"taints": [other]}})
    node = await env.controllers.patch(
        NODES,
        "node-1",
        {
            "metadata": {
                "resourceVersion": version(node),
                "annotations": {CORDONED_BY_ANNOTATION: "m1"},
            },
            "spec": {"unschedulable": True, "taints": [other, dict(MAINTENANCE_TAINT)]},
        },
    )
    assert node["spec"]["unschedulable"] is True
    assert node["metadata"]["annotations"][CORDONED_BY_ANNOTATION] == "m1"
    node = await env.controllers.patch(
        NODES,
        "node-1",
        {
            "metadata": {"annotations": {CORDONED_BY_ANNOTATION: None}},
            "spec": {"unschedulable": None, "taints": [other]},
        },
    )
    assert "unschedulable" not in node["spec"] and node["spec"]["taints"] == [other]
    assert CORDONED_BY_ANNOTATION not in (node["metadata"].get("annotations") or {})


# -- NodeMaintenances -------------------------------------------------------------------------


def selecting(node: str) -> Obj:
    return {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": [node]}]}]}  # fmt: skip


EVERY_NODE = {"nodeSelectorTerms": [{"matchExpressions": [
    {"key": "kubernetes.io/os", "operator": "Exists"}]}]}  # fmt: skip


async def an_admins_maintenance(env: Env) -> Obj:
    body = {
        "apiVersion": "nodeagent.io/v1alpha1",
        "kind": "NodeMaintenance",
        "metadata": {"name": "kernel-update", "labels": {"team": "ops"}},
        "spec": {"nodeSelector": selecting("node-2"), "stage": "Idle", "reason": "kernel"},
    }
    return await env.admin.create(NODEMAINTENANCES, body)


@pytest.mark.parametrize(
    ("patch", "field"),
    [
        ({"spec": {"nodeSelector": EVERY_NODE}}, "spec.nodeSelector"),
        ({"spec": {"stage": "Drain"}}, "spec.stage"),
        ({"metadata": {"labels": {"team": "nobody"}}}, "metadata.labels"),
        ({"metadata": {"annotations": {"example.com/x": "y"}}}, "metadata.annotations"),
        (
            {"metadata": {"finalizers": [FINALIZER, "example.com/keep"]}},
            f"metadata.finalizers other than {FINALIZER}",
        ),
    ],
    ids=["retarget", "stage", "labels", "annotations", "foreign-finalizer"],
)
async def test_maintenance_fields_are_refused(env: Env, patch: Obj, field: str) -> None:
    nm = await an_admins_maintenance(env)
    message = await refused(env.controllers, "patch", NODEMAINTENANCES, "kernel-update", patch)
    assert f"may not change {field} of NodeMaintenance kernel-update" in message
    got = await env.admin.get(NODEMAINTENANCES, "kernel-update")
    assert version(got) == version(nm)


async def test_finalizer_and_status_are_allowed(env: Env) -> None:
    """As the NodeMaintenance controller adds its finalizer, writes status and, on Complete,
    takes the finalizer off (others' finalizers stay where they are)."""
    nm = await an_admins_maintenance(env)
    nm = await env.admin.patch(
        NODEMAINTENANCES, "kernel-update", {"metadata": {"finalizers": ["example.com/keep"]}}
    )
    for finalizers in (["example.com/keep", FINALIZER], ["example.com/keep"]):
        patch = {"metadata": {"finalizers": finalizers, "resourceVersion": version(nm)}}
        nm = await env.controllers.patch(NODEMAINTENANCES, "kernel-update", patch)
        assert nm["metadata"]["finalizers"] == finalizers
        status = {"metadata": {"resourceVersion": version(nm)}, "status": {"nodeStatuses": []}}
        nm = await env.controllers.patch_status(NODEMAINTENANCES, "kernel-update", status)


async def test_deployment_token_may_not_create_or_complete_shutdown_maintenances(
    env: Env,
) -> None:
    """A shutdown maintenance is the node's part to write, which the Deployment does not run:
    refused even where the node role is bound to the account too."""
    account = await env.backend.service_account(
        CONTROLLERS_ACCOUNT, node="node-3", also_roles=["nodeagent-node"]
    )
    both = env.backend.client(account)
    body = model.shutdown_maintenance("node-1", BOOT, "reboot")
    name = body["metadata"]["name"]
    with pytest.raises(Forbidden) as e:
        await both.create(NODEMAINTENANCES, body)
    assert f"may not create NodeMaintenance {name}" in str(e.value)
    await env.admin.create(NODEMAINTENANCES, body)
    message = await refused(both, "patch", NODEMAINTENANCES, name, {"spec": {"stage": "Complete"}})
    assert f"may not change spec.stage of NodeMaintenance {name}" in message
    with pytest.raises(Forbidden) as e:
        await both.delete(NODEMAINTENANCES, name)
    assert f"may not delete NodeMaintenance {name}" in str(e.value)


async def test_a_debian_agent_writes_shutdown_maintenances_only(env: Env) -> None:
    """The controllers' account with the node role and a token bound to no pod, as a Debian
    agent that runs the controllers and its node's part has it: its shutdown maintenance may be
    created, completed and deleted, not retargeted; no one else's is changed; its Node's
    status may be written, the rest of the Node is confined as ever."""
    account = await env.backend.service_account(CONTROLLERS_ACCOUNT, also_roles=["nodeagent-node"])
    agent = env.backend.client(account)
    body = model.shutdown_maintenance("node-1", BOOT, "reboot")
    name = body["metadata"]["name"]
    await agent.create(NODEMAINTENANCES, body)
    retarget = {
        "metadata": {"labels": {NODE_LABEL: "node-2"}},
        "spec": {"nodeSelector": selecting("node-2")},
    }
    message = await refused(agent, "patch", NODEMAINTENANCES, name, retarget)
    assert f"may not change spec.nodeSelector, metadata.labels of NodeMaintenance {name}" in message
    await agent.patch(NODEMAINTENANCES, name, {"spec": {"stage": "Complete"}})
    await agent.delete(NODEMAINTENANCES, name)
    await an_admins_maintenance(env)
    message = await refused(
        agent, "patch", NODEMAINTENANCES, "kernel-update", {"spec": {"stage": "Drain"}}
    )
    assert "may not change spec.stage of NodeMaintenance kernel-update" in message
    with pytest.raises(Forbidden) as e:
        await agent.delete(NODEMAINTENANCES, "kernel-update")
    assert "may not delete NodeMaintenance kernel-update" in str(e.value)
    node = await agent.patch_status(NODES, "node-1", DRAINED, patch_type="strategic")
    assert any(c["type"] == "Drained" for c in node["status"]["conditions"])
    message = await refused(agent, "patch", NODES, "node-1", {"metadata": {"labels": {"a": "b"}}})
    assert "may not change metadata.labels of Node node-1" in message


# -- the policy's names are the code's -----------------------------------------------------


def test_policy_names_are_the_codes() -> None:
    policy = next(
        d
        for d in yaml.safe_load_all(POLICY_FILE.read_text())
        if d["kind"] == "ValidatingAdmissionPolicy"
    )
    variables = {v["name"]: v["expression"] for v in policy["spec"]["variables"]}
    assert variables["cordonedBy"] == f"'{CORDONED_BY_ANNOTATION}'"
    assert variables["finalizer"] == f"'{FINALIZER}'"
    taint = yaml.safe_load(variables["maintenanceTaint"].replace("'", '"'))
    assert taint == dict(MAINTENANCE_TAINT)
    assert f"'{NODE_LABEL}'" in variables["oldIsShutdown"] + variables["newIsShutdown"]
    assert TAINT in yaml.safe_dump(policy["spec"]["variables"])
