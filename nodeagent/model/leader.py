"""Leader election's decisions apart from its I/O (nodeagent.kube.leader does the calls).

The retry jitter, shared with the configuration's bounds, and what a candidate says and how long
it waits while the Lease's namespace does not exist: an operator's to fix, so said once as an
error with the ways out, then retried quietly with backoff and a reminder now and then.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nodeagent.model.backoff import capped_exponential

__all__ = [
    "JITTER",
    "MISSING_NAMESPACE_REMINDER",
    "MISSING_NAMESPACE_RETRY_CAP",
    "MissingNamespace",
    "Say",
    "is_missing_namespace",
    "missing_namespace_message",
    "missing_namespace_step",
]

JITTER = 1.2
"""client-go's JitterFactor: a retry while not leading comes up to this times the retry period
after the last, so the renew deadline must be longer than that."""

MISSING_NAMESPACE_RETRY_CAP = 30.0
"""Seconds between attempts at most while the namespace is missing: an agent leads at most this
long after the namespace is created (it may not watch namespaces)."""

MISSING_NAMESPACE_REMINDER = 600.0
"""Seconds between reminders at warning level while the namespace stays missing."""


def is_missing_namespace(status: int, details: Mapping[str, Any], namespace: str) -> bool:
    """Whether an API error says that ``namespace`` does not exist: 404 with the details
    kube-apiserver's NamespaceLifecycle admission gives (``namespaces "x" not found``). A 404
    about the Lease itself is not one."""
    if status != 404:
        return False
    return details.get("kind") == "namespaces" and details.get("name") == namespace


def missing_namespace_message(namespace: str) -> str:
    """The one error that says what to do."""
    return (
        f"the leader election namespace {namespace!r} does not exist, so no agent can lead the "
        f"cluster controllers: create it (kubectl create namespace {namespace}, or "
        f"nodeagent manifests namespace {namespace} | kubectl apply -f -) or set "
        "leader.namespace to an existing namespace; retrying quietly until it exists"
    )


class Say(enum.Enum):
    NOTHING = "nothing"
    ERROR = "error"  # the first time: the message with the ways out
    REMINDER = "reminder"  # warning level, every MISSING_NAMESPACE_REMINDER seconds
    QUIET = "quiet"  # debug level
    FOUND = "found"  # it exists now (after it was reported missing)


@dataclass(frozen=True)
class MissingNamespace:
    """What a candidate knows about its Lease's namespace being missing."""

    failures: int = 0  # consecutive attempts that found it missing
    said_at: float | None = None  # when the error or the last reminder was logged


def missing_namespace_step(
    state: MissingNamespace, missing: bool, now: float, retry_period: float
) -> tuple[MissingNamespace, Say, float]:
    """After an attempt to acquire: the new state, what to log, and the seconds until the next
    attempt (before jitter). While the namespace is missing the wait doubles from the retry
    period up to MISSING_NAMESPACE_RETRY_CAP (never below the retry period)."""
    if not missing:
        return MissingNamespace(), Say.FOUND if state.failures else Say.NOTHING, retry_period
    failures = state.failures + 1
    cap = max(retry_period, MISSING_NAMESPACE_RETRY_CAP)
    delay = capped_exponential(retry_period, 2.0, failures - 1, cap)
    if state.said_at is None:
        return MissingNamespace(failures, now), Say.ERROR, delay
    if now - state.said_at >= MISSING_NAMESPACE_REMINDER:
        return MissingNamespace(failures, now), Say.REMINDER, delay
    return MissingNamespace(failures, state.said_at), Say.QUIET, delay
