from __future__ import annotations

import asyncio
import itertools
from collections import Counter, defaultdict
from collections.abc import Callable, Hashable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nodeagent.kube.ratelimit import ItemExponentialFailureRateLimiter
from nodeagent.kube.workqueue import ShutDown, WorkQueue
from tests.faketime import fake_clock

# no test here waits for time to pass: the loop jumps to its next timer (tests/faketime.py)
pytestmark = pytest.mark.fake_time


class RecordingMetrics:
    def __init__(self) -> None:
        self.adds = 0
        self.retries = 0
        self.depths: list[int] = []
        self.queued: list[float] = []
        self.worked: list[float] = []
        self.running: Callable[[], list[float]] = list

    def observe_queue_duration(self, seconds: float) -> None:
        self.queued.append(seconds)

    def observe_work_duration(self, seconds: float) -> None:
        self.worked.append(seconds)

    def track_processing(self, running: Callable[[], list[float]]) -> None:
        self.running = running

    def inc_adds(self) -> None:
        self.adds += 1

    def set_depth(self, depth: int) -> None:
        self.depths.append(depth)

    def inc_retries(self) -> None:
        self.retries += 1


async def test_dedupes_waiting_keys() -> None:
    metrics = RecordingMetrics()
    q: WorkQueue[str] = WorkQueue("t", metrics=metrics)
    for key in ["a", "b", "a", "a", "c", "b"]:
        q.add(key)
    assert len(q) == 3
    assert [await q.get() for _ in range(3)] == ["a", "b", "c"]  # FIFO by first add
    assert metrics.adds == 3
    assert metrics.depths[-1] == 0


async def test_key_added_while_processing_comes_back_after_done() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    key = await q.get()
    q.add("a")  # changed while a worker holds it
    q.add("a")
    assert len(q) == 0  # not handed to a second worker
    q.done(key)
    assert len(q) == 1
    assert await q.get() == "a"
    q.done("a")
    assert len(q) == 0 and q.processing == 0


async def test_done_for_unknown_key_is_ignored() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.done("never")
    assert len(q) == 0


async def test_get_waits_for_add() -> None:
    q: WorkQueue[str] = WorkQueue()
    getter = asyncio.create_task(q.get())
    await asyncio.sleep(0)  # one loop turn: the getter starts and blocks
    assert not getter.done()
    q.add("x")
    async with asyncio.timeout(1):
        assert await getter == "x"


async def test_cancelled_getter_does_not_swallow_a_wakeup() -> None:
    q: WorkQueue[str] = WorkQueue()
    first = asyncio.create_task(q.get())
    second = asyncio.create_task(q.get())
    await asyncio.sleep(0)  # one loop turn: both getters start and block
    q.add("k")  # wakes `first`...
    first.cancel()  # ...which is cancelled before it can take the key
    async with asyncio.timeout(1):
        assert await second == "k"
    with pytest.raises(asyncio.CancelledError):
        await first


async def test_shutdown_drains_then_raises() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    q.shutdown()
    q.add("b")  # ignored after shutdown
    assert q.shutting_down
    assert await q.get() == "a"
    with pytest.raises(ShutDown):
        await q.get()


async def test_shutdown_wakes_waiting_workers() -> None:
    q: WorkQueue[str] = WorkQueue()
    workers = [asyncio.create_task(q.get()) for _ in range(3)]
    await asyncio.sleep(0)  # one loop turn: the workers start and block
    q.shutdown()
    for w in workers:
        with pytest.raises(ShutDown):
            async with asyncio.timeout(1):
                await w


async def test_add_after_keeps_earliest() -> None:
    q: WorkQueue[str] = WorkQueue()
    loop = asyncio.get_running_loop()
    start = loop.time()
    q.add_after("a", 0.5)
    q.add_after("a", 0.05)  # earlier wins
    q.add_after("a", 5.0)  # later is ignored
    assert len(q) == 0
    async with asyncio.timeout(2):
        assert await q.get() == "a"
    assert loop.time() - start == pytest.approx(0.05)
    q.done("a")
    await asyncio.sleep(0.6)  # fake time, past the superseded timers: none may fire
    assert len(q) == 0  # the superseded timer did not fire


async def test_add_after_zero_is_immediate_and_shutdown_cancels_timers() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add_after("now", 0)
    assert len(q) == 1
    q.add_after("later", 0.05)
    q.shutdown()
    await asyncio.sleep(0.1)  # fake time, past the cancelled timer: it must not fire
    assert await q.get() == "now"
    with pytest.raises(ShutDown):
        await q.get()


async def test_rate_limited_requeues_and_forget() -> None:
    metrics = RecordingMetrics()
    q: WorkQueue[str] = WorkQueue(
        rate_limiter=ItemExponentialFailureRateLimiter(0.01, 1.0), metrics=metrics
    )
    q.add("a")
    key = await q.get()
    q.add_rate_limited(key)
    q.done(key)
    assert q.num_requeues("a") == 1
    async with asyncio.timeout(1):
        assert await q.get() == "a"
    q.add_rate_limited("a")
    q.done("a")
    assert q.num_requeues("a") == 2
    async with asyncio.timeout(1):
        assert await q.get() == "a"
    q.forget("a")
    q.done("a")
    assert q.num_requeues("a") == 0
    assert metrics.retries == 2


# -- the guarantees under concurrency ---------------------------------------------------


async def _scenario(
    plan: list[tuple[str, int]], workers: int, work: list[int]
) -> tuple[dict[Hashable, int], dict[Hashable, list[int]], Counter[Hashable]]:
    q: WorkQueue[str] = WorkQueue("prop")
    clock = itertools.count()
    last_add: dict[Hashable, int] = {}
    adds: Counter[Hashable] = Counter()
    starts: dict[Hashable, list[int]] = defaultdict(list)
    active: set[str] = set()
    steps = itertools.cycle(work or [0])

    async def worker() -> None:
        while True:
            try:
                key = await q.get()
            except ShutDown:
                return
            assert key not in active, "key handed to two workers at once"
            active.add(key)
            starts[key].append(next(clock))
            for _ in range(next(steps)):
                await asyncio.sleep(0)
            active.discard(key)
            q.done(key)

    async def producer() -> None:
        for key, pause in plan:
            q.add(key)
            last_add[key] = next(clock)
            adds[key] += 1
            for _ in range(pause):
                await asyncio.sleep(0)

    async with asyncio.timeout(10):
        tasks = [asyncio.create_task(worker()) for _ in range(workers)]
        await producer()
        while len(q) or q.processing:  # noqa: ASYNC110 - let the workers run to idle
            await asyncio.sleep(0)
        q.shutdown()
        await asyncio.gather(*tasks)
    return last_add, starts, adds


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    plan=st.lists(st.tuples(st.sampled_from(["a", "b", "c", "d"]), st.integers(0, 3)), max_size=40),
    workers=st.integers(1, 5),
    work=st.lists(st.integers(0, 4), max_size=8),
)
def test_workers_never_share_a_key_and_see_every_last_add(
    plan: list[tuple[str, int]], workers: int, work: list[int]
) -> None:
    last_add, starts, adds = asyncio.run(_scenario(plan, workers, work))
    for key, added_at in last_add.items():
        # Processing starts strictly after the last add: the change it made is seen.
        assert starts[key] and max(starts[key]) > added_at, key
        # Adds fold together: never more runs than adds.
        assert len(starts[key]) <= adds[key], key
    assert set(starts) == set(last_add)


def test_burst_of_adds_while_waiting_runs_once() -> None:
    async def run() -> list[str]:
        q: WorkQueue[str] = WorkQueue()
        for _ in range(100):
            q.add("k")
        seen = [await q.get()]
        q.done("k")
        q.shutdown()
        with pytest.raises(ShutDown):
            await q.get()
        return seen

    assert asyncio.run(run()) == ["k"]


async def test_queue_and_work_durations_and_unfinished_work() -> None:
    """client-go's latency metrics, on the loop's fake clock: waiting time from the first add,
    working time until done, and the age of the keys being processed while they are."""
    clock = fake_clock()
    metrics = RecordingMetrics()
    q: WorkQueue[str] = WorkQueue("t", metrics=metrics, clock=clock)
    q.add("a")
    await asyncio.sleep(2)  # fake time: waiting in the queue
    q.add("a")  # folded: the wait counts from the first add
    clock.advance(1)
    assert await q.get() == "a"
    assert metrics.queued == [3.0]
    await asyncio.sleep(4)  # fake time: working on it
    assert metrics.running() == [4.0]
    q.add("a")  # added again while processing
    clock.advance(1)
    q.done("a")
    assert metrics.worked == [5.0] and metrics.running() == []
    assert await q.get() == "a"
    assert metrics.queued == [3.0, 1.0]
