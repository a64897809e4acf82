"""The NodeMaintenance controller shell: informers in, the pure decision
(:func:`nodeagent.model.nodemaintenance.decide.decide`) in between, API calls out.

Watches NodeMaintenances, Nodes, Pods (indexed by node) and EvictionRequests (indexed by the
``nodeagent.io/node`` label). Any change enqueues every maintenance connected to it through
shared nodes (drainTargets are resolved across intersecting maintenances, and the next plan
entry of one depends on pods of its neighbours). Nothing polls.

Under a limit on nodes draining at once (``nodeMaintenance.maxDrainingNodes``) every
maintenance in Drain depends on every other: each decision of one in Drain is handed all of
them, and a change around any of them enqueues them all (a node that finishes its drain frees a
slot for a node of another maintenance). A decision that admits nodes to drain counts them as
draining until the cache shows their drainTargets, so decisions taken meanwhile on the older
cache cannot admit more.

Writes use the resourceVersion of the object they were decided on as a precondition, so a
decision taken on a stale cache fails with Conflict and is retried on fresher state rather
than, say, storing drainTargets behind the ones already stored.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from functools import partial
from typing import Any, Protocol, TypeVar, cast

from prometheus_client import Histogram

from nodeagent.config import NodeMaintenanceConfig
from nodeagent.controllers.nodemaintenance.membership import Membership
from nodeagent.controllers.nodemaintenance.reconcile import (
    FINALIZER,
    Actions,
    EvictionRequestCreate,
    EvictionRequestDelete,
    Inputs,
    NodePatch,
    PodDelete,
    RecordedEvent,
    RequesterPatch,
    Stage,
    StatusUpdate,
    decide,
    effective_stage,
    recall_group,
    refusal,
)
from nodeagent.controllers.nodemaintenance.signatures import (
    drain_started,
    eviction_request_node_index,
    node_signature,
    pod_node_index,
    pod_signature,
    progress_only,
    request_keys,
    requests_by_name,
)
from nodeagent.kube.controller import Controller, SharedInformers
from nodeagent.kube.errors import AlreadyExists, NotFound
from nodeagent.kube.events import EventSink, EventType
from nodeagent.kube.protocols import Creator, Deleter, Getter, Patcher, StatusPatcher
from nodeagent.kube.resources import EVICTIONREQUESTS, NODEMAINTENANCES, NODES, PODS, Obj
from nodeagent.kube.store import key_of
from nodeagent.kube.workqueue import WorkQueueMetrics
from nodeagent.model.bodies import EvictionRequest, as_maintenance, as_map, metadata_of, name_of
from nodeagent.model.draintargets import PodInfoMemo
from nodeagent.model.interceptors import EvictionRequestView
from nodeagent.model.memo import ObjectMemo, Recall

__all__ = [
    "NodeMaintenanceClient",
    "NodeMaintenanceController",
    "drain_started",
    "eviction_request_node_index",
    "pod_node_index",
]

log = logging.getLogger(__name__)

T = TypeVar("T")

# A decision reads every pod of every node involved: with thousands of pods it takes
# milliseconds, and during a drain the events that ask for the next one arrive faster than
# that. A maintenance is decided again at the earliest PACING times as long after its last
# decision as that decision took, so deciding never takes more than about a ninth of the
# event loop, and the EvictionRequest controller, which does the evicting, keeps the rest
# (a 3,000-pod drain: 21.0 s with 3, 17.2 s with 8). Small maintenances decide in a
# millisecond and are not slowed down noticeably.
PACING = 8.0
# Progress alone (the pod counters, the "N pods left" message) is written at most this often;
# anything else (drainTargets, Drained, messages) at once. Each write is a request and a watch
# event to every client of the maintenance: 5 s keeps a 110-pod drain at ~3 writes of
# progress, and `kubectl get nm -w` still moves visibly.
PROGRESS_INTERVAL = 5.0
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


class NodeMaintenanceController(Controller):
    """Leader-only. Construct, then run `informers.run()` and `controller.run()` together."""

    def __init__(
        self,
        client: NodeMaintenanceClient,
        informers: SharedInformers,
        recorder: EventSink,
        *,
        workers: int = 4,
        max_concurrent_writes: int = 16,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        metrics: WorkQueueMetrics | None = None,
        drain_duration: Histogram | None = None,
        settings: NodeMaintenanceConfig | None = None,
    ) -> None:
        self._drain_duration = drain_duration
        self._settings = settings or NodeMaintenanceConfig()
        self._maintenances = informers.informer(NODEMAINTENANCES)
        self._nodes = informers.informer(NODES)
        self._pods = informers.informer(PODS, indexers={"node": pod_node_index})
        self._requests = informers.informer(
            EVICTIONREQUESTS, indexers={"node": eviction_request_node_index}
        )
        super().__init__(
            "nodemaintenance",
            informers=[self._maintenances, self._nodes, self._pods, self._requests],
            workers=workers,
            metrics=metrics,
        )
        self._client = client
        self._recorder = recorder
        self._clock = clock
        self._writes = max(1, max_concurrent_writes)
        # what decisions derive per node and maintenance, while it stays the same (Inputs.recall);
        # a node no maintenance has is read by no decision: its values (pod objects) go
        self._recall = Recall()
        self._members = Membership(node_left=self._recall.forget)
        self._joint = asyncio.Lock()  # decisions of intersecting maintenances, one at a time
        self._pod_info = PodInfoMemo()
        self._request_view = ObjectMemo(EvictionRequestView.from_obj)
        self._not_before: dict[str, float] = {}  # maintenance -> loop time, see PACING
        self._progress_written: dict[str, float] = {}  # maintenance -> loop time
        self._written: dict[str, tuple[str, float]] = {}  # maintenance -> (its rv, loop time)
        self._created: dict[str, float] = {}  # "namespace/name" of a request -> loop time
        self._created_by: dict[str, str] = {}  # "namespace/name" of a request -> maintenance
        self._deleted: dict[str, float] = {}  # uid of a request -> loop time
        self._gone: dict[str, float] = {}  # "namespace/name" of an owned request seen deleted
        self._deleted_pods: dict[str, float] = {}  # uid of a pod deleted by escalation
        self._in_drain: set[str] = set()  # maintenances in stage Drain
        self._admitting: dict[str, float] = {}  # node admitted to drain, cache lags -> loop time
        self._maintenances.add_handler(
            self._on_maintenance, self._on_maintenance_update, self._on_maintenance_delete
        )
        self._nodes.add_handler(self._on_node, self._on_node_update, self._on_node_delete)
        self._pods.add_handler(self._on_pod, self._on_pod_update, self._on_pod)
        # the expectations about a pod end with it (they would pile up over drains otherwise)
        self._pods.add_handler(on_delete=self._pod_gone)
        self._requests.add_handler(self._on_request, self._on_request_update, self._on_request)
        self._requests.add_handler(self._request_seen, None, self._request_gone)

    # -- event handlers: keep the membership index, enqueue what is affected ---------------------

    def _all_maintenances(self) -> dict[str, Obj]:
        return {str(metadata_of(nm).get("name")): nm for nm in self._maintenances.store.list()}

    def _enqueue_all(self, names: Iterable[str]) -> None:
        names = set(names)
        if self._settings.max_draining_nodes is not None and names & self._in_drain:
            names |= self._in_drain  # under a limit every drain depends on every other
        for name in names:
            self.enqueue(name)

    def _on_maintenance(self, nm: Obj) -> None:
        name = key_of(nm)
        written = self._written.get(name)
        if written is not None and written[0] == metadata_of(nm).get("resourceVersion"):
            del self._written[name]
        before = self._members.component([name])[0]
        if name in self._in_drain:
            before.add(name)  # it may leave Drain: the others are woken as it was
        self._members.maintenance_changed(nm, self._nodes.store.list)
        self._enqueue_all(before)
        if effective_stage(nm) == Stage.DRAIN:
            self._in_drain.add(name)
        else:
            self._in_drain.discard(name)
        for ns in (nm.get("status") or {}).get("nodeStatuses") or ():
            if isinstance(ns, Mapping) and ns.get("drainTargets"):
                self._admitting.pop(str(as_map(ns.get("nodeRef")).get("name")), None)
        self._enqueue_all(self._members.component([name])[0] | {name})

    def _on_maintenance_update(self, old: Obj, new: Obj) -> None:
        self._on_maintenance(new)

    def _on_maintenance_delete(self, nm: Obj) -> None:
        name = key_of(nm)
        self._written.pop(name, None)
        self._recall.forget(recall_group(name))
        before = self._members.component([name])[0]
        self._members.maintenance_deleted(name)
        if name in self._in_drain:
            self._in_drain.discard(name)
            before |= self._in_drain if self._settings.max_draining_nodes is not None else set()
        self._enqueue_all(before - {name})

    def _on_node(self, node: Obj) -> None:
        name = key_of(node)
        before = self._members.around_node(name)
        self._members.node_changed(name, node, self._all_maintenances())
        self._enqueue_all(before | self._members.around_node(name))

    def _on_node_update(self, old: Obj, new: Obj) -> None:
        if node_signature(old) != node_signature(new):
            self._on_node(new)

    def _on_node_delete(self, node: Obj) -> None:
        name = key_of(node)
        before = self._members.around_node(name)
        self._members.node_changed(name, None, self._all_maintenances())
        self._enqueue_all(before)

    def _on_pod(self, pod: Obj) -> None:
        for node in pod_node_index(pod):
            self._enqueue_all(self._members.around_node(node))

    def _on_pod_update(self, old: Obj, new: Obj) -> None:
        if pod_signature(old) != pod_signature(new):
            self._on_pod(old)
            self._on_pod(new)

    def _request_nodes(self, er: Obj) -> list[str]:
        nodes = eviction_request_node_index(er)
        if nodes:
            return nodes
        found = self._cached_target(er)
        return pod_node_index(found) if found is not None else []

    def _cached_target(self, er: Obj) -> Obj | None:
        """The pod informer's object of the pod the request names (by name: any UID)."""
        pod = ((er.get("spec") or {}).get("target") or {}).get("pod") or {}
        namespace = metadata_of(er).get("namespace")
        if not (namespace and pod.get("name")):
            return None
        return self._pods.store.get(f"{namespace}/{pod['name']}")

    def _on_request(self, er: Obj) -> None:
        for node in self._request_nodes(er):
            self._enqueue_all(self._members.around_node(node))

    def _on_request_update(self, old: Obj, new: Obj) -> None:
        if (
            old.get("spec") != new.get("spec")
            or (old.get("status") or {}).get("conditions")
            != (new.get("status") or {}).get("conditions")
            # status.summary.blockedBy
            or refusal(self._request_view(old)) != refusal(self._request_view(new))
        ):
            self._on_request(new)

    def _created_seen(self, key: str) -> None:
        """The create of request `key` needs no more waiting for."""
        self._created.pop(key, None)
        self._created_by.pop(key, None)

    def _request_seen(self, er: Obj) -> None:
        self._created_seen(key_of(er))

    def _request_gone(self, er: Obj) -> None:
        self._created_seen(key_of(er))
        view = self._request_view(er)
        self._request_view.forget(er)
        self._deleted.pop(str(metadata_of(er).get("uid")), None)
        pod = self._cached_target(er)  # a request is named after its pod's UID
        if view.owned_by_target and pod is not None and metadata_of(pod).get("uid") == name_of(er):
            # most likely garbage-collected with its pod, whose own deletion the pod informer
            # has not brought yet (kept only until it does): see _create_request
            self._gone[key_of(er)] = asyncio.get_running_loop().time()

    def _pod_gone(self, pod: Obj) -> None:
        uid = str(metadata_of(pod).get("uid"))
        self._gone.pop(f"{metadata_of(pod).get('namespace')}/{uid}", None)
        self._deleted_pods.pop(uid, None)
        self._pod_info.forget(pod)

    def _expecting(self, expectations: dict[str, float], key: str) -> float | None:
        """Seconds left of the expectation on `key`, or None."""
        since = expectations.get(key)
        if since is None:
            return None
        left = since + EXPECTATION_TIMEOUT - asyncio.get_running_loop().time()
        if left <= 0:
            del expectations[key]
            return None
        return left

    # -- reconcile ---------------------------------------------------------------------------------

    def _scope(self, key: str) -> tuple[set[str], set[str]]:
        """The maintenances and nodes a decision on `key` takes in."""
        start = {key}
        if self._settings.max_draining_nodes is not None and key in self._in_drain:
            start |= self._in_drain
        return self._members.component(start)

    def _wrote(self, nm: Obj) -> None:
        """We wrote `nm` (the server's answer): expect the informer to bring it."""
        name = key_of(nm)
        rv = str(metadata_of(nm).get("resourceVersion") or "")
        cached = self._maintenances.store.get(name)
        if cached is None or metadata_of(cached).get("resourceVersion") != rv:
            self._written[name] = (rv, asyncio.get_running_loop().time())

    def _writes_unseen(self, names: Iterable[str]) -> float | None:
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

    def inputs(self, key: str) -> Inputs | None:
        """The decision's inputs for maintenance `key` from the caches; None if it is gone."""
        nm = self._maintenances.store.get(key)
        if nm is None:
            return None
        limit = self._settings.max_draining_nodes
        names, node_names = self._scope(key)
        maintenances = [m for n in sorted(names) if (m := self._maintenances.store.get(n))]
        nodes = {n: obj for n in sorted(node_names) if (obj := self._nodes.store.get(n))}
        pods = {n: self._pods.store.by_index("node", n) for n in node_names}
        requests: dict[str, Obj] = {}
        for n in node_names:
            labelled = self._requests.store.by_index("node", n)
            by_name = self._recall(
                n, "labelled requests", labelled, partial(requests_by_name, labelled)
            )
            requests.update(by_name)
            on_node = pods[n]
            uids, keys = self._recall(n, "request keys", on_node, partial(request_keys, on_node))
            for uid, found in zip(uids, map(self._requests.store.get, keys), strict=True):
                if found is not None:
                    requests[uid] = found
        return Inputs(
            maintenance=as_maintenance(nm),
            maintenances=[as_maintenance(m) for m in maintenances],
            nodes=nodes,
            pods=pods,
            eviction_requests=cast("dict[str, EvictionRequest]", requests),  # read, never checked
            now=self._clock(),
            max_draining=limit.slots(len(self._nodes.store)) if limit is not None else None,
            cordon_while_waiting=self._settings.cordon_while_waiting,
            admitting=frozenset(n for n in list(self._admitting) if self._still_admitting(n)),
            drain_deadline=self._settings.drain_deadline,
            deadline_escalation=self._settings.drain_deadline_escalation,
            pod_info=self._pod_info,
            request_view=self._request_view,
            recall=self._recall,
        )

    def _still_admitting(self, node: str) -> bool:
        return self._expecting(self._admitting, node) is not None

    def enqueue(self, key: str) -> None:
        not_before = self._not_before.get(key)
        if not_before is not None:
            delay = not_before - asyncio.get_running_loop().time()
            if delay > 0:
                self.queue.add_after(key, delay)
                return
        self.queue.add(key)

    async def reconcile(self, key: str) -> None:
        if not self._scope(key)[0] - {key}:
            decided = await self._decide_and_store(key)
        else:
            # One resolution spans intersecting maintenances and is stored in each of them, in
            # as many writes: decided side by side, two decisions would each store part of
            # theirs (the other's writes refused) and leave the maintenances' positions out of
            # step. What follows the stored resolution (the EvictionRequests, however many or
            # slow) is done outside, so the others' decisions do not wait for it.
            async with self._joint:
                decided = await self._decide_and_store(key)
        if decided is not None:
            await self._act(*decided)

    async def _decide_and_store(self, key: str) -> tuple[Mapping[str, Any], Actions] | None:
        """Decide on `key` and store the resolution (the maintenances' writes); the stored
        maintenance and the decision's actions, if there is more to do."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        unseen = self._writes_unseen(self._scope(key)[0] | {key})
        if unseen is not None:
            # its informer event enqueues us again; the timeout, should it never come
            self.enqueue_after(key, unseen)
            return None
        inputs = self.inputs(key)
        if inputs is None:
            self._not_before.pop(key, None)
            self._progress_written.pop(key, None)
            return None
        actions = decide(inputs)
        now = loop.time()
        for node in actions.admitted:  # before any await: decisions taken meanwhile count it
            self._admitting[node] = now
        if actions.requeue_after is not None:
            self.enqueue_after(key, actions.requeue_after)
        self._not_before[key] = now + (now - started) * PACING
        if actions.status is not None and progress_only(
            as_map(inputs.maintenance.get("status")), actions.status
        ):
            written = self._progress_written.get(key)
            if written is not None and now - written < PROGRESS_INTERVAL:
                actions = dataclasses.replace(actions, status=None)
                self.enqueue_after(key, written + PROGRESS_INTERVAL - now)
        if actions.idle:
            return None
        try:
            return await self._store(inputs.maintenance, actions), actions
        except BaseException:
            for node in actions.admitted:  # not stored: the next decision admits afresh
                self._admitting.pop(node, None)
            raise

    async def _apply(self, nm: Mapping[str, Any], a: Actions) -> None:
        """All of a decision's actions, in order."""
        await self._act(await self._store(nm, a), a)

    async def _store(self, nm: Mapping[str, Any], a: Actions) -> Mapping[str, Any]:
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
            self._wrote(current)
        await self._each(a.cordon, self._patch_node)
        if a.cordon:
            log.info("%s: cordoned %s", name, ", ".join(p.node for p in a.cordon))
        # The neighbours' share of the one resolution first, our own status last: a neighbour
        # write refused (someone wrote it since our cache saw it) fails this decision before
        # our own progress is stored ahead of theirs, where the others would read it as a
        # floor (targets never go back) that the lagging neighbour has to wait out
        await self._each(a.neighbours, self._write_neighbour)
        if a.status is not None:
            self._progress_written[name] = asyncio.get_running_loop().time()
            current = await self._client.patch_status(
                NODEMAINTENANCES,
                name,
                {
                    "metadata": {"resourceVersion": metadata_of(current).get("resourceVersion")},
                    "status": a.status,
                },
            )
            self._wrote(current)
        return current

    async def _act(self, current: Mapping[str, Any], a: Actions) -> None:
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
        if a.remove_finalizer and (left := self._creates_unseen(name)) is not None:
            # A request we created is not in the cache yet, so this decision could not
            # withdraw it; its informer event decides again (the timeout, should it never come).
            self.enqueue_after(name, left)
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

    def _creates_unseen(self, maintenance: str) -> float | None:
        """Seconds left of the longest expectation on requests `maintenance` created and the
        informer has not brought in yet, or None when there are none."""
        waits = []
        for key, by in list(self._created_by.items()):
            if by != maintenance:
                continue
            left = self._expecting(self._created, key)
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
        gate = asyncio.Semaphore(self._writes)

        async def one(item: T) -> None:
            async with gate:
                await fn(item)

        results = await asyncio.gather(*(one(i) for i in items), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result

    async def _record(self, obj: Mapping[str, Any], events: Iterable[RecordedEvent]) -> None:
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
        self._wrote(written)
        await self._record(written, u.events)

    async def _patch_node(self, p: NodePatch) -> None:
        with contextlib.suppress(NotFound):  # a node that is gone needs no (un)cordon
            await self._client.patch(NODES, p.node, p.to_patch())

    async def _create_request(self, maintenance: str, c: EvictionRequestCreate) -> None:
        key = f"{c.namespace}/{metadata_of(c.body).get('name')}"
        if key in self._requests.store:
            # The decision was taken before the informer brought this request in (its event
            # came while the decision was being applied); that event decides again.
            return
        left = self._expecting(self._created, key)
        if left is not None:
            self.enqueue_after(maintenance, left)  # should its event never come
            return
        if self._expecting(self._gone, key) is not None and not await self._pod_exists(c):
            return  # the pod went with its request; its informer event comes next
        self._gone.pop(key, None)
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
            self._created_seen(key)  # not created: nothing to wait for
            raise
        if key in self._requests.store:  # its event came while the create was under way
            self._created_seen(key)

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
        sent = [d for d in deletes if self._expecting(self._deleted_pods, d.uid) is None]
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
                RecordedEvent(
                    "Warning",
                    "DrainDeadlineEscalated",
                    f"Drain deadline passed: deleted {len(sent)} pods past their disruption "
                    f"budgets (drainDeadlineEscalation DeletePods): {names}",
                ),
            ),
        )

    async def _delete_request(self, maintenance: str, d: EvictionRequestDelete) -> None:
        if d.uid:
            left = self._expecting(self._deleted, d.uid)
            if left is not None:
                self.enqueue_after(maintenance, left)
                return
        with contextlib.suppress(NotFound):
            await self._client.delete(
                EVICTIONREQUESTS,
                d.name,
                d.namespace,
                uid=d.uid or None,
                resource_version=d.resource_version or None,
            )
        cached = self._requests.store.get(f"{d.namespace}/{d.name}")
        if d.uid and cached is not None and metadata_of(cached).get("uid") == d.uid:
            self._deleted[d.uid] = asyncio.get_running_loop().time()
