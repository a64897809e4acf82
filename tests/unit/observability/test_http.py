"""The health and metrics server against clients that do not play by the rules.

Raw sockets (asyncio streams) on loopback: what a client sends is exactly what is written here.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter

from nodeagent.config import ObservabilityConfig
from nodeagent.observability import http
from nodeagent.observability.http import Health, HttpServer, Refused, parse_head, serve

GET = b"GET /healthz HTTP/1.1\r\nHost: agent\r\n\r\n"
CONFIG = ObservabilityConfig("127.0.0.1:0", idle_timeout=2.0)


@pytest.fixture
async def server() -> AsyncIterator[HttpServer]:
    registry = CollectorRegistry()
    Counter("nodeagent_test_total", "a test counter", registry=registry).inc()
    s = await serve(CONFIG, Health(), registry)
    yield s.http
    await s.close()


async def exchange(
    port: int, data: bytes, *, within: float = 5.0, source: str = "127.0.0.1"
) -> bytes:
    """Send `data`, then read until the server closes; all of it within `within` seconds."""
    async with asyncio.timeout(within):
        reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))
        try:
            writer.write(data)
            await writer.drain()
            return await reader.read()
        finally:
            writer.close()


def parse(raw: bytes) -> tuple[int, dict[str, str], bytes]:
    """(status, headers with lower-case names, body) of one complete response."""
    head, sep, body = raw.partition(b"\r\n\r\n")
    assert sep, raw
    status_line, *lines = head.decode("ascii").split("\r\n")
    version, status, _ = status_line.split(" ", 2)
    assert version == "HTTP/1.1"
    headers = {k.lower(): v for k, _, v in (line.partition(": ") for line in lines)}
    assert headers["connection"] == "close"
    assert int(headers["content-length"]) == len(body)
    assert headers["date"].endswith(" GMT")
    return int(status), headers, body


async def test_the_three_paths_and_others(server: HttpServer) -> None:
    status, headers, body = parse(await exchange(server.port, GET))
    assert (status, body) == (200, b"ok\n")
    assert headers["content-type"] == "text/plain; charset=utf-8"
    status, headers, body = parse(
        await exchange(server.port, b"GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\n\r\n")
    )
    assert status == 200
    assert headers["content-type"] == CONTENT_TYPE_LATEST
    assert b"nodeagent_test_total 1.0" in body
    status, _, _ = parse(await exchange(server.port, b"GET /nope HTTP/1.1\r\nHost: a\r\n\r\n"))
    assert status == 404


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"GET /healthz HTTP/1.0\r\n\r\n",  # HTTP/1.0 needs no Host
        b"GET /healthz HTTP/1.1\nHost: a\n\n",  # bare line feeds
        b"\r\nGET /healthz HTTP/1.1\r\nHost: a\r\n\r\n",  # an empty line first
        b"GET http://agent:9873/healthz HTTP/1.1\r\nHost: agent\r\n\r\n",  # absolute-form
        b"GET /healthz HTTP/1.1\r\nhost:a\r\nContent-Length: 0\r\nX-A:  b c \r\n\r\n",
    ],
)
async def test_requests_that_are_fine(server: HttpServer, request_bytes: bytes) -> None:
    status, _, body = parse(await exchange(server.port, request_bytes))
    assert (status, body) == (200, b"ok\n")


async def test_readiness_and_liveness_follow_health() -> None:
    health = Health()
    ready = {"lock": False}
    health.add("shutdown lock", lambda: ready["lock"])
    s = await serve(CONFIG, health, CollectorRegistry())
    try:
        ask = b"GET /readyz HTTP/1.1\r\nHost: a\r\n\r\n"
        port = s.http.port
        assert parse(await exchange(port, ask))[::2] == (503, b"not ready: shutdown lock\n")
        ready["lock"] = True
        assert parse(await exchange(port, ask))[::2] == (200, b"ok\n")
        health.alive = False
        assert parse(await exchange(port, GET))[::2] == (503, b"stopping\n")
    finally:
        await s.close()


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"GET /healthz\r\n\r\n", 400),  # no version
        (b"GET  /healthz HTTP/1.1\r\nHost: a\r\n\r\n", 400),  # two spaces
        (b"GET /healthz HTTP/1.1 x\r\nHost: a\r\n\r\n", 400),
        (b"\x00\x01\x02\xff\r\n\r\n", 400),
        (b"GET /h\xffz HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        (b"GET healthz HTTP/1.1\r\nHost: a\r\n\r\n", 400),  # neither origin- nor absolute-form
        (b"GET http://[::1/healthz HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        (b"get /healthz HTTP/1.1\r\nHost: a\r\n\r\n", 405),  # methods are case-sensitive
        (b"GET /healthz HTTP/1.1\r\n\r\n", 400),  # HTTP/1.1 without Host
        (b"GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
        (b"GET /healthz HTTP/1.1\r\nHost a\r\n\r\n", 400),  # no colon
        (b"GET /healthz HTTP/1.1\r\nHost : a\r\n\r\n", 400),  # space before the colon
        (b"GET /healthz HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n", 400),  # obs-fold
        (b"GET /healthz HTTP/1.1\r\nHost: a\rb\r\n\r\n", 400),  # a bare CR in a value
        (b"GET /healthz HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nab", 400),
        (b"GET /healthz HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
        (b"GET /healthz HTTP/2.0\r\nHost: a\r\n\r\n", 505),
        (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505),  # an HTTP/2 preface
    ],
)
async def test_malformed_requests_get_a_4xx_and_the_connection_closed(
    server: HttpServer, request_bytes: bytes, status: int
) -> None:
    got, _, body = parse(await exchange(server.port, request_bytes))
    assert got == status, body
    assert body.endswith(b"\n")
    assert body.count(b"\n") == 1  # one line saying why


@pytest.mark.parametrize("method", [b"HEAD", b"POST", b"PUT", b"DELETE", b"OPTIONS", b"PATCH"])
async def test_methods_other_than_get_get_405(server: HttpServer, method: bytes) -> None:
    status, headers, _ = parse(
        await exchange(server.port, method + b" /healthz HTTP/1.1\r\nHost: a\r\n\r\n")
    )
    assert status == 405
    assert headers["allow"] == "GET"


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"GET /" + b"a" * (2 * http.MAX_LINE) + b" HTTP/1.1\r\nHost: a\r\n\r\n", 414),
        (
            b"GET /healthz HTTP/1.1\r\nHost: a\r\nX: " + b"a" * (2 * http.MAX_LINE) + b"\r\n\r\n",
            431,
        ),
        (
            b"GET /healthz HTTP/1.1\r\nHost: a\r\n"
            + b"".join(b"X-%d: 1\r\n" % i for i in range(http.MAX_HEADERS + 1))
            + b"\r\n",
            431,
        ),
        (  # each line within bounds, all of them together not
            b"GET /healthz HTTP/1.1\r\nHost: a\r\n"
            + b"".join(b"X-%d: %s\r\n" % (i, b"a" * 1000) for i in range(30))
            + b"\r\n",
            431,
        ),
    ],
)
async def test_heads_too_large_are_refused(
    server: HttpServer, request_bytes: bytes, status: int
) -> None:
    assert len(request_bytes) < http.MAX_LINE * 8  # all of it read: the answer arrives intact
    got, _, _ = parse(await exchange(server.port, request_bytes))
    assert got == status


async def test_a_client_that_never_stops_sending_is_cut_off(server: HttpServer) -> None:
    """An endless request line: answered 414 and closed; the server does not read it all."""
    async with asyncio.timeout(http.LINGER_TIMEOUT + 5):
        _, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"GET /")
        sent = 0
        try:
            while True:  # until the server goes: it must, long before this ends
                writer.write(b"a" * 65536)
                await writer.drain()
                sent += 65536
                assert sent < 1 << 30
        except ConnectionError:
            pass
        finally:
            writer.transport.abort()


async def test_clients_that_stall_are_answered_408_and_closed(server: HttpServer) -> None:
    """A client that connects and sends nothing, and one that stops mid-head, hold their
    connections the idle timeout at most; others are served meanwhile."""
    silent = await asyncio.open_connection("127.0.0.1", server.port)
    partial = await asyncio.open_connection("127.0.0.1", server.port)
    partial[1].write(b"GET /healthz HTTP/1.1\r\nHost: a\r\n")
    start = time.monotonic()
    try:
        # while they stall, others get their answers at once
        for _ in range(3):
            assert parse(await exchange(server.port, GET, within=2.0))[0] == 200
        async with asyncio.timeout(CONFIG.idle_timeout + 3):
            answers = [await silent[0].read(), await partial[0].read()]
        waited = time.monotonic() - start
    finally:
        silent[1].close()
        partial[1].close()
    assert [parse(a)[0] for a in answers] == [408, 408]
    assert CONFIG.idle_timeout - 0.5 < waited < CONFIG.idle_timeout + 3


async def test_concurrent_clients_are_all_served(server: HttpServer) -> None:
    """50 clients (source addresses; one client has MAX_CLIENT_CONNECTIONS at most)."""
    metrics = b"GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n"
    answers = await asyncio.gather(
        *(
            exchange(server.port, GET if i % 2 else metrics, within=10, source=f"127.0.2.{i}")
            for i in range(1, 51)
        )
    )
    assert [parse(a)[0] for a in answers] == [200] * 50


async def test_closing_the_server_ends_connections_in_flight() -> None:
    s = await serve(CONFIG, Health(), CollectorRegistry())
    reader, writer = await asyncio.open_connection("127.0.0.1", s.http.port)
    try:
        writer.write(b"GET /healthz HTTP/1.1\r\n")  # and then nothing
        # served after the stalled one was taken: connections are accepted in order
        assert parse(await exchange(s.http.port, GET))[0] == 200
        async with asyncio.timeout(2):
            await s.close()
            assert await reader.read() == b""
    finally:
        writer.close()
    with pytest.raises(OSError):
        await asyncio.open_connection("127.0.0.1", s.http.port)


@given(st.binary(max_size=200), st.lists(st.binary(max_size=60), max_size=5))
def test_parse_head_answers_anything_with_a_path_or_a_refusal(
    line: bytes, headers: list[bytes]
) -> None:
    try:
        path = parse_head(line, headers)
    except Refused as e:
        assert e.reply.status in (400, 405, 505)
    else:
        assert path.startswith("/")


_PATH_CHARS = st.sampled_from("abcdefghijklmnopqrstuvwxyz0123456789-._~/%!$&'()*+,;=:@")


@given(st.text(_PATH_CHARS, max_size=50), st.text(_PATH_CHARS, max_size=20))
def test_parse_head_takes_any_origin_form_get(path: str, query: str) -> None:
    target = f"/{path}?{query}".encode()
    assert parse_head(b"GET " + target + b" HTTP/1.1", [b"Host: a"]) == f"/{path}"
