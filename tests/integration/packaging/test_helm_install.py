"""The Helm chart installed on the real control plane (kube-apiserver, controller-manager,
scheduler and kwok of the `backend` fixture) with real `helm` (the `helm` fixture of conftest.py),
as packaging/helm/README.md says to: the namespace created and labelled
`pod-security.kubernetes.io/enforce=privileged` with kubectl, then `helm install`.

What it checks: the install succeeds (the CRDs of crds/ first and Established, then the templates,
the ValidatingAdmissionPolicy and its binding accepted by the server); every object of the release's
manifest exists (Deployment, DaemonSet, PodDisruptionBudget, ServiceAccounts, RBAC, ConfigMaps, the
policy and binding, the NetworkPolicy); the DaemonSet runs one pod on each kwok node and the
controllers' Deployment gets its replicas (kwok plays the kubelets: the image is never pulled); the
chart's policy is in force for the chart's node account (a token bound to the DaemonSet's pod on
node-1 may not make a NodeMaintenance for another node, refused by the policy, not by RBAC); `helm
upgrade` with other values applies them (replicas, an agent's configuration); `helm uninstall`
removes every object of the release and their pods, and leaves the CRDs and the namespace, as Helm
does. Real control plane only: the simulated server has no admission policies, no garbage collector
and no scheduler to speak of."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from nodeagent.kube.client import KubeClient
from nodeagent.kube.resources import CRDS, DAEMONSETS, DEPLOYMENTS, PDBS, PODS, Resource
from nodeagent.manifests import crd_documents
from tests.clusters import NAMESPACES, ClusterView, TestCluster, request_token, wait_policy_in_force
from tests.conftest import Kubectl
from tests.integration.packaging.test_helm_chart import CHART

pytestmark = pytest.mark.backends("real")

Obj = dict[str, Any]
RELEASE = "nodeagent"
NAMESPACE = "nodeagent-system"
# generous: the control plane shares two cores with the test
TIMEOUT = 180.0

RBAC = "rbac.authorization.k8s.io"
ADMISSION = "admissionregistration.k8s.io"
# every kind the chart renders with its default values
RESOURCES = {
    r.kind: r
    for r in (
        DAEMONSETS,
        DEPLOYMENTS,
        PDBS,
        Resource("", "v1", "serviceaccounts", "ServiceAccount", True),
        Resource("", "v1", "configmaps", "ConfigMap", True),
        Resource(RBAC, "v1", "clusterroles", "ClusterRole", False),
        Resource(RBAC, "v1", "clusterrolebindings", "ClusterRoleBinding", False),
        Resource(RBAC, "v1", "roles", "Role", True),
        Resource(RBAC, "v1", "rolebindings", "RoleBinding", True),
        Resource(
            ADMISSION, "v1", "validatingadmissionpolicies", "ValidatingAdmissionPolicy", False
        ),
        Resource(
            ADMISSION,
            "v1",
            "validatingadmissionpolicybindings",
            "ValidatingAdmissionPolicyBinding",
            False,
        ),
        Resource("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", True),
    )
}


@dataclass
class Helm:
    """helm as the admin of the test's cluster, with its own cache, configuration and data."""

    path: Path
    kubeconfig: Path
    home: Path

    async def run(self, *args: str) -> str:
        env = {
            **os.environ,
            "KUBECONFIG": str(self.kubeconfig),
            "HELM_CACHE_HOME": str(self.home / "cache"),
            "HELM_CONFIG_HOME": str(self.home / "config"),
            "HELM_DATA_HOME": str(self.home / "data"),
        }
        proc = await asyncio.create_subprocess_exec(
            str(self.path),
            *args,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
        )
        async with asyncio.timeout(TIMEOUT):
            out, err = await proc.communicate()
        assert proc.returncode == 0, (
            f"helm {' '.join(args)} failed ({proc.returncode}):\n{out.decode()}{err.decode()}"
        )
        return out.decode()

    async def release_objects(self) -> list[tuple[Resource, str, str | None]]:
        """(resource, name, namespace) of each object of the release's current manifest."""
        manifest = await self.run("get", "manifest", RELEASE, "--namespace", NAMESPACE)
        out = []
        for doc in yaml.safe_load_all(manifest):
            if not doc:
                continue
            resource = RESOURCES.get(doc["kind"])
            assert resource is not None, f"the chart renders a {doc['kind']}: add it to RESOURCES"
            out.append(
                (resource, doc["metadata"]["name"], NAMESPACE if resource.namespaced else None)
            )
        return out

    async def revision(self) -> tuple[int, str]:
        status = yaml.safe_load(
            await self.run("status", RELEASE, "--namespace", NAMESPACE, "--output", "json")
        )
        return status["version"], status["info"]["status"]


@dataclass
class Env:
    backend: TestCluster
    admin: KubeClient
    view: ClusterView
    helm: Helm
    kubectl: Kubectl


@pytest.fixture
async def env(
    backend: TestCluster, helm: Path, kubectl: Kubectl, tmp_path: Path
) -> AsyncIterator[Env]:
    admin = backend.client(max_workers=4)
    view = ClusterView(admin, [CRDS, NAMESPACES, PODS, *RESOURCES.values()])
    await view.start()
    home = tmp_path / "helm-home"
    home.mkdir()
    try:
        yield Env(backend, admin, view, Helm(helm, backend.kubeconfig, home), kubectl)
    finally:
        await view.stop()


def condition(obj: Obj | None, kind: str) -> bool:
    conds = ((obj or {}).get("status") or {}).get("conditions") or []
    return any(c["type"] == kind and c["status"] == "True" for c in conds)


def rolled_out(obj: Obj | None) -> bool:
    """The workload's controller saw its current spec."""
    if obj is None:
        return False
    status = obj.get("status") or {}
    return bool(status.get("observedGeneration") == obj["metadata"]["generation"])


def pods(env: Env, name: str) -> list[Obj]:
    return env.view.list(PODS, NAMESPACE, **{"app.kubernetes.io/name": name})


def running(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running" and condition(pod, "Ready")


async def controllers_ready(env: Env, replicas: int) -> None:
    def ready() -> bool:
        d = env.view.get(DEPLOYMENTS, "nodeagent-controllers", NAMESPACE)
        if d is None or not rolled_out(d) or d["spec"]["replicas"] != replicas:
            return False
        status = d["status"]
        live = [p for p in pods(env, "nodeagent-controllers") if running(p)]
        return (
            status.get("readyReplicas") == replicas
            and status.get("updatedReplicas") == replicas
            and len(live) == replicas
            and all(p["spec"].get("nodeName") in env.backend.node_names for p in live)
        )

    await env.view.until(ready, timeout=TIMEOUT)


async def node_account(env: Env, pod: Obj) -> Path:
    """A kubeconfig with the token the DaemonSet's pod `pod` gets: the chart's node account,
    bound to the pod (so naming its node)."""
    token = await asyncio.to_thread(
        request_token, env.backend.kubeconfig, "nodeagent", NAMESPACE, pod
    )
    doc = yaml.safe_load(env.backend.kubeconfig.read_text())
    doc["users"] = [{"name": "nodeagent", "user": {"token": token}}]
    doc["contexts"][0]["context"]["user"] = "nodeagent"
    path = env.backend.kubeconfig.with_name("helm-nodeagent.kubeconfig")
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    path.chmod(0o600)
    return path


async def test_helm_install_upgrade_uninstall(env: Env) -> None:
    view, helm = env.view, env.helm
    # the namespace as packaging/helm/README.md makes it
    await env.kubectl.ok("create", "namespace", NAMESPACE)
    await env.kubectl.ok(
        "label", "namespace", NAMESPACE, "pod-security.kubernetes.io/enforce=privileged"
    )
    await view.until(
        lambda: (
            (
                ((view.get(NAMESPACES, NAMESPACE) or {}).get("metadata") or {}).get("labels") or {}
            ).get("pod-security.kubernetes.io/enforce")
            == "privileged"
        ),
        timeout=TIMEOUT,
    )

    # --- install: CRDs first, then the templates --------------------------------------------
    await helm.run("install", RELEASE, str(CHART), "--namespace", NAMESPACE)
    assert await helm.revision() == (1, "deployed")
    crd_names = [c["metadata"]["name"] for c in crd_documents()]
    await view.until(
        lambda: all(condition(view.get(CRDS, n), "Established") for n in crd_names),
        timeout=TIMEOUT,
    )
    objects = await helm.release_objects()
    kinds = {r.kind for r, _, _ in objects}
    assert kinds == set(RESOURCES), f"the release lacks {set(RESOURCES) - kinds}"
    await view.until(lambda: all(view.get(*o) is not None for o in objects), timeout=TIMEOUT)
    for resource, name, namespace in objects:
        got = view.get(resource, name, namespace)
        assert got is not None
        assert got["metadata"]["annotations"]["meta.helm.sh/release-name"] == RELEASE
        assert got["metadata"]["annotations"]["meta.helm.sh/release-namespace"] == NAMESPACE
    account_names = {n for r, n, _ in objects if r.kind == "ServiceAccount"}
    assert account_names == {"nodeagent", "nodeagent-controllers"}

    # the DaemonSet on every kwok node, the controllers with their replicas
    def agents_everywhere() -> bool:
        ds = view.get(DAEMONSETS, "nodeagent", NAMESPACE)
        if ds is None or not rolled_out(ds):
            return False
        status = ds["status"]
        live = [p for p in pods(env, "nodeagent") if running(p)]
        return (
            status.get("desiredNumberScheduled") == len(env.backend.node_names)
            and status.get("numberReady") == len(env.backend.node_names)
            and sorted(p["spec"]["nodeName"] for p in live) == sorted(env.backend.node_names)
        )

    await view.until(agents_everywhere, timeout=TIMEOUT)
    await controllers_ready(env, 2)
    for p in pods(env, "nodeagent-controllers"):
        assert p["spec"]["serviceAccountName"] == "nodeagent-controllers"

    # the chart's policy and RBAC in force for the chart's node account: node-1's agent may
    # not make a NodeMaintenance for another node (refused by the policy, not by RBAC)
    (agent,) = [p for p in pods(env, "nodeagent") if p["spec"]["nodeName"] == "node-1"]
    assert agent["spec"]["serviceAccountName"] == "nodeagent"
    account = await node_account(env, agent)
    await asyncio.to_thread(wait_policy_in_force, account, "node-1", TIMEOUT)

    # --- upgrade with other values ------------------------------------------------------------
    await helm.run(
        "upgrade",
        RELEASE,
        str(CHART),
        "--namespace",
        NAMESPACE,
        "--set",
        "controllers.replicas=3",
        "--set",
        "nodeAgent.config.shutdown.budget=900",
    )
    assert await helm.revision() == (2, "deployed")
    await controllers_ready(env, 3)

    def budget() -> object:
        cm = view.get(RESOURCES["ConfigMap"], "nodeagent-config", NAMESPACE)
        if cm is None:
            return None
        return yaml.safe_load(cm["data"]["config.yaml"])["shutdown"]["budget"]

    await view.until(lambda: budget() == 900, timeout=TIMEOUT)
    assert {(r, n, ns) for r, n, ns in await helm.release_objects()} == set(objects)

    # --- uninstall: the release's objects and their pods go; CRDs and namespace stay ----------
    await helm.run("uninstall", RELEASE, "--namespace", NAMESPACE)
    await view.until(
        lambda: all(view.get(*o) is None for o in objects) and not view.list(PODS, NAMESPACE),
        timeout=TIMEOUT,
    )
    for n in crd_names:
        assert condition(view.get(CRDS, n), "Established"), n
    assert view.get(NAMESPACES, NAMESPACE) is not None
    listed = await helm.run("list", "--namespace", NAMESPACE, "--all", "--short")
    assert listed.strip() == ""
