"""The health and metrics server against clients that hold connections open: real listeners on
loopback, clients from several source addresses (Linux routes all of 127.0.0.0/8 to lo, so a
client socket may bind 127.0.0.x).

What they check: one client (source address) holds MAX_CLIENT_CONNECTIONS at most, more are
closed at once, unanswered, while another client is served; with the metrics listener full
(200 connections from 25 clients), the probe listener answers /healthz and /readyz at once and
nothing else; a connection that sends no complete request is closed after the idle timeout; a
client that leaves frees its slot; a probe port in use is an error naming its setting.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import AsyncIterator

import pytest
from prometheus_client import CollectorRegistry

from nodeagent.config import ObservabilityConfig
from nodeagent.observability import http
from nodeagent.observability.http import Health, ListenError, Listeners, serve

Conn = tuple[asyncio.StreamReader, asyncio.StreamWriter]

# long enough that the idle connections of a test stay open until it ends
LONG_IDLE = ObservabilityConfig("127.0.0.1:0", probe_listen="127.0.0.1:0", idle_timeout=60)


def request(path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: agent\r\n\r\n".encode()


@pytest.fixture
async def listeners() -> AsyncIterator[Listeners]:
    s = await serve(LONG_IDLE, Health(), CollectorRegistry())
    yield s
    await s.close()


async def connect(port: int, source: str) -> Conn:
    return await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))


async def status(conn: Conn, path: str = "/healthz") -> int:
    """Ask on an open connection; the status of the answer."""
    reader, writer = conn
    writer.write(request(path))
    answer = await reader.read()
    assert answer.startswith(b"HTTP/1.1 "), answer
    return int(answer.split(b" ", 2)[1])


async def closed_unanswered(conn: Conn) -> bool:
    reader, _ = conn
    try:
        return await reader.read() == b""
    except ConnectionResetError:
        return True


async def ask(port: int, source: str, path: str = "/healthz") -> int:
    conn = await connect(port, source)
    try:
        return await status(conn, path)
    finally:
        conn[1].close()


@contextlib.asynccontextmanager
async def held(port: int, sources: list[str], count: int) -> AsyncIterator[list[Conn]]:
    """`count` connections, from `sources` in turn, opened one after the other (the server
    takes them in that order), closed on the way out."""
    conns: list[Conn] = []
    try:
        for i in range(count):
            conns.append(await connect(port, sources[i % len(sources)]))
        yield conns
    finally:
        for _, writer in conns:
            writer.transport.abort()


async def test_a_client_beyond_its_share_is_closed_at_once_while_another_is_served(
    listeners: Listeners,
) -> None:
    port = listeners.http.port
    share = http.MAX_CLIENT_CONNECTIONS
    async with held(port, ["127.0.0.2"], share + 1) as conns:
        # at once: not the idle timeout's 408, a minute away
        async with asyncio.timeout(5):
            assert await closed_unanswered(conns[-1])
            assert await ask(port, "127.0.0.3") == 200
            assert await ask(port, "127.0.0.3", "/metrics") == 200
            # one that leaves frees its slot (it sees the server close after it is freed)
            conns[0][1].write_eof()
            assert await closed_unanswered(conns[0])
            assert await ask(port, "127.0.0.2") == 200
            # the others within its share were kept, and are served
            assert [await status(c) for c in conns[1:share]] == [200] * (share - 1)


@pytest.mark.parametrize("clients", [1, 25])
async def test_probes_are_answered_at_once_while_200_idle_connections_are_held(
    listeners: Listeners, clients: int
) -> None:
    sources = [f"127.0.1.{i}" for i in range(1, clients + 1)]
    port, probes = listeners.http.port, listeners.probes
    assert probes is not None
    async with held(port, sources, 200) as conns:
        kept = min(http.MAX_CONNECTIONS, clients * http.MAX_CLIENT_CONNECTIONS)
        async with asyncio.timeout(5):
            # those past the limits are closed unanswered, and at once
            for conn in conns[kept:]:
                assert await closed_unanswered(conn)
        async with asyncio.timeout(1):
            assert await ask(probes.port, "127.0.0.4") == 200
            assert await ask(probes.port, "127.0.0.4", "/readyz") == 200
            assert await ask(probes.port, "127.0.0.4", "/metrics") == 404
            if kept < http.MAX_CONNECTIONS:  # one client: the others are served on its port
                assert await ask(port, "127.0.0.4") == 200
            else:  # the metrics listener is full: only the probe listener answers
                assert await closed_unanswered(await connect(port, "127.0.0.4"))
        # and those it kept were kept, not closed
        async with asyncio.timeout(5):
            assert [await status(c) for c in conns[:kept]] == [200] * kept


async def test_an_idle_connection_is_closed_after_the_idle_timeout() -> None:
    cfg = ObservabilityConfig("127.0.0.1:0", idle_timeout=0.5)
    s = await serve(cfg, Health(), CollectorRegistry())
    try:
        port = s.http.port
        start = time.monotonic()
        async with held(port, ["127.0.0.5"], http.MAX_CLIENT_CONNECTIONS) as conns:
            conns[0][1].write(b"GET /healthz HTTP/1.1\r\n")  # one stops mid-head
            async with asyncio.timeout(cfg.idle_timeout + 5):
                answers = [await reader.read() for reader, _ in conns]
            waited = time.monotonic() - start
        assert {a.split(b"\r\n")[0] for a in answers} == {b"HTTP/1.1 408 Request Timeout"}
        assert cfg.idle_timeout <= waited < cfg.idle_timeout + 5
    finally:
        await s.close()


async def test_a_probe_port_in_use_names_its_setting_and_frees_the_metrics_port() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with socket.socket() as free:
            free.bind(("127.0.0.1", 0))
            metrics_port = free.getsockname()[1]
        cfg = ObservabilityConfig(f"127.0.0.1:{metrics_port}", probe_listen=f"127.0.0.1:{port}")
        with pytest.raises(ListenError) as info:
            await serve(cfg, Health(), CollectorRegistry())
    assert str(info.value).startswith(
        f"observability.probeListen: cannot listen on 127.0.0.1:{port}"
    )
    # the metrics listener it had opened is closed again: its port can be listened on
    with socket.socket() as again:
        again.bind(("127.0.0.1", metrics_port))
        again.listen()
