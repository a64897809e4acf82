"""Exponential backoff, computed once: the workqueue's per-item limiter and jittered backoff
(`kube.ratelimit`), logind's reconnects (`logind.backoff`) and the imperative eviction's retries
(`model.interceptors`) all wait `base * factor**n`, capped. Jitter, where wanted, is theirs."""

from __future__ import annotations

__all__ = ["capped_exponential"]


def capped_exponential(base: float, factor: float, exponent: int, cap: float) -> float:
    """``min(cap, base * factor**exponent)``, 0 for ``base <= 0``, and ``cap`` where the power
    is too large for a float (any exponent: a failure count may grow without bound)."""
    if base <= 0:
        return 0.0
    try:
        return float(min(cap, base * factor**exponent))
    except OverflowError:
        return float(cap)
