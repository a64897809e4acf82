"""The NodeMaintenance shell's writes: a decision's actions applied in order (see
:mod:`nodeagent.model.nodemaintenance`), and what they leave to expect from the informers.

A write's informer event comes back some milliseconds after it; decisions taken meanwhile on the
older cache would repeat it (and get AlreadyExists or NotFound) or, for a maintenance's status,
store progress out of step with it. So each write is remembered until its event comes, for at
most a timeout: EvictionRequests created and deleted, owned requests seen deleted before their
pod, pods deleted past the drain deadline, and maintenances written.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol, TypeVar

from prometheus_client import Histogram

from nodeagent.controllers.nodemaintenance.signatures import drain_started
from nodeagent.kube.errors import AlreadyExists, NotFound
from nodeagent.kube.events import EventSink, EventType
from nodeagent.kube.protocols import Creator, Deleter, Getter, Patcher, StatusPatcher
from nodeagent.kube.resources import EVICTIONREQUESTS, NODEMAINTENANCES, NODES, PODS, Obj
from nodeagent.kube.store import Store, key_of
from nodeagent.model.bodies import Event, metadata_of
from nodeagent.model.names import FINALIZER
from nodeagent.model.nodemaintenance.actions import (
    Actions,
    EvictionRequestCreate,
    EvictionRequestDelete,
    NodePatch,
    PodDelete,
    RequesterPatch,
    StatusUpdate,
)

__all__ = [
    "EXPECTATION_TIMEOUT",
    "WRITE_SEEN_TIMEOUT",
    "NodeMaintenanceClient",
    "Writes",
    "expecting",
]

# the shell's logger: what it logs of its writes is filtered and read under that name
log = logging.getLogger("nodeagent.controllers.nodemaintenance.controller")

T = TypeVar("T")

# An EvictionRequest we created or deleted, whose informer event has not come back yet, is not
# created or deleted again by decisions taken meanwhile on the older cache (they would only get
# AlreadyExists or NotFound), for at most this long.
EXPECTATION_TIMEOUT = 30.0
# A maintenance we wrote (its status, a neighbour's, a finalizer) is decided on, or its
# neighbours are, only once the informer has brought that write back, for at most this long:
# one resolution spans every intersecting maintenance, and taken on a cache that misses our
# own last write it would store progress out of step with it (the watch brings it in ms).
WRITE_SEEN_TIMEOUT = 5.0


class NodeMaintenanceClient(Creator, Getter, Patcher, StatusPatcher, Deleter, Protocol):
    """The part of `KubeClient` the controller writes with."""


def expecting(expectations: dict[str, float], key: str) -> float | None:
    """Seconds left of the expectation on `key`, or None."""
    since = expectations.get(key)
    if since is None:
        return None
    left = since + EXPECTATION_TIMEOUT - asyncio.get_running_loop().time()
    if left <= 0:
        del expectations[key]
        return None
    return left


class Writes:
    """The API writes of the NodeMaintenance shell, and the expectations they leave."""

    def __init__(
        self,
        client: NodeMaintenanceClient,
        recorder: EventSink,
        *,
        maintenances: Store,
        requests: Store,
        enqueue_after: Callable[[str, float], None],
        clock: Callable[[], datetime],
        max_concurrent_writes: int,
        drain_duration: Histogram | None,
    ) -> None:
        self._client = client
        self._recorder = recorder
        self._maintenances = maintenances  # the informers' stores
        self._requests = requests
        self._enqueue_after = enqueue_after
        self._clock = clock
        self._concurrency = max(1, max_concurrent_writes)
        self._drain_duration = drain_duration
        self.progress_written: dict[str, float] = {}  # maintenance -> loop time
        self._written: dict[str, tuple[str, float]] = {}  # maintenance -> (its rv, loop time)
        self._created: dict[str, float] = {}  # "namespace/name" of a request -> loop time
        self._created_by: dict[str, str] = {}  # "namespace/name" of a request -> maintenance
        self._deleted: dict[str, float] = {}  # uid of a request -> loop time
        self.gone: dict[str, float] = {}  # "namespace/name" of an owned request seen deleted
        self._deleted_pods: dict[str, float] = {}  # uid of a pod deleted by escalation

    # -- informer events that end expectations -----------------------------------------------

    def maintenance_seen(self, nm: Obj) -> None:
        """The informer brought `nm`: a write of ours at its resourceVersion is seen."""
        name = key_of(nm)
        written = self._written.get(name)
        if written is not None and written[0] == metadata_of(nm).get("resourceVersion"):
            del self._written[name]

    def maintenance_gone(self, name: str) -> None:
        self._written.pop(name, None)

    def request_gone(self, er: Obj, with_its_pod: bool) -> None:
        """The informer saw request `er` deleted; ``with_its_pod``: most likely
        garbage-collected with its pod, whose own deletion the pod informer has not brought
        yet (kept only until it does): see _create_request."""
        self.created_seen(key_of(er))
        self._deleted.pop(str(metadata_of(er).get("uid")), None)
        if with_its_pod:
            self.gone[key_of(er)] = asyncio.get_running_loop().time()

    def pod_gone(self, pod: Obj) -> None:
        """The expectations about a pod end with it (they would pile up over drains)."""
        uid = str(metadata_of(pod).get("uid"))
        self.gone.pop(f"{metadata_of(pod).get('namespace')}/{uid}", None)
        self._deleted_pods.pop(uid, None)

    # -- writes ------------------------------------------------------------------------------

    def created_seen(self, key: str) -> None:
        """The create of request `key` needs no more waiting for."""
        self._created.pop(key, None)
        self._created_by.pop(key, None)

    def wrote(self, nm: Obj) -> None:
        """We wrote `nm` (the server's answer): expect the informer to bring it."""
        name = key_of(nm)
        rv = str(metadata_of(nm).get("resourceVersion") or "")
        cached = self._maintenances.get(name)
        if cached is None or metadata_of(cached).get("resourceVersion") != rv:
            self._written[name] = (rv, asyncio.get_running_loop().time())

    def writes_unseen(self, names: Iterable[str]) -> float | None:
        """Seconds left of the longest wait for a write of ours to `names` to come back."""
        now = asyncio.get_running_loop().time()
        waits = []
        for name in names:
            written = self._written.get(name)
            if written is None:
                continue
            left = written[1] + WRITE_SEEN_TIMEOUT - now
            if left <= 0:
                del self._written[name]
            else:
                waits.append(left)
        return max(waits, default=None)

    async def apply(self, nm: Mapping[str, Any], a: Actions) -> None:
        """All of a decision's actions, in order."""
        await self.act(await self.store(nm, a), a)

    async def store(self, nm: Mapping[str, Any], a: Actions) -> Mapping[str, Any]:
        """The maintenances' writes of a decision, up to its own status; the maintenance as
        stored."""
        name = key_of(nm)
        current: Mapping[str, Any] = nm
        if a.add_finalizer:
            finalizers = [*(metadata_of(current).get("finalizers") or []), FINALIZER]
            current = await self._client.patch(
                NODEMAINTENANCES,
                name,
                {
                    "metadata": {
                        "finalizers": finalizers,
                        "resourceVersion": metadata_of(current).get("resourceVersion"),
                    }
                },
            )
            self.wrote(current)
        await self._each(a.cordon, self._patch_node)
        if a.cordon:
            log.info("%s: cordoned %s", name, ", ".join(p.node for p in a.cordon))
        # The neighbours' share of the one resolution first, our own status last: a neighbour
        # write refused (someone wrote it since our cache saw it) fails this decision before
        # our own progress is stored ahead of theirs, where the others would read it as a
        # floor (targets never go back) that the lagging neighbour has to wait out
        await self._each(a.neighbours, self._write_neighbour)
        if a.status is not None:
            self.progress_written[name] = asyncio.get_running_loop().time()
            current = await self._client.patch_status(
                NODEMAINTENANCES,
                name,
                {
                    "metadata": {"resourceVersion": metadata_of(current).get("resourceVersion")},
                    "status": a.status,
                },
            )
            self.wrote(current)
        return current

    async def act(self, current: Mapping[str, Any], a: Actions) -> None:
        """What a decision does once its resolution is stored: events, EvictionRequests,
        deletions past the deadline, uncordons, the finalizer."""
        name = key_of(current)
        await self._record(current, a.events)
        if self._drain_duration is not None and any(e.reason == "Drained" for e in a.events):
            started = drain_started(current)
            if started is not None:
                self._drain_duration.observe(max(0.0, (self._clock() - started).total_seconds()))
        await self._each(a.delete_evictions, lambda d: self._delete_request(name, d))
        await self._each(a.create_evictions, lambda c: self._create_request(name, c))
        await self._each(a.requester_patches, self._patch_requesters)
        if a.create_evictions:
            log.info("%s: requested the eviction of %d pods", name, len(a.create_evictions))
        await self._escalate(current, a.delete_pods)
        await self._each(a.uncordon, self._patch_node)
        if a.remove_finalizer and (left := self.creates_unseen(name)) is not None:
            # A request we created is not in the cache yet, so this decision could not
            # withdraw it; its informer event decides again (the timeout, should it never come).
            self._enqueue_after(name, left)
        elif a.remove_finalizer:
            finalizers = [f for f in metadata_of(current).get("finalizers") or [] if f != FINALIZER]
            await self._client.patch(
                NODEMAINTENANCES,
                name,
                {
                    "metadata": {
                        "finalizers": finalizers,
                        "resourceVersion": metadata_of(current).get("resourceVersion"),
                    }
                },
            )
            log.info("%s: completed; finalizer removed", name)

    def creates_unseen(self, maintenance: str) -> float | None:
        """Seconds left of the longest expectation on requests `maintenance` created and the
        informer has not brought in yet, or None when there are none."""
        waits = []
        for key, by in list(self._created_by.items()):
            if by != maintenance:
                continue
            left = expecting(self._created, key)
            if left is None:
                del self._created_by[key]
            else:
                waits.append(left)
        return max(waits, default=None)

    async def _each(self, items: Sequence[T], fn: Callable[[T], Awaitable[None]]) -> None:
        """Run `fn` over `items`, at most `max_concurrent_writes` at a time; raise the first
        failure once all have finished."""
        if not items:
            return
        gate = asyncio.Semaphore(self._concurrency)

        async def one(item: T) -> None:
            async with gate:
                await fn(item)

        results = await asyncio.gather(*(one(i) for i in items), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result

    async def _record(self, obj: Mapping[str, Any], events: Iterable[Event]) -> None:
        for event in events:
            kind: EventType = "Warning" if event.type == "Warning" else "Normal"
            await self._recorder.record(obj, kind, event.reason, event.message)

    async def _write_neighbour(self, u: StatusUpdate) -> None:
        try:
            written = await self._client.patch_status(
                NODEMAINTENANCES,
                u.name,
                {"metadata": {"resourceVersion": u.resource_version}, "status": u.status},
            )
        except NotFound:
            return
        self.wrote(written)
        await self._record(written, u.events)

    async def _patch_node(self, p: NodePatch) -> None:
        with contextlib.suppress(NotFound):  # a node that is gone needs no (un)cordon
            await self._client.patch(NODES, p.node, p.to_patch())

    async def _create_request(self, maintenance: str, c: EvictionRequestCreate) -> None:
        key = f"{c.namespace}/{metadata_of(c.body).get('name')}"
        if key in self._requests:
            # The decision was taken before the informer brought this request in (its event
            # came while the decision was being applied); that event decides again.
            return
        left = expecting(self._created, key)
        if left is not None:
            self._enqueue_after(maintenance, left)  # should its event never come
            return
        if expecting(self.gone, key) is not None and not await self._pod_exists(c):
            return  # the pod went with its request; its informer event comes next
        self.gone.pop(key, None)
        # Expected before it is sent: its informer events (even its deletion, should the pod
        # go at once) may come before the create returns, and must find the expectation to end
        self._created[key] = asyncio.get_running_loop().time()
        self._created_by[key] = maintenance
        try:
            # AlreadyExists: our cache lags, or another requester was first; the informer event
            # for the existing request brings us back to add the requester if it is missing.
            with contextlib.suppress(AlreadyExists):
                await self._client.create(EVICTIONREQUESTS, c.body, c.namespace)
        except BaseException:
            self.created_seen(key)  # not created: nothing to wait for
            raise
        if key in self._requests:  # its event came while the create was under way
            self.created_seen(key)

    async def _pod_exists(self, c: EvictionRequestCreate) -> bool:
        """Whether the request's pod (that UID) is still there, as the API server says."""
        target = c.body["spec"]["target"]["pod"]
        try:
            pod = await self._client.get(PODS, target["name"], c.namespace)
        except NotFound:
            return False
        return bool(metadata_of(pod).get("uid") == target["uid"])

    async def _patch_requesters(self, p: RequesterPatch) -> None:
        with contextlib.suppress(NotFound):
            await self._client.patch(EVICTIONREQUESTS, p.name, p.to_patch(), p.namespace)

    async def _escalate(self, nm: Mapping[str, Any], deletes: Sequence[PodDelete]) -> None:
        """Delete the pods past the drain deadline, each once (until the pod informer shows it
        terminating or gone), and say which in one Warning Event."""
        sent = [d for d in deletes if expecting(self._deleted_pods, d.uid) is None]
        if not sent:
            return
        now = asyncio.get_running_loop().time()
        for d in sent:
            self._deleted_pods[d.uid] = now

        async def delete(d: PodDelete) -> None:
            with contextlib.suppress(NotFound):  # gone already
                await self._client.delete(PODS, d.name, d.namespace, uid=d.uid)

        await self._each(sent, delete)
        names = ", ".join(f"{d.namespace}/{d.name}" for d in sent)
        log.warning("%s: drain deadline passed; deleted pods %s", key_of(nm), names)
        await self._record(
            nm,
            (
                Event(
                    "Warning",
                    "DrainDeadlineEscalated",
                    f"Drain deadline passed: deleted {len(sent)} pods past their disruption "
                    f"budgets (drainDeadlineEscalation DeletePods): {names}",
                ),
            ),
        )

    async def _delete_request(self, maintenance: str, d: EvictionRequestDelete) -> None:
        if d.uid:
            left = expecting(self._deleted, d.uid)
            if left is not None:
                self._enqueue_after(maintenance, left)
                return
        with contextlib.suppress(NotFound):
            await self._client.delete(
                EVICTIONREQUESTS,
                d.name,
                d.namespace,
                uid=d.uid or None,
                resource_version=d.resource_version or None,
            )
        cached = self._requests.get(f"{d.namespace}/{d.name}")
        if d.uid and cached is not None and metadata_of(cached).get("uid") == d.uid:
            self._deleted[d.uid] = asyncio.get_running_loop().time()
