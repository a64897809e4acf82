"""What a controller wrote and waits for its informers to show (client-go's
ControllerExpectations, pkg/controller/controller_utils.go).

A write's watch event comes back some milliseconds after the call returns. A decision taken
meanwhile on the older cache would repeat a create (AlreadyExists), a delete (NotFound), or
write onto the version it has just replaced (Conflict). So the controller records what it
expects the informer to show, the informer's events end those expectations, and each expires
after a TTL: an event that never comes (a relist skipped it, a write failed unseen) holds a key
up for that long at most.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass

from nodeagent.kube.ratelimit import MonotonicClock

__all__ = ["EXPECTATION_TTL", "Expectations", "loop_time"]

# An informer event comes within milliseconds of its write; an expectation only outlives it when
# the event is lost (a watch that ended unseen, a write that failed after the server stored it),
# and this bounds what that costs: a key held up, never a wrong decision.
EXPECTATION_TTL = 30.0


def loop_time() -> float:
    """The running event loop's monotonic clock: the one its timers (`enqueue_after`) follow."""
    return asyncio.get_running_loop().time()


@dataclass(frozen=True)
class _Expectation:
    deadline: float
    replaced: frozenset[str] = frozenset()
    """Versions that do not end it: our writes replaced them."""
    by: str | None = None


class Expectations:
    """Expectations by key (an object's key or UID, as the controller names it), each ended by
    the informer event that shows it met, or `ttl` seconds after it was raised."""

    def __init__(self, ttl: float = EXPECTATION_TTL, clock: MonotonicClock = loop_time) -> None:
        self._ttl = ttl
        self._clock = clock
        self._pending: dict[str, _Expectation] = {}

    def expect(self, key: str, *, by: str | None = None) -> None:
        """Expect the informer to show `key` (created, deleted: whatever the caller waits for);
        `by`: the key of the object it is for (see `longest_by`)."""
        self._pending[key] = _Expectation(self._clock() + self._ttl, by=by)

    def expect_write(
        self, key: str, replaced: Iterable[str], shown: str | None, *, answer: str
    ) -> None:
        """We wrote `key` onto the versions `replaced` and the server answered with version
        `answer`: expect the informer to show a version that none of our writes replaced.
        `shown`: the version it shows now, if any (already past them, there is nothing to wait
        for). An answer at a replaced version is a write that changed nothing: the server
        stored nothing and no event comes for it."""
        replaced = frozenset(replaced)
        if answer not in replaced:
            self.expect_past(key, replaced, shown)

    def expect_past(self, key: str, replaced: Iterable[str], shown: str | None) -> None:
        """Expect the informer to show `key` at a version past `replaced` (and those of our
        writes not seen yet): the server has one, ours or another writer's. `shown`: the version
        the informer shows now."""
        replaced = frozenset(replaced)
        earlier = self._pending.get(key) if self.left(key) is not None else None
        versions = replaced | (earlier.replaced if earlier is not None else frozenset())
        if shown is not None and shown not in versions:
            self._pending.pop(key, None)
        else:
            self._pending[key] = _Expectation(self._clock() + self._ttl, versions)

    def observed(self, key: str, version: str | None = None) -> None:
        """The informer showed `key` (at `version`): that ends its expectation, unless our own
        writes replaced that version."""
        expectation = self._pending.get(key)
        if expectation is not None and version not in expectation.replaced:
            del self._pending[key]

    def forget(self, key: str) -> None:
        """Nothing is expected of `key` any more (it is gone, or the write was never sent)."""
        self._pending.pop(key, None)

    def left(self, key: str) -> float | None:
        """Seconds before the expectation on `key` expires, or None when there is none."""
        expectation = self._pending.get(key)
        if expectation is None:
            return None
        left = expectation.deadline - self._clock()
        if left <= 0:
            del self._pending[key]
            return None
        return left

    def longest(self, keys: Iterable[str]) -> float | None:
        """The longest `left` of `keys`, or None when none of them has an expectation."""
        return max((left for key in keys if (left := self.left(key)) is not None), default=None)

    def longest_by(self, by: str) -> float | None:
        """The longest `left` of the expectations raised for `by`."""
        return self.longest([key for key, e in self._pending.items() if e.by == by])

    def pending(self) -> frozenset[str]:
        """The keys with an expectation."""
        return frozenset(key for key in list(self._pending) if self.left(key) is not None)
