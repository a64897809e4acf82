from __future__ import annotations

import json
import logging
import os
import socket
from pathlib import Path

import aiohttp
from prometheus_client import CollectorRegistry, Counter

from nodeagent.config import ObservabilityConfig
from nodeagent.observability.http import Health, serve
from nodeagent.observability.logs import JsonFormatter
from nodeagent.observability.sdnotify import Notifier


def test_notify_sends_datagrams(tmp_path: Path) -> None:
    path = tmp_path / "notify"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.bind(str(path))
        n = Notifier(
            {
                "NOTIFY_SOCKET": str(path),
                "WATCHDOG_USEC": "4000000",
                "WATCHDOG_PID": str(os.getpid()),
            }
        )
        assert n.watchdog_interval == 2.0
        n.ready("lock held")
        assert s.recv(100) == b"READY=1\nSTATUS=lock held"
        n.watchdog()
        assert s.recv(100) == b"WATCHDOG=1"


def test_notify_without_systemd_does_nothing() -> None:
    n = Notifier({})
    assert n.watchdog_interval is None
    n.ready("x")  # no socket: nothing to send, no error


def test_json_log_lines_carry_extra_fields() -> None:
    record = logging.makeLogRecord(
        {
            "name": "t",
            "levelname": "INFO",
            "msg": "drained %s",
            "args": ("node-1",),
            "node": "node-1",
        }
    )
    out = json.loads(JsonFormatter().format(record))
    assert out["msg"] == "drained node-1"
    assert out["node"] == "node-1"
    assert out["level"] == "info"


async def test_health_endpoints() -> None:
    health = Health()
    lock = {"held": False}
    health.add("shutdown lock", lambda: lock["held"])
    registry = CollectorRegistry()
    Counter("nodeagent_test_total", "a test counter", registry=registry).inc()
    server = await serve(ObservabilityConfig("127.0.0.1:0"), health, registry)
    try:
        port = server.http.port
        async with aiohttp.ClientSession(f"http://127.0.0.1:{port}") as http:
            async with http.get("/readyz") as r:
                assert r.status == 503
                assert "shutdown lock" in await r.text()
            lock["held"] = True
            async with http.get("/readyz") as r:
                assert r.status == 200
            async with http.get("/healthz") as r:
                assert r.status == 200
            async with http.get("/metrics") as r:
                assert "nodeagent_test_total 1.0" in await r.text()
    finally:
        await server.close()
