"""Records core/v1 Events about objects, folding repeats into one Event with a count.

Events are best effort: `record` logs failures and never raises into the caller, whose real
work must not fail because an Event could not be written.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from nodeagent.kube.errors import AlreadyExists, KubeError, NotFound
from nodeagent.kube.protocols import Creator, Patcher
from nodeagent.kube.resources import EVENTS, NODES, Obj, format_time
from nodeagent.model.bodies import EventType, describe, metadata_of
from nodeagent.model.names import AGENT
from nodeagent.model.selectors import DNS_SUBDOMAIN_MAX

__all__ = ["EventClient", "EventRecorder", "EventSink", "EventType"]

log = logging.getLogger(__name__)


class EventSink(Protocol):
    """What controllers need of `EventRecorder`: best effort, never raises."""

    async def record(
        self, obj: Mapping[str, Any], type: EventType, reason: str, message: str
    ) -> None: ...


_MAX_MESSAGE = 1024  # what events.k8s.io/v1 allows; kubectl truncates longer ones anyway


class EventClient(Creator, Patcher, Protocol):
    """The part of `KubeClient` the recorder needs."""


@dataclass(eq=False)
class _EventSeries:
    """One Event on the server that repeats of the same event are folded into."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    name: str | None = None
    namespace: str = ""
    count: int = 0


_Key = tuple[str, str, str, str, str, str, str]


def node_object(name: str, uid: str | None = None) -> Obj:
    """A Node as an Event's object: a listed Node carries no kind, so name it, as the
    kubelet's Node Events do."""
    metadata: dict[str, Any] = {"name": name}
    if uid:
        metadata["uid"] = uid
    return {"apiVersion": NODES.api_version, "kind": NODES.kind, "metadata": metadata}


def _involved(obj: Mapping[str, Any]) -> Obj:
    meta = metadata_of(obj)
    ref: Obj = {
        "apiVersion": obj.get("apiVersion", ""),
        "kind": obj.get("kind", ""),
        "name": meta.get("name", ""),
    }
    for src, dst in (
        ("namespace", "namespace"),
        ("uid", "uid"),
        ("resourceVersion", "resourceVersion"),
    ):
        if meta.get(src):
            ref[dst] = meta[src]
    return ref


class EventRecorder:
    def __init__(
        self,
        client: EventClient,
        component: str = AGENT,
        *,
        host: str | None = None,
        instance: str | None = None,
        cache_size: int = 4096,
    ) -> None:
        """`host` goes to `source.host` (the node), `instance` to `reportingInstance`."""
        self._client = client
        self._component = component
        self._host = host
        self._instance = instance or host or component
        self._cache_size = max(1, cache_size)
        self._series: OrderedDict[_Key, _EventSeries] = OrderedDict()

    async def normal(self, obj: Mapping[str, Any], reason: str, message: str) -> None:
        await self.record(obj, "Normal", reason, message)

    async def warning(self, obj: Mapping[str, Any], reason: str, message: str) -> None:
        await self.record(obj, "Warning", reason, message)

    async def record(
        self, obj: Mapping[str, Any], type: EventType, reason: str, message: str
    ) -> None:
        """Create an Event about `obj`, or bump the count of the same one recorded before."""
        try:
            involved = _involved(obj)
            if len(message) > _MAX_MESSAGE:
                message = message[: _MAX_MESSAGE - 3] + "..."
            key: _Key = (
                involved["apiVersion"],
                involved["kind"],
                involved.get("namespace", ""),
                involved["name"],
                involved.get("uid", ""),
                type + "/" + reason,
                message,
            )
            series = self._series_for(key)
            async with series.lock:
                now = format_time(datetime.now(UTC))
                if series.name is not None and await self._bump(series, now):
                    return
                await self._create(series, involved, type, reason, message, now)
        except KubeError as exc:
            log.warning("cannot record event %s for %s: %s", reason, describe(obj), exc)
        except Exception:
            log.exception("cannot record event %s for %s", reason, describe(obj))

    def _series_for(self, key: _Key) -> _EventSeries:
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = _EventSeries()
            while len(self._series) > self._cache_size:
                self._series.popitem(last=False)
        else:
            self._series.move_to_end(key)
        return series

    async def _bump(self, series: _EventSeries, now: str) -> bool:
        """Count one more occurrence; False if the Event is gone (expired) and must be recreated."""
        assert series.name is not None
        try:
            await self._client.patch(
                EVENTS,
                series.name,
                {"count": series.count + 1, "lastTimestamp": now},
                series.namespace,
            )
        except NotFound:
            return False
        series.count += 1
        return True

    async def _create(
        self,
        series: _EventSeries,
        involved: Obj,
        type: EventType,
        reason: str,
        message: str,
        now: str,
    ) -> None:
        # Cluster-scoped objects (nodes, maintenances) get their Events in "default".
        namespace = involved.get("namespace") or "default"
        base = (involved["name"] or "unknown")[: DNS_SUBDOMAIN_MAX - 34]
        body: Obj = {
            "apiVersion": EVENTS.api_version,
            "kind": EVENTS.kind,
            "metadata": {"namespace": namespace},
            "involvedObject": involved,
            "reason": reason,
            "message": message,
            "type": type,
            "source": {
                "component": self._component,
                **({"host": self._host} if self._host else {}),
            },
            "reportingComponent": self._component,
            "reportingInstance": self._instance,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        for attempt in range(2):
            # Same naming as client-go (name.<hex nanoseconds>), plus a random tail so two
            # agents recording at the same instant do not collide.
            body["metadata"]["name"] = f"{base}.{time.time_ns():x}{secrets.token_hex(4)}"
            try:
                created = await self._client.create(EVENTS, body, namespace)
            except AlreadyExists:
                if attempt:
                    raise
                continue
            series.name = metadata_of(created).get("name") or body["metadata"]["name"]
            series.namespace = namespace
            series.count = 1
            return
