"""Whether a leader's term serves the upstream EvictionRequest API (ClusterControllers.
upstream_api), on the fake clock: it waits out an API server that cannot tell, and with
`eviction.api: upstream` one that does not serve the group, saying why once."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from nodeagent.config import Config, EvictionConfig
from nodeagent.controllers.cluster import ClusterControllers
from nodeagent.kube.errors import Forbidden, NotFound, Unreachable
from nodeagent.kube.resources import UPSTREAM_EVICTIONREQUESTS

pytestmark = pytest.mark.fake_time


class Server:
    """Answers each list with the next of `answers`: True (served), False (404), or an error."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.asked = 0

    async def list(self, resource: Any, *args: Any, **kw: Any) -> dict[str, Any]:
        assert resource == UPSTREAM_EVICTIONREQUESTS
        self.asked += 1
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        if not answer:
            raise NotFound("404 Not Found")
        return {"items": []}


def leader(server: Server, api: str) -> ClusterControllers:
    return ClusterControllers(server, Config(eviction=EvictionConfig(api=api)), CollectorRegistry())  # type: ignore[arg-type]


async def test_auto_follows_the_server() -> None:
    assert await leader(Server(True), "auto").upstream_api() is True
    assert await leader(Server(False), "auto").upstream_api() is False
    server = Server(True)
    assert await leader(server, "nodeagent").upstream_api() is False
    assert server.asked == 0


async def test_a_server_that_cannot_tell_is_asked_again(caplog: pytest.LogCaptureFixture) -> None:
    server = Server(Unreachable("connection refused"), Unreachable("connection refused"), True)
    with caplog.at_level(logging.ERROR):
        assert await leader(server, "auto").upstream_api() is True
    assert server.asked == 3
    [record] = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert "cannot tell whether the server serves lifecycle.k8s.io/v1alpha1" in record.message


async def test_upstream_waits_for_the_group_saying_why_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = Server(False)
    with caplog.at_level(logging.ERROR):
        task = asyncio.create_task(leader(server, "upstream").upstream_api())
        await asyncio.sleep(600)  # fake time: ten minutes of backoff, capped at 60 s
        assert not task.done() and server.asked >= 10
        server.answers = [True]
        assert await task is True
    errors = [r.message for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and "does not serve lifecycle.k8s.io/v1alpha1" in errors[0]


async def test_a_group_served_but_not_to_us_is_not_used(caplog: pytest.LogCaptureFixture) -> None:
    """RBAC that predates the group (403): auto does without it, saying so once; upstream waits
    for the permission."""
    with caplog.at_level(logging.ERROR):
        assert await leader(Server(Forbidden("403 Forbidden")), "auto").upstream_api() is False
    [said] = [r.message for r in caplog.records if r.levelno == logging.ERROR]
    assert said.startswith("not using lifecycle.k8s.io/v1alpha1")
    server = Server(Forbidden("403 Forbidden"), Forbidden("403 Forbidden"), True)
    assert await leader(server, "upstream").upstream_api() is True
    assert server.asked == 3
