"""Exponential backoff, computed once: the workqueue's per-item limiter (`kube.ratelimit`), the
jittered backoff every reconnect and retry loop waits on (informers, logind, token renewal,
shutdown) and the imperative eviction's retries (`model.interceptors`) all wait
`base * factor**n`, capped."""

from __future__ import annotations

import random

__all__ = ["JitteredBackoff", "capped_exponential"]


def capped_exponential(base: float, factor: float, exponent: int, cap: float) -> float:
    """``min(cap, base * factor**exponent)``, 0 for ``base <= 0``, and ``cap`` where the power
    is too large for a float (any exponent: a failure count may grow without bound)."""
    if base <= 0:
        return 0.0
    try:
        return float(min(cap, base * factor**exponent))
    except OverflowError:
        return float(cap)


class JitteredBackoff:
    """Delay before retry number `attempt` (1-based): base * factor**(attempt-1), capped, then
    scaled down by up to `jitter` (a fraction) so a fleet of agents (all losing the API server
    or the bus at once) does not retry in lockstep. Jittering downwards keeps `cap` a hard upper
    bound. Randomness comes from an injected `random.Random`, so tests are deterministic.
    """

    def __init__(
        self,
        base: float = 0.5,
        cap: float = 30.0,
        factor: float = 2.0,
        jitter: float = 0.5,
        rng: random.Random | None = None,
    ) -> None:
        if base < 0 or cap < base or factor < 1.0 or not 0.0 <= jitter <= 1.0:
            raise ValueError("need 0 <= base <= cap, factor >= 1 and 0 <= jitter <= 1")
        self.base = base
        self.cap = cap
        self.factor = factor
        self.jitter = jitter
        self._rng = rng if rng is not None else random.Random()

    def delay(self, attempt: int) -> float:
        if attempt < 1:
            return 0.0
        ceiling = capped_exponential(self.base, self.factor, attempt - 1, self.cap)
        return ceiling * (1.0 - self.jitter * self._rng.random())
