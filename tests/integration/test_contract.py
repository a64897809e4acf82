"""Contract tests: the same requests and the same assertions against the simulated API server and
kube-apiserver, where the simulated one used to answer differently (DESIGN.md section 7).

Raw HTTP (aiohttp with the kubeconfig's credentials) where status codes, headers and Status
bodies are the point; nodeagent's client and real kubectl where what they make of it is.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import re
import ssl
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import pytest
import yaml

from nodeagent.kube.client import KubeClient
from nodeagent.kube.errors import Gone
from nodeagent.kube.resources import CRDS, NODES, PDBS, PODS, Obj, Resource
from tests.clusters import ClusterView, TestCluster, create_pod
from tests.conftest import Kubectl

NS = "/api/v1/namespaces/default"
POLICY = "/apis/policy/v1/namespaces/default"
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap", namespaced=True)
GROUP = "contract.nodeagent.io"
GADGETS = Resource(GROUP, "v1", "gadgets", "Gadget", namespaced=True)  # status subresource
WIDGETS = Resource(GROUP, "v1", "widgets", "Widget", namespaced=True)  # none


class Http:
    """Raw requests with the credentials of a kubeconfig."""

    def __init__(self, backend: TestCluster) -> None:
        doc = yaml.safe_load(backend.kubeconfig.read_text())
        cluster, user = doc["clusters"][0]["cluster"], doc["users"][0]["user"]
        self.base = cluster["server"]
        self.headers: dict[str, str] = {}
        self.ssl: ssl.SSLContext | bool = True
        if self.base.startswith("https:"):
            ctx = ssl.create_default_context(cafile=cluster["certificate-authority"])
            if "client-certificate" in user:
                ctx.load_cert_chain(user["client-certificate"], user["client-key"])
            self.ssl = ctx
        if "token" in user:
            self.headers["Authorization"] = f"Bearer {user['token']}"
        self.session = aiohttp.ClientSession()

    async def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        ctype: str = "application/json",
    ) -> tuple[int, dict[str, str], Any]:
        data = json.dumps(body) if body is not None else None
        headers = {**self.headers, "Content-Type": ctype}
        async with self.session.request(
            method, self.base + path, data=data, headers=headers, ssl=self.ssl
        ) as r:
            return r.status, dict(r.headers), json.loads(await r.read())

    @contextlib.asynccontextmanager
    async def stream(self, path: str) -> AsyncIterator[tuple[int, Callable[[], Any]]]:
        """A watch: its HTTP status, and a function giving the next event (None at the end)."""
        async with self.session.get(self.base + path, headers=self.headers, ssl=self.ssl) as r:

            async def next_event() -> Any:
                async with asyncio.timeout(30):
                    line = await r.content.readline()
                return json.loads(line) if line else None

            yield r.status, next_event


@pytest.fixture
async def http(backend: TestCluster) -> AsyncIterator[Http]:
    h = Http(backend)
    try:
        yield h
    finally:
        await h.session.close()


def crd(plural: str, kind: str, status: bool) -> Obj:
    version: Obj = {
        "name": "v1",
        "served": True,
        "storage": True,
        "schema": {
            "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        },
    }
    if status:
        version["subresources"] = {"status": {}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.lower(), "kind": kind},
            "versions": [version],
        },
    }


async def install_gadgets_and_widgets(kube: KubeClient) -> None:
    for plural, kind, status in (("gadgets", "Gadget", True), ("widgets", "Widget", False)):
        await kube.create(CRDS, crd(plural, kind, status))
    view = ClusterView(kube, [CRDS])
    await view.start()
    try:

        def established() -> bool:
            for plural in ("gadgets", "widgets"):
                got = view.get(CRDS, f"{plural}.{GROUP}") or {}
                conds = (got.get("status") or {}).get("conditions") or []
                if not any(c["type"] == "Established" and c["status"] == "True" for c in conds):
                    return False
            return True

        await view.until(established, timeout=30)
    finally:
        await view.stop()


def bare_pod(name: str, node: str | None = "node-2", **extra: Any) -> Obj:
    spec: Obj = {"containers": [{"name": "c", "image": "busybox"}]}
    if node is not None:
        spec["nodeName"] = node
    else:
        spec["nodeSelector"] = {"contract.nodeagent.io/nowhere": "true"}  # stays Pending
    return {
        "metadata": {"name": name, "namespace": "default", "labels": {"app": name}, **extra},
        "spec": spec,
    }


def ready(pod: Obj | None) -> bool:
    if pod is None or pod["metadata"].get("deletionTimestamp"):
        return False
    st = pod.get("status") or {}
    conds = st.get("conditions") or []
    return st.get("phase") == "Running" and any(
        c["type"] == "Ready" and c["status"] == "True" for c in conds
    )


def eviction(name: str, **extra: Any) -> Obj:
    return {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}, **extra}


def disruption_target(pod: Obj) -> Obj | None:
    conds = (pod.get("status") or {}).get("conditions") or []
    return next((c for c in conds if c["type"] == "DisruptionTarget"), None)


# --- watch and list ---------------------------------------------------------------------------


async def test_watch_from_before_the_watch_cache_is_an_error_event_in_a_200_stream(
    backend: TestCluster, http: Http
) -> None:
    """A resource's watch cache starts when the resource is first served (for a custom
    resource: when its CRD is established); a watch from an older resourceVersion gets HTTP 200
    and one ERROR event, a Status with code 410, and nodeagent's client raises Gone."""
    kube = backend.client()
    before = await kube.create(CONFIGMAPS, {"metadata": {"name": "before", "namespace": "default"}})
    old = before["metadata"]["resourceVersion"]
    await install_gadgets_and_widgets(kube)
    await kube.create(GADGETS, {"metadata": {"name": "g1", "namespace": "default"}})
    path = f"/apis/{GROUP}/v1/namespaces/default/gadgets?watch=true&resourceVersion={old}"
    async with http.stream(path) as (code, next_event):
        assert code == 200
        event = await next_event()
        assert await next_event() is None  # and the stream ends
    assert event["type"] == "ERROR"
    status = event["object"]
    assert {k: status[k] for k in ("kind", "apiVersion", "status", "reason", "code")} == {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "reason": "Expired",
        "code": 410,
    }
    assert re.fullmatch(rf"too old resource version: {old} \(\d+\)", status["message"])

    with pytest.raises(Gone):
        async with contextlib.aclosing(kube.watch(GADGETS, "default", resource_version=old)) as w:
            async for _ in w:
                pass

    # from a resourceVersion in the window, the events since
    listed = await kube.list(GADGETS, "default")
    await kube.create(GADGETS, {"metadata": {"name": "g2", "namespace": "default"}})
    rv = listed["metadata"]["resourceVersion"]
    path = f"/apis/{GROUP}/v1/namespaces/default/gadgets?watch=true&resourceVersion={rv}"
    async with http.stream(path) as (code, next_event):
        assert code == 200
        event = await next_event()
    assert (event["type"], event["object"]["metadata"]["name"]) == ("ADDED", "g2")


async def compact(backend: TestCluster, request: pytest.FixtureRequest) -> None:
    """Compact the storage: on the sim, its fault injection; on the real server, an etcd
    compaction that kube-apiserver learns of through compact_rev_key, as when another API
    server compacted."""
    if backend.sim is not None:
        backend.sim.store.compact()
        return
    etcd = request.getfixturevalue("real_plane").etcd_url

    def b64(s: str) -> str:
        return base64.b64encode(s.encode()).decode()

    async with aiohttp.ClientSession() as s:
        async with s.post(
            f"{etcd}/v3/kv/put", json={"key": b64("contract/bump"), "value": ""}
        ) as r:
            rev = int((await r.json())["header"]["revision"])
        async with s.post(
            f"{etcd}/v3/kv/put", json={"key": b64("compact_rev_key"), "value": b64(str(rev))}
        ) as r:
            assert r.status == 200
        async with s.post(f"{etcd}/v3/kv/compaction", json={"revision": str(rev)}) as r:
            assert r.status == 200, await r.text()


async def test_continue_token_expires_with_compaction(
    backend: TestCluster, http: Http, request: pytest.FixtureRequest
) -> None:
    """A continue token from before a compaction is 410 Expired, with a token to go on with an
    inconsistent list; a token that is not one is 400."""
    kube = backend.client()
    for i in range(5):
        body = {"metadata": {"name": f"page-{i}", "namespace": "default", "labels": {"set": "p"}}}
        await kube.create(CONFIGMAPS, body)
    code, _, page = await http.call("GET", f"{NS}/configmaps?labelSelector=set%3Dp&limit=2")
    assert code == 200
    assert [i["metadata"]["name"] for i in page["items"]] == ["page-0", "page-1"]
    token = page["metadata"]["continue"]
    await compact(backend, request)
    # kube-apiserver serves continuations from its watch cache's snapshots, which it drops when
    # it polls the compaction revision (every 15 s): ask until the token expired
    delay = 0.1
    async with asyncio.timeout(40):
        while True:
            path = f"{NS}/configmaps?labelSelector=set%3Dp&limit=2&continue={token}"
            code, _, status = await http.call("GET", path)
            if code != 200:
                break
            await asyncio.sleep(delay)  # nothing to wait on: the server tells no one
            delay = min(delay * 2, 1.0)
    assert (code, status["reason"], status["code"]) == (410, "Expired", 410)
    assert status["message"].startswith(
        "The provided continue parameter is too old to display a consistent list result. You "
        "can start a new list without the continue parameter, or use the continue token in "
        "this response to retrieve the remainder of the results."
    )
    names = []
    token = status["metadata"]["continue"]
    while token:
        path = f"{NS}/configmaps?labelSelector=set%3Dp&limit=2&continue={token}"
        code, _, page = await http.call("GET", path)
        assert code == 200
        names += [i["metadata"]["name"] for i in page["items"]]
        token = page["metadata"].get("continue")
    assert names == ["page-2", "page-3", "page-4"]

    code, _, status = await http.call("GET", f"{NS}/configmaps?limit=2&continue=bm90IGEgdG9rZW4")
    assert (code, status["reason"]) == (400, "BadRequest")
    assert status["message"].startswith("invalid continue token: ")


# --- eviction -----------------------------------------------------------------------------------


async def test_eviction_marks_the_pod_disruption_target_before_deleting_it(
    backend: TestCluster, http: Http
) -> None:
    kube = backend.client()
    view = ClusterView(kube, [PODS])
    seen: list[tuple[str, Obj]] = []
    view.listen(lambda kind, _r, obj: seen.append((kind, obj)))
    await view.start()
    try:
        await create_pod(kube, bare_pod("running"))
        await create_pod(kube, bare_pod("pending", node=None))
        await view.until(lambda: ready(view.get(PODS, "running", "default")))
        for name in ("running", "pending"):
            code, _, status = await http.call("POST", f"{NS}/pods/{name}/eviction", eviction(name))
            assert (code, status) == (
                201,
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "metadata": {},
                    "status": "Success",
                    "code": 201,
                },
            )
        await view.until(lambda: not view.list(PODS, "default"), timeout=60)
    finally:
        await view.stop()
    for name in ("running", "pending"):
        events = [(k, o) for k, o in seen if o["metadata"]["name"] == name]
        marked = next(i for i, (_, o) in enumerate(events) if disruption_target(o))
        deleting = next(
            i
            for i, (k, o) in enumerate(events)
            if k == "DELETED" or o["metadata"].get("deletionTimestamp")
        )
        assert marked < deleting, name
        cond = disruption_target(events[marked][1])
        assert cond is not None
        assert {k: cond[k] for k in ("status", "reason", "message")} == {
            "status": "True",
            "reason": "EvictionByEvictionAPI",
            "message": "Eviction API: evicting",
        }


async def test_eviction_checks_the_eviction_object_and_the_preconditions(
    backend: TestCluster, http: Http
) -> None:
    """400 for an Eviction that names another pod (or none, or another namespace), 409 for a
    uid precondition that is not the pod's; the pod stays untouched."""
    kube = backend.client()
    view = ClusterView(kube, [PODS])
    await view.start()
    try:
        created = await create_pod(kube, bare_pod("p"))
        await view.until(lambda: ready(view.get(PODS, "p", "default")))
    finally:
        await view.stop()
    before = await kube.get(PODS, "p", "default")
    url = f"{NS}/pods/p/eviction"
    for body, message in (
        (eviction("other"), "name in URL does not match name in Eviction object"),
        ({**eviction("p"), "metadata": {}}, "name in URL does not match name in Eviction object"),
        (
            {**eviction("p"), "metadata": {"name": "p", "namespace": "kube-system"}},
            "the namespace of the provided object does not match the namespace sent on the request",
        ),
    ):
        code, _, status = await http.call("POST", url, body)
        assert (code, status["reason"], status["message"]) == (400, "BadRequest", message)
    code, _, status = await http.call(
        "POST", url, eviction("p", deleteOptions={"preconditions": {"uid": "not-the-uid"}})
    )
    assert (code, status["reason"]) == (409, "Conflict")
    assert status["message"] == (
        'Operation cannot be fulfilled on Pod "p": the UID in the precondition (not-the-uid) '
        f"does not match the UID in record ({created['metadata']['uid']}). The object might have "
        "been deleted and then recreated"
    )
    after = await kube.get(PODS, "p", "default")
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


async def test_eviction_spends_the_budget_and_dry_runs_change_nothing(
    backend: TestCluster, http: Http
) -> None:
    """A budget with one disruption allowed: dry-run evictions (body or query) are answered 201
    and change neither the pod nor the budget; mismatched dry-run options are a 500; the real
    eviction spends the disruption; the next is 429 without Retry-After. A budget by
    maxUnavailable over pods of no controller expects none, so allows no disruption."""
    kube = backend.client()
    view = ClusterView(kube, [PODS, PDBS])
    await view.start()
    try:
        for name in ("web-0", "web-1"):
            pod = bare_pod(name)
            pod["metadata"]["labels"] = {"app": "web"}
            await create_pod(kube, pod)
        budget = {
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
        }
        await kube.create(PDBS, budget)

        def budget_is(allowed: int, healthy: int) -> Callable[[], bool]:
            def check() -> bool:
                pdb = view.get(PDBS, "web", "default") or {"metadata": {}}
                st = pdb.get("status") or {}
                return (
                    st.get("observedGeneration") == pdb["metadata"].get("generation")
                    and st.get("disruptionsAllowed") == allowed
                    and st.get("currentHealthy") == healthy
                )

            return check

        await view.until(budget_is(allowed=1, healthy=2), timeout=60)
        pod_rv = (await kube.get(PODS, "web-0", "default"))["metadata"]["resourceVersion"]
        pdb_rv = (await kube.get(PDBS, "web", "default"))["metadata"]["resourceVersion"]
        for path, body in (
            (f"{NS}/pods/web-0/eviction", eviction("web-0", deleteOptions={"dryRun": ["All"]})),
            (f"{NS}/pods/web-0/eviction?dryRun=All", eviction("web-0")),
        ):
            code, _, status = await http.call("POST", path, body)
            assert (code, status["status"]) == (201, "Success")
        code, _, status = await http.call(
            "POST",
            f"{NS}/pods/web-0/eviction?dryRun=All",
            eviction("web-0", deleteOptions={"dryRun": ["Bogus"]}),
        )
        assert code == 500
        assert status == {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": "Non-matching dry-run options in request and content: [All] and [Bogus]",
            "code": 500,
        }
        pod = await kube.get(PODS, "web-0", "default")
        assert pod["metadata"]["resourceVersion"] == pod_rv
        assert disruption_target(pod) is None
        pdb = await kube.get(PDBS, "web", "default")
        assert pdb["metadata"]["resourceVersion"] == pdb_rv

        code, _, status = await http.call("POST", f"{NS}/pods/web-0/eviction", eviction("web-0"))
        assert code == 201
        await view.until(budget_is(allowed=0, healthy=1), timeout=60)
        code, headers, status = await http.call(
            "POST", f"{NS}/pods/web-1/eviction", eviction("web-1")
        )
        assert code == 429
        assert "Retry-After" not in headers
        assert status["reason"] == "TooManyRequests"
        assert status["message"] == (
            "Cannot evict pod as it would violate the pod's disruption budget."
        )
        assert status["details"] == {
            "causes": [
                {
                    "reason": "DisruptionBudget",
                    "message": "The disruption budget web needs 1 healthy pods and has 1 currently",
                }
            ]
        }

        # maxUnavailable over a pod of no controller: no pods expected, so no disruption
        await create_pod(kube, bare_pod("loose"))
        loose = {
            "metadata": {"name": "loose", "namespace": "default"},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "loose"}}},
        }
        await kube.create(PDBS, loose)

        def computed() -> bool:
            pdb = view.get(PDBS, "loose", "default") or {"metadata": {}}
            st = pdb.get("status") or {}
            return st.get("observedGeneration") == pdb["metadata"].get("generation") and (
                st.get("currentHealthy"),
                st.get("desiredHealthy"),
                st.get("expectedPods"),
                st.get("disruptionsAllowed"),
            ) == (1, 0, 0, 0)

        await view.until(computed, timeout=60)
        code, _, status = await http.call("POST", f"{NS}/pods/loose/eviction", eviction("loose"))
        assert code == 429
        assert status["details"]["causes"] == [
            {
                "reason": "DisruptionBudget",
                "message": "The disruption budget loose does not allow evicting pods currently",
            }
        ]
    finally:
        await view.stop()


async def test_eviction_against_a_budget_being_processed_or_overloaded(
    backend: TestCluster, http: Http
) -> None:
    """A budget the disruption controller cannot compute (its pod's controller is a ConfigMap,
    which has no scale) keeps status.observedGeneration behind: 429 with Retry-After 10. With
    more than 2,000 unconfirmed disruptions it is 403; a negative disruptionsAllowed cannot be
    stored (422); a pod under two budgets is a 500."""
    kube = backend.client()
    owner = await kube.create(CONFIGMAPS, {"metadata": {"name": "owner", "namespace": "default"}})
    ref = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "owner",
        "uid": owner["metadata"]["uid"],
        "controller": True,
    }
    view = ClusterView(kube, [PODS, PDBS])
    await view.start()
    try:
        await create_pod(kube, bare_pod("guarded", ownerReferences=[ref]))
        await view.until(lambda: ready(view.get(PODS, "guarded", "default")))
        budget = {
            "metadata": {"name": "guard", "namespace": "default"},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "guarded"}}},
        }
        await kube.create(PDBS, budget)

        def sync_failed() -> bool:
            st = (view.get(PDBS, "guard", "default") or {}).get("status") or {}
            conds = st.get("conditions") or []
            return any(
                c["type"] == "DisruptionAllowed" and c["reason"] == "SyncFailed" for c in conds
            )

        await view.until(sync_failed, timeout=60)
    finally:
        await view.stop()
    url = f"{NS}/pods/guarded/eviction"
    code, headers, status = await http.call("POST", url, eviction("guarded"))
    assert (code, headers.get("Retry-After"), status["reason"]) == (429, "10", "TooManyRequests")
    assert status["details"] == {
        "causes": [
            {
                "reason": "DisruptionBudget",
                "message": "The disruption budget guard is still being processed by the server.",
            }
        ],
        "retryAfterSeconds": 10,
    }

    status_url = f"{POLICY}/poddisruptionbudgets/guard/status"
    merge = "application/merge-patch+json"
    code, _, status = await http.call(
        "PATCH", status_url, {"status": {"disruptionsAllowed": -1}}, merge
    )
    assert (code, status["reason"]) == (422, "Invalid")
    assert status["message"] == (
        'PodDisruptionBudget.policy "guard" is invalid: status.disruptionsAllowed: Invalid value: '
        "-1: must be greater than or equal to 0"
    )
    disrupted = {f"gone-{i}": "2026-01-01T00:00:00Z" for i in range(2001)}
    patch = {"status": {"observedGeneration": 1, "disruptedPods": disrupted}}
    code, _, _ = await http.call("PATCH", status_url, patch, merge)
    assert code == 200
    code, headers, status = await http.call("POST", url, eviction("guarded"))
    assert (code, status["reason"]) == (403, "Forbidden")
    assert "Retry-After" not in headers
    assert status["message"] == (
        'poddisruptionbudget.policy "guard" is forbidden: DisruptedPods map too big - too many '
        "evictions not confirmed by PDB controller"
    )
    assert status["details"] == {
        "name": "guard",
        "group": "policy",
        "kind": "poddisruptionbudget",
        "causes": [
            {
                "reason": "DisruptionBudget",
                "message": "The disruption budget guard does not allow evicting pods currently: "
                "too many pending evictions not confirmed by PDB controller",
            }
        ],
    }

    await kube.create(PDBS, {**budget, "metadata": {"name": "second", "namespace": "default"}})
    code, _, status = await http.call("POST", url, eviction("guarded"))
    assert code == 500
    assert status == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "This pod has more than one PodDisruptionBudget, which the eviction "
        "subresource does not support.",
        "code": 500,
    }
    assert disruption_target(await kube.get(PODS, "guarded", "default")) is None


# --- dry run ------------------------------------------------------------------------------------


async def test_server_side_dry_runs_change_nothing(
    backend: TestCluster, http: Http, kubectl: Kubectl
) -> None:
    """kubectl delete/drain/create/apply --dry-run=server, and DELETE with dryRun in the body or
    the query, leave everything as it was."""
    kube = backend.client()
    view = ClusterView(kube, [PODS])
    await view.start()
    try:
        await create_pod(kube, bare_pod("p"))
        await view.until(lambda: ready(view.get(PODS, "p", "default")))
    finally:
        await view.stop()
    await kube.create(
        CONFIGMAPS, {"metadata": {"name": "cm", "namespace": "default"}, "data": {"v": "1"}}
    )
    pod_rv = (await kube.get(PODS, "p", "default"))["metadata"]["resourceVersion"]
    cm_rv = (await kube.get(CONFIGMAPS, "cm", "default"))["metadata"]["resourceVersion"]

    out = await kubectl.ok("delete", "pod", "p", "--dry-run=server")
    assert out.strip() == 'pod "p" deleted from default namespace (server dry run)'
    await kubectl.ok(
        "drain",
        "node-2",
        "--dry-run=server",
        "--force",
        "--ignore-daemonsets",
        "--delete-emptydir-data",
        "--timeout=60s",
    )
    for path, body in ((f"{NS}/pods/p", {"dryRun": ["All"]}), (f"{NS}/pods/p?dryRun=All", None)):
        code, _, answer = await http.call("DELETE", path, body)
        assert (code, answer["kind"], answer["metadata"]["name"]) == (200, "Pod", "p")
    manifest = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cm", "namespace": "default"},
        "data": {"v": "2"},
    }
    await kubectl.ok("apply", "--dry-run=server", "-f", "-", stdin=json.dumps(manifest))
    await kubectl.ok("create", "configmap", "new", "--dry-run=server", "--from-literal=v=1")
    code, _, created = await http.call(
        "POST", f"{NS}/configmaps?dryRun=All", {"metadata": {"name": "new"}}
    )
    assert (code, created["metadata"]["name"]) == (201, "new")
    assert "resourceVersion" not in created["metadata"]

    pod = await kube.get(PODS, "p", "default")
    assert pod["metadata"]["resourceVersion"] == pod_rv
    assert "deletionTimestamp" not in pod["metadata"]
    assert disruption_target(pod) is None
    node = await kube.get(NODES, "node-2")
    assert not (node.get("spec") or {}).get("unschedulable")
    cm = await kube.get(CONFIGMAPS, "cm", "default")
    assert (cm["metadata"]["resourceVersion"], cm["data"]) == (cm_rv, {"v": "1"})
    names = [c["metadata"]["name"] for c in (await kube.list(CONFIGMAPS, "default"))["items"]]
    assert "new" not in names


# --- status on create ---------------------------------------------------------------------------


async def test_status_sent_on_create(backend: TestCluster, http: Http) -> None:
    """What kube-apiserver makes of a status sent with a create: its strategies reset it for
    workloads, budgets, services, namespaces and pods; nodes keep theirs; custom resources lose
    it where status is a subresource."""
    kube = backend.client()
    apps = "/apis/apps/v1/namespaces/default"
    selector = {"matchLabels": {"app": "none"}}
    template = {
        "metadata": {"labels": {"app": "none"}},
        "spec": {
            "containers": [{"name": "c", "image": "busybox"}],
            "nodeSelector": {"contract.nodeagent.io/nowhere": "true"},
        },
    }
    workload = {"selector": selector, "template": template}
    cases: list[tuple[str, Obj, Any]] = [
        (
            f"{apps}/deployments",
            {"spec": {**workload, "replicas": 0}, "status": {"replicas": 5, "readyReplicas": 5}},
            {},
        ),
        (
            f"{apps}/replicasets",
            {"spec": {**workload, "replicas": 0}, "status": {"replicas": 5}},
            {"replicas": 0},
        ),
        (
            f"{apps}/statefulsets",
            {"spec": {**workload, "replicas": 0, "serviceName": "s"}, "status": {"replicas": 3}},
            {"replicas": 0, "availableReplicas": 0},
        ),
        (
            f"{apps}/daemonsets",
            {"spec": workload, "status": {"numberReady": 3, "desiredNumberScheduled": 3}},
            {
                "currentNumberScheduled": 0,
                "numberMisscheduled": 0,
                "desiredNumberScheduled": 0,
                "numberReady": 0,
            },
        ),
        (
            f"{POLICY}/poddisruptionbudgets",
            {
                "spec": {"minAvailable": 1, "selector": selector},
                "status": {"disruptionsAllowed": 3, "currentHealthy": 3, "observedGeneration": 1},
            },
            {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0},
        ),
        (
            f"{NS}/services",
            {
                "spec": {"ports": [{"port": 80}]},
                "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}},
            },
            {"loadBalancer": {}},
        ),
        ("/api/v1/namespaces", {"status": {"phase": "Terminating"}}, {"phase": "Active"}),
    ]
    for burst, requests in (
        ("burstable", {"cpu": "100m"}),
        ("guaranteed", {"cpu": "1", "memory": "64Mi"}),
    ):
        pod = bare_pod(burst, node=None)
        pod["spec"]["containers"][0]["resources"] = (
            {"limits": requests} if burst == "guaranteed" else {"requests": requests}
        )
        pod["status"] = {"phase": "Running", "podIP": "192.0.2.2"}
        cases.append((f"{NS}/pods", pod, {"phase": "Pending", "qosClass": burst.capitalize()}))
    for i, (path, body, expected) in enumerate(cases):
        body = {
            "metadata": {"name": f"s{i}", **body.get("metadata", {})},
            **{k: v for k, v in body.items() if k != "metadata"},
        }
        code, _, created = await http.call("POST", path, body)
        assert code == 201, (path, created)
        assert created.get("status") == expected, path

    node = {
        "metadata": {"name": "contract-node", "labels": {"type": "contract"}},
        "spec": {"taints": [{"key": "contract", "effect": "NoSchedule"}]},
        "status": {"capacity": {"cpu": "4", "pods": "10"}, "phase": "Running"},
    }
    code, _, created = await http.call("POST", "/api/v1/nodes", node)
    assert code == 201
    assert created["status"]["capacity"] == {"cpu": "4", "pods": "10"}
    assert created["status"]["phase"] == "Running"

    await install_gadgets_and_widgets(kube)
    for resource, kept in ((GADGETS, False), (WIDGETS, True)):
        body = {"metadata": {"name": "x"}, "status": {"state": "made up"}}
        # a custom object has no type the server could take its kind from
        code, _, status = await http.call("POST", resource.path("default"), body)
        assert (code, status["reason"]) == (400, "BadRequest")
        assert status["message"].startswith(
            f"the object provided is unrecognized (must be of type {resource.kind}): Object "
            "'Kind' is missing in "
        )
        body = {"apiVersion": resource.api_version, "kind": resource.kind, **body}
        code, _, created = await http.call("POST", resource.path("default"), body)
        assert code == 201, json.dumps(created)
        assert ("status" in created) == kept, resource
