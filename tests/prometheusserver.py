"""A real HTTP server on loopback that answers like Prometheus's ``GET /api/v1/alerts``, for the
gate tests: the alerts it is given, or garbage, an HTTP error, or it hangs (accepts the request
and never answers). It counts the requests and lets a test wait for the next ones."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from aiohttp import web


def alert(name: str, state: str = "firing") -> dict[str, Any]:
    """One alert as Prometheus lists it."""
    return {
        "labels": {"alertname": name, "severity": "warning"},
        "annotations": {"summary": name},
        "state": state,
        "activeAt": "2024-05-01T10:00:00Z",
        "value": "1e+00",
    }


class PrometheusServer:
    def __init__(self) -> None:
        self.alerts: list[dict[str, Any]] = []
        self.body: bytes | None = None
        """Answered as it is instead of the alerts (garbage)."""
        self.status = 200
        self.hang = False
        self.requests = 0
        self.url = ""
        self._changed = asyncio.Event()
        self._release = asyncio.Event()

    async def _alerts(self, request: web.Request) -> web.Response:
        self.requests += 1
        self._changed.set()
        if self.hang:
            await self._release.wait()
        if self.body is not None:
            return web.Response(status=self.status, body=self.body)
        if self.status != 200:
            answer: dict[str, Any] = {"status": "error", "errorType": "internal", "error": "boom"}
        else:
            answer = {"status": "success", "data": {"alerts": self.alerts}}
        return web.Response(
            status=self.status, body=json.dumps(answer), content_type="application/json"
        )

    async def until_requests(self, count: int, timeout: float = 10) -> None:
        async with asyncio.timeout(timeout):
            while self.requests < count:
                self._changed.clear()
                await self._changed.wait()

    def resume(self) -> None:
        self.hang = False
        self._release.set()


@asynccontextmanager
async def prometheus_server(host: str = "127.0.0.1") -> AsyncIterator[PrometheusServer]:
    server = PrometheusServer()
    app = web.Application()
    app.router.add_get("/api/v1/alerts", server._alerts)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, 0)
    await site.start()
    address = runner.addresses[0]
    server.url = f"http://{address[0]}:{address[1]}"
    try:
        yield server
    finally:
        server.resume()
        await runner.cleanup()
