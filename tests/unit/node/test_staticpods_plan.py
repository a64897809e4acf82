"""The static-pod interceptor's decisions about an EvictionRequest, pure."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from nodeagent.model.interceptors.status import InterceptorStatus
from nodeagent.model.names import KUBELET_INTERCEPTOR, MIRROR_ANNOTATION
from nodeagent.model.staticpods.journal import JournalEntry, Owner, State
from nodeagent.model.staticpods.manifests import FileId, Manifest, ManifestProblem, ScanResult
from nodeagent.model.staticpods.outcomes import Stashed, StashListing
from nodeagent.model.staticpods.plan import (
    find_manifest,
    not_moved_message,
    plan_eviction,
    plan_missing_manifest,
    plan_progress,
    plan_stash,
    plan_stopping,
    stashed_payload,
)
from nodeagent.model.staticpods.policy import EvictionView, coverage

NOW = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


def request(
    *,
    active: bool = True,
    finished: bool = False,
    entry: dict[str, Any] | None = None,
    canceled: bool = False,
) -> EvictionView:
    status: dict[str, Any] = {
        "activeInterceptors": [KUBELET_INTERCEPTOR] if active else [],
        "interceptors": [entry] if entry else [],
    }
    if finished:
        status["conditions"] = [{"type": "Canceled" if canceled else "Evicted", "status": "True"}]
    return EvictionView.of(
        {
            "metadata": {"name": "u1", "namespace": "kube-system", "resourceVersion": "3"},
            "spec": {"target": {"pod": {"name": "etcd-node-1", "uid": "u1"}}},
            "status": status,
        }
    )


def pod(uid: str = "u1", mirror: bool = True) -> dict[str, Any]:
    annotations = {MIRROR_ANNOTATION: "h"} if mirror else {}
    return {"metadata": {"name": "etcd-node-1", "namespace": "kube-system", "uid": uid,
                         "annotations": annotations}}  # fmt: skip


def test_a_static_pod_in_its_turn_is_stopped() -> None:
    plan = plan_eviction(request(), node_name="node-1", now=NOW)
    assert plan.action == "stop_pod"


def test_not_our_turn_or_done_is_skipped() -> None:
    done = InterceptorStatus(KUBELET_INTERCEPTOR, start_time=NOW, completion_time=NOW).to_dict()
    for view in (request(active=False), request(finished=True), request(entry=done)):
        plan = plan_eviction(view, node_name="node-1", now=NOW)
        assert plan.action == "skip"


def test_an_upstream_eviction_is_answered_only_in_our_turn_and_never_after() -> None:
    """The server keeps a finished responder's entry as it was: once our turn ended, or the
    Eviction did, nothing is written (where our CRD takes a completion)."""
    started = InterceptorStatus(KUBELET_INTERCEPTOR).heartbeat(NOW)
    view = request(entry=started.to_dict())
    ours = replace(view, upstream=True)
    assert plan_eviction(ours, node_name="node-1", now=NOW).action == "stop_pod"
    ended = replace(view, upstream=True, finished=True, evicted=True, frozen=True)
    assert plan_eviction(ended, node_name="node-1", now=NOW).action == "skip"
    # our CRD: the same request finished gets our completion
    crd = replace(view, finished=True, evicted=True)
    assert plan_eviction(crd, node_name="node-1", now=NOW).action == "finish"


def test_a_pod_that_cannot_be_a_mirror_pod_of_the_node_is_declined() -> None:
    """The kubelet names a mirror pod `<name>-<node, lower case>`: any other name is declined
    with completion (node agents read no pods, the name is what there is to go by)."""
    for node in ("node-2", "ode-1"):
        plan = plan_eviction(request(), node_name=node, now=NOW)
        assert plan.action == "finish" and plan.entry is not None
        assert plan.entry == InterceptorStatus(
            KUBELET_INTERCEPTOR,
            heartbeat_time=NOW,
            start_time=NOW,
            completion_time=NOW,
            message=(
                f"declined: kube-system/etcd-node-1 is not a static (mirror) pod of node {node}; "
                f"{KUBELET_INTERCEPTOR} only stops static pods"
            ),
        )
    upper = plan_eviction(request(), node_name="Node-1", now=NOW)
    assert upper.action == "stop_pod"


@given(beat_age=st.integers(0, 600), active=st.booleans(), evicted=st.booleans())
def test_a_started_request_keeps_its_recent_heartbeat_when_it_finishes(
    beat_age: int, active: bool, evicted: bool
) -> None:
    """Once started, the interceptor answers even after its turn, and completes without moving
    a heartbeat (KEP-4563's CEL rule refuses one from an interceptor whose turn is over)."""
    beat = NOW - timedelta(seconds=1 + beat_age, microseconds=1)
    entry = InterceptorStatus(KUBELET_INTERCEPTOR, expected_finish_time=NOW).heartbeat(beat, "m")
    view = request(active=active, finished=True, entry=entry.to_dict(), canceled=not evicted)
    plan = plan_eviction(view, node_name="node-1", now=NOW)
    assert plan.action == "finish" and plan.entry is not None
    assert plan.entry.heartbeat_time == beat and plan.entry.start_time == beat
    assert plan.entry.expected_finish_time == NOW
    assert plan.entry.completion_time == NOW
    assert plan.entry.message == (
        "static pod kube-system/etcd-node-1 is gone"
        if evicted
        else "the eviction of static pod kube-system/etcd-node-1 was canceled"
    )


def test_a_started_request_heartbeats_until_the_pod_is_gone() -> None:
    entry = InterceptorStatus(KUBELET_INTERCEPTOR).heartbeat(NOW).to_dict()
    plan = plan_eviction(request(entry=entry), node_name="node-1", now=NOW)
    assert plan.action == "stop_pod"


# --- the manifest half ----------------------------------------------------------------------

NODE = "node-1"
MANIFESTS = Path("/etc/kubernetes/manifests")
STASH = MANIFESTS / ".nodeagent-stash"


def manifest(name: str = "etcd", file_name: str = "etcd.yaml") -> Manifest:
    return Manifest(
        path=MANIFESTS / file_name,
        name=name,
        namespace="kube-system",
        sha256="0" * 64,
        file_id=FileId(1, 2, 3, 4),
        content=b"",
        pod={"metadata": {"name": name, "namespace": "kube-system"}},
    )


def stashed(pod_name: str = "etcd-node-1", state: State = State.STASHED, n: int = 1) -> Stashed:
    entry = JournalEntry(
        id=f"e{n}",
        state=state,
        original_path=str(MANIFESTS / "etcd.yaml"),
        sha256="0" * 64,
        size=1,
        maintenance="nm",
        shutdown=False,
        boot_id="b1",
        node=NODE,
        pod_namespace="kube-system",
        pod_name=pod_name,
        stashed_at="2030-01-01T12:00:00Z",
    )
    return Stashed(entry, STASH / entry.payload_name)


def listing(*entries: Stashed) -> StashListing:
    return StashListing(entries, ())


def test_the_manifest_of_the_mirror_pod_is_found() -> None:
    etcd = manifest()
    scan = ScanResult(MANIFESTS, (manifest("kube-apiserver", "apiserver.yaml"), etcd))
    assert find_manifest(scan, request(), NODE) == etcd
    assert find_manifest(scan, request(), "node-2") is None
    assert find_manifest(ScanResult(MANIFESTS), request(), NODE) is None


def test_a_manifest_moved_aside_already_is_waited_for() -> None:
    entries = listing(
        stashed("kube-apiserver-node-1", n=1),
        stashed(n=2),
        stashed(state=State.RESTORING, n=3),
        stashed(n=4),
    )
    assert stashed_payload(entries, request()) == STASH / "e4.manifest"
    missing = plan_missing_manifest(
        request(), ScanResult(MANIFESTS), entries, node_name=NODE, manifest_dir=MANIFESTS
    )
    assert not missing.warn
    assert missing.message == (
        f"manifest moved aside to {stashed(n=4).payload}; waiting for the kubelet to stop "
        "static pod kube-system/etcd-node-1"
    )
    assert stashed_payload(listing(stashed(state=State.STASHING)), request()) is None


def test_a_missing_manifest_is_a_problem_named_once() -> None:
    problem = ManifestProblem(MANIFESTS / "etcd.yaml", "a directory", ("kube-system", "etcd"))
    bad = plan_missing_manifest(
        request(), ScanResult(MANIFESTS, (), (problem,)), listing(), node_name=NODE,
        manifest_dir=MANIFESTS,
    )  # fmt: skip
    assert bad.warn
    assert bad.message == f"cannot stop static pod kube-system/etcd-node-1: {problem}"
    none = plan_missing_manifest(
        request(), ScanResult(MANIFESTS), listing(), node_name=NODE, manifest_dir=MANIFESTS
    )
    assert none.warn
    assert none.message == (
        f"cannot stop static pod kube-system/etcd-node-1: no manifest in {MANIFESTS} defines it"
    )


def drain(
    name: str, targets: list[dict[str, Any]], created: str = "2030-01-01T10:00:00Z"
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "creationTimestamp": created},
        "spec": {"stage": "Drain"},
        "status": {"nodeStatuses": [{"nodeRef": {"name": NODE}, "drainTargets": targets}]},
    }


STATIC = {"podType": "Static", "podPriority": 2_000_001_000}


def static_pod(priority: int = 2_000_001_000) -> dict[str, Any]:
    target = pod()
    target["spec"] = {"priority": priority}
    return target


def test_covered_static_pods_are_moved_aside_for_the_oldest_covering_maintenance() -> None:
    cov = coverage(
        [drain("newer", [STATIC], "2030-01-01T11:00:00Z"), drain("older", [STATIC])],
        None,
        NODE,
        "b1",
    )
    for listed in (False, True):
        plan = plan_stash(request(), static_pod(), cov, listed=listed, node_name=NODE, now=NOW)
        assert plan.action == "stash" and plan.entry is None
        assert plan.owner == Owner("older", False, NODE)


def test_uncovered_asks_the_api_then_declines() -> None:
    cov = coverage([drain("nm", [{"podType": "Static", "podPriority": 100}])], None, NODE, "b1")
    cached = plan_stash(request(), static_pod(), cov, listed=False, node_name=NODE, now=NOW)
    assert cached.action == "ask_api" and cached.owner is None and cached.entry is None
    fresh = plan_stash(request(), static_pod(), cov, listed=True, node_name=NODE, now=NOW)
    assert fresh.action == "decline" and fresh.owner is None and fresh.entry is not None
    assert fresh.message == (
        "declined: no NodeMaintenance drain target of node node-1 covers static pod "
        "kube-system/etcd-node-1 (priority 2000001000; targets: nm: [Static<=100]); it is not "
        "stopped out of order"
    )
    assert fresh.entry.completion_time == NOW and fresh.entry.message == fresh.message
    assert fresh.entry.start_time == NOW and fresh.entry.heartbeat_time == NOW
    # a started request keeps its heartbeat when declined (the CRD refuses one closer than 60 s)
    beat = NOW - timedelta(seconds=10)
    started = InterceptorStatus(KUBELET_INTERCEPTOR, expected_finish_time=NOW).heartbeat(beat)
    kept = plan_stash(
        request(entry=started.to_dict()), static_pod(), cov, listed=True, node_name=NODE, now=NOW
    )
    assert kept.entry == replace(started, completion_time=NOW, message=fresh.message)


def test_what_the_move_says() -> None:
    owner = Owner("nm", False, NODE)
    said = plan_stopping(MANIFESTS / "etcd.yaml", STASH / "e1.manifest", owner)
    assert said.event == (
        f"moved manifest {MANIFESTS}/etcd.yaml aside to {STASH}/e1.manifest for NodeMaintenance nm"
    )
    assert said.progress == (
        f"manifest {MANIFESTS}/etcd.yaml moved aside to {STASH}/e1.manifest for NodeMaintenance "
        "nm; waiting for the kubelet to stop the pod"
    )
    assert not_moved_message(MANIFESTS / "etcd.yaml", OSError("read-only")) == (
        f"cannot move {MANIFESTS}/etcd.yaml aside: read-only"
    )


T0 = NOW


def test_progress_starts_the_grace_period_and_writes_once() -> None:
    target = static_pod()
    target["spec"]["terminationGracePeriodSeconds"] = 45
    first = plan_progress(request(), target, T0, "moving", heartbeat_every=MINUTE, start=True)
    assert first.write and first.recheck_in == 60.0
    assert first.entry == InterceptorStatus(
        KUBELET_INTERCEPTOR,
        heartbeat_time=T0,
        start_time=T0,
        expected_finish_time=T0 + timedelta(seconds=45),
        message="moving",
    )
    assert first.entry.to_dict()["expectedFinishTime"] == "2030-01-01T12:00:45.000000Z"
    written = request(entry=first.entry.to_dict())
    later = T0 + timedelta(seconds=20)
    same = plan_progress(written, target, later, "moving", heartbeat_every=MINUTE)
    assert not same.write and same.recheck_in == 40.0
    said = plan_progress(written, target, later, "waiting", heartbeat_every=MINUTE)
    assert said.write and said.entry.heartbeat_time == T0 and said.entry.message == "waiting"
    assert said.entry.expected_finish_time == T0 + timedelta(seconds=45)
    # moved aside again: the grace period starts anew, the heartbeat keeps its spacing
    again = plan_progress(written, target, later, "moving", heartbeat_every=MINUTE, start=True)
    assert again.write and again.entry.expected_finish_time == later + timedelta(seconds=45)
    assert again.entry.heartbeat_time == T0 and again.entry.start_time == T0


def test_our_heartbeat_moves_only_when_due_and_not_on_completion() -> None:
    """The CRD refuses heartbeats closer than 60 s and from an interceptor whose turn is over."""
    t59, t60 = T0 + timedelta(seconds=59), T0 + MINUTE
    first = plan_progress(request(), None, T0, "moving", heartbeat_every=MINUTE).entry
    assert first.heartbeat_time == T0
    view = request(entry=first.to_dict())
    waiting = plan_progress(view, None, t59, "waiting", heartbeat_every=MINUTE)
    assert waiting.entry.heartbeat_time == T0 and waiting.recheck_in == 1.0
    due = plan_progress(view, None, t60, "waiting", heartbeat_every=MINUTE)
    assert due.entry.heartbeat_time == t60 and due.recheck_in == 60.0
    done = plan_eviction(replace(view, finished=True, evicted=True), node_name="node-1", now=t60)
    assert done.entry is not None
    assert done.entry.heartbeat_time == T0 and done.entry.completion_time == t60
    # a heartbeatTime that cannot be read is no heartbeat: one is written now
    unread = request(entry={**first.to_dict(), "heartbeatTime": "not a time"})
    moved = plan_progress(unread, None, t59, "waiting", heartbeat_every=MINUTE)
    assert moved.write and moved.entry.heartbeat_time == t59 and moved.entry.start_time == T0


@given(
    beat_age=st.integers(0, 600_000_000),
    step=st.integers(0, 600_000_000),
    start=st.booleans(),
    changed=st.booleans(),
)
def test_progress_heartbeats_no_closer_than_a_minute(
    beat_age: int, step: int, start: bool, changed: bool
) -> None:
    """The CRD refuses heartbeats closer than 60 s: the heartbeat moves only once the last is a
    minute old, and the next look comes when it may move again (times in micro-seconds, as
    written)."""
    beat = T0 - timedelta(microseconds=beat_age)
    began = T0 - timedelta(hours=1)
    entry = InterceptorStatus(
        KUBELET_INTERCEPTOR,
        heartbeat_time=beat,
        start_time=began,
        expected_finish_time=began + timedelta(seconds=30),
        message="m",
    )
    now = T0 + timedelta(microseconds=step)
    progress = plan_progress(
        request(entry=entry.to_dict()), static_pod(), now, "n" if changed else "m",
        heartbeat_every=MINUTE, start=start,
    )  # fmt: skip
    moved = progress.entry.heartbeat_time != beat
    assert moved == (now - beat >= MINUTE)
    assert progress.entry.heartbeat_time == (now if moved else beat)
    assert progress.entry.start_time == began
    assert progress.write == (moved or changed or start)
    next_beat = progress.entry.heartbeat_time
    assert next_beat is not None
    assert progress.recheck_in == (next_beat + MINUTE - now).total_seconds()
    assert 0.0 < progress.recheck_in <= 60.0
