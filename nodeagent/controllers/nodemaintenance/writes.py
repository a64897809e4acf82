"""The NodeMaintenance shell's writes: a decision's actions applied in order (see
:mod:`nodeagent.model.nodemaintenance`), and what they leave to expect from the informers
(:mod:`nodeagent.kube.expectations`): EvictionRequests created and deleted, owned requests seen
deleted before their pod, pods deleted past the drain deadline, and maintenances written.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol, TypeVar

from prometheus_client import Histogram

from nodeagent.controllers.nodemaintenance.requestsource import RequestStore
from nodeagent.controllers.nodemaintenance.signatures import drain_started
from nodeagent.kube.caswrite import CasWriter
from nodeagent.kube.errors import AlreadyExists, NotFound
from nodeagent.kube.events import EventSink, EventType
from nodeagent.kube.expectations import Expectations
from nodeagent.kube.protocols import Creator, Deleter, Getter, Patcher, StatusPatcher
from nodeagent.kube.resources import (
    EVICTIONREQUESTS,
    NODEMAINTENANCES,
    NODES,
    PODS,
    UPSTREAM_EVICTIONREQUESTS,
    Obj,
)
from nodeagent.kube.store import Store, key_of, version_of
from nodeagent.model.bodies import Event, mapping, merge_patch, metadata_of, name_of
from nodeagent.model.lifecycle.mirror import intent, upstream_body, upstream_name
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

__all__ = ["NodeMaintenanceClient", "Writes"]

# the shell's logger: what it logs of its writes is filtered and read under that name
log = logging.getLogger("nodeagent.controllers.nodemaintenance.controller")

T = TypeVar("T")


class NodeMaintenanceClient(Creator, Getter, Patcher, StatusPatcher, Deleter, Protocol):
    """The part of `KubeClient` the controller writes with."""


class Writes:
    """The API writes of the NodeMaintenance shell, and the expectations they leave."""

    def __init__(
        self,
        client: NodeMaintenanceClient,
        recorder: EventSink,
        *,
        maintenances: Store,
        requests: RequestStore,
        upstream: Callable[[str, str, str], bool],
        enqueue_after: Callable[[str, float], None],
        clock: Callable[[], datetime],
        max_concurrent_writes: int,
        drain_duration: Histogram | None,
    ) -> None:
        self._client = client
        self._recorder = recorder
        self._maintenances = maintenances  # the informers' stores
        self._requests = requests
        # (namespace, pod name, request key): is that request ours on lifecycle.k8s.io?
        self._upstream = upstream
        self._enqueue_after = enqueue_after
        self._clock = clock
        self._concurrency = max(1, max_concurrent_writes)
        self._drain_duration = drain_duration
        self.progress_written: dict[str, float] = {}  # maintenance -> loop time
        # A maintenance we wrote (its status, a neighbour's, a finalizer) is decided on, or its
        # neighbours are, only once the informer has brought that write back: one resolution
        # spans every intersecting maintenance, and taken on a cache that misses our own last
        # write it would store progress out of step with it.
        self.written = CasWriter(client, NODEMAINTENANCES, maintenances)
        # An EvictionRequest we created or deleted whose informer event has not come yet is not
        # created or deleted again by decisions taken on the older cache (AlreadyExists or
        # NotFound is all they would get); nor is a pod deleted again.
        self.created = Expectations()  # "namespace/name" of requests, by maintenance
        self.deleted = Expectations()  # UIDs of requests
        # "namespace/name" of owned requests seen deleted, most likely garbage-collected with
        # their pod, whose own deletion the pod informer has not brought yet: see _create_request
        self.collected = Expectations()
        self.pods_deleted = Expectations()  # UIDs of pods deleted by escalation

    # -- informer events that end expectations -----------------------------------------------

    def maintenance_seen(self, nm: Obj) -> None:
        self.written.seen(nm)

    def maintenance_gone(self, name: str) -> None:
        self.written.gone(name)

    def request_seen(self, er: Obj) -> None:
        self.created.observed(key_of(er))

    def request_gone(self, er: Obj, with_its_pod: bool) -> None:
        """The informer saw request `er` deleted; ``with_its_pod``: most likely
        garbage-collected with its pod."""
        self.created.observed(key_of(er))
        self.deleted.observed(str(metadata_of(er).get("uid")))
        if with_its_pod:
            self.collected.expect(key_of(er))

    def pod_gone(self, pod: Obj) -> None:
        uid = str(metadata_of(pod).get("uid"))
        self.collected.observed(f"{metadata_of(pod).get('namespace')}/{uid}")
        self.pods_deleted.observed(uid)

    # -- writes ------------------------------------------------------------------------------

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
            body = {"metadata": {"finalizers": finalizers}}
            current = await self.written.patch(name, body, version_of(current))
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
            # at that version, so the status it held is what the patch replaces
            status = merge_patch(mapping(current, "status"), a.status)
            body = {"status": status}
            current = await self.written.patch(name, body, version_of(current), status=True)
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
        if a.remove_finalizer and (left := self.created.longest_by(name)) is not None:
            # A request we created is not in the cache yet, so this decision could not
            # withdraw it; its informer event decides again (the timeout, should it never come).
            self._enqueue_after(name, left)
        elif a.remove_finalizer:
            finalizers = [f for f in metadata_of(current).get("finalizers") or [] if f != FINALIZER]
            body = {"metadata": {"finalizers": finalizers}}
            await self.written.patch(name, body, version_of(current))
            log.info("%s: completed; finalizer removed", name)

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
            # the log says what the Events say (cordoned, drained, uncordoned, ...): an operator
            # follows a maintenance in either
            level = logging.WARNING if kind == "Warning" else logging.INFO
            log.log(level, "NodeMaintenance %s: %s: %s", name_of(obj), event.reason, event.message)
            await self._recorder.record(obj, kind, event.reason, event.message)

    async def _write_neighbour(self, u: StatusUpdate) -> None:
        cached = self._maintenances.get(u.name)
        # the cache's status is the one at that version, or the write is refused (409)
        status = merge_patch(mapping(cached, "status"), u.status) if cached else u.status
        try:
            written = await self.written.patch(
                u.name, {"status": status}, u.resource_version, status=True
            )
        except NotFound:
            return
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
        left = self.created.left(key)
        if left is not None:
            self._enqueue_after(maintenance, left)  # should its event never come
            return
        if self.collected.left(key) is not None and not await self._pod_exists(c):
            return  # the pod went with its request; its informer event comes next
        self.collected.forget(key)
        # Expected before it is sent: its informer events (even its deletion, should the pod
        # go at once) may come before the create returns, and must find the expectation to end
        self.created.expect(key, by=maintenance)
        try:
            # AlreadyExists: our cache lags, or another requester was first; the informer event
            # for the existing request brings us back to add the requester if it is missing.
            with contextlib.suppress(AlreadyExists):
                target = c.body["spec"]["target"]["pod"]
                if self._upstream(c.namespace, target["name"], key):
                    await self._client.create(UPSTREAM_EVICTIONREQUESTS, upstream_body(c.body))
                else:
                    await self._client.create(EVICTIONREQUESTS, c.body, c.namespace)
        except BaseException:
            self.created.forget(key)  # not created: nothing to wait for
            raise
        if key in self._requests:  # its event came while the create was under way
            self.created.forget(key)

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
            if self._requests_upstream(p.namespace, p.name):
                # upstream a requester has a request of its own, and says whether it wants
                # the eviction: our requester in or out of the list is our intent
                patch = {
                    "metadata": {"resourceVersion": p.resource_version},
                    "spec": {"intent": intent(p.requesters)},
                }
                name = upstream_name(p.name)
                await self._client.patch(UPSTREAM_EVICTIONREQUESTS, name, patch, p.namespace)
            else:
                await self._client.patch(EVICTIONREQUESTS, p.name, p.to_patch(), p.namespace)

    def _requests_upstream(self, namespace: str, name: str) -> bool:
        """Whether the request the decision knows as `name` (its pod's UID) is ours upstream."""
        return self._requests.upstream(f"{namespace}/{name}")

    async def _escalate(self, nm: Mapping[str, Any], deletes: Sequence[PodDelete]) -> None:
        """Delete the pods past the drain deadline, each once (until the pod informer shows it
        terminating or gone), and say which in one Warning Event."""
        sent = [d for d in deletes if self.pods_deleted.left(d.uid) is None]
        if not sent:
            return
        for d in sent:
            self.pods_deleted.expect(d.uid)

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
            left = self.deleted.left(d.uid)
            if left is not None:
                self._enqueue_after(maintenance, left)
                return
        uid, version = d.uid or None, d.resource_version or None  # preconditions
        with contextlib.suppress(NotFound):
            if self._requests_upstream(d.namespace, d.name):
                await self._client.delete(
                    UPSTREAM_EVICTIONREQUESTS,
                    upstream_name(d.name),
                    d.namespace,
                    uid=uid,
                    resource_version=version,
                )
            else:
                await self._client.delete(
                    EVICTIONREQUESTS, d.name, d.namespace, uid=uid, resource_version=version
                )
        cached = self._requests.get(f"{d.namespace}/{d.name}")
        if d.uid and cached is not None and metadata_of(cached).get("uid") == d.uid:
            self.deleted.expect(d.uid)
