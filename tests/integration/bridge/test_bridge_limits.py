"""The bridge's port against clients that hold connections open (issue 34, finding 2: 340 idle
TCP connections exhausted it and an eviction then passed after 5 s, skipping its responder):
one source holds MAX_CLIENT_CONNECTIONS at most, more are closed at once, unanswered; those it
holds are closed after the idle timeout, whether they begin no TLS or ask nothing once it is
up. The clients bind 127.0.0.x (Linux routes all of 127.0.0.0/8 to lo). With kube-apiserver
calling meanwhile: test_forged_reviews.py, on the real control plane."""

from __future__ import annotations

import asyncio
import dataclasses
import ssl
import time
from pathlib import Path

import aiohttp
import pytest

from nodeagent.bridge import listener
from nodeagent.bridge.server import Listen
from tests.integration.bridge.clientcerts import ClientCA, Pair
from tests.integration.bridge.test_webhook import NAMES, Served, serve
from tests.integration.controllers.evictionrequest_harness import Env, env
from tests.integration.observability.test_http_limits import closed_unanswered, held
from tests.until import until

__all__ = ["IDLE", "env", "port_of"]  # the fixture, re-exported for pytest

ATTACKER = "127.0.0.2"
IDLE = 340  # the attack's count
QUICK = Listen("127.0.0.1", 0, idle_timeout=0.5)


def port_of(bridge: Served) -> int:
    assert bridge.server.port is not None
    return bridge.server.port


def held_by(bridge: Served, source: str | None = None) -> int:
    slots = bridge.server.listener.slots if bridge.server.listener is not None else None
    assert slots is not None
    return len(slots) if source is None else slots.held(source)


async def test_idle_connections_beyond_a_sources_share_are_closed_at_once_the_rest_in_time(
    env: Env,
) -> None:
    async with serve(env.kube, listen=QUICK) as bridge:
        share = listener.MAX_CLIENT_CONNECTIONS
        start = time.monotonic()
        async with held(port_of(bridge), [ATTACKER], IDLE) as conns:
            async with asyncio.timeout(5):
                for conn in conns[share:]:
                    assert await closed_unanswered(conn)
            assert held_by(bridge, ATTACKER) == share
            # another source is served meanwhile
            assert (await bridge.evict("nobody"))["allowed"] is True
            # those it kept begin no TLS: closed after the idle timeout, not before
            async with asyncio.timeout(QUICK.idle_timeout + 5):
                for conn in conns[:share]:
                    assert await closed_unanswered(conn)
            assert time.monotonic() - start >= QUICK.idle_timeout
            await until(lambda: held_by(bridge, ATTACKER) == 0)


async def test_a_connection_that_completes_tls_but_asks_nothing_is_closed_in_time(
    env: Env,
) -> None:
    async with serve(env.kube, listen=QUICK) as bridge:
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", port_of(bridge), ssl=bridge.trust, server_hostname=NAMES[2]
        )
        try:
            started = time.monotonic()
            async with asyncio.timeout(QUICK.idle_timeout + 5):
                assert await reader.read() == b""
            assert time.monotonic() - started >= QUICK.idle_timeout / 2
        finally:
            writer.transport.abort()
        await until(lambda: held_by(bridge) == 0)


async def test_a_client_that_is_no_tls_client_is_closed_and_frees_its_slot(env: Env) -> None:
    async with serve(env.kube, listen=QUICK) as bridge:
        reader, writer = await asyncio.open_connection("127.0.0.1", port_of(bridge))
        try:
            writer.write(b"GET / HTTP/1.1\r\nHost: bridge\r\n\r\n")
            async with asyncio.timeout(5):
                assert await closed_unanswered((reader, writer))
        finally:
            writer.transport.abort()
        await until(lambda: held_by(bridge) == 0)
        assert (await bridge.evict("nobody"))["allowed"] is True


# --- eviction.bridge.clientCaFile: only kube-apiserver's certificate is answered ------------


async def test_with_a_client_ca_only_clients_with_its_certificate_are_answered(
    env: Env, tmp_path: Path
) -> None:
    ca = ClientCA(tmp_path)
    other = ClientCA(tmp_path, "someone-else")
    async with serve(env.kube, listen=QUICK, client_ca=ca.pem) as bridge:

        def presenting(pair: Pair | None) -> Served:
            bundle = bridge.server.keeper.bundle
            assert bundle is not None
            trust = ssl.create_default_context(cadata=bundle.trusted.decode())
            if pair is not None:
                trust.load_cert_chain(pair.cert, pair.key)
            return dataclasses.replace(bridge, trust=trust)

        # kube-apiserver, with the certificate its kubeConfigFile names: answered
        assert (await presenting(ca.client("kube-apiserver")).evict("nobody"))["allowed"]
        # no certificate, or one of another CA: refused in the handshake, nothing read
        for attacker in (presenting(None), presenting(other.client("kube-apiserver"))):
            with pytest.raises((aiohttp.ClientError, ssl.SSLError, ConnectionError)):
                async with asyncio.timeout(5):
                    await attacker.evict("nobody")
        assert bridge.server.bridge.metrics.answered() == {"unknown": 1}
        # the refused freed their slots; kube-apiserver's stays for its next call (keep-alive)
        await until(lambda: held_by(bridge) == 1)
