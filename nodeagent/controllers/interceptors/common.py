"""What the cluster-side interceptors share: their client, reading the target pod from the cache,
and writing their own ``status.interceptors[]`` entry with optimistic concurrency."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Protocol

from nodeagent.controllers.interceptors.apis import CRD, RequestApi
from nodeagent.kube.controller import Result
from nodeagent.kube.errors import Conflict, NotFound
from nodeagent.kube.protocols import Deleter, Getter, Lister, Patcher, StatusPatcher
from nodeagent.kube.resources import PODS, Obj
from nodeagent.kube.store import Store
from nodeagent.model.bodies import metadata_of, uid_of
from nodeagent.model.interceptors.heartbeats import (
    heartbeat_interval,
    next_heartbeat_in,
    report_progress,
)
from nodeagent.model.interceptors.plans import WAITING
from nodeagent.model.interceptors.requests import EvictionRequestView
from nodeagent.model.interceptors.status import InterceptorStatus
from nodeagent.model.times import Clock, utcnow

__all__ = [
    "WAITING",
    "Clock",
    "InterceptorClient",
    "Update",
    "complete",
    "completion_message",
    "progress",
    "report",
    "target_pod",
    "utcnow",
]

log = logging.getLogger(__name__)


class InterceptorClient(Getter, Lister, Patcher, StatusPatcher, Deleter, Protocol):
    """The part of `KubeClient` the interceptors need."""


def completion_message(previous: str, view: EvictionRequestView) -> str:
    """The final message: what the interceptor did (its last progress message), and that the
    pod is gone."""
    gone = f"pod {view.target_name} with UID {view.target_uid} is gone."
    if previous.endswith(WAITING):
        return previous.removesuffix(WAITING) + gone
    if WAITING in previous:  # a remark follows the progress
        head, _, tail = previous.partition(WAITING)
        return head + gone + tail
    return gone[0].upper() + gone[1:]


async def target_pod(
    client: InterceptorClient, pods: Store, view: EvictionRequestView
) -> Obj | None:
    """The request's pod: that name *and* that UID (a pod recreated under the same name is
    another pod), or None when it is gone. From the cache; a pod missing there is looked up on
    the API server, as the pod informer may lag behind the request's."""
    pod = pods.get(f"{view.namespace}/{view.target_name}")
    if pod is not None and uid_of(pod) == view.target_uid:
        return pod
    try:
        pod = await client.get(PODS, view.target_name, view.namespace)
    except NotFound:
        return None
    return pod if uid_of(pod) == view.target_uid else None


Update = Callable[[InterceptorStatus], "InterceptorStatus | None"]
"""Computes an interceptor's new entry from its current one (None: nothing to write)."""


async def report(
    client: InterceptorClient,
    request: Obj,
    name: str,
    update: Update,
    api: RequestApi = CRD,
    attempts: int = 5,
) -> Obj | None:
    """Write interceptor ``name``'s entry (of ``status.interceptors``, or its responder's of an
    upstream Eviction's ``status.responders``) as ``update`` makes it from the current one (the
    rest untouched), onto the version read. When the request changed meanwhile, read it again
    and recompute (client-go's RetryOnConflict), as long as it is still this interceptor's
    turn. Returns the written request; None when nothing needed writing, or the request is
    gone, canceled or no longer ours (after Evicted, the active interceptor may still report
    its completion)."""
    md = metadata_of(request)
    obj_name, namespace = str(md.get("name")), md.get("namespace")
    for attempt in range(attempts):
        view = api.read(request)
        if view.canceled or view.active != name:
            log.debug("interceptor %s: request %s/%s moved on", name, namespace, obj_name)
            return None
        entry = update(view.entry(name))
        if entry is None:
            return None
        md = metadata_of(request)
        patch = {
            "metadata": {"resourceVersion": md.get("resourceVersion")},
            "status": api.entries_patch(request.get("status") or {}, entry),
        }
        try:
            return await client.patch_status(api.resource, obj_name, patch, namespace)
        except NotFound:
            return None
        except Conflict:
            if attempt + 1 == attempts:
                raise
        try:
            request = await client.get(api.resource, obj_name, namespace)
        except NotFound:
            return None
    return None


async def complete(
    client: InterceptorClient, request: Obj, name: str, now: datetime, api: RequestApi = CRD
) -> InterceptorStatus | None:
    """Set ``completionTime`` (the pod is gone), keeping what the last message said was done.
    Returns the entry written, or None."""
    view = api.read(request)

    def done(entry: InterceptorStatus) -> InterceptorStatus | None:
        if entry.completion_time is not None:
            return None
        return entry.complete(now, completion_message(entry.message, view))

    written = await report(client, request, name, done, api)
    return api.read(written).entry(name) if written is not None else None


async def progress(
    client: InterceptorClient,
    request: Obj,
    name: str,
    message: str,
    now: datetime,
    deadline: timedelta,
    minimum: timedelta,
    api: RequestApi = CRD,
) -> Result | None:
    """Report ``message`` (heartbeating when due, see `report_progress`). Returns when to look
    again (the entry's next heartbeat), or None when the request moved on (its watch event
    brings the caller back)."""
    every = heartbeat_interval(deadline, minimum)
    stored = api.read(request).entry(name)
    if report_progress(stored, message, now, every) is not None:
        written = await report(
            client, request, name, lambda entry: report_progress(entry, message, now, every), api
        )
        if written is None:
            return None
        stored = api.read(written).entry(name)
    return Result(requeue_after=next_heartbeat_in(stored, now, every))
