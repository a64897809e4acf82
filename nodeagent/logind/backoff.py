"""Exponential backoff with jitter, as a small pure value object."""

from __future__ import annotations

import random
from dataclasses import dataclass

from nodeagent.model.backoff import capped_exponential

__all__ = ["Backoff"]


@dataclass(frozen=True)
class Backoff:
    """Delay before attempt `n` (0-based): `initial * factor**n`, capped, then jittered.

    With `jitter=j` the delay is drawn uniformly from `[d * (1 - j), d]`, so many agents that
    lose the bus at once (a dbus-daemon restart hits every client) do not come back in step.
    """

    initial: float = 0.2
    cap: float = 30.0
    factor: float = 2.0
    jitter: float = 0.5

    def __post_init__(self) -> None:
        if not 0 < self.initial <= self.cap:
            raise ValueError("backoff: need 0 < initial <= cap")
        if self.factor < 1:
            raise ValueError("backoff: factor must be at least 1")
        if not 0 <= self.jitter <= 1:
            raise ValueError("backoff: jitter must be within [0, 1]")

    def delay(self, attempt: int) -> float:
        base = capped_exponential(self.initial, self.factor, attempt, self.cap)
        return base * (1.0 - self.jitter * random.random())
