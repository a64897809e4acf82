"""The two cluster backends of the integration tests, behind one face.

`sim`: nodeagent's simulated API server and kubelets, in the test's own event loop.
`real`: kube-apiserver, kube-controller-manager, kube-scheduler and kwok built from upstream
(nodeagent_testbed.controlplane), on an etcd shared by the test session; every test gets API
servers of its own on a fresh etcd prefix, so no state leaks from one test to the next.

Tests read the cluster through `ClusterView`, caches filled by list+watch over HTTP like any
client's, and wait for conditions with `until`, which re-checks on every change seen (no
polling). The same assertions thus run against both servers.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import time
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, utils
from watchfiles import awatch

from nodeagent.kube.client import KubeClient
from nodeagent.kube.connection import load_api_client
from nodeagent.kube.errors import AlreadyExists, Conflict, Forbidden, KubeError, NotFound
from nodeagent.kube.informer import Informer
from nodeagent.kube.resources import CRDS, NODES, PODS, Obj, Resource
from nodeagent.manifests import crd_documents
from nodeagent.model.backoff import JitteredBackoff
from nodeagent_testbed.controlplane.kubeapi import api_client, create_from_dict
from nodeagent_testbed.sim.actors.staticpods import MIRROR, Manifest, is_mirror, mirror_pod, scan
from nodeagent_testbed.sim.cluster import SimCluster
from tests.tasks import cancel_and_wait
from tests.until import until as wait_until

log = logging.getLogger(__name__)

NAMESPACES = Resource("", "v1", "namespaces", "Namespace", False)

PRIORITY_CLASSES = Resource("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False)
# values only these built-in classes may have (user classes stop at one billion)
BUILTIN_CLASSES = {2000000000: "system-cluster-critical", 2000001000: "system-node-critical"}

BACKENDS = ("sim", "real")
REPO = Path(__file__).resolve().parents[1]
NAMESPACE = "nodeagent-system"
PACKAGING_RBAC = [
    REPO / "packaging" / "kubernetes" / f
    for f in (
        "namespace.yaml",
        "rbac.yaml",
        "admission-policy.yaml",
        "controllers-policy.yaml",
        "nodemaintenance-policy.yaml",
    )
]
# the ServiceAccounts of packaging/kubernetes: the node agents' (DaemonSet) and the controllers'
NODE_ACCOUNT = "nodeagent"
CONTROLLERS_ACCOUNT = "nodeagent-controllers"
POLICY = "nodeagent-node-restriction"
CONTROLLERS_POLICY = "nodeagent-controllers-restriction"


def with_heartbeat_spacing(crd: Obj, seconds: int) -> Obj:
    """`crd` with its CEL rules asking `seconds` between heartbeats instead of 60."""
    text = json.dumps(crd)
    if crd["spec"]["names"]["plural"] == "evictionrequests":
        assert "duration('60s')" in text, "the heartbeat rule moved: update this helper"
    return dict(json.loads(text.replace("duration('60s')", f"duration('{seconds}s')")))


class ClusterView:
    """Watch-fed caches of the resources a test looks at; `until` wakes on any change."""

    def __init__(self, kube: KubeClient, resources: Iterable[Resource]) -> None:
        self._changed = asyncio.Event()
        self._informers: dict[Resource, Informer] = {}
        self._listeners: list[Callable[[str, Resource, Obj], None]] = []
        self._tasks: list[asyncio.Task[None]] = []
        for r in resources:
            inf = Informer(
                kube, r, backoff=JitteredBackoff(base=0.05, cap=0.5, rng=random.Random(0))
            )
            self._report(inf, r)
            self._informers[r] = inf

    def _report(self, inf: Informer, resource: Resource) -> None:
        def on_add(o: Obj) -> None:
            self._seen("ADDED", resource, o)

        def on_update(_old: Obj, o: Obj) -> None:
            self._seen("MODIFIED", resource, o)

        def on_delete(o: Obj) -> None:
            self._seen("DELETED", resource, o)

        inf.add_handler(on_add=on_add, on_update=on_update, on_delete=on_delete)

    def _seen(self, kind: str, resource: Resource, obj: Obj) -> None:
        self._changed.set()
        for listener in self._listeners:
            listener(kind, resource, obj)

    def listen(self, fn: Callable[[str, Resource, Obj], None]) -> None:
        """Call `fn(event, resource, object)` on every change seen from now on, in order."""
        self._listeners.append(fn)

    async def start(self) -> None:
        for inf in self._informers.values():
            self._tasks.append(asyncio.create_task(inf.run()))
        async with asyncio.timeout(30):
            for inf in self._informers.values():
                await inf.wait_synced()

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t

    def get(self, resource: Resource, name: str, namespace: str | None = None) -> Obj | None:
        key = f"{namespace}/{name}" if resource.namespaced else name
        return self._informers[resource].store.get(key)

    def list(self, resource: Resource, namespace: str | None = None, **labels: str) -> list[Obj]:
        out = []
        for o in self._informers[resource].store.list():
            m = o["metadata"]
            if namespace is not None and m.get("namespace") != namespace:
                continue
            have = m.get("labels") or {}
            if all(have.get(k) == v for k, v in labels.items()):
                out.append(o)
        return out

    async def until(self, cond: Callable[[], bool], timeout: float = 20) -> None:
        await wait_until(cond, changed=self._changed, timeout=timeout)


class TestCluster:
    """What a test gets: an admin client, the admin kubeconfig, the node names."""

    __test__ = False  # not a test class, whatever its name

    kind: str
    kubeconfig: Path
    node_names: list[str]
    sim: SimCluster | None = None  # the simulated cluster itself, for sim-only fault injection

    def __init__(self) -> None:
        self._clients: list[KubeClient] = []

    async def service_account(
        self,
        name: str = NODE_ACCOUNT,
        namespace: str = NAMESPACE,
        *,
        node: str | None = None,
        also_roles: Iterable[str] = (),
    ) -> Path:
        """A kubeconfig for a ServiceAccount of packaging/kubernetes (see the backends')."""
        raise NotImplementedError

    def client(self, kubeconfig: Path | None = None, **kw: Any) -> KubeClient:
        kube = KubeClient(load_api_client(str(kubeconfig or self.kubeconfig)), **kw)
        self._clients.append(kube)
        return kube

    async def close_clients(self) -> None:
        for c in self._clients:
            await c.close()

    async def install_crds(self, heartbeat_spacing: int | None = None) -> None:
        """The shipped CRDs; `heartbeat_spacing` replaces the 60 s the EvictionRequest's CEL rule
        asks between heartbeats, for tests whose interceptors beat every second (the shipped
        rule itself is tested as it is)."""
        kube = self.client()
        for crd in crd_documents():
            if heartbeat_spacing is not None:
                crd = with_heartbeat_spacing(crd, heartbeat_spacing)
            with contextlib.suppress(AlreadyExists):
                await kube.create(CRDS, crd)
        await self.wait_crds_established(kube)

    async def wait_crds_established(self, kube: KubeClient) -> None:
        names = [c["metadata"]["name"] for c in crd_documents()]
        view = ClusterView(kube, [CRDS])
        await view.start()
        try:

            def established() -> bool:
                for n in names:
                    crd = view.get(CRDS, n)
                    conds = ((crd or {}).get("status") or {}).get("conditions") or []
                    if not any(c["type"] == "Established" and c["status"] == "True" for c in conds):
                        return False
                return True

            await view.until(established, timeout=30)
        finally:
            await view.stop()


async def priority_class(kube: KubeClient, value: int) -> str | None:
    """The PriorityClass that gives `value` (made if need be), or None for 0: both servers refuse
    a pod that states `spec.priority` without a class that has it."""
    if value == 0:
        return None
    if value in BUILTIN_CLASSES:
        return BUILTIN_CLASSES[value]
    name = f"priority-{value}"
    with contextlib.suppress(AlreadyExists):
        await kube.create(PRIORITY_CLASSES, {"metadata": {"name": name}, "value": value})
    return name


async def create_pod(kube: KubeClient, body: Obj, timeout: float = 10) -> Obj:
    """Create a pod, retrying while the API server's admission has not yet seen the
    PriorityClass it names (kube-apiserver reads classes from its own informer cache)."""
    delay = 0.02
    async with asyncio.timeout(timeout):
        while True:
            try:
                return await kube.create(PODS, body)
            except Forbidden as e:
                if "no PriorityClass with name" not in str(e):
                    raise
            # the API server's own PriorityClass informer, not ours: nothing to wait on
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.5)


class SimBackend(TestCluster):
    kind = "sim"

    def __init__(self, sim: SimCluster) -> None:
        super().__init__()
        assert sim.kubeconfig is not None
        self.sim = sim
        self.kubeconfig = sim.kubeconfig
        self.node_names = list(sim.node_names)

    async def service_account(
        self,
        name: str = NODE_ACCOUNT,
        namespace: str = NAMESPACE,
        *,
        node: str | None = None,
        also_roles: Iterable[str] = (),
    ) -> Path:
        """A kubeconfig for a ServiceAccount of packaging/kubernetes. The simulated server has no
        authentication, RBAC nor admission policies: there it is the admin's (in a cluster with
        packaging's namespace, where the agent keeps its Lease)."""
        with contextlib.suppress(AlreadyExists):
            await self.client().create(NAMESPACES, {"metadata": {"name": namespace}})
        return self.kubeconfig


class RealBackend(TestCluster):
    kind = "real"

    def __init__(self, kubeconfig: Path, node_names: list[str], pki_dir: Path) -> None:
        super().__init__()
        self.kubeconfig = kubeconfig
        self.node_names = node_names
        self.pki_dir = pki_dir

    async def service_account(
        self,
        name: str = NODE_ACCOUNT,
        namespace: str = NAMESPACE,
        *,
        node: str | None = None,
        also_roles: Iterable[str] = (),
    ) -> Path:
        """The namespace, RBAC and admission policy of packaging/kubernetes applied, and a
        kubeconfig with a bound token (TokenRequest) of the ServiceAccount: every call it makes
        meets RBAC and the policy.

        `node`: the token is bound to a pod of the account on that node, as the DaemonSet pod's
        token is, so the API server puts the node's name in the user's extra and the policy
        keeps the account to that node; the call returns once the policy is in force (call it
        after installing the CRDs). Without, a token bound to nothing: a node agent's names no
        node and may write nothing the policy looks at. `also_roles`: ClusterRoles bound to the
        account besides packaging's (an agent that runs more parts than one workload does).
        The controllers' account: the call returns once their policy (controllers-policy.yaml)
        is in force."""
        await asyncio.to_thread(apply_files, self.kubeconfig, PACKAGING_RBAC)
        for role in also_roles:
            await asyncio.to_thread(bind_cluster_role, self.kubeconfig, role, name, namespace)
        pod = None
        if node is not None:
            pod = await asyncio.to_thread(anchor_pod, self.kubeconfig, name, namespace, node)
        token = await asyncio.to_thread(request_token, self.kubeconfig, name, namespace, pod)
        doc = yaml.safe_load(self.kubeconfig.read_text())
        doc["users"] = [{"name": name, "user": {"token": token}}]
        doc["contexts"][0]["context"]["user"] = name
        suffix = f"-{node}" if node else ""
        path = self.kubeconfig.with_name(f"{namespace}-{name}{suffix}.kubeconfig")
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        path.chmod(0o600)
        if name == CONTROLLERS_ACCOUNT:
            # the last node: node-1 may be a real kubelet's, not registered yet
            await asyncio.to_thread(wait_controllers_policy_in_force, path, self.node_names[-1])
        elif node is not None:
            await asyncio.to_thread(wait_policy_in_force, path, node)
        return path


def apply_files(kubeconfig: Path, files: Iterable[Path]) -> None:
    """Create the objects of manifest files that are not there yet (as admin)."""
    with api_client(kubeconfig) as api:
        for f in files:
            for doc in yaml.safe_load_all(f.read_text()):
                if not doc:
                    continue
                try:
                    create_from_dict(api, doc)
                except utils.FailToCreateError as e:
                    if any(x.status != 409 for x in e.api_exceptions):
                        raise


def request_token(kubeconfig: Path, name: str, namespace: str, pod: Obj | None = None) -> str:
    """A token of the ServiceAccount, bound to `pod` if given (it dies with the pod)."""
    with api_client(kubeconfig) as api:
        spec: Obj = {"expirationSeconds": 3600}
        if pod is not None:
            m = pod["metadata"]
            spec["boundObjectRef"] = {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": m["name"],
                "uid": m["uid"],
            }
        got = client.CoreV1Api(api).create_namespaced_service_account_token(
            name, namespace, client.AuthenticationV1TokenRequest.model_validate({"spec": spec})
        )
        assert got.status is not None
        return str(got.status.token)


def anchor_pod(kubeconfig: Path, account: str, namespace: str, node: str) -> Obj:
    """A pod of `account` on `node`, standing in for the DaemonSet's agent pod there: a token
    bound to it carries the node's name. Never drained (as the agent's pod)."""
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{account}-{node}",
            "namespace": namespace,
            "annotations": {"nodeagent.io/drain": "skip"},
        },
        "spec": {
            "nodeName": node,
            "serviceAccountName": account,
            "tolerations": [{"operator": "Exists"}],
            "containers": [{"name": "agent", "image": "nodeagent"}],
        },
    }
    with api_client(kubeconfig) as api:
        core = client.CoreV1Api(api)
        try:
            pod = core.create_namespaced_pod(namespace, client.V1Pod.model_validate(body))
        except client.ApiException as e:
            if e.status != 409:
                raise
            pod = core.read_namespaced_pod(f"{account}-{node}", namespace)
        return dict(api.sanitize_for_serialization(pod))


def bind_cluster_role(kubeconfig: Path, role: str, account: str, namespace: str) -> None:
    body = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": f"test-{account}-{role}"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
    }
    with (
        api_client(kubeconfig) as api,
        contextlib.suppress(utils.FailToCreateError),
    ):
        create_from_dict(api, body)


def wait_policy_in_force(kubeconfig: Path, node: str, timeout: float = 30) -> None:
    """Until the API server refuses (dry run) a NodeMaintenance for another node to the node
    agent of `node`."""
    other = f"not-{node}"
    body = {
        "apiVersion": "nodeagent.io/v1alpha1",
        "kind": "NodeMaintenance",
        "metadata": {"name": "test-policy-probe", "labels": {"nodeagent.io/node": other}},
        "spec": {"nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [other]}]}]}},
    }  # fmt: skip

    def attempt(api: client.ApiClient) -> None:
        try:
            client.CustomObjectsApi(api).create_cluster_custom_object(
                "nodeagent.io", "v1alpha1", "nodemaintenances", body, dry_run="All"
            )
        except client.ApiException as e:
            if e.status == 404:
                raise RuntimeError("install the CRDs before asking for a node's account") from e
            raise

    until_policy_refuses(kubeconfig, POLICY, attempt, timeout)


def wait_controllers_policy_in_force(kubeconfig: Path, node: str, timeout: float = 30) -> None:
    """Until the API server refuses (dry run) the controllers a label on `node`."""

    def attempt(api: client.ApiClient) -> None:
        client.CoreV1Api(api).patch_node(
            node, {"metadata": {"labels": {"test-policy-probe": "x"}}}, dry_run="All"
        )

    until_policy_refuses(kubeconfig, CONTROLLERS_POLICY, attempt, timeout)


def until_policy_refuses(
    kubeconfig: Path, policy: str, attempt: Callable[[client.ApiClient], None], timeout: float
) -> None:
    """Repeat `attempt` until admission policy `policy` refuses it: kube-apiserver takes in a
    new policy from its own informer, some time after it was created."""
    deadline = time.monotonic() + timeout
    delay = 0.02
    with api_client(kubeconfig) as api:
        while True:
            try:
                attempt(api)
            except client.ApiException as e:
                if e.status == 403 and policy in str(e.body):
                    return
                raise
            if time.monotonic() > deadline:
                raise TimeoutError(f"the admission policy {policy} is not in force")
            time.sleep(delay)  # the server's informer, not ours: nothing to wait on
            delay = min(delay * 2, 0.5)


class MirrorPods:
    """The kubelet's file source for one kwok node, as the simulated kubelet plays it
    (nodeagent_testbed.sim.actors.kubelet): a mirror pod for each manifest of a real static pod
    directory. When a manifest goes or changes, the static pod stops: its mirror pod is deleted
    gracefully, so kwok lets it exit as the kubelet would (after `sim.nodeagent.io/exit-seconds`,
    within the grace period), and a changed manifest's new mirror pod follows once the old one
    is gone. A mirror pod deleted through the API while its manifest stays is removed at once
    and created again, as the kubelet does. The directory is read at start, on every change
    its watch reports and every second (which also covers changes made before the watch was in
    place); the node's pods come from a watch. kwok plays the pods' life cycle."""

    def __init__(self, kube: KubeClient, node_name: str, directory: Path) -> None:
        self.kube = kube
        self.node_name = node_name
        self.directory = directory
        self._manifests: dict[tuple[str, str], Manifest] = {}
        self._reported: dict[Path, bytes] = {}
        self._stopping: set[str] = set()  # uids of mirror pods whose static pod stops
        self._node: Obj | None = None
        self._dirty = asyncio.Event()
        self._backoff = JitteredBackoff(base=0.05, cap=0.5, rng=random.Random(0))
        self._pods = Informer(
            kube, PODS, field_selector=f"spec.nodeName={node_name}", backoff=self._backoff
        )

    async def run(self) -> None:
        self._pods.add_handler(
            on_add=lambda _o: self._dirty.set(),
            on_update=lambda _a, _b: self._dirty.set(),
            on_delete=lambda _o: self._dirty.set(),
        )
        await self._scan()
        async with asyncio.TaskGroup() as tg:
            tg.create_task(self._pods.run())
            tg.create_task(self._watch())
            await self._pods.wait_synced()
            failures = 0
            while True:
                self._dirty.clear()
                try:
                    await self._sync()
                except KubeError as e:
                    failures += 1
                    log.warning("mirror pods of %s: %s; retrying", self.node_name, e)
                    # pacing retries against a failing API server, as the kubelet does
                    await asyncio.sleep(self._backoff.delay(failures))
                    continue
                failures = 0
                await self._dirty.wait()

    async def _watch(self) -> None:
        async for _ in awatch(
            self.directory,
            watch_filter=None,
            recursive=False,
            rust_timeout=1000,
            yield_on_timeout=True,
        ):
            await self._scan()

    async def _scan(self) -> None:
        found = await asyncio.to_thread(scan, self.directory, self.node_name, self._reported)
        if found != self._manifests:
            self._manifests = found
            self._dirty.set()

    async def _sync(self) -> None:
        pods = {
            (p["metadata"]["namespace"], p["metadata"]["name"]): p for p in self._pods.store.list()
        }
        self._stopping &= {p["metadata"]["uid"] for p in pods.values()}
        mirrors = {key for key, p in pods.items() if is_mirror(p)}
        for key in sorted(mirrors | self._manifests.keys()):
            manifest, pod = self._manifests.get(key), pods.get(key)
            if pod is None:
                assert manifest is not None
                await self._create(manifest)
            elif not is_mirror(pod):
                continue  # a pod of that name that is not a mirror pod: the kubelet waits
            elif manifest is None or pod["metadata"]["annotations"][MIRROR] != manifest.hash:
                # the static pod stops: its mirror pod terminates with it
                self._stopping.add(pod["metadata"]["uid"])
                if not pod["metadata"].get("deletionTimestamp"):
                    await self._delete(pod)
            elif (
                pod["metadata"].get("deletionTimestamp")
                and pod["metadata"]["uid"] not in self._stopping
            ):
                # deleted through the API while the static pod runs on
                await self._delete(pod, grace_period_seconds=0)

    async def _create(self, manifest: Manifest) -> None:
        if self._node is None:
            self._node = await self.kube.get(NODES, self.node_name)
        body = mirror_pod(manifest, self._node)
        body["metadata"].pop("creationTimestamp", None)
        with contextlib.suppress(AlreadyExists):  # our watch has not seen it yet
            await self.kube.create(PODS, body)

    async def _delete(self, pod: Obj, grace_period_seconds: int | None = None) -> None:
        m = pod["metadata"]
        with contextlib.suppress(NotFound, Conflict):  # gone, or another pod of that name
            await self.kube.delete(
                PODS,
                m["name"],
                m["namespace"],
                grace_period_seconds=grace_period_seconds,
                uid=m["uid"],
            )


@contextlib.asynccontextmanager
async def mirror_pods(
    backend: TestCluster, dirs: dict[str, Path]
) -> AsyncIterator[list[MirrorPods]]:
    """On the real backend, run the file source of each node's static pod directory."""
    if backend.kind == "sim":
        yield []
        return
    kube = backend.client()
    actors = [MirrorPods(kube, node, d) for node, d in dirs.items()]
    tasks = [asyncio.create_task(a.run()) for a in actors]
    try:
        yield actors
    finally:
        await cancel_and_wait(tasks)
