from __future__ import annotations

import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodeagent.kube.ratelimit import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
    default_controller_rate_limiter,
)
from nodeagent.model.backoff import JitteredBackoff


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_item_exponential_doubles_per_item_and_caps() -> None:
    limiter = ItemExponentialFailureRateLimiter(base_delay=0.01, max_delay=0.1)
    assert [limiter.when("a") for _ in range(6)] == pytest.approx(
        [0.01, 0.02, 0.04, 0.08, 0.1, 0.1]
    )
    assert limiter.when("b") == pytest.approx(0.01)  # items are independent
    assert limiter.num_requeues("a") == 6
    assert limiter.num_requeues("b") == 1
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0
    assert limiter.when("a") == pytest.approx(0.01)


def test_item_exponential_survives_huge_failure_counts() -> None:
    limiter = ItemExponentialFailureRateLimiter(base_delay=0.005, max_delay=1000.0)
    for _ in range(5000):
        delay = limiter.when("x")
    assert delay == 1000.0


def test_bucket_allows_burst_then_paces_at_qps() -> None:
    clock = FakeClock()
    bucket = BucketRateLimiter(qps=10.0, burst=3, clock=clock)
    assert [bucket.when(i) for i in range(3)] == [0.0, 0.0, 0.0]
    # Tokens go into debt: each further item waits one more 1/qps.
    assert [bucket.when(i) for i in range(3)] == pytest.approx([0.1, 0.2, 0.3])
    clock.now += 0.3  # the debt is paid back
    assert bucket.when("x") == pytest.approx(0.1)
    clock.now += 100.0  # refill stops at burst
    assert [bucket.when(i) for i in range(4)] == pytest.approx([0.0, 0.0, 0.0, 0.1])
    assert bucket.num_requeues("x") == 0
    bucket.forget("x")


def test_bucket_ignores_clock_going_backwards() -> None:
    clock = FakeClock()
    bucket = BucketRateLimiter(qps=1.0, burst=1, clock=clock)
    assert bucket.when("a") == 0.0
    clock.now -= 50
    assert bucket.when("a") == pytest.approx(1.0)


def test_max_of_takes_longest_and_feeds_all() -> None:
    clock = FakeClock()
    fast = ItemExponentialFailureRateLimiter(0.001, 10.0)
    bucket = BucketRateLimiter(qps=1.0, burst=1, clock=clock)
    limiter = MaxOfRateLimiter(fast, bucket)
    assert limiter.when("a") == pytest.approx(0.001)
    assert limiter.when("a") == pytest.approx(1.0)  # the bucket is empty now
    assert fast.num_requeues("a") == 2
    assert limiter.num_requeues("a") == 2
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0


def test_default_controller_rate_limiter() -> None:
    limiter = default_controller_rate_limiter()
    assert limiter.when("k") == pytest.approx(0.005)
    assert limiter.when("k") == pytest.approx(0.01)


def test_invalid_arguments() -> None:
    with pytest.raises(ValueError):
        ItemExponentialFailureRateLimiter(1.0, 0.5)
    with pytest.raises(ValueError):
        BucketRateLimiter(qps=0)
    with pytest.raises(ValueError):
        MaxOfRateLimiter()
    with pytest.raises(ValueError):
        JitteredBackoff(base=2, cap=1)
    with pytest.raises(ValueError):
        JitteredBackoff(jitter=1.5)


def test_backoff_without_jitter_is_exponential_and_capped() -> None:
    backoff = JitteredBackoff(base=0.5, cap=5.0, factor=2.0, jitter=0.0)
    assert [backoff.delay(n) for n in range(0, 7)] == [0.0, 0.5, 1.0, 2.0, 4.0, 5.0, 5.0]
    assert backoff.delay(10_000) == 5.0


def test_backoff_is_deterministic_given_rng() -> None:
    a = JitteredBackoff(rng=random.Random(7))
    b = JitteredBackoff(rng=random.Random(7))
    assert [a.delay(n) for n in range(1, 10)] == [b.delay(n) for n in range(1, 10)]


@given(
    base=st.floats(0.001, 10.0),
    spread=st.floats(1.0, 1000.0),
    factor=st.floats(1.0, 4.0),
    jitter=st.floats(0.0, 1.0),
    attempt=st.integers(1, 10_000),
    seed=st.integers(0, 2**32),
)
def test_backoff_stays_within_bounds(
    base: float, spread: float, factor: float, jitter: float, attempt: int, seed: int
) -> None:
    cap = base * spread
    backoff = JitteredBackoff(base, cap, factor, jitter, random.Random(seed))
    grows_past_cap = (attempt - 1) * math.log(factor) >= math.log(cap / base)
    ceiling = cap if grows_past_cap else min(cap, base * factor ** (attempt - 1))
    delay = backoff.delay(attempt)
    assert delay <= cap * (1 + 1e-9)
    assert delay <= ceiling * (1 + 1e-9)
    assert delay >= ceiling * (1 - jitter) * (1 - 1e-9)
