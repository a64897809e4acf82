"""An asyncio work queue with client-go's guarantees.

- A key waits in the queue at most once, however often it is added (the dirty set).
- A key is never handed to two workers at once (the processing set).
- A key added while a worker holds it is handed out again after that worker calls `done`, so
  the change that caused the add is always seen by a run that starts after it.
- `add_after` delays an add; several delays for one key keep the earliest.
- `add_rate_limited` delays by what the rate limiter says; `forget` resets it on success.

Usage by a worker::

    while True:
        key = await queue.get()          # raises ShutDown once shut down and empty
        try:
            await reconcile(key)
        except Exception:
            queue.add_rate_limited(key)
        else:
            queue.forget(key)
        finally:
            queue.done(key)
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable, Hashable
from typing import Generic, Protocol, TypeVar

from nodeagent.kube.ratelimit import MonotonicClock, RateLimiter, default_controller_rate_limiter

__all__ = ["ShutDown", "WorkQueue", "WorkQueueMetrics"]

K = TypeVar("K", bound=Hashable)


class ShutDown(Exception):
    """The queue was shut down; workers should return."""


class WorkQueueMetrics(Protocol):
    """What a queue reports; one object per queue (it knows the queue's name)."""

    def inc_adds(self) -> None:
        """A key entered the queue (duplicates folded into a waiting key do not count)."""
        ...

    def set_depth(self, depth: int) -> None:
        """Keys now waiting to be handed out."""
        ...

    def inc_retries(self) -> None:
        """A key was re-added through the rate limiter."""
        ...

    def observe_queue_duration(self, seconds: float) -> None:
        """A key waited this long between entering the queue and being handed out."""
        ...

    def observe_work_duration(self, seconds: float) -> None:
        """A key was processed (handed out until `done`) for this long."""
        ...

    def track_processing(self, running: Callable[[], list[float]]) -> None:
        """How to read, when asked, how long each key now being processed has been so."""
        ...


class WorkQueue(Generic[K]):
    """Must be created and used on one running event loop."""

    def __init__(
        self,
        name: str = "",
        rate_limiter: RateLimiter | None = None,
        metrics: WorkQueueMetrics | None = None,
        clock: MonotonicClock = time.monotonic,
    ) -> None:
        self.name = name
        self._clock = clock
        self._queued_at: dict[K, float] = {}  # when each waiting key entered the queue
        self._started_at: dict[K, float] = {}  # when each key being processed was handed out
        self._limiter: RateLimiter = (
            rate_limiter if rate_limiter is not None else default_controller_rate_limiter()
        )
        self._metrics = metrics
        self._queue: deque[K] = deque()
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._getters: deque[asyncio.Future[None]] = deque()
        # Delayed adds: key -> (loop time it is due, timer)
        self._delayed: dict[K, tuple[float, asyncio.TimerHandle]] = {}
        self._shutting_down = False
        if metrics is not None:
            metrics.track_processing(self._running)

    def _running(self) -> list[float]:
        now = self._clock()
        return [now - t for t in self._started_at.values()]

    def __len__(self) -> int:
        """Keys waiting to be handed out (not the ones being processed or delayed)."""
        return len(self._queue)

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    @property
    def processing(self) -> int:
        return len(self._processing)

    def add(self, key: K) -> None:
        if self._shutting_down or key in self._dirty:
            return
        self._dirty.add(key)
        self._queued_at.setdefault(key, self._clock())
        if self._metrics is not None:
            self._metrics.inc_adds()
        if key in self._processing:
            # `done` puts it back; handing it out now would run it twice at once.
            return
        self._queue.append(key)
        self._depth_changed()
        self._wake_one()

    async def get(self) -> K:
        """The next key; the caller owns it until `done(key)`."""
        while not self._queue:
            if self._shutting_down:
                raise ShutDown(self.name)
            waiter = asyncio.get_running_loop().create_future()
            self._getters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                # Woken but cancelled before running: hand the wake-up to the next getter,
                # or a key could sit in the queue while a worker sleeps.
                if waiter.done() and not waiter.cancelled():
                    self._wake_one()
                raise
            finally:
                if not waiter.done():
                    waiter.cancel()
                with contextlib.suppress(ValueError):
                    self._getters.remove(waiter)
        key = self._queue.popleft()
        self._processing.add(key)
        self._dirty.discard(key)
        now = self._clock()
        queued = self._queued_at.pop(key, now)
        self._started_at[key] = now
        if self._metrics is not None:
            self._metrics.observe_queue_duration(now - queued)
        self._depth_changed()
        return key

    def done(self, key: K) -> None:
        """The caller finished with `key`; re-queue it if it was added meanwhile."""
        if key not in self._processing:
            return
        self._processing.discard(key)
        now = self._clock()
        started = self._started_at.pop(key, now)
        if self._metrics is not None:
            self._metrics.observe_work_duration(now - started)
        if key in self._dirty:
            self._queue.append(key)
            self._depth_changed()
            self._wake_one()

    def add_after(self, key: K, delay: float) -> None:
        if self._shutting_down:
            return
        if delay <= 0:
            self.add(key)
            return
        loop = asyncio.get_running_loop()
        due = loop.time() + delay
        pending = self._delayed.get(key)
        if pending is not None:
            if pending[0] <= due:
                return
            pending[1].cancel()
        handle = loop.call_at(due, self._fire, key)
        self._delayed[key] = (due, handle)

    def add_rate_limited(self, key: K) -> None:
        if self._shutting_down:
            return
        if self._metrics is not None:
            self._metrics.inc_retries()
        self.add_after(key, self._limiter.when(key))

    def forget(self, key: K) -> None:
        """The key succeeded: reset its rate limiter history."""
        self._limiter.forget(key)

    def num_requeues(self, key: K) -> int:
        return self._limiter.num_requeues(key)

    def shutdown(self) -> None:
        """Stop accepting keys. Keys already queued are still handed out; then `get` raises."""
        if self._shutting_down:
            return
        self._shutting_down = True
        for _, handle in self._delayed.values():
            handle.cancel()
        self._delayed.clear()
        while self._getters:
            waiter = self._getters.popleft()
            if not waiter.done():
                waiter.set_result(None)

    def _fire(self, key: K) -> None:
        self._delayed.pop(key, None)
        self.add(key)

    def _wake_one(self) -> None:
        while self._getters:
            waiter = self._getters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def _depth_changed(self) -> None:
        if self._metrics is not None:
            self._metrics.set_depth(len(self._queue))
