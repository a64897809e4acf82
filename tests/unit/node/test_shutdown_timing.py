"""The shutdown flow's bounds on a fake clock: the budget, logind's delay limit, the safety
margin, the unreachable bound and a restart's recorded start, each at the exact second it is
due and with the production's own numbers (tests/faketime.py; the API is tests/unit/kube/
fakeapi.py, in memory). Against a cluster: tests/integration/node/test_shutdown_flow.py."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from nodeagent.config import ShutdownConfig
from nodeagent.kube.resources import NODEMAINTENANCES, Resource
from nodeagent.model import shutdown as model
from nodeagent.node.shutdown import ShutdownFlow
from tests.faketime import fake_clock
from tests.unit.kube.fakeapi import Backend, FakeClient

pytestmark = pytest.mark.fake_time

BOOT = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
CONFIG = ShutdownConfig()  # 600 s budget, 10 s margin, unreachable after 30 s
BUDGET = "the shutdown budget is nearly spent"
UNREACHABLE = "the API server could not be reached"


class HungClient(FakeClient):
    """An API server that takes connections and never answers (a stopped process)."""

    async def _enter(self, verb: str, resource: Resource) -> None:
        await asyncio.Event().wait()


def flow(client: FakeClient, config: ShutdownConfig = CONFIG, **kw: Any) -> ShutdownFlow:
    return ShutdownFlow(
        client,  # type: ignore[arg-type]  # the calls the flow makes
        "node-1",
        BOOT,
        config,
        clock=fake_clock(),
        **kw,
    )


async def timed(shutdown: ShutdownFlow) -> tuple[str, float]:
    """Why `on_shutdown` let go, and after how many (fake) seconds."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    reason = await shutdown.on_shutdown("reboot")
    return reason, loop.time() - start


async def test_the_budget_less_the_margin_bounds_the_wait() -> None:
    backend = Backend()
    reason, took = await timed(flow(FakeClient(backend)))
    assert reason == BUDGET and took == pytest.approx(600 - 10)
    (nm,) = backend.all(NODEMAINTENANCES)
    assert model.boot_of(nm) == BOOT and nm["spec"]["stage"] == "Drain"


async def test_logind_granting_less_than_the_budget_wins() -> None:
    shutdown = flow(FakeClient(Backend()), delay_max=lambda: 90.0)
    reason, took = await timed(shutdown)
    assert reason == BUDGET and took == pytest.approx(90 - 10)


async def test_a_margin_of_half_the_limit_or_more_keeps_four_fifths() -> None:
    """logind grants 8 s where the margin is 10 s: the agent still creates the maintenance (the
    node is cordoned and draining) and lets go at 80 % of the limit."""
    backend = Backend()
    shutdown = flow(FakeClient(backend), delay_max=lambda: 8.0)
    reason, took = await timed(shutdown)
    assert reason == BUDGET and took == pytest.approx(8 * 0.8)
    assert [nm["spec"]["stage"] for nm in backend.all(NODEMAINTENANCES)] == ["Drain"]


async def test_a_refusing_api_server_releases_at_the_unreachable_bound() -> None:
    client = FakeClient(Backend())
    client.down = True
    reason, took = await timed(flow(client))
    assert reason == UNREACHABLE and took == pytest.approx(30)


async def test_a_hung_api_server_releases_at_the_unreachable_bound() -> None:
    """Each request hangs: counted as unreachable from the last answer (the start), so a hung
    request costs no time beyond the bound."""
    reason, took = await timed(flow(HungClient(Backend())))
    assert reason == UNREACHABLE and took == pytest.approx(30)


async def test_an_api_server_that_stops_answering_releases_a_bound_after_its_last_answer() -> None:
    client = FakeClient(Backend())
    shutdown = asyncio.create_task(timed(flow(client)))
    # fake time: the maintenance is made, its watch is quiet, a probe every 5 s is answered
    await asyncio.sleep(102)
    client.down = True  # the probe at 105 s fails
    # the bound counts from the last answer, the probe at 100 s
    reason, took = await shutdown
    assert reason == UNREACHABLE and took == pytest.approx(100 + 30)


async def test_a_restarted_agent_keeps_the_bound_of_the_shutdown(tmp_path: Path) -> None:
    """The shutdown's start is recorded: an agent started again during it (after a crash)
    measures the budget from there, and adopts the same maintenance."""
    backend = Backend()
    record = tmp_path / "run" / "shutdown.json"
    config = dataclasses.replace(CONFIG, budget=60.0, safety_margin=5.0)
    loop = asyncio.get_running_loop()
    first_start = loop.time()
    first = asyncio.create_task(
        flow(FakeClient(backend), config, record_file=record).on_shutdown("reboot")
    )
    await asyncio.sleep(20)  # fake time: the agent runs 20 s into the shutdown, then dies
    first.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await first
    await asyncio.sleep(3)  # fake time: systemd restarts it
    second = flow(FakeClient(backend), config, record_file=record)
    assert await second.on_shutdown("reboot") == BUDGET
    assert loop.time() - first_start == pytest.approx(60 - 5)  # not 23 + 55
    assert [nm["metadata"]["name"] for nm in backend.all(NODEMAINTENANCES)] == [second.maintenance]
