"""A TCP proxy in the test's event loop, between a client and a backend's API server: the
network the test controls. TLS passes through untouched, so it works the same in front of the
simulated server and kube-apiserver, and network faults (dropped connections, a server that
cannot be reached, a switch to another API server instance) need no fault injection in the
server."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import yaml

_CHUNK = 65536


def server_of(kubeconfig: Path) -> str:
    doc = yaml.safe_load(kubeconfig.read_text())
    return str(doc["clusters"][0]["cluster"]["server"])


def port_of(url: str) -> int:
    port = urlsplit(url).port
    assert port is not None, url
    return port


def kubeconfig_on_port(source: Path, target: Path, port: int) -> Path:
    """A copy of `source` (its credentials too) for the server on `port` of 127.0.0.1."""
    doc = yaml.safe_load(source.read_text())
    url = urlsplit(doc["clusters"][0]["cluster"]["server"])
    doc["clusters"][0]["cluster"]["server"] = urlunsplit(url._replace(netloc=f"127.0.0.1:{port}"))
    target.write_text(yaml.safe_dump(doc, sort_keys=False))
    target.chmod(0o600)
    return target


class TcpProxy:
    """Listens on 127.0.0.1; every connection is piped to `upstream_port`, read at accept time."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.port = 0
        self.accepted = 0  # connections accepted so far
        self._server: asyncio.Server | None = None
        self._open: set[asyncio.StreamWriter] = set()
        self._pipes: set[asyncio.Task[None]] = set()
        self._passing = asyncio.Event()
        self._passing.set()
        self._changed = asyncio.Event()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    def kubeconfig(self, source: Path, target: Path) -> Path:
        """A copy of `source` (its credentials too) that reaches the server through us."""
        return kubeconfig_on_port(source, target, self.port)

    def cut(self) -> int:
        """Abort every open connection, as a network blip or a dying server would."""
        n = len(self._open)
        for w in list(self._open):
            w.transport.abort()
        self._open.clear()
        return n

    def hold(self) -> None:
        """Accept new connections but connect them upstream only after `resume()`."""
        self._passing.clear()

    def resume(self) -> None:
        self._passing.set()

    async def stop_listening(self) -> None:
        """Close the port (connections are refused, as with nothing listening) and cut."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        self.cut()

    async def close(self) -> None:
        await self.stop_listening()
        for t in list(self._pipes):
            t.cancel()
        for t in list(self._pipes):
            with contextlib.suppress(asyncio.CancelledError):
                await t

    async def until(self, cond: Callable[[], bool], timeout: float = 10) -> None:
        async with asyncio.timeout(timeout):
            while not cond():
                self._changed.clear()
                await self._changed.wait()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        self._changed.set()
        self._open.add(writer)
        try:
            await self._passing.wait()
            if writer.transport.is_closing():
                return
            try:
                up_reader, up_writer = await asyncio.open_connection(
                    "127.0.0.1", self.upstream_port
                )
            except OSError:
                writer.transport.abort()
                return
            self._open.add(up_writer)
            pipes = [
                asyncio.create_task(_pipe(reader, up_writer)),
                asyncio.create_task(_pipe(up_reader, writer)),
            ]
            self._pipes.update(pipes)
            try:
                await asyncio.wait(pipes, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for t in pipes:
                    t.cancel()
                await asyncio.gather(*pipes, return_exceptions=True)
                self._pipes.difference_update(pipes)
                up_writer.transport.abort()
                self._open.discard(up_writer)
        finally:
            writer.transport.abort()
            self._open.discard(writer)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError, OSError):
        while data := await reader.read(_CHUNK):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()


@contextlib.asynccontextmanager
async def proxy_to(kubeconfig: Path) -> AsyncIterator[TcpProxy]:
    """A started proxy in front of the API server `kubeconfig` names."""
    proxy = TcpProxy(port_of(server_of(kubeconfig)))
    await proxy.start()
    try:
        yield proxy
    finally:
        await proxy.close()
