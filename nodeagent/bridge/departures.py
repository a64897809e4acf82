"""The bridge's memory of the pods it asked to evict that are gone: what lets it answer 404 to
a drain that asks by name only after the pod was replaced under the same name.

It is filled from the informers' delete events of pods and of EvictionRequests, which come in no
set order: the garbage collector deletes a pod's request after the pod, but the two watches may
deliver the request's delete first. So a deleted request of the bridge's whose pod is still
cached is kept until that pod's delete event comes (or until it expires)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any, TypeVar

from nodeagent.model.bodies import metadata_of, uid_of
from nodeagent.model.bridge.decision import Departed, departure
from nodeagent.model.interceptors.requests import EvictionRequestView
from nodeagent.model.names import BRIDGE_REQUESTER
from nodeagent.model.times import Clock

__all__ = ["Departures", "drop_older"]

K = TypeVar("K")
V = TypeVar("V")


class Departures:
    """Pods gone whose eviction the bridge asked for, by (namespace, name), for ``keep``."""

    def __init__(self, keep: timedelta, clock: Clock) -> None:
        self._keep = keep
        self._clock = clock
        self._gone: dict[tuple[str, str], Departed] = {}  # oldest first
        # (namespace, pod UID) -> the bridge's request, deleted before its pod, and when
        self._orphans: dict[tuple[str, str], tuple[EvictionRequestView, datetime]] = {}

    def get(self, namespace: str, name: str) -> Departed | None:
        return self._gone.get((namespace, name))

    def pod_deleted(self, pod: Mapping[str, Any], request: EvictionRequestView | None) -> None:
        """``pod`` is gone; ``request`` is its EvictionRequest as still cached, if it is."""
        md = metadata_of(pod)
        namespace, name, uid = str(md.get("namespace")), str(md.get("name")), uid_of(pod)
        now = self._clock()
        self._expire(now)
        orphan = self._orphans.pop((namespace, uid), None)
        if request is None and orphan is not None:
            request = orphan[0]
        gone = departure(pod, request, now)
        if gone is not None:
            self._remember(namespace, name, gone)

    def request_deleted(self, request: EvictionRequestView, pod: Mapping[str, Any] | None) -> None:
        """``request`` is gone; ``pod`` is the pod of its target's name as cached, if any."""
        if BRIDGE_REQUESTER not in request.requesters:
            return
        now = self._clock()
        self._expire(now)
        if pod is not None and uid_of(pod) == request.target_uid:
            # its pod's delete event is still to come (or the request was deleted for another
            # reason: then this expires unused)
            self._orphans[(request.namespace, request.target_uid)] = (request, now)
        elif (known := self.get(request.namespace, request.target_name)) is None or (
            known.uid != request.target_uid
        ):
            # its pod went first (and was not seen to) or was replaced meanwhile
            gone = Departed(request.target_uid, request.creation_time, now)
            self._remember(request.namespace, request.target_name, gone)

    def _remember(self, namespace: str, name: str, gone: Departed) -> None:
        self._gone.pop((namespace, name), None)  # re-inserted as the newest
        self._gone[(namespace, name)] = gone

    def _expire(self, now: datetime) -> None:
        drop_older(self._gone, lambda d: d.gone_at, now - self._keep)
        drop_older(self._orphans, lambda o: o[1], now - self._keep)

    def __len__(self) -> int:
        return len(self._gone)


def drop_older(entries: dict[K, V], when: Callable[[V], datetime], before: datetime) -> None:
    """Drop the entries (oldest first) stamped before ``before``."""
    for key, value in list(entries.items()):
        if when(value) >= before:
            return
        del entries[key]
