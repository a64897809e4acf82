"""The imperative eviction (``imperative-eviction.k8s.io``): its backoff between refused
evictions, and the refusal messages that carry the retry count."""

from __future__ import annotations

import re

from nodeagent.model.backoff import capped_exponential
from nodeagent.model.budgets import WAITING_PREFIX

__all__ = [
    "EVICTION_BACKOFF_BASE",
    "EVICTION_BACKOFF_CAP",
    "eviction_backoff",
    "imperative_refusal_cause",
    "imperative_refusal_message",
    "parse_retries",
]

EVICTION_BACKOFF_BASE = 1.0
"""Seconds after the first refused eviction (`eviction.backoffBase`'s default)."""
EVICTION_BACKOFF_CAP = 15 * 60.0
"""The KEP's "maximum approx. 15 minutes" between evictions (`eviction.backoffCap`'s default)."""

_RETRIES = re.compile(r"number of retries: (\d+)")


def eviction_backoff(retries: int, base: float, cap: float) -> float:
    """Seconds to wait after ``retries`` refused evictions: base, 2*base, 4*base, ... up to
    ``cap``, without jitter (the retry count is in the request's message for all to see).
    0 before the first refusal."""
    if retries <= 0:
        return 0.0
    return capped_exponential(base, 2.0, retries - 1, cap)


def parse_retries(message: str) -> int:
    """The retry count in an ``imperative-eviction.k8s.io`` message (0 when there is none), so a
    new leader continues counting where the last one stopped."""
    match = _RETRIES.search(message)
    return int(match.group(1)) if match else 0


_REFUSAL_PREFIX = "Could not evict the pod due to failing eviction requests, number of retries: "
_REFUSAL = re.compile(re.escape(_REFUSAL_PREFIX) + r"\d+(?: \(last: (.*)\))?\Z", re.DOTALL)
_BUDGET = re.compile(r"disruption budget ([a-z0-9][-a-z0-9.]*[a-z0-9]|[a-z0-9])")


def imperative_refusal_message(retries: int, cause: str) -> str:
    """As the KEP's example: "Could not evict a pod due to failing eviction requests, number of
    retries: 7", plus the last refusal."""
    text = f"{_REFUSAL_PREFIX}{retries}"
    return text + (f" (last: {cause})" if cause else "")


def imperative_refusal_cause(message: str) -> str | None:
    """What refused the eviction, briefly and without the retry count, from an
    ``imperative-eviction.k8s.io`` message of :func:`imperative_refusal_message`; None when the
    message is no refusal. A PodDisruptionBudget is named (``PodDisruptionBudget web``), since
    its message also carries pod counts that change while nothing else does."""
    if message.startswith(WAITING_PREFIX):  # held back before asking: the budget is named
        cause = message
    elif (match := _REFUSAL.match(message)) is not None:
        cause = " ".join((match.group(1) or "").split())
    else:
        return None
    if (budget := _BUDGET.search(cause)) is not None:
        return f"PodDisruptionBudget {budget.group(1)}"
    return cause or "refused"
