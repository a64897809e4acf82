"""The evictionrequest-controller of `lifecycle.k8s.io` (leader only): one Eviction per target
pod, moved on by :func:`nodeagent.model.lifecycle.eviction.decide`. Keys are
``namespace/pod-UID``: every request and Eviction of one pod is decided together."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, Protocol

from nodeagent.kube.caswrite import CasClient, CasWriter
from nodeagent.kube.controller import Controller, Result, SharedInformers
from nodeagent.kube.errors import AlreadyExists, NotFound
from nodeagent.kube.protocols import Creator
from nodeagent.kube.resources import EVICTIONS, PODS, UPSTREAM_EVICTIONREQUESTS, Obj
from nodeagent.kube.store import key_of
from nodeagent.kube.workqueue import WorkQueueMetrics
from nodeagent.model.bodies import mapping, metadata_of
from nodeagent.model.lifecycle.eviction import (
    SERVER_HEARTBEAT_DEADLINE,
    EvictionPlan,
    Target,
    decide,
    target_index,
)
from nodeagent.model.lifecycle.evictor import EvictorTurn, active_evictor, with_entry
from nodeagent.model.lifecycle.ourresponders import ResponderNames, our_responders
from nodeagent.model.lifecycle.succession import pod_name_index
from nodeagent.model.times import Clock, utcnow

__all__ = ["EvictionClient", "LifecycleEvictionController"]

NAME_TAKEN_RETRY = 1.0
"""Seconds before a turn whose new Eviction's name was taken by one the informer has not
brought yet (ours, made by the turn before, or another's) is taken again."""


class EvictionClient(Creator, CasClient, Protocol):
    """The part of `KubeClient` the controller needs."""


class EvictorReports(Protocol):
    """The imperative evictor, which runs beside this controller (:class:`ImperativeEvictor`)."""

    def report(self, eviction: Mapping[str, Any]) -> EvictorTurn | None: ...


def _target(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return mapping(mapping(mapping(obj, "spec"), "target"), "pod")


class LifecycleEvictionController(Controller):
    """Reconciles each target pod's Eviction from informers of upstream EvictionRequests,
    Evictions and pods. `names`: our interceptors as responders (a new Eviction lists those
    of its pod's that have an upstream name); `evictor`: the imperative evictor, whose first words
    as it becomes Active this controller writes with its own (one write, not two)."""

    def __init__(
        self,
        client: EvictionClient,
        informers: SharedInformers,
        *,
        names: ResponderNames | None = None,
        evictor: EvictorReports | None = None,
        heartbeat_deadline: float = SERVER_HEARTBEAT_DEADLINE.total_seconds(),
        clock: Clock = utcnow,
        workers: int = 4,
        queue_metrics: WorkQueueMetrics | None = None,
        name: str = "evictions",
    ) -> None:
        self.requests = informers.informer(
            UPSTREAM_EVICTIONREQUESTS, indexers={"target": target_index}
        )
        self.evictions = informers.informer(
            EVICTIONS, indexers={"target": target_index, "pod-name": pod_name_index}
        )
        self.pods = informers.informer(PODS)
        super().__init__(
            name,
            informers=[self.requests, self.evictions, self.pods],
            workers=workers,
            metrics=queue_metrics,
        )
        self._client = client
        self._clock = clock
        self._deadline = timedelta(seconds=heartbeat_deadline)
        self._names = names or ResponderNames(())
        self._evictor = evictor
        # a target is decided on again once the informer shows our last status write of its
        # Evictions: decided on the version it replaced, the next write is refused
        self._writes = CasWriter(client, EVICTIONS, self.evictions.store)
        self.evictions.add_handler(
            self._writes.seen, lambda _, new: self._writes.seen(new), self._eviction_gone
        )
        self.enqueue_on(self.requests, target_index)
        self.enqueue_on(self.evictions, target_index)
        self.enqueue_on(self.pods, self._keys_for_pod)
        # when each target was seen deleted: its Active responder gets upstream's delay after
        # that to report its completion (keys of targets with requests only; dropped with them)
        self._gone_at: dict[str, datetime] = {}
        self.pods.add_handler(None, None, self._seen_gone)

    def _keys_for_pod(self, pod: Obj) -> Iterable[str]:
        md = metadata_of(pod)
        key = f"{md.get('namespace')}/{md.get('uid')}"
        return [key] if self.requests.store.index_keys("target", key) else []

    def _eviction_gone(self, eviction: Obj) -> None:
        self._writes.gone(key_of(eviction))

    def _seen_gone(self, pod: Obj) -> None:
        for key in self._keys_for_pod(pod):
            self._gone_at.setdefault(key, self._clock())

    async def reconcile(self, key: str) -> Result | None:
        namespace, _, uid = key.partition("/")
        requests = self.requests.store.by_index("target", key)
        evictions = self.evictions.store.by_index("target", key)
        named = next((_target(o).get("name") for o in (*requests, *evictions)), None)
        if not isinstance(named, str):
            self._gone_at.pop(key, None)
            return None  # nothing of this pod is left
        if (unseen := self._writes.longest(key_of(e) for e in evictions)) is not None:
            return Result(unseen)  # its informer event comes first, most likely
        pod = self.pods.store.get(f"{namespace}/{named}")
        plan = decide(
            Target(namespace, named, uid),
            requests,
            evictions,
            pod,
            self._clock(),
            self._deadline,
            our_responders(pod, self._names),
            self._gone_at.get(key),
            self.evictions.store.by_index("pod-name", f"{namespace}/{named}"),
        )
        plan = self._with_evictor_start(plan, evictions)
        if not await self._apply(namespace, plan):
            return Result(NAME_TAKEN_RETRY)
        return Result(plan.requeue_after) if plan.requeue_after is not None else None

    def _with_evictor_start(self, plan: EvictionPlan, evictions: Sequence[Obj]) -> EvictionPlan:
        """`plan` with the evictor's first words where it makes it Active (held back by a
        budget, say), which the evictor would write next otherwise."""
        write = plan.status
        if self._evictor is None or write is None:
            return plan
        was = next((e for e in evictions if metadata_of(e).get("name") == write.name), None)
        if was is None or active_evictor(was) is not None:
            return plan
        planned = {**was, "status": write.status}
        turn = self._evictor.report(planned)
        if turn is None or turn.entry is None or turn.entry.get("completionTime"):
            return plan  # calls at once, or done at once: the evictor's own turn
        status = mapping(with_entry(planned, turn.entry), "status")
        return replace(plan, status=replace(write, status=dict(status)))

    async def _apply(self, namespace: str, plan: EvictionPlan) -> bool:
        """Carries `plan` out; False if its new Eviction's name was taken."""
        for bad in plan.invalid:
            await self._write_status(namespace, bad.name, bad.resource_version, bad.status)
        if plan.create is not None:
            try:
                await self._client.create(EVICTIONS, plan.create, namespace)
            except AlreadyExists:
                return False
        if plan.status is not None:
            s = plan.status
            await self._write_status(namespace, s.name, s.resource_version, s.status)
        if plan.metadata is not None:
            name, patch = plan.metadata
            await self._client.patch(EVICTIONS, name, patch, namespace)
        for r in plan.requests:
            with contextlib.suppress(NotFound):  # deleted meanwhile: nothing to tell it
                await self._client.patch_status(
                    UPSTREAM_EVICTIONREQUESTS, r.name, {"status": r.status}, namespace
                )
        return True

    async def _write_status(
        self, namespace: str, name: str, resource_version: str, status: Obj
    ) -> None:
        # at the version decided from: a responder's heartbeat written meanwhile is a 409 and a
        # new decision, never overwritten (merge patches replace whole lists)
        key = f"{namespace}/{name}"
        await self._writes.patch(key, {"status": status}, resource_version, status=True)
