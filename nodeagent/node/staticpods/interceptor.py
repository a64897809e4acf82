"""The `kubelet.k8s.io` interceptor: stops static pods gracefully by moving their manifests out
of the kubelet's directory when their turn in a drain comes, and puts them back afterwards.

It runs in every agent, for its own node only:

- EvictionRequests of this node (label `nodeagent.io/node=<node>`) whose active interceptor is
  `kubelet.k8s.io`, and where the server serves them the node's upstream Evictions whose
  Active responder is `nodeagent.io/static-pod` (`requests`): if a NodeMaintenance holding the
  node targets the pod (a `Static` drain target covering its priority and labels), the pod's
  manifest is moved aside and the request gets a heartbeat (our entry: startTime,
  heartbeatTime, expectedFinishTime from the pod's grace period, message) until the mirror pod
  is gone, then `completionTime`. A pod that is not targeted is declined (`completionTime` with
  a message) rather than stopped out of order.
- The manifest directory, watched with inotify (watchfiles): a manifest that appears while its
  pod would already be targeted is moved aside at once, with an Event.
- When no maintenance holds the node any more (Complete or deleted), every stashed manifest is
  put back.

It is an ordinary controller (`nodeagent.kube.controller.Controller`) on the node agent's shared
informers, with one worker: one key at a time, so file moves never race each other.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Protocol, TypeVar

from nodeagent.kube.controller import Controller, Result, SharedInformers
from nodeagent.kube.discovery import ask_served
from nodeagent.kube.errors import Conflict, KubeError, NotFound
from nodeagent.kube.events import EventClient, EventRecorder
from nodeagent.kube.informer import ListWatcher
from nodeagent.kube.protocols import StatusPatcher
from nodeagent.kube.resources import (
    EVICTIONREQUESTS,
    EVICTIONS,
    NODEMAINTENANCES,
    NODES,
    Obj,
    Resource,
)
from nodeagent.kube.store import key_of
from nodeagent.model import evictionapi
from nodeagent.model.interceptors.status import InterceptorStatus
from nodeagent.model.shutdown import is_ours
from nodeagent.model.staticpods.journal import Owner
from nodeagent.model.staticpods.manifests import FileId, Manifest, ScanResult
from nodeagent.model.staticpods.outcomes import (
    ManifestChanged,
    RestoreResult,
    StashError,
    StashUnavailable,
)
from nodeagent.model.staticpods.plan import (
    StashPlan,
    find_manifest,
    not_moved_message,
    plan_eviction,
    plan_missing_manifest,
    plan_progress,
    plan_stash,
    plan_stopping,
    unknown_priority_message,
)
from nodeagent.model.staticpods.policy import (
    Coverage,
    EvictionView,
    coverage,
    manifest_pod,
    manifest_priority,
    progress_status,
)
from nodeagent.model.times import Clock, utcnow
from nodeagent.node.dirwatch import watch_directory
from nodeagent.node.staticpods.fsops import DirHandle
from nodeagent.node.staticpods.manifestfiles import scan_manifest_dir
from nodeagent.node.staticpods.requests import NodeRequests
from nodeagent.node.staticpods.stash import Stash

__all__ = ["PRIORITYCLASSES", "StaticPodClient", "StaticPodInterceptor"]

log = logging.getLogger(__name__)

PRIORITYCLASSES = Resource(
    "scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", namespaced=False
)
_SWEEP = "sweep"
T = TypeVar("T")


class StaticPodClient(ListWatcher, EventClient, StatusPatcher, Protocol):
    """The part of `KubeClient` the static-pod interceptor needs."""


class StaticPodInterceptor(Controller):
    """Keys: `sweep` for the manifest directory, those of `NodeRequests` for requests."""

    expected_errors = (KubeError, StashError, OSError)

    def __init__(
        self,
        client: StaticPodClient,
        informers: SharedInformers,
        stash: Stash,
        events: EventRecorder,
        *,
        node_name: str,
        boot_id: str,
        heartbeat_interval: float = 60.0,
        resync_interval: float = 60.0,
        now: Clock = utcnow,
        eviction_api: str = evictionapi.AUTO,
    ) -> None:
        """`stash` is opened (and recovered) by `run`; it names the manifest directory.
        `informers` are the node agent's, run by the caller."""
        self._client = client
        self._stash = stash
        self._events = events
        self._node_name = node_name
        self._boot_id = boot_id
        self._heartbeat = timedelta(seconds=heartbeat_interval)
        self._resync = resync_interval
        self._now = now
        self._eviction_api = eviction_api
        # no pods: node agents may not read them (the requests and manifests say enough)
        self._requests = NodeRequests(informers, node_name)
        self._maintenances = informers.informer(NODEMAINTENANCES)
        self._nodes = informers.informer(NODES, field_selector=f"metadata.name={node_name}")
        self._priority_classes = informers.informer(PRIORITYCLASSES)
        super().__init__("static-pods", informers=[self._priority_classes], workers=1)
        self.enqueue_on(self._requests.crd, NodeRequests.crd_keys)
        self.enqueue_on(self._maintenances, self._on_cluster_change)
        self.enqueue_on(self._nodes, self._on_cluster_change)
        self._stash_open = False
        self._known: dict[str, FileId] | None = None  # manifests seen by the last sweep
        self._warned: dict[str, str] = {}  # subject -> last warning, so each is reported once
        self.watching = asyncio.Event()
        """Set once the manifest directory is watched and the first sweep is queued."""

    @property
    def manifest_dir(self) -> Path:
        return self._stash.manifest_dir

    # --- running -----------------------------------------------------------------------------

    async def run(self) -> None:
        """Serve the queue, watch the manifest directory and sweep it every `resync_interval`
        once the informers have synced; until cancelled."""
        upstream = None
        # `eviction.api` as the controllers read it: with `nodeagent`, no upstream Eviction is
        # responded to; otherwise the node's, where the server serves them (never waited for:
        # the requests on our CRD must not wait for the upstream API)
        wanted = evictionapi.asks_server(self._eviction_api)
        if wanted and await ask_served(self._client, EVICTIONS):
            upstream = self._requests.watch_upstream(self._client)
            self.enqueue_on(upstream, NodeRequests.upstream_keys)
        try:
            async with asyncio.TaskGroup() as tg:
                if upstream is not None:
                    tg.create_task(upstream.run(), name=f"{self.name} evictions")
                tg.create_task(super().run(), name=f"{self.name} workers")
                await self.wait_synced()
                watch = watch_directory(
                    lambda: self._stash.manifest_dir,
                    ready=self.watching,
                    changed=functools.partial(self.enqueue, _SWEEP),
                    failed=self._watch_failed,
                )
                tg.create_task(watch, name=f"{self.name} manifest watch")
                tg.create_task(self._resync_loop(), name=f"{self.name} resync")
                self.enqueue(_SWEEP)
        finally:
            self._stash.close()
            self._stash_open = False

    def _on_cluster_change(self, _: Obj) -> list[str]:
        return [_SWEEP, *self._requests.keys()]

    async def _resync_loop(self) -> None:
        while True:
            await asyncio.sleep(self._resync)
            self.enqueue(_SWEEP)

    def _watch_failed(self, directory: Path, e: OSError) -> None:
        self._warn_once("watch", f"cannot watch manifest directory {directory}: {e}")

    async def reconcile(self, key: str) -> Result | None:
        try:
            if key == _SWEEP:
                await self._sweep()
                return None
            return await self._reconcile_eviction(key)
        except StashUnavailable:
            # e.g. a directory was replaced: open the stash afresh next time
            self._stash.close()
            self._stash_open = False
            raise

    # --- helpers -----------------------------------------------------------------------------

    async def _fs(self, fn: Callable[[], T]) -> T:
        """Run a blocking file operation in a thread. If we are cancelled meanwhile, the
        operation still finishes before we stop (it uses the stash's directory handles)."""
        future = asyncio.ensure_future(asyncio.to_thread(fn))
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                await future
            raise

    async def _open_stash(self) -> bool:
        if self._stash_open:
            return True
        try:
            await self._fs(self._stash.open)
            actions = await self._fs(self._stash.recover)
        except StashUnavailable as e:
            if self._warn_once("stash", str(e)):
                await self._events.warning(self._node_obj(), "StaticPodStashUnavailable", str(e))
            return False
        self._warned.pop("stash", None)
        for action in actions:
            if action.action == "problem":
                await self._events.warning(
                    self._node_obj(), "StaticPodStashProblem", action.message
                )
        self._stash_open = True
        return True

    def _node_obj(self) -> Obj:
        node = self._nodes.store.get(self._node_name)
        if node is not None:
            return node
        return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": self._node_name}}

    def _coverage(self) -> Coverage:
        cov = coverage(
            self._maintenances.store.list(),
            self._nodes.store.get(self._node_name),
            self._node_name,
            self._boot_id,
        )
        for problem in cov.problems:
            self._warn_once("targets:" + problem, problem)
        return cov

    def _warn_once(self, subject: str, message: str) -> bool:
        if self._warned.get(subject) == message:
            return False
        self._warned[subject] = message
        log.warning("static pods: %s", message)
        return True

    def _scan(self) -> ScanResult:
        with DirHandle(self._stash.manifest_dir) as directory:
            return scan_manifest_dir(directory)

    def _priority_class_map(self) -> dict[str, Obj]:
        return {key_of(pc): pc for pc in self._priority_classes.store.list()}

    # --- the manifest directory --------------------------------------------------------------

    async def _sweep(self) -> None:
        if not await self._open_stash():
            return
        cov = self._coverage()
        if not cov.holds:
            results = await self._fs(self._stash.restore_all)
            await self._report_restores(results)
            scan = await self._fs(self._scan)
            self._known = {m.path.name: m.file_id for m in scan.manifests}
            await self._report_problems(scan)
            return
        scan = await self._fs(self._scan)
        if self._known is None:
            # what is there at start-up is not "appearing": EvictionRequests drive those pods
            self._known = {m.path.name: m.file_id for m in scan.manifests}
        else:
            await self._move_new_manifests(scan, cov)
        await self._report_problems(scan)

    async def _move_new_manifests(self, scan: ScanResult, cov: Coverage) -> None:
        """Move aside every manifest that appeared (or changed) since the last sweep and whose
        pod the drain targets already cover."""
        assert self._known is not None
        known: dict[str, FileId] = {}
        classes = self._priority_class_map()
        retry = False
        for manifest in scan.manifests:
            name = manifest.path.name
            if self._known.get(name) == manifest.file_id:
                known[name] = manifest.file_id
                continue
            priority = manifest_priority(manifest.pod, classes)
            if priority is None:
                self._warn_once(
                    "priority:" + str(manifest.path), unknown_priority_message(manifest.path)
                )
                known[name] = manifest.file_id
                continue
            nm = cov.covering(manifest_pod(manifest.pod, priority))
            if nm is None:
                known[name] = manifest.file_id
                continue
            nm_name = str(nm["metadata"]["name"])
            owner = Owner(nm_name, is_ours(nm, self._node_name), self._node_name)
            try:
                entry = await self._fs(functools.partial(self._stash.stash, manifest, owner))
            except ManifestChanged as e:
                log.info("static pods: %s; looking again", e)
                retry = True
                continue
            except StashError as e:
                await self._events.warning(nm, "StaticPodManifestNotMoved", f"{manifest.path}: {e}")
                raise
            ns, pod_name = manifest.mirror_key(self._node_name)
            await self._events.normal(
                nm,
                "StaticPodManifestMovedAside",
                f"{manifest.path} (static pod {ns}/{pod_name}) appeared while the drain targets "
                f"of node {self._node_name} already cover it; moved aside to "
                f"{self._stash.stash_dir / entry.payload_name}",
            )
        self._known = known
        if retry:
            self.enqueue(_SWEEP)

    async def _report_restores(self, results: list[RestoreResult]) -> None:
        node = self._node_obj()
        for r in results:
            subject = "restore:" + r.entry.id
            if r.outcome in ("restored", "identical"):
                self._warned.pop(subject, None)
                await self._events.normal(node, "StaticPodManifestRestored", r.message)
            elif self._warn_once(subject, r.message):
                reason = (
                    "StaticPodManifestConflict"
                    if r.outcome == "conflict"
                    else "StaticPodRestoreFailed"
                )
                await self._events.warning(node, reason, r.message)

    async def _report_problems(self, scan: ScanResult) -> None:
        current = {"problem:" + str(p.path) for p in scan.problems}
        for subject in [s for s in self._warned if s.startswith("problem:")]:
            if subject not in current:
                del self._warned[subject]
        for problem in scan.problems:
            if self._warn_once("problem:" + str(problem.path), str(problem)):
                await self._events.warning(
                    self._node_obj(), "StaticPodManifestInvalid", str(problem)
                )

    # --- EvictionRequests --------------------------------------------------------------------

    async def _reconcile_eviction(self, key: str) -> Result | None:
        """Carry out the plans of `plan.py`: read the cache, the manifest directory, the stash
        and (when the cache may lag) the maintenances from the API; move the manifest aside and
        write our entry."""
        view = self._requests.view(key)
        if view is None:
            return None
        now = self._now()
        plan = plan_eviction(view, node_name=self._node_name, now=now)
        if plan.action == "finish" and plan.entry is not None:
            await self._write(view, plan.entry)
        if plan.action != "stop_pod":
            return None
        return await self._stop_static_pod(key, view, now)

    async def _stop_static_pod(self, key: str, view: EvictionView, now: datetime) -> Result | None:
        """Find the request's manifest, decide whether to move it aside and for whom (or to
        decline), and do it."""
        if not await self._open_stash():
            return await self._progress(
                view, None, now, f"cannot move manifests: {self._warned.get('stash')}"
            )
        scan = await self._fs(self._scan)
        manifest = find_manifest(scan, view, self._node_name)
        if manifest is None:
            listing = await self._fs(self._stash.contents)
            missing = plan_missing_manifest(
                view,
                scan,
                listing,
                node_name=self._node_name,
                manifest_dir=self._stash.manifest_dir,
            )
            return await self._not_stopped(key, view, now, missing.message, warn=missing.warn)
        priority = manifest_priority(manifest.pod, self._priority_class_map())
        if priority is None:
            return await self._not_stopped(key, view, now, unknown_priority_message(manifest.path))
        stash = await self._plan_stash(view, manifest_pod(manifest.pod, priority), now)
        if stash.action == "decline" and stash.entry is not None:
            await self._events.normal(view.pod_ref, "StaticPodEvictionDeclined", stash.message)
            await self._write(view, stash.entry)
            return None
        if stash.owner is None:
            return None
        return await self._move_aside(key, view, manifest, stash.owner, now)

    async def _plan_stash(
        self, view: EvictionView, pod: Mapping[str, Any], now: datetime
    ) -> StashPlan:
        """`plan_stash` on the cache; if that may lag behind the maintenance that led to this
        request, again on the maintenances listed from the API."""
        plan = functools.partial(plan_stash, view, pod, node_name=self._node_name, now=now)
        stash = plan(self._coverage(), listed=False)
        if stash.action != "ask_api":
            return stash
        listed = await self._client.list(NODEMAINTENANCES)
        cov = coverage(
            listed.get("items") or [],
            self._nodes.store.get(self._node_name),
            self._node_name,
            self._boot_id,
        )
        return plan(cov, listed=True)

    async def _move_aside(
        self, key: str, view: EvictionView, manifest: Manifest, owner: Owner, now: datetime
    ) -> Result:
        """Move the manifest aside so that the kubelet stops the pod; heartbeat from then on."""
        try:
            entry = await self._fs(functools.partial(self._stash.stash, manifest, owner))
        except ManifestChanged as e:
            log.info("static pods: %s; looking again", e)
            return Result(requeue_after=0.0)  # now
        except StashError as e:
            heartbeat = await self._not_stopped(key, view, now, not_moved_message(manifest.path, e))
            if heartbeat.requeue_after is not None:  # the raise backs off; a heartbeat does not
                self.enqueue_after(key, heartbeat.requeue_after)
            raise
        self._warned.pop(key, None)
        if self._known is not None:
            self._known.pop(manifest.path.name, None)
        stopping = plan_stopping(manifest.path, self._stash.stash_dir / entry.payload_name, owner)
        await self._events.normal(view.pod_ref, "StaticPodStopping", stopping.event)
        return await self._progress(view, manifest.pod, now, stopping.progress, start=True)

    async def _not_stopped(
        self, key: str, view: EvictionView, now: datetime, message: str, *, warn: bool = True
    ) -> Result:
        """Why the pod is not being stopped: in our entry, and (when `warn`) in an Event, once
        per message."""
        if warn and self._warn_once(key, message):
            await self._events.warning(view.pod_ref, "StaticPodNotStopped", message)
        return await self._progress(view, None, now, message)

    async def _progress(
        self,
        view: EvictionView,
        pod: Mapping[str, Any] | None,
        now: datetime,
        message: str,
        *,
        start: bool = False,
    ) -> Result:
        """Heartbeat: write our entry (if anything changed or a heartbeat is due), then look
        again after the heartbeat interval. `pod`: the manifest's pod, whose grace period
        starts when `start`."""
        progress = plan_progress(
            view, pod, now, message, heartbeat_every=self._heartbeat, start=start
        )
        if progress.write:
            await self._write(view, progress.entry)
        return Result(requeue_after=progress.recheck_in)

    async def _write(self, view: EvictionView, entry: InterceptorStatus) -> None:
        try:
            patch = progress_status(view, entry)
            if view.upstream:
                await self._client.patch_status(EVICTIONS, view.name, patch, view.namespace)
            else:
                await self._client.patch_status(EVICTIONREQUESTS, view.name, patch, view.namespace)
        except NotFound:
            return
        except Conflict:
            # we read a stale request: look again once the informer has the new one
            self.queue.add_rate_limited(NodeRequests.key(view))
            return
        log.info(
            "%s %s (pod %s): %s%s",
            "Eviction" if view.upstream else "EvictionRequest",
            view.key,
            view.pod_name,
            entry.message,
            " (completed)" if entry.completion_time is not None else "",
        )
