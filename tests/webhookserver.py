"""A real HTTP server on loopback that receives webhooks, for the notification tests: it records
every request, answers with the statuses it is told (200 once they run out), or hangs: accepts
the request and never answers (a stopped process, a black-holed load balancer)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from aiohttp import web


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class WebhookServer:
    def __init__(self) -> None:
        self.received: list[Received] = []
        self.statuses: list[int] = []  # answered in order, then 200
        self.hang = False
        self.url = ""
        self._changed = asyncio.Event()
        self._release = asyncio.Event()  # lets hung requests go at the end

    async def _handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        self.received.append(Received(request.path_qs, dict(request.headers), body))
        self._changed.set()
        if self.hang:
            await self._release.wait()
        return web.Response(status=self.statuses.pop(0) if self.statuses else 200)

    def resume(self) -> None:
        """Answer the hung requests, and the next ones at once."""
        self.hang = False
        self._release.set()

    def on(self, path: str) -> list[Received]:
        return [r for r in self.received if r.path == path]

    async def until(self, cond: Callable[[], bool], timeout: float = 10) -> None:
        """Wait until `cond()` holds, re-checked at each request received."""
        async with asyncio.timeout(timeout):
            while not cond():
                self._changed.clear()
                await self._changed.wait()


@asynccontextmanager
async def webhook_server() -> AsyncIterator[WebhookServer]:
    server = WebhookServer()
    app = web.Application()
    app.router.add_post("/{tail:.*}", server._handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    sockets = runner.addresses
    host, port = sockets[0][:2]
    server.url = f"http://{host}:{port}"
    try:
        yield server
    finally:
        server.resume()
        await runner.cleanup()


class Outcomes:
    """The (event, result) pairs a `Webhooks` counted, to wait on without polling."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []
        self._changed = asyncio.Event()

    def __call__(self, event: str, result: str) -> None:
        self.seen.append((event, result))
        self._changed.set()

    async def until(self, cond: Callable[[], bool], timeout: float = 10) -> None:
        async with asyncio.timeout(timeout):
            while not cond():
                self._changed.clear()
                await self._changed.wait()
