"""The static-pod interceptor's decisions about an EvictionRequest, pure: whether it acts at
all, finishes at once (the pod is gone, or is not a static pod), or goes on to the manifest
directory (which `interceptor.py` reads and moves, I/O this module never does); then, from what
it read there (the scan, the stash's contents, the maintenances covering the node), what to say
when the manifest is missing, whether to move it aside and for whom or to decline, and which
entry to write while the kubelet stops the pod.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from nodeagent.model.interceptors.heartbeats import next_heartbeat_in, report_progress
from nodeagent.model.interceptors.status import InterceptorStatus
from nodeagent.model.names import KUBELET_INTERCEPTOR
from nodeagent.model.shutdown import is_ours
from nodeagent.model.staticpods.journal import Owner, State
from nodeagent.model.staticpods.manifests import Manifest, ScanResult
from nodeagent.model.staticpods.outcomes import StashListing
from nodeagent.model.staticpods.policy import Coverage, EvictionView, expected_finish

__all__ = [
    "EvictionPlan",
    "MissingManifest",
    "Progress",
    "StashPlan",
    "Stopping",
    "find_manifest",
    "is_mirror_name",
    "not_moved_message",
    "plan_eviction",
    "plan_missing_manifest",
    "plan_progress",
    "plan_stash",
    "plan_stopping",
    "stashed_payload",
    "unknown_priority_message",
]


def is_mirror_name(pod_name: str, node_name: str) -> bool:
    """Whether `pod_name` can be the mirror pod of a static pod of `node_name`: the kubelet
    names each `<static pod name>-<node name, lower case>`."""
    suffix = "-" + node_name.lower()
    return pod_name.endswith(suffix) and len(pod_name) > len(suffix)


@dataclass(frozen=True)
class EvictionPlan:
    """``skip``: nothing to do; ``finish``: write ``entry`` (with completionTime) and stop;
    ``stop_pod``: the request's static pod is to be stopped, find and move its manifest."""

    action: Literal["skip", "finish", "stop_pod"]
    entry: InterceptorStatus | None = None


def plan_eviction(view: EvictionView, *, node_name: str, now: datetime) -> EvictionPlan:
    """The pod itself is never read (node agents may not read pods): the request says when it
    is gone (the EvictionRequest controller sets Evicted), its name whether it can be a static
    pod of this node, and the manifest the rest."""
    if view.completed or view.frozen or (view.entry is None and (view.finished or not view.active)):
        return EvictionPlan("skip")  # done, or not our turn (and we never started)
    pod = f"{view.namespace}/{view.pod_name}"
    if view.finished:
        message = (
            f"static pod {pod} is gone"
            if view.evicted
            else f"the eviction of static pod {pod} was canceled"
        )
    elif not is_mirror_name(view.pod_name, node_name):
        message = (
            f"declined: {pod} is not a static (mirror) pod of node {node_name}; "
            f"{KUBELET_INTERCEPTOR} only stops static pods"
        )
    else:
        return EvictionPlan("stop_pod")
    return EvictionPlan("finish", _finished(view, now, message))


def _ours(view: EvictionView) -> InterceptorStatus:
    """Our entry as the request has it, or a new one."""
    return view.entry or InterceptorStatus(KUBELET_INTERCEPTOR)


def _finished(view: EvictionView, now: datetime, message: str) -> InterceptorStatus:
    """Our entry completed with ``message``: startTime, heartbeatTime and expectedFinishTime
    kept where set (see `InterceptorStatus.complete`)."""
    return _ours(view).complete(now, message)


# --- the manifest ----------------------------------------------------------------------------


def find_manifest(scan: ScanResult, view: EvictionView, node_name: str) -> Manifest | None:
    """The manifest in the directory that defines the request's (mirror) pod."""
    return scan.by_mirror_key(node_name).get((view.namespace, view.pod_name))


def stashed_payload(listing: StashListing, view: EvictionView) -> Path | None:
    """Where the stash keeps the request's pod's manifest moved aside (the latest entry still
    stashed), if it does."""
    stashed = [
        s
        for s in listing.entries
        if s.entry.pod_key == (view.namespace, view.pod_name) and s.entry.state is State.STASHED
    ]
    return stashed[-1].payload if stashed else None


@dataclass(frozen=True)
class MissingManifest:
    """No manifest in the directory defines the pod: report ``message`` as progress; ``warn``:
    it is a problem (a warning Event, once), not a manifest moved aside already."""

    message: str
    warn: bool


def plan_missing_manifest(
    view: EvictionView,
    scan: ScanResult,
    listing: StashListing,
    *,
    node_name: str,
    manifest_dir: Path,
) -> MissingManifest:
    payload = stashed_payload(listing, view)
    pod = f"{view.namespace}/{view.pod_name}"
    if payload is not None:
        return MissingManifest(
            f"manifest moved aside to {payload}; waiting for the kubelet to stop static pod {pod}",
            warn=False,
        )
    base_name = view.pod_name.removesuffix("-" + node_name.lower())
    problem = scan.problem_for(view.namespace, base_name)
    if problem is not None:
        return MissingManifest(f"cannot stop static pod {pod}: {problem}", warn=True)
    return MissingManifest(
        f"cannot stop static pod {pod}: no manifest in {manifest_dir} defines it", warn=True
    )


# --- coverage --------------------------------------------------------------------------------


@dataclass(frozen=True)
class StashPlan:
    """``stash``: move the manifest aside for ``owner``; ``ask_api``: no maintenance in the
    cache covers the pod, but the cache may lag behind the one that led to this request - plan
    again with the maintenances listed from the API server; ``decline``: finish with ``entry``
    (completionTime, ``message``), the pod is not stopped out of order."""

    action: Literal["stash", "ask_api", "decline"]
    owner: Owner | None = None
    message: str = ""
    entry: InterceptorStatus | None = None


def plan_stash(
    view: EvictionView,
    pod: Mapping[str, Any],
    cov: Coverage,
    *,
    listed: bool,
    node_name: str,
    now: datetime,
) -> StashPlan:
    """``cov``: the maintenances holding the node, from the cache or (``listed``) the API
    server."""
    nm = cov.covering(pod)
    if nm is not None:
        return StashPlan(
            "stash", Owner(str(nm["metadata"]["name"]), is_ours(nm, node_name), node_name)
        )
    if not listed:
        return StashPlan("ask_api")
    priority = (pod.get("spec") or {}).get("priority", 0)
    message = (
        f"declined: no NodeMaintenance drain target of node {node_name} covers "
        f"static pod {view.namespace}/{view.pod_name} (priority {priority}; targets: "
        f"{cov.describe_targets()}); it is not stopped out of order"
    )
    return StashPlan("decline", message=message, entry=_finished(view, now, message))


# --- what to write ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Stopping:
    """The manifest is moved aside: the ``event`` (StaticPodStopping) and the ``progress``
    message of our entry."""

    event: str
    progress: str


def plan_stopping(manifest_path: Path, payload: Path, owner: Owner) -> Stopping:
    return Stopping(
        event=(
            f"moved manifest {manifest_path} aside to {payload} for NodeMaintenance "
            f"{owner.maintenance}"
        ),
        progress=(
            f"manifest {manifest_path} moved aside to {payload} for NodeMaintenance "
            f"{owner.maintenance}; waiting for the kubelet to stop the pod"
        ),
    )


def unknown_priority_message(manifest_path: Path) -> str:
    return (
        f"{manifest_path}: unknown priorityClassName; cannot tell whether it is targeted, so it "
        "is left in place"
    )


def not_moved_message(manifest_path: Path, error: Exception) -> str:
    return f"cannot move {manifest_path} aside: {error}"


@dataclass(frozen=True)
class Progress:
    """Our entry while the pod is being stopped: write ``entry`` when ``write`` (something
    changed, or a heartbeat is due), then look again in ``recheck_in`` seconds."""

    entry: InterceptorStatus
    write: bool
    recheck_in: float


def plan_progress(
    view: EvictionView,
    pod: Mapping[str, Any] | None,
    now: datetime,
    message: str,
    *,
    heartbeat_every: timedelta,
    start: bool = False,
) -> Progress:
    """``start``: the manifest was moved aside just now, so the kubelet's grace period (the
    expectedFinishTime) starts now; it is set too when the entry has none yet. The heartbeat
    moves at most every ``heartbeat_every`` (`report_progress`); the next look is due when it
    may move again."""
    previous = _ours(view)
    entry = report_progress(previous, message, now, heartbeat_every) or previous
    if start or entry.expected_finish_time is None:
        entry = replace(entry, expected_finish_time=expected_finish(now, pod))
    # no margin: heartbeatTime is written in micro-seconds; an upstream Eviction stores it in
    # whole seconds (v1.Time), which only makes the stored one earlier: the look is never early
    return Progress(entry, entry != view.entry, next_heartbeat_in(entry, now, heartbeat_every))
