"""aiohttp (some 10 MiB resident) is imported by a node's agent only where webhooks are
configured: the health and metrics server is asyncio's own.

In a fresh interpreter (`python -c`): what counts is what the agent leaves in `sys.modules`, and
this test process has imported aiohttp already.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

SET_UP = """
import asyncio, json, sys
import nodeagent.app  # what `nodeagent run` imports before it starts
from nodeagent.app import Agent
from nodeagent.config import ObservabilityConfig, from_mapping
from nodeagent.observability.http import serve

async def main():
    agent = Agent(from_mapping(json.loads(sys.argv[1])), env={})
    server = await serve(ObservabilityConfig("127.0.0.1:0"), agent.health, agent.registry)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.http.port)
        writer.write(b"GET /metrics HTTP/1.1\\r\\nHost: a\\r\\n\\r\\n")
        answer = await reader.read()
        writer.close()
    finally:
        await server.close()
    return agent.webhooks is not None, answer.split(b"\\r\\n")[0].decode()

webhooks, status = asyncio.run(main())
print(json.dumps({
    "aiohttp": sorted(m for m in sys.modules if m.split(".")[0] == "aiohttp"),
    "webhooks": webhooks,
    "status": status,
}))
"""


@pytest.mark.parametrize("webhooks", [False, True])
def test_aiohttp_is_imported_only_for_webhooks(webhooks: bool) -> None:
    config: dict[str, object] = {"nodeName": "node-1"}
    if webhooks:
        config["notifications"] = {"webhooks": [{"url": "http://hooks.example/x"}]}
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(SET_UP), json.dumps(config)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.splitlines()[-1])
    assert got["status"] == "HTTP/1.1 200 OK"
    assert got["webhooks"] is webhooks
    assert bool(got["aiohttp"]) is webhooks, got["aiohttp"]
