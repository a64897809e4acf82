"""The pods of a node as the drainTargets resolution reads them."""

from __future__ import annotations

from typing import Any

from nodeagent.model.drainplan import PodClass
from nodeagent.model.draintargets.pods import PodInfo, PodRef
from tests.unit.model.test_draintargets import DS


def test_pod_info_from_pod() -> None:
    raw = {
        "metadata": {
            "name": "p",
            "namespace": "kube-system",
            "uid": "u1",
            "labels": {"app": "x"},
            "deletionTimestamp": "2024-01-01T00:00:00Z",
            "ownerReferences": [{"kind": "DaemonSet", "name": "ds", "controller": True}],
        },
        "spec": {"priority": 2000001000},
        "status": {"phase": "Running"},
    }
    info = PodInfo.from_pod(raw)
    assert info == PodInfo(
        "kube-system", "p", "u1", PodClass(DS, 2000001000), {"app": "x"}, False, True
    )
    assert info.ref == PodRef("kube-system", "p", "u1")
    assert PodInfo.from_pod({"status": {"phase": "Succeeded"}}).terminal


def test_pod_info_follows_every_version_of_a_pod() -> None:
    # memoized by UID and resourceVersion: a new version is read anew, an old one stays right
    pod: dict[str, Any] = {
        "metadata": {"name": "web", "namespace": "ns", "uid": "u1", "resourceVersion": "5"},
        "spec": {"priority": 0},
        "status": {"phase": "Running"},
    }
    first = PodInfo.from_pod(pod)
    assert not first.terminating and not first.terminal
    leaving = {**pod, "metadata": {**pod["metadata"], "resourceVersion": "6"}}
    leaving["metadata"]["deletionTimestamp"] = "2030-01-01T00:00:00Z"
    assert PodInfo.from_pod(leaving).terminating
    done = {**leaving, "metadata": {**leaving["metadata"], "resourceVersion": "7"}}
    done["status"] = {"phase": "Succeeded"}
    assert PodInfo.from_pod(done).terminal
    assert PodInfo.from_pod(pod) == first
