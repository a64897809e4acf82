"""/healthz, /readyz and /metrics: a minimal HTTP/1.1 server on asyncio streams.

A web framework's server (aiohttp's cost every node's agent some 10 MiB resident) is more than
three GET routes need. One request per connection (`Connection: close`; a probe and a scrape
open a connection each anyway), so no connection waits idle between requests. Every connection
is bounded, whatever its client does: its request head must arrive within the idle timeout
(observability.idleTimeout) and fit in MAX_LINE, MAX_HEADERS and MAX_HEAD_BYTES, the answer
must be taken within WRITE_TIMEOUT and the client's close is awaited LINGER_TIMEOUT at most. A
listener serves at most MAX_CONNECTIONS at once and MAX_CLIENT_CONNECTIONS of one client (source
address), so one client cannot take them all; more are closed unanswered.

The kubelet's probes may have a listener of their own (observability.probeListen, /healthz and
/readyz only): whatever the clients of /metrics hold, they hold none of its connections, and a
NetworkPolicy can leave it to the node (packaging/kubernetes/networkpolicy.yaml).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from email.utils import formatdate
from http import HTTPStatus
from urllib.parse import urlsplit

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from nodeagent.config import ObservabilityConfig

__all__ = ["Health", "HttpServer", "ListenError", "Listeners", "Slots", "serve", "source_of"]

log = logging.getLogger(__name__)

WRITE_TIMEOUT = 10.0  # seconds for the answer to be taken
LINGER_TIMEOUT = 2.0  # seconds to wait for the client's close after ours (see _send)
MAX_LINE = 8192  # bytes of the request line, and of a header line
MAX_HEADERS = 100
MAX_HEAD_BYTES = 16384  # request line and headers together
MAX_CONNECTIONS = 64  # of one listener
# of one source address: a probe or two and a scrape at a time, with room to spare
MAX_CLIENT_CONNECTIONS = 8
_LINGER_BYTES = 65536
PROBE_PATHS = frozenset({"/healthz", "/readyz"})
ALL_PATHS = PROBE_PATHS | {"/metrics"}

# a readiness check: (name, is it ready?)
Check = tuple[str, Callable[[], bool]]


class Health:
    def __init__(self) -> None:
        self.checks: list[Check] = []
        self.alive = True

    def add(self, name: str, ready: Callable[[], bool]) -> None:
        self.checks.append((name, ready))

    def failing(self) -> list[str]:
        return [name for name, ready in self.checks if not ready()]


@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes
    content_type: str = "text/plain; charset=utf-8"
    allow: str | None = None  # the Allow header of a 405

    def encode(self, date: str) -> bytes:
        head = [
            f"HTTP/1.1 {self.status} {HTTPStatus(self.status).phrase}",
            f"Date: {date}",
            f"Content-Type: {self.content_type}",
            f"Content-Length: {len(self.body)}",
            "Connection: close",
        ]
        if self.allow is not None:
            head.append(f"Allow: {self.allow}")
        return ("\r\n".join(head) + "\r\n\r\n").encode("ascii") + self.body


def _text(status: int, text: str) -> Reply:
    return Reply(status, (text + "\n").encode())


class Refused(Exception):
    """The request is not one we answer; `reply` says why."""

    def __init__(self, status: int, why: str, allow: str | None = None) -> None:
        super().__init__(why)
        self.reply = Reply(status, (why + "\n").encode(), allow=allow)


_TOKEN = rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_REQUEST_LINE = re.compile(rb"(" + _TOKEN + rb") ([\x21-\x7e]+) HTTP/([0-9])\.([0-9])")
_HEADER = re.compile(rb"(" + _TOKEN + rb"):[ \t]*([^\x00\r\n]*?)[ \t]*")


def parse_head(request_line: bytes, header_lines: list[bytes]) -> str:
    """The path a GET asks for, from the request's lines without their line ends; raises
    Refused (400, 405, 505) for anything else."""
    m = _REQUEST_LINE.fullmatch(request_line)
    if m is None:
        raise Refused(400, "malformed request line")
    method, target, major, minor = m.groups()
    if major != b"1":
        raise Refused(505, "only HTTP/1.x is served here")
    hosts = 0
    for line in header_lines:
        h = _HEADER.fullmatch(line)
        if h is None:
            raise Refused(400, "malformed header line")
        name, value = h.group(1).lower(), h.group(2)
        if name == b"host":
            hosts += 1
        elif name == b"transfer-encoding" or (name == b"content-length" and value != b"0"):
            raise Refused(400, "a request with a body is not served here")
    if minor != b"0" and hosts != 1:  # HTTP/1.1 asks for exactly one Host
        raise Refused(400, "an HTTP/1.1 request needs exactly one Host header")
    if method != b"GET":
        raise Refused(405, "only GET is served here", allow="GET")
    if target.startswith(b"/"):
        path = target.partition(b"?")[0].decode("ascii")
    elif target.startswith((b"http://", b"https://")):  # absolute-form, which HTTP/1.1 allows
        try:
            path = urlsplit(target.decode("ascii")).path or "/"
        except ValueError:
            raise Refused(400, "malformed request target") from None
    else:
        raise Refused(400, "malformed request target")
    return path


async def _read_line(reader: asyncio.StreamReader, too_long: Refused) -> bytes:
    """One line without its CRLF (or bare LF); raises `too_long` past MAX_LINE."""
    try:
        line = await reader.readuntil(b"\n")
    except asyncio.LimitOverrunError:
        raise too_long from None
    return line[:-2] if line.endswith(b"\r\n") else line[:-1]


async def read_head(reader: asyncio.StreamReader) -> str:
    """Raises Refused, or asyncio.IncompleteReadError when the client leaves mid-head."""
    too_large = Refused(431, "request header fields too large")
    line = b""
    size = 0
    while not line:  # empty lines before the request line are to be ignored (RFC 9112 2.2)
        line = await _read_line(reader, Refused(414, "request line too long"))
        size += len(line) + 2
        if size > MAX_HEAD_BYTES:
            raise too_large
    headers: list[bytes] = []
    while header := await _read_line(reader, too_large):
        size += len(header) + 2
        headers.append(header)
        if size > MAX_HEAD_BYTES or len(headers) > MAX_HEADERS:
            raise too_large
    return parse_head(line, headers)


class Slots:
    """The connections a listener serves at once: `total` in all and `per_client` of one
    client."""

    def __init__(self, total: int, per_client: int) -> None:
        self.total = total
        self.per_client = per_client
        self._of: collections.Counter[str] = collections.Counter()

    def __len__(self) -> int:
        return self._of.total()

    def held(self, client: str) -> int:
        return self._of[client]

    def take(self, client: str) -> bool:
        """Whether the client may have one more; if so, it has it until give()."""
        if len(self) >= self.total or self._of[client] >= self.per_client:
            return False
        self._of[client] += 1
        return True

    def give(self, client: str) -> None:
        self._of[client] -= 1
        if self._of[client] <= 0:
            del self._of[client]


def source_of(peer: object) -> str:
    """A connection's client, for Slots, from its peer's address: the source address (the
    port changes with every connection); "" where there is none (a Unix socket)."""
    return str(peer[0]) if isinstance(peer, tuple) and peer else ""


def client_of(writer: asyncio.StreamWriter) -> str:
    """A connection's client, for Slots (:func:`source_of`)."""
    return source_of(writer.get_extra_info("peername"))


class ListenError(Exception):
    """The health and metrics server cannot listen where it is configured to."""


class HttpServer:
    """One listener, answering GET of `paths` (404 for others)."""

    def __init__(
        self,
        health: Health,
        registry: CollectorRegistry,
        *,
        idle_timeout: float,
        paths: frozenset[str] = ALL_PATHS,
    ) -> None:
        self._health = health
        self._registry = registry
        self._idle_timeout = idle_timeout
        self._paths = paths
        self._slots = Slots(MAX_CONNECTIONS, MAX_CLIENT_CONNECTIONS)
        self._server: asyncio.Server | None = None
        self.port = 0  # where it listens, once started
        # the connections being served, by their handler's task
        self._connections: dict[asyncio.Task[None], asyncio.StreamWriter] = {}

    async def start(self, host: str, port: int) -> None:
        # the stream's limit bounds what one readuntil holds: a line
        self._server = await asyncio.start_server(self._connection, host, port, limit=MAX_LINE)
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        """Stop listening, and end the connections being served."""
        if self._server is not None:
            self._server.close()
        # their handlers see the connection lost and return (a cancelled handler's task would
        # be logged as an error by asyncio's streams)
        for writer in self._connections.values():
            writer.transport.abort()
        await asyncio.gather(*self._connections, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    def answer(self, path: str) -> Reply:
        if path not in self._paths:
            return _text(404, "not found")
        if path == "/healthz":
            alive = self._health.alive
            return _text(200 if alive else 503, "ok" if alive else "stopping")
        if path == "/readyz":
            failing = self._health.failing()
            return _text(503, "not ready: " + ", ".join(failing)) if failing else _text(200, "ok")
        if path == "/metrics":
            return Reply(200, generate_latest(self._registry), CONTENT_TYPE_LATEST)
        return _text(404, "not found")

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        client = client_of(writer)
        # before any await: connections take their slots in the order they were accepted
        if not self._slots.take(client):
            writer.transport.abort()
            return
        self._connections[task] = writer
        try:
            reply = await self._reply(reader)
            if reply is not None:
                await self._send(reader, writer, reply)
        finally:
            del self._connections[task]
            self._slots.give(client)
            writer.transport.abort()  # a no-op once closed

    async def _reply(self, reader: asyncio.StreamReader) -> Reply | None:
        """None when the client left before its request was complete."""
        try:
            async with asyncio.timeout(self._idle_timeout):
                path = await read_head(reader)
        except TimeoutError:
            return _text(408, "the request took too long")
        except Refused as e:
            return e.reply
        except (asyncio.IncompleteReadError, ConnectionError):
            return None
        try:
            return self.answer(path)
        except Exception:  # a readiness check's or a collector's bug: the probe fails, we stay
            log.exception("observability: answering GET %s failed", path)
            return _text(500, "internal error")

    async def _send(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, reply: Reply
    ) -> None:
        with contextlib.suppress(TimeoutError, ConnectionError):
            async with asyncio.timeout(WRITE_TIMEOUT):
                writer.write(reply.encode(formatdate(usegmt=True)))
                await writer.drain()
            if not writer.can_write_eof():
                return
            writer.write_eof()
            # a lingering close: closing with the client's bytes unread (the rest of a head
            # that was too large) would reset the connection, and the client could lose the
            # answer; so read (and drop) what comes until it closes, a little while at most
            async with asyncio.timeout(LINGER_TIMEOUT):
                left = _LINGER_BYTES
                while left > 0 and (data := await reader.read(min(left, MAX_LINE))):
                    left -= len(data)


class Listeners:
    """What observability asks to listen on: `http` serves every path at observability.listen;
    `probes`, when observability.probeListen is set, /healthz and /readyz there."""

    def __init__(self, http: HttpServer, probes: HttpServer | None) -> None:
        self.http = http
        self.probes = probes

    async def close(self) -> None:
        await self.http.close()
        if self.probes is not None:
            await self.probes.close()


async def _listen(server: HttpServer, listen: str, setting: str) -> None:
    """Raises ListenError, naming the setting, when the address is taken or not ours."""
    host, _, port = listen.rpartition(":")
    try:
        await server.start(host.strip("[]") or "0.0.0.0", int(port))
    except OSError as e:
        why = os.strerror(e.errno) if e.errno else str(e)
        raise ListenError(f"{setting}: cannot listen on {listen}: {why}") from None


async def serve(cfg: ObservabilityConfig, health: Health, registry: CollectorRegistry) -> Listeners:
    """Raises ListenError, naming the setting, when an address is taken or not ours."""
    http = HttpServer(health, registry, idle_timeout=cfg.idle_timeout)
    await _listen(http, cfg.listen, "observability.listen")
    if cfg.probe_listen is None:
        return Listeners(http, None)
    probes = HttpServer(health, registry, idle_timeout=cfg.idle_timeout, paths=PROBE_PATHS)
    try:
        await _listen(probes, cfg.probe_listen, "observability.probeListen")
    except ListenError:
        await http.close()
        raise
    return Listeners(http, probes)
