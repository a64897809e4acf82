"""The bridge's memory of the evictions it answered without writing yet: the first attempt
of each, by pod, for :func:`~nodeagent.model.bridge.decision.held_until_asked_again`.

It is a replica's own (no write, nothing shared): an attempt answered by another replica is
not in it, which only makes a caller ask once more. It holds at most one entry per cached pod
with interceptors, each for ``within``."""

from __future__ import annotations

from datetime import datetime, timedelta

from nodeagent.bridge.departures import drop_older
from nodeagent.model.times import Clock

__all__ = ["Attempts"]


class Attempts:
    """When an eviction of each pod was first asked for within ``within``."""

    def __init__(self, within: timedelta, clock: Clock) -> None:
        self._within = within
        self._clock = clock
        self._first: dict[tuple[str, str], datetime] = {}  # (namespace, pod UID), oldest first

    def first(self, namespace: str, pod_uid: str) -> datetime | None:
        """The first attempt still remembered for that pod, recording this one as the first
        when there is none."""
        now = self._clock()
        drop_older(self._first, lambda t: t, now - self._within)
        first = self._first.get((namespace, pod_uid))
        if first is None:
            self._first[(namespace, pod_uid)] = now
        return first

    def __len__(self) -> int:
        return len(self._first)
