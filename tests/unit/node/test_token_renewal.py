"""The token renewal loop on a fake clock (nodeagent.node.token_renewal): when it asks, what it
writes, and that a refusing or hanging API server stops nothing."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from nodeagent.kube.errors import Forbidden, ServerError
from nodeagent.model.backoff import JitteredBackoff
from nodeagent.model.token_renewal import read_claims
from nodeagent.node.token_renewal import RECHECK, TokenRenewer
from tests.tokens import sa_token
from tests.until import until

pytestmark = pytest.mark.fake_time

EPOCH = 1_800_000_000.0  # wall time at loop time 0
TIMEOUT = 30.0
DAY = 86_400.0  # of fake time: the longest a test here waits for a renewal


@dataclass
class Store:
    token: str
    where: str = "memory"
    written: list[tuple[float, str]] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)  # set on every write

    async def read(self) -> str:
        return self.token

    async def write(self, token: str) -> None:
        self.token = token
        self.written.append((asyncio.get_running_loop().time(), token))
        self.changed.set()


@dataclass
class Api:
    """The TokenRequest API: each call takes the next behaviour ("ok", "refuse", "fail",
    "hang"); "ok" once they run out."""

    behaviour: list[str] = field(default_factory=list)
    calls: list[tuple[float, str, str, Mapping[str, Any]]] = field(default_factory=list)
    hung: asyncio.Event = field(default_factory=asyncio.Event)
    changed: asyncio.Event = field(default_factory=asyncio.Event)  # set on every call

    async def request_token(self, namespace: str, name: str, spec: Mapping[str, Any]) -> Any:
        now = asyncio.get_running_loop().time()
        self.calls.append((now, namespace, name, spec))
        self.changed.set()
        what = self.behaviour.pop(0) if self.behaviour else "ok"
        if what == "refuse":
            raise Forbidden("denied by admission", status=403)
        if what == "fail":
            raise ServerError("etcd is down", status=500)
        if what == "hang":
            await self.hung.wait()  # never set: only the renewer's timeout ends it
        issued = EPOCH + now
        return {"status": {"token": sa_token(issued, issued + spec["expirationSeconds"])}}


def wall() -> float:
    return EPOCH + asyncio.get_running_loop().time()


@contextlib.asynccontextmanager
async def running(api: Api, store: Store, renew_after: float = 0.8) -> AsyncIterator[TokenRenewer]:
    renewer = TokenRenewer(
        api,  # type: ignore[arg-type]  # the one call it makes
        store,
        expiration=3600,
        renew_after=renew_after,
        request_timeout=TIMEOUT,
        backoff=JitteredBackoff(base=1.0, cap=300.0, jitter=0.0),
        clock=wall,
    )
    task = asyncio.create_task(renewer.run())
    try:
        yield renewer
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_renews_at_80_percent_of_the_life_and_uses_the_new_token() -> None:
    now = wall()
    store = Store(sa_token(now, now + 600))  # the admin's first 10-minute token
    api = Api()
    start = asyncio.get_running_loop().time()
    async with running(api, store):
        await until(lambda: len(store.written) == 2, changed=store.changed, timeout=DAY)
    # at 480 s of 600, then at 80 % of the new token's hour
    assert [t - start for t, *_ in api.calls] == [480.0, 480.0 + 2880.0]
    _, namespace, name, spec = api.calls[0]
    assert (namespace, name) == ("nodeagent-system", "nodeagent")
    assert spec == {
        "expirationSeconds": 3600,
        "boundObjectRef": {"apiVersion": "v1", "kind": "Node", "name": "node-1"},
    }
    assert read_claims(store.token).node == "node-1"


async def test_a_refusing_or_hanging_api_server_is_retried_with_backoff() -> None:
    now = wall()
    first = sa_token(now, now + 600)
    store = Store(first)
    api = Api(["refuse", "fail", "hang", "refuse"])
    start = asyncio.get_running_loop().time()
    async with running(api, store):
        await until(lambda: len(store.written) == 1, changed=store.changed, timeout=DAY)
    times = [t - start for t, *_ in api.calls]
    # 1 s, 2 s after the refusals; the hang ends at its timeout and waits 4 s, then 8 s
    assert times == [480.0, 481.0, 483.0, 483.0 + TIMEOUT + 4.0, 483.0 + TIMEOUT + 4.0 + 8.0]
    # the first token was in use until the renewal, and nothing else was written
    assert store.written == [(start + times[-1], store.token)] and store.token != first


async def test_a_token_given_after_expiry_is_renewed_on_its_own_schedule() -> None:
    """The node was off longer than its token's life: the API server refuses the expired
    token until an admin puts a new one in the file; from then on the agent renews it."""
    now = wall()
    store = Store(sa_token(now - 7200, now - 3600))
    api = Api(["refuse"] * 1000)
    async with running(api, store):
        # backing off to the 5-minute cap
        await until(lambda: len(api.calls) >= 12, changed=api.changed, timeout=DAY)
        assert not store.written
        gaps = [b[0] - a[0] for a, b in zip(api.calls[-3:-1], api.calls[-2:], strict=True)]
        assert gaps == [300.0, 300.0]
        api.behaviour.clear()
        given = asyncio.get_running_loop().time()
        store.token = sa_token(wall(), wall() + 3600)  # kubectl create token --duration=1h
        await until(lambda: len(store.written) == 1, changed=store.changed, timeout=DAY)
    # read again within the 5-minute backoff, renewed at 80 % of its hour
    assert store.written[0][0] == pytest.approx(given + 2880, abs=1.0)


async def test_no_renewal_of_a_token_it_cannot_renew() -> None:
    now = wall()
    for token in (sa_token(now, now + 600, pod="agent-pod"), sa_token(now, now + 600, node=None)):
        renewer = TokenRenewer(
            Api(),  # type: ignore[arg-type]
            Store(token),
            expiration=3600,
            renew_after=0.8,
            request_timeout=TIMEOUT,
            clock=wall,
        )
        async with asyncio.timeout(1):
            await renewer.run()  # returns at once
        assert renewer.renewals == 0


async def test_an_unreadable_token_is_read_again() -> None:
    store = Store("not a token")
    api = Api()
    async with running(api, store):
        loop = asyncio.get_running_loop()
        await asyncio.sleep(RECHECK * 3)  # fake time: three rechecks in which nothing may happen
        assert not api.calls
        now = wall()
        store.token = sa_token(now, now + 600)
        start = loop.time()
        await until(lambda: len(store.written) == 1, changed=store.changed, timeout=DAY)
    assert api.calls[0][0] - start <= RECHECK + 480.0
