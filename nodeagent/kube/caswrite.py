"""The one way a controller writes an object it decided on: a compare-and-swap merge patch onto
the version the decision was made from, which records what the informer must bring back before
that object is decided on again (client-go's optimistic concurrency with its expectations).

A decision taken on a cache that does not show our last write would undo it or repeat it, so
every write leaves an expectation, ended by the informer event that shows a version none of our
writes replaced. A Conflict (409) is the same case seen from the other side: the cache is
behind the server. It leaves the same expectation (a version past the one written onto) and
propagates: the controller's worker requeues the key, and the key waits for its informer to
catch up rather than trying again on the version the server has just refused.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from nodeagent.kube.errors import Conflict
from nodeagent.kube.expectations import Expectations, loop_time
from nodeagent.kube.protocols import Patcher, StatusPatcher
from nodeagent.kube.ratelimit import MonotonicClock
from nodeagent.kube.resources import Obj, Resource
from nodeagent.kube.store import key_of, split_key, version_of
from nodeagent.model.bodies import metadata_of

__all__ = ["CasClient", "CasWriter", "Versions"]


class CasClient(Patcher, StatusPatcher, Protocol):
    """The part of `KubeClient` a compare-and-swap writer uses."""


class Versions(Protocol):
    """What the informer shows of a key: an informer's `Store`."""

    def version(self, key: str) -> str | None: ...


class CasWriter:
    """Compare-and-swap writes of one resource's objects and the expectations they leave."""

    def __init__(
        self,
        client: CasClient,
        resource: Resource,
        shown: Versions,
        clock: MonotonicClock = loop_time,
    ) -> None:
        self._client = client
        self._resource = resource
        self._shown = shown
        self._unseen = Expectations(clock=clock)

    async def patch(
        self, key: str, body: Mapping[str, Any], onto: str, *, status: bool = False
    ) -> Obj:
        """Merge-patch `body` onto version `onto` of `key` (its status subresource if
        `status`); the server's answer. Writes in a row (each onto the version the one before
        answered) are awaited together: the informer must show a version none of them
        replaced."""
        namespace, name = split_key(key)
        patch = {**body, "metadata": {**metadata_of(body), "resourceVersion": onto}}
        call = self._client.patch_status if status else self._client.patch
        try:
            answer = await call(self._resource, name, patch, namespace)
        except Conflict:
            self._unseen.expect_past(key, [onto], self._shown.version(key))
            raise
        shown = self._shown.version(key)
        self._unseen.expect_write(key, [onto], shown, answer=version_of(answer))
        return answer

    def seen(self, obj: Mapping[str, Any]) -> None:
        """The informer showed `obj`: that ends the expectation on it, unless our own writes
        replaced that version."""
        self._unseen.observed(key_of(obj), version_of(obj))

    def gone(self, key: str) -> None:
        """The informer saw `key` deleted: nothing of it is awaited any more."""
        self._unseen.forget(key)

    def left(self, key: str) -> float | None:
        """Seconds `key` still waits for its informer to show our writes, or None."""
        return self._unseen.left(key)

    def longest(self, keys: Iterable[str]) -> float | None:
        """The longest `left` of `keys`, or None when none of them waits."""
        return self._unseen.longest(keys)
