"""Delivering notifications to webhooks, off the shutdown's critical path.

`Webhooks.notify` only puts the notification on each interested webhook's bounded queue and
returns: the shutdown flow never waits on a webhook, and a full queue drops the notification
(counted) rather than grow. `run` gives each webhook one worker, so deliveries to one webhook
keep their order (drainStarted before lockReleased) and at most one request per webhook is in
flight; a webhook that hangs delays only its own later notifications. Each attempt has its own
deadline, attempts are few and spaced by capped exponential backoff, and a receiver's "no"
(a 4xx other than 408/429) is not asked again.

The requests are aiohttp's, on the event loop (no thread, no blocking call). Logs show only
the scheme, host and port of a webhook: the rest of its URL and its headers often hold a secret.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

import aiohttp

from nodeagent import version
from nodeagent.config import NotificationsConfig, Webhook
from nodeagent.model import notifications as model
from nodeagent.model.times import Clock, format_time, utcnow

__all__ = ["QUEUE_SIZE", "Webhooks"]

log = logging.getLogger(__name__)

# per webhook: a shutdown and a return make a handful of events; more waiting means the
# webhook is down, and old news is worth less than memory
QUEUE_SIZE = 32

SENT, FAILED, DROPPED = "sent", "failed", "dropped"

Count = Callable[[str, str], None]
"""Called with (event, result) for each notification's fate at one webhook."""


def _uncounted(event: str, result: str) -> None:
    pass


@dataclass
class _Target:
    hook: Webhook
    where: str  # the redacted URL, for logs
    queue: asyncio.Queue[model.Notification]


class Webhooks:
    def __init__(
        self, config: NotificationsConfig, count: Count = _uncounted, clock: Clock = utcnow
    ) -> None:
        """`count`: e.g. the ``nodeagent_notifications_total`` counter's increment."""
        self._count = count
        self._clock = clock
        self._targets = [
            _Target(hook, model.redact(hook.url), asyncio.Queue(QUEUE_SIZE))
            for hook in config.webhooks
        ]

    def __bool__(self) -> bool:
        return bool(self._targets)

    def notify(self, event: str, node: str, maintenance: str, reason: str) -> None:
        """Queue the notification for each webhook that wants `event`; never waits."""
        n = model.Notification(event, node, maintenance, reason, format_time(self._clock()))
        for target in self._targets:
            if event not in target.hook.events:
                continue
            try:
                target.queue.put_nowait(n)
            except asyncio.QueueFull:
                log.warning(
                    "webhook %s: %d notifications wait already; %s of %s dropped",
                    target.where,
                    target.queue.qsize(),
                    event,
                    node,
                )
                self._count(event, DROPPED)

    async def run(self) -> None:
        """Deliver until cancelled; what is still queued then is not sent."""
        if not self._targets:
            return
        # trust_env: HTTPS_PROXY/NO_PROXY, as a node's other clients (curl) take them
        async with aiohttp.ClientSession(trust_env=True) as session, asyncio.TaskGroup() as tg:
            for i, target in enumerate(self._targets):
                tg.create_task(self._worker(session, target), name=f"webhook-{i}")

    async def _worker(self, session: aiohttp.ClientSession, target: _Target) -> None:
        while True:
            n = await target.queue.get()
            try:
                result = await self._deliver(session, target, n)
            except Exception:
                # a notification's failure is never the agent's: the shutdown guard runs in
                # the same task group
                log.exception("webhook %s: %s of %s failed", target.where, n.event, n.node)
                result = FAILED
            self._count(n.event, result)

    async def _deliver(
        self, session: aiohttp.ClientSession, target: _Target, n: model.Notification
    ) -> str:
        hook = target.hook
        body, content_type = model.render(hook.template, n)
        headers = {"Content-Type": content_type, "User-Agent": f"nodeagent/{version()}"}
        for name, value in hook.headers.items():  # the configured ones win, in any case
            for default in [k for k in headers if k.lower() == name.lower()]:
                del headers[default]
            headers[name] = value
        failures = 0
        while True:
            status, problem = await self._attempt(session, hook, body, headers)
            if status is not None and 200 <= status < 300:
                log.info("webhook %s: %s of %s sent (%d)", target.where, n.event, n.node, status)
                return SENT
            failures += 1
            if not model.retryable(status) or failures >= hook.attempts:
                log.warning(
                    "webhook %s: %s of %s not sent after %d attempt(s): %s",
                    target.where,
                    n.event,
                    n.node,
                    failures,
                    problem,
                )
                return FAILED
            delay = model.retry_delay(failures)
            log.info(
                "webhook %s: %s of %s: %s; again in %.1fs",
                target.where,
                n.event,
                n.node,
                problem,
                delay,
            )
            # pacing between attempts
            await asyncio.sleep(delay)

    async def _attempt(
        self,
        session: aiohttp.ClientSession,
        hook: Webhook,
        body: bytes,
        headers: dict[str, str],
    ) -> tuple[int | None, str]:
        """(status, what went wrong); status None when no answer came."""
        try:
            # the deadline covers connecting, sending and the answer's head
            async with (
                asyncio.timeout(hook.timeout),
                session.post(hook.url, data=body, headers=headers, allow_redirects=False) as resp,
            ):
                return resp.status, f"HTTP {resp.status} {resp.reason or ''}".strip()
        except TimeoutError:
            return None, f"no answer within {hook.timeout:g}s"
        except aiohttp.InvalidURL:
            return None, "aiohttp takes the URL for invalid"  # its message would show the URL
        except (aiohttp.ClientError, OSError) as e:
            return None, f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
