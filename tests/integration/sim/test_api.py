"""API semantics of the simulated server over real HTTP (aiohttp client)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from nodeagent_testbed.sim.cluster import SimCluster
from nodeagent_testbed.sim.store import FRESH_SECONDS, HISTORY_MIN
from tests.simutil import pods, running, until

MERGE = "application/merge-patch+json"
POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p", "labels": {"app": "a"}},
    "spec": {"containers": [{"name": "c", "image": "busybox"}]},
}


@pytest.fixture
async def http(sim: SimCluster) -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(base_url=sim.url) as s:
        yield s


async def call(
    http: aiohttp.ClientSession,
    method: str,
    path: str,
    body: Any = None,
    ctype: str = "application/json",
) -> tuple[int, Any]:
    data = json.dumps(body) if body is not None else None
    async with http.request(method, path, data=data, headers={"Content-Type": ctype}) as r:
        return r.status, await r.json()


def pod(name: str, node: str | None = None, **labels: str) -> dict[str, Any]:
    p: dict[str, Any] = json.loads(json.dumps(POD))
    p["metadata"]["name"] = name
    p["metadata"]["labels"] = labels or {"app": "a"}
    if node:
        p["spec"]["nodeName"] = node
    return p


async def test_discovery(http: aiohttp.ClientSession) -> None:
    code, body = await call(http, "GET", "/api/v1")
    assert code == 200
    names = {r["name"] for r in body["resources"]}
    assert {"pods", "pods/eviction", "pods/status", "nodes", "events"} <= names
    evict = next(r for r in body["resources"] if r["name"] == "pods/eviction")
    assert (evict["group"], evict["version"], evict["kind"]) == ("policy", "v1", "Eviction")
    code, body = await call(http, "GET", "/apis")
    assert "coordination.k8s.io" in {g["name"] for g in body["groups"]}


async def test_stale_update_conflicts(http: aiohttp.ClientSession) -> None:
    # a ConfigMap: no simulated actor writes it behind the test's back
    path = "/api/v1/namespaces/default/configmaps"
    code, created = await call(http, "POST", path, {"metadata": {"name": "c"}, "data": {"v": "0"}})
    assert code == 201
    stale = json.loads(json.dumps(created))
    created["data"]["v"] = "1"
    code, updated = await call(http, "PUT", f"{path}/c", created)
    assert code == 200
    assert int(updated["metadata"]["resourceVersion"]) > int(stale["metadata"]["resourceVersion"])
    stale["data"]["v"] = "2"
    code, status = await call(http, "PUT", f"{path}/c", stale)
    assert code == 409
    assert status["reason"] == "Conflict"
    assert "the object has been modified" in status["message"]


async def test_field_selector_on_node_name(http: aiohttp.ClientSession) -> None:
    for i, node in enumerate(["node-1", "node-2", "node-2", "node-3"]):
        code, _ = await call(http, "POST", "/api/v1/namespaces/default/pods", pod(f"p{i}", node))
        assert code == 201
    code, body = await call(http, "GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-2")
    assert code == 200
    assert sorted(p["metadata"]["name"] for p in body["items"]) == ["p1", "p2"]
    code, body = await call(http, "GET", "/api/v1/pods?fieldSelector=spec.flavour%3Dx")
    assert code == 400


async def test_watch_from_a_compacted_version_is_gone(
    sim: SimCluster, http: aiohttp.ClientSession
) -> None:
    _, listed = await call(http, "GET", "/api/v1/namespaces/default/pods")
    old = listed["metadata"]["resourceVersion"]
    await call(http, "POST", "/api/v1/namespaces/default/pods", pod("p"))
    sim.store.compact()
    # as kube-apiserver answers: HTTP 200, then one ERROR event carrying the 410 Status
    async with http.get(f"/api/v1/pods?watch=true&resourceVersion={old}") as r:
        assert r.status == 200
        lines = [json.loads(line) for line in (await r.read()).splitlines() if line.strip()]
    assert [ev["type"] for ev in lines] == ["ERROR"]
    status = lines[0]["object"]
    assert status["kind"] == "Status" and status["code"] == 410
    assert status["reason"] == "Expired"
    assert status["message"].startswith("too old resource version")


async def test_churn_expires_the_watch_window_by_itself(
    sim: SimCluster, http: aiohttp.ClientSession
) -> None:
    """Like kube-apiserver's watch cache: once a resource's window is full and its oldest events
    are stale, they go, and a watch from before them gets the 410 ERROR event."""
    now = [0.0]
    sim.store.clock = lambda: now[0]
    path = "/api/v1/namespaces/default/configmaps"
    for i in range(HISTORY_MIN):
        await call(http, "POST", path, {"metadata": {"name": f"cm-{i}"}})
    now[0] += FRESH_SECONDS + 1
    for i in range(HISTORY_MIN // 2):
        await call(http, "PATCH", f"{path}/cm-{i}", {"data": {"v": "1"}}, MERGE)
    async with http.get("/api/v1/configmaps?watch=true&resourceVersion=1") as r:
        assert r.status == 200
        lines = [json.loads(line) for line in (await r.read()).splitlines() if line.strip()]
    assert [(ev["type"], ev["object"]["code"]) for ev in lines] == [("ERROR", 410)]


async def test_watch_replays_history_and_reports_selection_changes(
    sim: SimCluster, http: aiohttp.ClientSession
) -> None:
    _, listed = await call(http, "GET", "/api/v1/namespaces/default/pods")
    rv = listed["metadata"]["resourceVersion"]
    await call(http, "POST", "/api/v1/namespaces/default/pods", pod("p", app="a"))
    events: list[tuple[str, str]] = []
    url = f"/api/v1/namespaces/default/pods?watch=true&resourceVersion={rv}&labelSelector=app%3Da"
    async with http.get(url) as r:
        assert r.status == 200
        line = await r.content.readline()
        ev = json.loads(line)
        events.append((ev["type"], ev["object"]["metadata"]["name"]))
        # relabel out of the selection: the watch sees it leave as DELETED
        await call(
            http,
            "PATCH",
            "/api/v1/namespaces/default/pods/p",
            {"metadata": {"labels": {"app": "b"}}},
            "application/merge-patch+json",
        )
        while events[-1][0] != "DELETED":
            ev = json.loads(await r.content.readline())
            if ev["type"] != "BOOKMARK":
                events.append((ev["type"], ev["object"]["metadata"]["name"]))
                labels = ev["object"]["metadata"]["labels"]
                assert labels["app"] == ("b" if ev["type"] == "DELETED" else "a")
    # the scheduler and kubelet modify the pod meanwhile; the watch must see it come and go
    assert events[0] == ("ADDED", "p")
    assert {t for t, _ in events[1:-1]} <= {"MODIFIED"}


async def test_eviction_under_two_pdbs_is_500(sim: SimCluster, http: aiohttp.ClientSession) -> None:
    await call(http, "POST", "/api/v1/namespaces/default/pods", pod("p", "node-1"))
    for name in ("one", "two"):
        code, _ = await call(
            http,
            "POST",
            "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
            {
                "metadata": {"name": name},
                "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "a"}}},
            },
        )
        assert code == 201
    await until(sim, lambda: all(running(p) for p in pods(sim)))
    code, status = await call(
        http,
        "POST",
        "/api/v1/namespaces/default/pods/p/eviction",
        {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": "p"},
        },
    )
    assert code == 500
    assert "more than one PodDisruptionBudget" in status["message"]


async def test_finalizers_hold_deletion(sim: SimCluster, http: aiohttp.ClientSession) -> None:
    cm = {"metadata": {"name": "c", "finalizers": ["example.com/hold"]}, "data": {"a": "b"}}
    await call(http, "POST", "/api/v1/namespaces/default/configmaps", cm)
    code, body = await call(http, "DELETE", "/api/v1/namespaces/default/configmaps/c")
    assert code == 200
    assert body["metadata"]["deletionTimestamp"]
    code, _ = await call(http, "GET", "/api/v1/namespaces/default/configmaps/c")
    assert code == 200
    code, _ = await call(
        http,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/c",
        {"metadata": {"finalizers": None}},
        "application/merge-patch+json",
    )
    assert code == 200
    code, _ = await call(http, "GET", "/api/v1/namespaces/default/configmaps/c")
    assert code == 404


async def test_generation_moves_with_spec_only(http: aiohttp.ClientSession) -> None:
    dep = {
        "metadata": {"name": "d"},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"a": "b"}},
            "template": {
                "metadata": {"labels": {"a": "b"}},
                "spec": {"containers": [{"name": "c", "image": "i"}]},
            },
        },
    }
    _, d = await call(http, "POST", "/apis/apps/v1/namespaces/default/deployments", dep)
    assert d["metadata"]["generation"] == 1
    _, d = await call(
        http,
        "PATCH",
        "/apis/apps/v1/namespaces/default/deployments/d",
        {"metadata": {"labels": {"x": "y"}}},
        "application/merge-patch+json",
    )
    assert d["metadata"]["generation"] == 1
    _, d = await call(
        http,
        "PATCH",
        "/apis/apps/v1/namespaces/default/deployments/d",
        {"spec": {"replicas": 2}},
        "application/strategic-merge-patch+json",
    )
    assert d["metadata"]["generation"] == 2


async def test_injected_error_burst(sim: SimCluster, http: aiohttp.ClientSession) -> None:
    async with http.post(
        "/sim/faults", json={"bursts": [{"code": 429, "count": 2, "verb": "list"}]}
    ):
        pass
    codes = [(await call(http, "GET", "/api/v1/pods"))[0] for _ in range(3)]
    assert codes == [429, 429, 200]
