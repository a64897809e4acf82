"""The imperative eviction (``imperative-eviction.k8s.io``): its backoff between refused
evictions, and the refusal messages that carry the retry count."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from nodeagent.model.backoff import capped_exponential
from nodeagent.model.budgets import WAITING_PREFIX
from nodeagent.model.names import BRIDGE_REQUESTER, UPSTREAM_BRIDGE_REQUESTER

__all__ = [
    "CALLER_EVICTS",
    "EVICTION_BACKOFF_BASE",
    "EVICTION_BACKOFF_CAP",
    "HELD_AT_MOST",
    "EvictionOutcome",
    "ImperativeState",
    "caller_evicts",
    "eviction_backoff",
    "imperative_refusal_cause",
    "imperative_refusal_message",
    "parse_retries",
]

EVICTION_BACKOFF_BASE = 1.0
"""Seconds after the first refused eviction (`eviction.backoffBase`'s default)."""
EVICTION_BACKOFF_CAP = 15 * 60.0
"""The KEP's "maximum approx. 15 minutes" between evictions (`eviction.backoffCap`'s default)."""


CALLER_EVICTS = (
    "Not calling the Eviction API: only the eviction bridge asked for this eviction, for a "
    "caller of the Eviction API; the caller's retried eviction goes through at this turn "
    "(the bridge allows it). Waiting for it."
)
"""What the imperative eviction says at its turn on a request only the bridge asked for."""


def caller_evicts(requesters: Iterable[str]) -> bool:
    """Whether the eviction bridge is the only requester (on our CRD or upstream): the bridge
    made the request from an AdmissionReview, which is no command (anyone who reaches its port
    can send one), so nodeagent's imperative eviction never carries it out; the caller's own
    eviction, retried, goes through at its turn. With any other requester too (a maintenance),
    the eviction is carried out as usual."""
    names = set(requesters)
    return bool(names) and names <= {BRIDGE_REQUESTER, UPSTREAM_BRIDGE_REQUESTER}


HELD_AT_MOST = timedelta(seconds=10)
"""How long a budget that allows nothing, as cached, holds an eviction back before the server is
asked anyway: its watch event normally wakes the pod much sooner; this bounds what a missed or
unforeseen one costs (a 429, and the backoff, if the cache was right)."""


@dataclass(frozen=True)
class ImperativeState:
    """The imperative eviction's retry state for one pod, kept in memory by the controller
    (the retry count is also in the interceptor's or responder's message, where a new leader
    picks it up)."""

    retries: int = 0
    next_attempt: datetime | None = None
    message: str = ""
    """The last message, written again should its first write have been lost."""
    evicted: bool = False
    """The Eviction API accepted (or answered the pod gone): never called again for it."""
    gone: bool = False
    """The Eviction API answered that the pod was gone."""
    held_since: datetime | None = None
    """Since when a disruption budget that allows nothing has held the eviction back
    (:mod:`nodeagent.model.budgets`); None while it does not."""


@dataclass(frozen=True)
class EvictionOutcome:
    """What the Eviction API answered. ``gone``: 404, or a 409 for a pod since replaced;
    ``refused``: 429 (a PodDisruptionBudget), a 5xx such as the one for a pod under two budgets,
    or a 409 for the same pod (a conflict on the server's side: tried again with backoff);
    ``error``: anything else."""

    kind: Literal["evicted", "gone", "refused", "error"]
    detail: str = ""


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
