"""The webhook sender against a real HTTP server on loopback: bodies and headers as sent,
bounded retries, receivers that refuse, hang or are not there, a full queue, and order.

(The shutdown flow sending through it, with a fake logind and a cluster, is
tests/integration/logind/test_notifications.py.)"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from datetime import UTC, datetime

from nodeagent import version
from nodeagent.config import NotificationsConfig, Webhook
from nodeagent.notify import Webhooks
from nodeagent.notify.sender import QUEUE_SIZE
from tests.webhookserver import Outcomes, WebhookServer, webhook_server

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


@contextlib.asynccontextmanager
async def running(*hooks: Webhook) -> AsyncIterator[tuple[Webhooks, Outcomes]]:
    outcomes = Outcomes()
    webhooks = Webhooks(NotificationsConfig(hooks), count=outcomes, clock=lambda: NOW)
    task = asyncio.create_task(webhooks.run())
    try:
        yield webhooks, outcomes
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@contextlib.asynccontextmanager
async def server() -> AsyncIterator[WebhookServer]:
    async with webhook_server() as s:
        yield s


async def test_the_default_body_and_headers() -> None:
    async with (
        server() as s,
        running(Webhook(f"{s.url}/hook?t=1", headers={"Authorization": "Bearer x"})) as (w, out),
    ):
        w.notify("drainStarted", "node-1", "nm-1", "Node reboot requested")
        await out.until(lambda: out.seen == [("drainStarted", "sent")])
    (got,) = s.received
    assert got.path == "/hook?t=1"
    assert got.json() == {
        "event": "drainStarted",
        "node": "node-1",
        "maintenance": "nm-1",
        "reason": "Node reboot requested",
        "time": "2026-01-02T03:04:05Z",
    }
    assert got.headers["Content-Type"] == "application/json"
    assert got.headers["Authorization"] == "Bearer x"
    assert got.headers["User-Agent"] == f"nodeagent/{version()}"


async def test_a_text_template_and_a_configured_content_type_wins() -> None:
    headers = {"content-type": "text/markdown"}
    async with server() as s:
        hook = Webhook(f"{s.url}/t", template="$node: $event", headers=headers)
        async with running(hook) as (w, out):
            w.notify("nodeBack", "node-1", "nm-1", "back")
            await out.until(lambda: len(out.seen) == 1)
    (got,) = s.received
    assert got.body == b"node-1: nodeBack"
    assert got.headers["Content-Type"] == "text/markdown"


async def test_only_the_events_a_webhook_wants() -> None:
    async with server() as s:
        hooks = (
            Webhook(f"{s.url}/all"),
            Webhook(f"{s.url}/back", events=frozenset({"nodeBack"})),
        )
        async with running(*hooks) as (w, out):
            w.notify("drainStarted", "node-1", "nm-1", "r")
            w.notify("nodeBack", "node-1", "nm-1", "r")
            await out.until(lambda: len(out.seen) == 3)
    assert [r.json()["event"] for r in s.on("/all")] == ["drainStarted", "nodeBack"]
    assert [r.json()["event"] for r in s.on("/back")] == ["nodeBack"]


async def test_a_server_error_is_retried_a_bounded_number_of_times() -> None:
    async with server() as s:
        s.statuses = [500] * 10
        async with running(Webhook(f"{s.url}/h", attempts=3)) as (w, out):
            w.notify("lockReleased", "node-1", "nm-1", "the node is drained")
            await out.until(lambda: out.seen == [("lockReleased", "failed")])
    assert len(s.received) == 3
    assert s.statuses == [500] * 7, "no attempt after the count"


async def test_a_server_error_then_success_is_sent() -> None:
    async with server() as s:
        s.statuses = [503, 429]
        async with running(Webhook(f"{s.url}/h")) as (w, out):
            w.notify("lockReleased", "node-1", "nm-1", "r")
            await out.until(lambda: out.seen == [("lockReleased", "sent")])
    assert len(s.received) == 3
    assert len({r.body for r in s.received}) == 1, "the same body every attempt"


async def test_a_refusal_is_not_asked_again() -> None:
    async with server() as s:
        s.statuses = [404, 404]
        async with running(Webhook(f"{s.url}/h")) as (w, out):
            w.notify("nodeBack", "node-1", "nm-1", "r")
            await out.until(lambda: out.seen == [("nodeBack", "failed")])
    assert len(s.received) == 1


async def test_a_hanging_server_costs_each_attempt_its_timeout_and_no_more() -> None:
    async with server() as s:
        s.hang = True
        loop = asyncio.get_running_loop()
        async with running(Webhook(f"{s.url}/h", timeout=0.3, attempts=2)) as (w, out):
            t0 = loop.time()
            w.notify("drainStarted", "node-1", "nm-1", "r")
            await out.until(lambda: out.seen == [("drainStarted", "failed")])
            took = loop.time() - t0
    assert len(s.received) == 2
    # two timeouts and one pause of 0.5 s between them
    assert 0.3 * 2 + 0.5 <= took < 0.3 * 2 + 0.5 + 1.0


async def test_nobody_listening_fails_after_its_attempts() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, not listening: connections are refused
        async with running(Webhook(f"http://127.0.0.1:{port}/h", attempts=2)) as (w, out):
            w.notify("drainStarted", "node-1", "nm-1", "r")
            await out.until(lambda: out.seen == [("drainStarted", "failed")])


async def test_one_hanging_webhook_does_not_hold_another() -> None:
    async with server() as hung, server() as fine:
        hung.hang = True
        hooks = (Webhook(f"{hung.url}/h", timeout=60), Webhook(f"{fine.url}/h"))
        async with running(*hooks) as (w, out):
            w.notify("drainStarted", "node-1", "nm-1", "r")
            w.notify("lockReleased", "node-1", "nm-1", "r")
            await out.until(lambda: len(out.seen) == 2, timeout=5)
            assert out.seen == [("drainStarted", "sent"), ("lockReleased", "sent")]
            assert [r.json()["event"] for r in fine.received] == ["drainStarted", "lockReleased"]
            await hung.until(lambda: len(hung.received) == 1)


async def test_a_full_queue_drops_and_counts_and_keeps_the_order() -> None:
    async with server() as s:
        s.hang = True
        async with running(Webhook(f"{s.url}/h", timeout=60)) as (w, out):
            w.notify("drainStarted", "node-1", "nm-0", "r")
            await s.until(lambda: len(s.received) == 1)  # in flight, so off the queue
            for i in range(1, QUEUE_SIZE + 3):
                w.notify("lockReleased", "node-1", f"nm-{i}", "r")
            assert out.seen == [("lockReleased", "dropped")] * 2
            s.resume()
            await out.until(lambda: len(out.seen) == 2 + 1 + QUEUE_SIZE)
    names = [r.json()["maintenance"] for r in s.received]
    assert names == [f"nm-{i}" for i in range(QUEUE_SIZE + 1)]
