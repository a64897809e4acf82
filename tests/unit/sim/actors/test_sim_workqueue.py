"""The actors' work queue: each key queued once, delayed adds, retries."""

from __future__ import annotations

import asyncio

import pytest

from nodeagent_testbed.sim.actors.base import WorkQueue

# no test here waits for time to pass: the loop jumps to its next timer (tests/faketime.py)
pytestmark = pytest.mark.fake_time


async def test_a_key_is_queued_once_until_taken() -> None:
    q: WorkQueue[str] = WorkQueue()
    for k in ("a", "b", "a", "a"):
        q.add(k)
    assert len(q) == 2
    assert await q.get() == "a"
    q.add("a")  # changed while being processed: queued again
    assert [await q.get(), await q.get()] == ["b", "a"]
    assert len(q) == 0


async def test_add_after_keeps_the_earliest_timer() -> None:
    q: WorkQueue[str] = WorkQueue()
    loop = asyncio.get_running_loop()
    start = loop.time()
    q.add_after("k", 30)
    q.add_after("k", 0.05)
    q.add_after("k", 10)  # later than the pending timer: ignored
    async with asyncio.timeout(2):
        assert await q.get() == "k"
    assert 0.04 <= loop.time() - start < 1
    q.close()


async def test_add_after_without_delay_adds_at_once() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add_after("k", 0)
    assert len(q) == 1


async def test_retry_requeues_with_backoff_and_forget_resets_it() -> None:
    q: WorkQueue[str] = WorkQueue()
    loop = asyncio.get_running_loop()
    for _ in range(3):
        q.retry("k")
        async with asyncio.timeout(2):
            assert await q.get() == "k"
    q.forget("k")
    start = loop.time()
    q.retry("k")
    async with asyncio.timeout(2):
        assert await q.get() == "k"
    assert loop.time() - start < 0.5


async def test_close_cancels_pending_timers() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add_after("k", 0.01)
    q.close()
    await asyncio.sleep(0.05)  # fake time, past the cancelled timer: it must not fire
    assert len(q) == 0
