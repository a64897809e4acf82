"""The bridge's port: every connection is counted before its TLS handshake, as the health ports
count theirs (:class:`nodeagent.observability.http.Slots`): at most ``MAX_CONNECTIONS`` at once
and ``MAX_CLIENT_CONNECTIONS`` of one source address; more are closed at once, unanswered.
Whatever a client does, its connection is bounded: the TLS handshake (and, with
``clientCA``, the client's certificate) within ``idle_timeout``, then its first request
begun within ``idle_timeout`` too; between requests, aiohttp's keep-alive timeout. So idle
connections, however many, cannot take the port from kube-apiserver (issue 34: 340 of them
exhausted it and an eviction passed the bridge): one source holds a share at most, and each
for a bounded time.

kube-apiserver reuses its connections to the webhook and opens one per concurrent call, one
per pod evicted at once by a drain; ``MAX_CLIENT_CONNECTIONS`` leaves it room for a whole
node's."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
import struct
from collections.abc import Callable

from nodeagent.observability.http import Slots, source_of

__all__ = [
    "IDLE_TIMEOUT",
    "MAX_CLIENT_CONNECTIONS",
    "MAX_CONNECTIONS",
    "LimitedListener",
]

log = logging.getLogger(__name__)

MAX_CONNECTIONS = 512
"""Connections the bridge serves at once, from every source together."""
MAX_CLIENT_CONNECTIONS = 128
"""Connections of one source address. kube-apiserver opens one per concurrent call, and a
drain evicts a node's pods at once (``kubectl drain``: one goroutine per pod): at most 110 by
the kubelet's default ``maxPods``. One refused would let that eviction pass the bridge
(failurePolicy Ignore)."""
IDLE_TIMEOUT = 10.0
"""Seconds a new connection has for its TLS handshake, and then for its first request."""


class _Counted(asyncio.Protocol):
    """The HTTP protocol of one connection (aiohttp's), told apart from nothing but: it is
    closed when its first bytes do not come within ``idle``, and ``closed`` resolves when it
    is lost."""

    def __init__(self, inner: asyncio.Protocol, idle: float) -> None:
        self._inner = inner
        self._idle = idle
        self._timer: asyncio.TimerHandle | None = None
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(self._idle, _abort(transport))
        self._inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received()

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
        try:
            self._inner.connection_lost(exc)
        finally:
            if not self.closed.done():
                self.closed.set_result(None)


def _abort(transport: asyncio.BaseTransport) -> Callable[[], None]:
    def abort() -> None:
        if isinstance(transport, asyncio.Transport):
            transport.abort()
        else:
            transport.close()

    return abort


class LimitedListener:
    """Accepts on ``host:port`` and serves each connection it has room for with TLS
    (``context``) and the protocol ``factory`` makes (aiohttp's web server)."""

    def __init__(
        self,
        factory: Callable[[], asyncio.Protocol],
        context: ssl.SSLContext,
        *,
        idle_timeout: float = IDLE_TIMEOUT,
        total: int = MAX_CONNECTIONS,
        per_client: int = MAX_CLIENT_CONNECTIONS,
    ) -> None:
        self._factory = factory
        self._context = context
        self._idle = idle_timeout
        self.slots = Slots(total, per_client)
        self._sock: socket.socket | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0

    def bind(self, host: str, port: int) -> None:
        """Listen (raises OSError when the address is taken or not ours)."""
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
            sock.listen(socket.SOMAXCONN)
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        self._sock = sock
        self.port = int(sock.getsockname()[1])

    async def serve(self) -> None:
        """Accept until cancelled; then close every connection."""
        assert self._sock is not None, "bind() first"
        loop = asyncio.get_running_loop()
        try:
            while True:
                conn, peer = await loop.sock_accept(self._sock)
                client = source_of(peer)
                # before any await: connections take their slots in the order they came
                if not self.slots.take(client):
                    _close_at_once(conn)
                    continue
                task = asyncio.create_task(self._connection(conn, client))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
        finally:
            self._sock.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _connection(self, conn: socket.socket, client: str) -> None:
        loop = asyncio.get_running_loop()
        transport: asyncio.BaseTransport | None = None
        try:
            counted: _Counted | None = None

            def made() -> asyncio.Protocol:
                nonlocal counted
                counted = _Counted(self._factory(), self._idle)
                return counted

            try:
                transport, _ = await loop.connect_accepted_socket(
                    made, conn, ssl=self._context, ssl_handshake_timeout=self._idle
                )
            except (OSError, ssl.SSLError, TimeoutError, ConnectionError) as exc:
                # no handshake in time, a client that is not TLS, a certificate refused
                log.debug("eviction bridge: connection from %s refused: %s", client, exc)
                _close_at_once(conn)
                return
            assert counted is not None
            await counted.closed
        finally:
            if transport is not None and not transport.is_closing():
                _abort(transport)()
            self.slots.give(client)


def _close_at_once(conn: socket.socket) -> None:
    """Closed with a reset, unanswered: nothing lingers for it."""
    with contextlib.suppress(OSError):
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    conn.close()
