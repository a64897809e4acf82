"""/healthz, /readyz and /metrics on one port."""

from __future__ import annotations

import os
from collections.abc import Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

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


def make_app(health: Health, registry: CollectorRegistry) -> web.Application:
    async def healthz(_: web.Request) -> web.Response:
        return web.Response(
            text="ok\n" if health.alive else "stopping\n", status=200 if health.alive else 503
        )

    async def readyz(_: web.Request) -> web.Response:
        failing = health.failing()
        if failing:
            return web.Response(text="not ready: " + ", ".join(failing) + "\n", status=503)
        return web.Response(text="ok\n")

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(
            body=generate_latest(registry), headers={"Content-Type": CONTENT_TYPE_LATEST}
        )

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
    return app


class ListenError(Exception):
    """The health and metrics server cannot listen where it is configured to."""


async def serve(listen: str, health: Health, registry: CollectorRegistry) -> web.AppRunner:
    """Raises ListenError, naming the setting, when the address is taken or not ours."""
    host, _, port = listen.rpartition(":")
    runner = web.AppRunner(make_app(health, registry), access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, host or "0.0.0.0", int(port)).start()
    except OSError as e:
        await runner.cleanup()
        why = os.strerror(e.errno) if e.errno else str(e)
        raise ListenError(f"observability.listen: cannot listen on {listen}: {why}") from None
    return runner
