"""KubeClient against a small scripted HTTP server: the wire format, errors, threads."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kubernetes.client
import pytest
import yaml
from aiohttp import web

from nodeagent.kube.client import KubeClient
from nodeagent.kube.connection import load_api_client
from nodeagent.kube.errors import (
    Gone,
    KubeConfigError,
    NotFound,
    ServerError,
    TooManyRequests,
    Unreachable,
)
from nodeagent.kube.resources import LEASES, NODEMAINTENANCES, NODES, PODS, Resource
from nodeagent.kube.transport import Transport
from tests.faketime import FakeClock
from tests.until import until

Obj = dict[str, Any]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class Seen:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any


@dataclass
class FakeServer:
    url: str
    routes: dict[tuple[str, str], Handler] = field(default_factory=dict)
    seen: list[Seen] = field(default_factory=list)

    def on(self, method: str, path: str, handler: Handler) -> None:
        self.routes[(method, path)] = handler

    def reply(self, method: str, path: str, body: Any, status: int = 200, **headers: str) -> None:
        async def handler(request: web.Request) -> web.Response:
            return web.json_response(body, status=status, headers=headers)

        self.on(method, path, handler)


def status(code: int, reason: str, message: str = "") -> Obj:
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code,
            "reason": reason, "message": message or reason}  # fmt: skip


@pytest.fixture
async def server() -> AsyncIterator[FakeServer]:
    fake = FakeServer("")

    async def dispatch(request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        fake.seen.append(
            Seen(
                request.method,
                request.path,
                dict(request.query),
                dict(request.headers),
                json.loads(raw) if raw else None,
            )
        )
        handler = fake.routes.get((request.method, request.path))
        if handler is None:
            return web.json_response(status(404, "NotFound", request.path), status=404)
        return await handler(request)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", dispatch)
    runner = web.AppRunner(app, handler_cancellation=True)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    fake.url = f"http://127.0.0.1:{port}"
    yield fake
    await runner.cleanup()


def api_client(url: str) -> Transport:
    config = kubernetes.client.Configuration(host=url)
    config.api_key = {"BearerToken": "s3cret"}
    config.api_key_prefix = {"BearerToken": "Bearer"}
    return Transport(config)


@pytest.fixture
async def client(server: FakeServer) -> AsyncIterator[KubeClient]:
    api = api_client(server.url)
    async with KubeClient(api, max_workers=4) as kc:
        yield kc
    api.close()


async def test_get_sends_auth_and_returns_dict(server: FakeServer, client: KubeClient) -> None:
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}
    server.reply("GET", "/api/v1/nodes/n1", node)
    assert await client.get(NODES, "n1") == node
    assert server.seen[0].headers["Authorization"] == "Bearer s3cret"
    assert server.seen[0].headers["Accept"] == "application/json"
    assert server.seen[0].headers["User-Agent"].startswith("nodeagent/")


async def test_the_token_is_asked_for_again_once_a_second(server: FakeServer) -> None:
    """A pod's ServiceAccount token rotates: the in-cluster loader's refresh hook rereads it.
    The transport calls the hook once for all requests within a second, and again after."""
    server.reply("GET", "/api/v1/nodes/n1", {"metadata": {"name": "n1"}})
    config = kubernetes.client.Configuration(host=server.url)
    config.api_key = {"authorization": "Bearer zero"}  # as loaded, before the first refresh
    tokens = iter(["one", "two"])

    def refresh(c: kubernetes.client.Configuration) -> None:
        c.api_key = {"authorization": f"Bearer {next(tokens)}"}

    config.refresh_api_key_hook = refresh  # type: ignore[assignment]
    clock = FakeClock()
    api = Transport(config, clock=clock)
    async with KubeClient(api) as kc:
        for step in (0.0, 0.5, 0.25, 0.25):  # the last one a second after the first
            clock.advance(step)
            await kc.get(NODES, "n1")
    api.close()
    seen = [r.headers["Authorization"] for r in server.seen]
    assert seen == ["Bearer one", "Bearer one", "Bearer one", "Bearer two"]


async def test_errors_are_translated(server: FakeServer, client: KubeClient) -> None:
    with pytest.raises(NotFound) as nf:
        await client.get(PODS, "nope", "default")
    assert nf.value.status == 404
    server.reply(
        "POST",
        "/api/v1/namespaces/ns/pods/web/eviction",
        status(
            429,
            "TooManyRequests",
            "Cannot evict pod as it would violate the pod's disruption budget.",
        ),
        status=429,
        **{"Retry-After": "5"},
    )
    with pytest.raises(TooManyRequests) as tmr:
        await client.evict("ns", "web")
    assert tmr.value.retry_after == 5.0
    assert "disruption budget" in tmr.value.message
    server.reply("GET", "/api/v1/nodes/broken", "not json at all", status=200)
    with pytest.raises(ServerError):
        await client.get(NODES, "broken")


async def test_list_follows_pages(server: FakeServer, client: KubeClient) -> None:
    def page(name: str, token: str | None) -> Obj:
        meta = {"resourceVersion": "7", **({"continue": token} if token else {})}
        return {"metadata": meta, "items": [{"metadata": {"name": name}}]}

    pages = {None: page("a", "t1"), "t1": page("b", "t2"), "t2": page("c", None)}

    async def handler(request: web.Request) -> web.Response:
        page = pages[request.query.get("continue")]
        return web.json_response({"kind": "PodList", "apiVersion": "v1", **page})

    server.on("GET", "/api/v1/namespaces/ns/pods", handler)
    result = await client.list(
        PODS, "ns", label_selector="app in (web,db)", resource_version="5", page_size=1
    )
    assert [i["metadata"]["name"] for i in result["items"]] == ["a", "b", "c"]
    assert all(i["kind"] == "Pod" and i["apiVersion"] == "v1" for i in result["items"])
    assert result["metadata"] == {"resourceVersion": "7"}
    queries = [s.query for s in server.seen]
    assert queries[0] == {"labelSelector": "app in (web,db)", "resourceVersion": "5", "limit": "1"}
    assert queries[1] == {"labelSelector": "app in (web,db)", "continue": "t1", "limit": "1"}


async def test_list_restarts_when_continue_expires(server: FakeServer, client: KubeClient) -> None:
    async def handler(request: web.Request) -> web.Response:
        if request.query.get("continue"):
            return web.json_response(status(410, "Expired", "continue expired"), status=410)
        if request.query.get("limit"):
            meta = {"resourceVersion": "3", "continue": "x"}
            return web.json_response({"metadata": meta, "items": [{"metadata": {"name": "a"}}]})
        items = [{"metadata": {"name": n}} for n in "ab"]
        return web.json_response({"metadata": {"resourceVersion": "4"}, "items": items})

    server.on("GET", "/api/v1/nodes", handler)
    result = await client.list(NODES, page_size=1)
    assert [i["metadata"]["name"] for i in result["items"]] == ["a", "b"]
    assert result["metadata"]["resourceVersion"] == "4"


async def test_writes(server: FakeServer, client: KubeClient) -> None:
    async def echo(request: web.Request) -> web.Response:
        body = await request.json()
        return web.json_response(body if isinstance(body, dict) else {"ops": body})

    for method, path in [
        ("POST", "/apis/coordination.k8s.io/v1/namespaces/ns/leases"),
        ("PUT", "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l"),
        ("PUT", "/apis/nodeagent.io/v1alpha1/nodemaintenances/m/status"),
        ("PATCH", "/api/v1/nodes/n1"),
        ("PATCH", "/apis/nodeagent.io/v1alpha1/nodemaintenances/m/status"),
        ("DELETE", "/api/v1/namespaces/ns/pods/p"),
    ]:
        server.on(method, path, echo)
    lease = {"metadata": {"name": "l", "namespace": "ns"}, "spec": {}}
    created = await client.create(LEASES, lease)
    assert created["apiVersion"] == "coordination.k8s.io/v1" and created["kind"] == "Lease"
    await client.replace(LEASES, {**lease, "metadata": {"name": "l", "resourceVersion": "9"}}, "ns")
    await client.replace_status(NODEMAINTENANCES, {"metadata": {"name": "m"}, "status": {}})
    await client.patch(NODES, "n1", {"spec": {"unschedulable": True}})
    await client.patch(NODES, "n1", {"spec": {"unschedulable": True}}, patch_type="strategic")
    await client.patch(NODES, "n1", [{"op": "remove", "path": "/spec/taints/0"}], patch_type="json")
    await client.patch_status(NODEMAINTENANCES, "m", {"status": {"x": 1}})
    await client.delete(
        PODS, "p", "ns", grace_period_seconds=0, uid="u1", resource_version="5",
        propagation="Background",
    )  # fmt: skip
    types = [s.headers.get("Content-Type") for s in server.seen if s.method == "PATCH"]
    assert types == [
        "application/merge-patch+json",
        "application/strategic-merge-patch+json",
        "application/json-patch+json",
        "application/merge-patch+json",
    ]
    assert server.seen[-1].body == {
        "apiVersion": "v1",
        "kind": "DeleteOptions",
        "gracePeriodSeconds": 0,
        "preconditions": {"uid": "u1", "resourceVersion": "5"},
        "propagationPolicy": "Background",
    }
    with pytest.raises(ValueError):
        await client.patch(NODES, "n1", {"op": "x"}, patch_type="json")
    with pytest.raises(ValueError):
        await client.create(PODS, {"metadata": {"name": "no-namespace"}})


async def test_evict_body(server: FakeServer, client: KubeClient) -> None:
    server.reply(
        "POST", "/api/v1/namespaces/ns/pods/web/eviction", {"kind": "Status", "code": 201}, 201
    )
    await client.evict("ns", "web", uid="u-1", grace_period_seconds=30)
    assert server.seen[0].body == {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": "web", "namespace": "ns"},
        "deleteOptions": {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "gracePeriodSeconds": 30,
            "preconditions": {"uid": "u-1"},
        },
    }


async def test_request_hook_and_bounded_concurrency(server: FakeServer) -> None:
    in_flight = 0
    peak = 0

    async def slow(request: web.Request) -> web.Response:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        # real time: the requests must overlap for a third one at once to show
        await asyncio.sleep(0.05)
        in_flight -= 1
        return web.json_response({"metadata": {"name": "n1"}})

    server.on("GET", "/api/v1/nodes/n1", slow)
    calls: list[tuple[str, Resource, int]] = []
    api = api_client(server.url)
    async with KubeClient(api, max_workers=2, on_request=lambda *a: calls.append(a)) as kc:
        await asyncio.gather(*(kc.get(NODES, "n1") for _ in range(8)))
        with pytest.raises(NotFound):
            await kc.get(NODES, "other")
    api.close()
    assert peak == 2
    assert calls[:8] == [("get", NODES, 200)] * 8
    assert calls[8] == ("get", NODES, 404)


async def test_unreachable() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = kubernetes.client.Configuration(host=f"http://127.0.0.1:{port}")
    config.retries = 0
    api = Transport(config)
    async with KubeClient(api) as kc:
        with pytest.raises(Unreachable):
            await kc.get(NODES, "n1")
        with pytest.raises(Unreachable):
            async for _ in kc.watch(NODES):
                pass
    api.close()


# -- watch -----------------------------------------------------------------------------


def watch_threads(name: str, besides: Collection[threading.Thread] = ()) -> list[threading.Thread]:
    """The live threads of that name not in `besides` (an earlier test's may still be ending)."""
    return [t for t in threading.enumerate() if t.name == name and t not in besides]


def line(event: Obj) -> bytes:
    return json.dumps(event).encode() + b"\n"


def pod_event(kind: str, name: str, rv: str) -> Obj:
    return {
        "type": kind,
        "object": {"kind": "Pod", "metadata": {"name": name, "resourceVersion": rv}},
    }


async def test_watch_streams_events_split_across_chunks(
    server: FakeServer, client: KubeClient
) -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse()
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        data = line(pod_event("ADDED", "a", "1")) + line(pod_event("MODIFIED", "a", "2"))
        await resp.write(data[:10])
        # real time: the client's thread reads the first piece alone, so it must join the line
        await asyncio.sleep(0.05)
        await resp.write(data[10:] + b"\n")  # a blank line is skipped
        await resp.write(
            line({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "3"}}})
        )
        await resp.write_eof()
        return resp

    server.on("GET", "/api/v1/namespaces/ns/pods", handler)
    events = [
        e
        async for e in client.watch(
            PODS, "ns", resource_version="0", field_selector="spec.nodeName=n1", timeout_seconds=30
        )
    ]
    assert [(e["type"], e["object"]["metadata"]["resourceVersion"]) for e in events] == [
        ("ADDED", "1"),
        ("MODIFIED", "2"),
        ("BOOKMARK", "3"),
    ]
    assert server.seen[0].query == {
        "fieldSelector": "spec.nodeName=n1",
        "watch": "true",
        "resourceVersion": "0",
        "allowWatchBookmarks": "true",
        "timeoutSeconds": "30",
    }


async def test_watch_error_event_410_raises_gone(server: FakeServer, client: KubeClient) -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse()
        await resp.prepare(request)
        await resp.write(line(pod_event("ADDED", "a", "1")))
        await resp.write(
            line(
                {
                    "type": "ERROR",
                    "object": status(410, "Expired", "too old resource version: 1 (9)"),
                }
            )
        )
        await asyncio.Event().wait()  # a real server may keep the stream open; we must not wait
        return resp

    server.on("GET", "/api/v1/pods", handler)
    got: list[Obj] = []
    async with asyncio.timeout(2):
        with pytest.raises(Gone) as gone:
            async for event in client.watch(PODS, resource_version="1"):
                got.append(event)
    assert len(got) == 1
    assert gone.value.status == 410 and "too old" in gone.value.message


async def test_watch_http_410_raises_gone(server: FakeServer, client: KubeClient) -> None:
    server.reply("GET", "/api/v1/pods", status(410, "Expired", "too old"), status=410)
    with pytest.raises(Gone):
        async for _ in client.watch(PODS, resource_version="1"):
            pass


async def test_closing_a_watch_ends_the_response_and_thread(
    server: FakeServer, client: KubeClient
) -> None:
    disconnected = asyncio.Event()

    async def handler(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse()
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        await resp.write(line(pod_event("ADDED", "a", "1")))
        try:
            await asyncio.Event().wait()  # the stream stays open
        except asyncio.CancelledError:  # aiohttp's word that the client closed the connection
            disconnected.set()
            raise
        return resp

    server.on("GET", "/api/v1/pods", handler)
    before = set(threading.enumerate())
    stream = client.watch(PODS)
    async with contextlib.aclosing(stream):
        first = await anext(stream)
        assert first["type"] == "ADDED"
        assert watch_threads("watch pods", before)
    async with asyncio.timeout(2):
        await disconnected.wait()
    await until(lambda: not watch_threads("watch pods", before), timeout=2)


async def test_cancelling_the_consumer_closes_the_watch(
    server: FakeServer, client: KubeClient
) -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse()
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        await asyncio.Event().wait()  # the stream stays open
        return resp

    server.on("GET", "/api/v1/nodes", handler)

    async def consume() -> None:
        async with contextlib.aclosing(client.watch(NODES)) as events:
            async for _ in events:
                pass

    before = set(threading.enumerate())
    task = asyncio.create_task(consume())
    await until(lambda: bool(watch_threads("watch nodes", before)), timeout=2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await until(lambda: not watch_threads("watch nodes", before), timeout=2)


async def test_client_close_ends_open_watches(server: FakeServer) -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse()
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        await resp.write(line(pod_event("ADDED", "a", "1")))
        await asyncio.Event().wait()  # the stream stays open
        return resp

    server.on("GET", "/api/v1/pods", handler)
    api = api_client(server.url)
    kc = KubeClient(api)
    before = set(threading.enumerate())
    stream = kc.watch(PODS)
    await anext(stream)
    assert watch_threads("watch pods", before)
    async with asyncio.timeout(2):
        await kc.close()
    await until(lambda: not watch_threads("watch pods", before), timeout=2)
    await stream.aclose()
    api.close()


# -- configuration ---------------------------------------------------------------------


def test_load_api_client_from_kubeconfig(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:6443"}}],
                "users": [{"name": "u", "user": {"token": "tok"}}],
                "contexts": [
                    {"name": "one", "context": {"cluster": "c", "user": "u"}},
                    {"name": "two", "context": {"cluster": "c", "user": "u"}},
                ],
                "current-context": "one",
            }
        )
    )
    api = load_api_client(str(path), context="two", connection_pool_maxsize=16)
    try:
        assert api.configuration.host == "http://127.0.0.1:6443"
        assert api.configuration.connection_pool_maxsize == 16
        assert api.configuration.auth_settings()["BearerToken"]["value"] == "Bearer tok"
        # every connection, watches included, has TCP keepalive (the client's default is off)
        options = api.rest.pool_manager.connection_pool_kw["socket_options"]
        assert (socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1) in options
        assert (socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, 30) in options
        assert (socket.IPPROTO_TCP, socket.TCP_NODELAY, 1) in options
    finally:
        api.close()
    with pytest.raises(KubeConfigError):
        load_api_client(str(tmp_path / "missing"))
    with pytest.raises(KubeConfigError):
        load_api_client(str(path), context="nope")
