"""The interceptor's decisions: which maintenances hold the node, which static pods are targeted,
what goes into the EvictionRequest status."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from nodeagent.model.interceptors.status import InterceptorStatus
from nodeagent.model.maintenance import holds_pods_off_this_boot
from nodeagent.model.names import IMPERATIVE_RESPONDER, KUBELET_INTERCEPTOR, STATIC_POD_RESPONDER
from nodeagent.model.shutdown import shutdown_maintenance
from nodeagent.model.staticpods.policy import (
    EvictionView,
    coverage,
    expected_finish,
    manifest_pod,
    manifest_priority,
    progress_status,
)
from nodeagent.model.times import format_micro_time

NODE = "node-1"
BOOT = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
NODE_OBJ = {"metadata": {"name": NODE, "labels": {"pool": "cp"}}}


def nm(
    name: str = "m",
    stage: str = "Drain",
    *,
    node: str | None = NODE,
    targets: list[dict[str, Any]] | None = None,
    selector: dict[str, Any] | None = None,
    created: str = "2025-01-01T00:00:00Z",
    **meta: Any,
) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "nodeagent.io/v1alpha1",
        "kind": "NodeMaintenance",
        "metadata": {"name": name, "creationTimestamp": created, **meta},
        "spec": {
            "stage": stage,
            "nodeSelector": selector
            or {
                "nodeSelectorTerms": [
                    {
                        "matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": ["other"]}
                        ]
                    }
                ]
            },
        },
    }
    if node is not None:
        status: dict[str, Any] = {"nodeRef": {"name": node}}
        if targets is not None:
            status["drainTargets"] = targets
        obj["status"] = {"nodeStatuses": [status]}
    return obj


def static(priority: int, selector: dict[str, Any] | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"podPriority": priority, "podType": "Static"}
    if selector is not None:
        entry["podSelector"] = selector
    return entry


def mirror(
    priority: int, labels: dict[str, str] | None = None, **annotations: str
) -> dict[str, Any]:
    return {
        "metadata": {
            "labels": labels or {},
            "annotations": {"kubernetes.io/config.mirror": "abc", **annotations},
        },
        "spec": {"priority": priority},
    }


@pytest.mark.parametrize(
    ("obj", "holds"),
    [
        (nm(), True),
        (nm(stage="Idle"), False),
        (nm(stage="Cordon"), False),
        (nm(stage="Complete"), False),
        (nm(deletionTimestamp="2025-01-01T00:00:00Z"), False),
        (nm(node="node-2"), False),
        # selected by the node selector before the controller wrote any status
        (
            nm(
                node=None,
                selector={
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["cp"]}]}
                    ]
                },
            ),
            True,
        ),
        (nm(node=None), False),
    ],
)
def test_which_maintenances_hold_the_node(obj: dict[str, Any], holds: bool) -> None:
    assert holds_pods_off_this_boot(obj, NODE, NODE_OBJ, BOOT) is holds


def test_shutdown_maintenances_hold_only_in_their_boot() -> None:
    this_boot = shutdown_maintenance(NODE, BOOT, "reboot")
    this_boot["status"] = {"nodeStatuses": [{"nodeRef": {"name": NODE}}]}
    earlier = shutdown_maintenance(NODE, "aaaabbbb-cccc-dddd-eeee-ffff00001111", "reboot")
    earlier["status"] = this_boot["status"]
    assert holds_pods_off_this_boot(this_boot, NODE, NODE_OBJ, BOOT)
    assert not holds_pods_off_this_boot(earlier, NODE, NODE_OBJ, BOOT)


def test_coverage_finds_the_oldest_covering_maintenance() -> None:
    young = nm("young", targets=[static(2_000_001_000)], created="2025-02-01T00:00:00Z")
    old = nm("old", targets=[static(1000)], created="2025-01-01T00:00:00Z")
    done = nm("done", stage="Complete", targets=[static(2_147_483_647)])
    cov = coverage([young, done, old], NODE_OBJ, NODE, BOOT)
    assert cov.holds and cov.names == ["old", "young"]
    assert cov.covering(mirror(500)) is old
    assert cov.covering(mirror(2_000_001_000)) is young
    assert cov.covering(mirror(2_000_001_001)) is None
    assert cov.describe_targets() == "old: [Static<=1000]; young: [Static<=2000001000]"


def test_coverage_needs_a_static_entry_and_matching_labels() -> None:
    targets = [
        {"podPriority": 2_147_483_647, "podType": "Default"},
        {"podPriority": 2_147_483_647, "podType": "DaemonSet"},
        static(2_000_000_000, {"matchLabels": {"tier": "control-plane"}}),
    ]
    cov = coverage([nm(targets=targets)], NODE_OBJ, NODE, BOOT)
    assert cov.covering(mirror(100, {"tier": "control-plane"})) is not None
    assert cov.covering(mirror(100, {"tier": "other"})) is None
    assert cov.covering(mirror(2_000_001_000, {"tier": "control-plane"})) is None
    # a pod that is not a mirror pod is never a Static target
    only_static = coverage([nm(targets=[static(2_147_483_647)])], NODE_OBJ, NODE, BOOT)
    assert only_static.covering({"metadata": {"labels": {}}, "spec": {"priority": 0}}) is None
    # nodeagent.io/drain: skip
    skipped = mirror(100, {"tier": "control-plane"}, **{"nodeagent.io/drain": "skip"})
    assert cov.covering(skipped) is None


def test_holding_without_targets_yet_covers_nothing() -> None:
    cov = coverage([nm(targets=None)], NODE_OBJ, NODE, BOOT)
    assert cov.holds
    assert cov.covering(mirror(0)) is None


def test_malformed_targets_are_reported() -> None:
    cov = coverage([nm(targets=[{"podType": "Static"}])], NODE_OBJ, NODE, BOOT)
    assert cov.holds and cov.covering(mirror(0)) is None
    assert "podPriority: required" in cov.problems[0]


def test_manifest_priority() -> None:
    classes = {
        "high": {"value": 5000},
        "default-class": {"value": 7, "globalDefault": True},
    }

    def pod(**spec: Any) -> dict[str, Any]:
        return {"spec": spec}

    assert manifest_priority(pod(priorityClassName="system-node-critical"), {}) == 2_000_001_000
    assert manifest_priority(pod(priorityClassName="system-cluster-critical"), {}) == 2_000_000_000
    assert manifest_priority(pod(priorityClassName="high"), classes) == 5000
    assert manifest_priority(pod(priorityClassName="missing"), classes) is None
    assert manifest_priority(pod(priority=42), classes) == 42
    assert manifest_priority(pod(), classes) == 7
    assert manifest_priority(pod(), {}) == 0


def test_manifest_pod_is_classified_as_static() -> None:
    p = manifest_pod({"metadata": {"labels": {"a": "b"}}}, 10)
    cov = coverage([nm(targets=[static(10, {"matchLabels": {"a": "b"}})])], NODE_OBJ, NODE, BOOT)
    assert cov.covering(p) is not None


def evr(**status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "uid-1", "namespace": "kube-system", "resourceVersion": "7"},
        "spec": {"target": {"pod": {"name": "etcd-node-1", "uid": "uid-1"}}},
        "status": status,
    }


def test_eviction_view() -> None:
    v = EvictionView.of(evr(activeInterceptors=[KUBELET_INTERCEPTOR]))
    assert (v.key, v.pod_name, v.pod_uid, v.resource_version) == (
        "kube-system/uid-1",
        "etcd-node-1",
        "uid-1",
        "7",
    )
    assert v.active and not v.finished and v.entry is None and not v.completed
    other = EvictionView.of(evr(activeInterceptors=["x.example.com"]))
    assert not other.active
    evicted = EvictionView.of(
        evr(conditions=[{"type": "Evicted", "status": "True"}], activeInterceptors=[])
    )
    assert evicted.finished
    done = EvictionView.of(
        evr(interceptors=[{"name": KUBELET_INTERCEPTOR, "completionTime": "2025-01-01T00:00:00Z"}])
    )
    assert done.completed
    assert done.entry == InterceptorStatus(
        KUBELET_INTERCEPTOR, completion_time=datetime(2025, 1, 1, tzinfo=UTC)
    )


T0 = datetime(2025, 1, 1, tzinfo=UTC)
T1 = T0 + timedelta(seconds=1, microseconds=250_000)
T2 = T0 + timedelta(seconds=2)
T9 = T0 + timedelta(seconds=9)


def test_status_entries_keep_start_and_other_interceptors() -> None:
    assert expected_finish(T0, {"spec": {"terminationGracePeriodSeconds": 45}}) == datetime(
        2025, 1, 1, 0, 0, 45, tzinfo=UTC
    )
    assert (expected_finish(T0, {"spec": {}}) - T0).total_seconds() == 30
    first = replace(
        InterceptorStatus(KUBELET_INTERCEPTOR).heartbeat(T1, "moving"), expected_finish_time=T9
    )
    later = first.complete(T2, "waiting")
    assert later.start_time == T1 and later.expected_finish_time == T9
    assert later.completion_time == T2
    view = EvictionView.of(
        evr(
            interceptors=[
                {"name": "a.example.com", "message": "x"},
                first.to_dict(),
                {"name": "z.io"},
            ]
        )
    )
    assert view.entry == first  # micro-seconds read back as written
    patch = progress_status(view, later)
    assert patch["metadata"] == {"resourceVersion": "7"}
    assert [i["name"] for i in patch["status"]["interceptors"]] == [
        "a.example.com",
        KUBELET_INTERCEPTOR,
        "z.io",
    ]
    assert patch["status"]["interceptors"][1] == {
        "name": KUBELET_INTERCEPTOR,
        "startTime": "2025-01-01T00:00:01.250000Z",
        "heartbeatTime": "2025-01-01T00:00:01.250000Z",
        "expectedFinishTime": "2025-01-01T00:00:09.000000Z",
        "completionTime": "2025-01-01T00:00:02.000000Z",
        "message": "waiting",
    }
    # a request without our entry yet: ours goes last
    fresh = EvictionView.of(evr(interceptors=[{"name": "a.example.com"}]))
    names = [i["name"] for i in progress_status(fresh, later)["status"]["interceptors"]]
    assert names == ["a.example.com", KUBELET_INTERCEPTOR]


def eviction(state: str, *conditions: str, **ours: Any) -> dict[str, Any]:
    """An upstream Eviction of etcd-node-1 whose static-pod responder is in `state`."""
    return {
        "metadata": {"name": "uid-1", "namespace": "kube-system", "resourceVersion": "8"},
        "spec": {"target": {"pod": {"name": "etcd-node-1", "uid": "uid-1"}}},
        "status": {
            "conditions": [{"type": c, "status": "True"} for c in conditions],
            "targetResponders": [
                {"name": STATIC_POD_RESPONDER, "priority": 10000, "state": state},
                {"name": IMPERATIVE_RESPONDER, "priority": 100, "state": "Inactive"},
            ],
            "responders": [
                {"name": STATIC_POD_RESPONDER, **ours},
                {"name": IMPERATIVE_RESPONDER},
            ],
        },
    }


# as an upstream Eviction stores them (v1.Time: whole seconds)
S0, S9 = "2025-01-01T00:00:00Z", "2025-01-01T00:00:09Z"


def test_an_upstream_eviction_reads_as_our_request() -> None:
    v = EvictionView.of_eviction(eviction("Active", startTime=S0, expectedCompletionTime=S9))
    assert v.upstream and v.active and not v.finished and not v.frozen
    assert (v.key, v.pod_name, v.resource_version) == ("kube-system/uid-1", "etcd-node-1", "8")
    assert v.entry == InterceptorStatus(KUBELET_INTERCEPTOR, start_time=T0, expected_finish_time=T9)
    assert not v.completed
    waiting = EvictionView.of_eviction(eviction("Inactive"))
    assert not waiting.active and waiting.entry is None and not waiting.frozen
    for ended in (eviction("Completed"), eviction("Canceled", "TargetEvicted")):
        assert EvictionView.of_eviction(ended).frozen
    failed = EvictionView.of_eviction(eviction("Active", "Failed", startTime=S0))
    assert failed.finished and failed.frozen and not failed.evicted
    done = EvictionView.of_eviction(eviction("Active", startTime=S0, completionTime=S9))
    assert done.completed


def test_our_responder_entry_alone_is_written_upstream() -> None:
    view = EvictionView.of_eviction(eviction("Active", startTime=S0))
    assert view.entry is not None
    entry = replace(view.entry.heartbeat(T1, "moving"), expected_finish_time=T9)
    patch = progress_status(view, entry)
    assert patch["metadata"] == {"resourceVersion": "8"}
    assert patch["status"]["responders"] == [
        {
            "name": STATIC_POD_RESPONDER,
            "startTime": format_micro_time(T0),
            "heartbeatTime": format_micro_time(T1),
            "expectedCompletionTime": format_micro_time(T9),
            "message": "moving",
        },
        {"name": IMPERATIVE_RESPONDER},
    ]
