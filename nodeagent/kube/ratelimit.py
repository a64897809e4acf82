"""Rate limiters and backoff as small pure objects (client-go `workqueue` rate limiters).

Nothing here sleeps or touches the event loop: a limiter answers "how long should this item
wait", and the caller does the waiting. Time enters through an injected clock, randomness
through an injected `random.Random`, so tests are deterministic.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from typing import Protocol

from nodeagent.model.backoff import capped_exponential

__all__ = [
    "BucketRateLimiter",
    "ItemExponentialFailureRateLimiter",
    "MaxOfRateLimiter",
    "MonotonicClock",
    "RateLimiter",
    "default_controller_rate_limiter",
]

MonotonicClock = Callable[[], float]
"""Seconds from a monotonic clock (`time.monotonic`), injected so tests can move it."""


class RateLimiter(Protocol):
    def when(self, item: Hashable) -> float:
        """Seconds `item` should wait before it is processed again; records one failure."""
        ...

    def forget(self, item: Hashable) -> None:
        """Stop tracking `item` (it succeeded)."""
        ...

    def num_requeues(self, item: Hashable) -> int:
        """How many times `item` has failed since it was last forgotten."""
        ...


class ItemExponentialFailureRateLimiter:
    """base * 2**failures per item, capped. Defaults match client-go (5 ms, 1000 s)."""

    def __init__(self, base_delay: float = 0.005, max_delay: float = 1000.0) -> None:
        if base_delay < 0 or max_delay < base_delay:
            raise ValueError("need 0 <= base_delay <= max_delay")
        self._base = base_delay
        self._cap = max_delay
        self._failures: dict[Hashable, int] = {}

    def when(self, item: Hashable) -> float:
        exponent = self._failures.get(item, 0)
        self._failures[item] = exponent + 1
        return capped_exponential(self._base, 2.0, exponent, self._cap)

    def forget(self, item: Hashable) -> None:
        self._failures.pop(item, None)

    def num_requeues(self, item: Hashable) -> int:
        return self._failures.get(item, 0)


class BucketRateLimiter:
    """Overall token bucket (`qps` refill, `burst` capacity), shared by all items.

    Like golang.org/x/time/rate `Reserve`: every call takes a token, possibly going into
    debt, and the answer is how long until that token exists. Defaults match client-go
    (10 qps, burst 100).
    """

    def __init__(
        self, qps: float = 10.0, burst: int = 100, clock: MonotonicClock = time.monotonic
    ) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError("need qps > 0 and burst >= 1")
        self._qps = qps
        self._burst = float(burst)
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock()

    def when(self, item: Hashable) -> float:
        now = self._clock()
        elapsed = max(0.0, now - self._last)
        self._last = max(self._last, now)
        self._tokens = min(self._burst, self._tokens + elapsed * self._qps) - 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self._qps

    def forget(self, item: Hashable) -> None:
        pass

    def num_requeues(self, item: Hashable) -> int:
        return 0


class MaxOfRateLimiter:
    """The longest wait any of the given limiters asks for."""

    def __init__(self, *limiters: RateLimiter) -> None:
        if not limiters:
            raise ValueError("need at least one rate limiter")
        self._limiters = limiters

    def when(self, item: Hashable) -> float:
        # Every limiter must see every failure, so no short-circuiting max() over a generator.
        delays = [limiter.when(item) for limiter in self._limiters]
        return max(delays)

    def forget(self, item: Hashable) -> None:
        for limiter in self._limiters:
            limiter.forget(item)

    def num_requeues(self, item: Hashable) -> int:
        return max(limiter.num_requeues(item) for limiter in self._limiters)


def default_controller_rate_limiter() -> MaxOfRateLimiter:
    """client-go's `DefaultControllerRateLimiter`: per-item exponential and an overall bucket."""
    return MaxOfRateLimiter(ItemExponentialFailureRateLimiter(0.005, 1000.0), BucketRateLimiter())
