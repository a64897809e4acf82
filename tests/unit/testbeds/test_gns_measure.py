"""The GNS figure's budget measure from the kubelet's SIGTERMs (tests.bench.gns.analyse): a
SIGTERM of a pod deleted through the API keeps the server's order against what the watch shows,
though the watch shows the deletion later than the kubelet logs the SIGTERM."""

from __future__ import annotations

import copy
from typing import Any

from tests.bench.gns import NODE, analyse

RS = [{"kind": "ReplicaSet", "uid": "rs-web", "name": "web-1"}]


def web(uid: str, node: str = "node-2") -> dict[str, Any]:
    return {
        "metadata": {
            "uid": uid,
            "name": f"web-{uid}",
            "namespace": "default",
            "labels": {"app": "web"},
            "ownerReferences": RS,
        },
        "spec": {"nodeName": node},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }


def disrupted(pod: dict[str, Any], reason: str, deleting: bool) -> dict[str, Any]:
    out = copy.deepcopy(pod)
    out["status"]["conditions"].append({"type": "DisruptionTarget", "reason": reason})
    if deleting:
        out["metadata"]["deletionTimestamp"] = "2026-12-06T00:00:00Z"
    return out


def snapshot() -> dict[str, dict[str, Any]]:
    pods = [web("a", NODE), web("b", NODE)] + [web(f"o{i}") for i in range(6)]
    return {p["metadata"]["uid"]: p for p in pods}


def test_an_eviction_the_budget_allowed_is_not_two_down_at_once() -> None:
    """a evicted, its replacement Ready, then b evicted: the server let one go at a time. The
    kubelet's SIGTERM of b (2.0) comes before the watch shows a's replacement (2.05)."""
    pods = snapshot()
    log = [
        (1.05, "MODIFIED", disrupted(pods["a"], "EvictionByEvictionAPI", True)),
        (2.05, "ADDED", web("a2")),
        (2.10, "MODIFIED", disrupted(pods["b"], "EvictionByEvictionAPI", True)),
    ]
    result = analyse(pods, log, 0.0, 10.0, {"a": 1.0, "b": 2.0})
    assert result["budgets"]["web"]["max_unavailable"] == 1
    assert result["budgets"]["web"]["max_down_from_sigterm"] == 1


def test_the_kubelets_own_terminations_are_counted_from_their_sigterm() -> None:
    """Graceful Node Shutdown: both SIGTERMed at once, the API shows it only later."""
    pods = snapshot()
    log = [
        (3.0, "MODIFIED", disrupted(pods["a"], "TerminationByKubelet", False)),
        (3.1, "MODIFIED", disrupted(pods["b"], "TerminationByKubelet", False)),
        (4.0, "ADDED", web("a2")),
    ]
    result = analyse(pods, log, 0.0, 10.0, {"a": 1.0, "b": 1.0})
    assert result["budgets"]["web"]["max_down_from_sigterm"] == 2


def test_a_sigterm_before_any_deletion_is_counted_from_itself() -> None:
    """The kubelet stopped b on its own (no deletion seen before the node went down)."""
    pods = snapshot()
    log = [
        (1.05, "MODIFIED", disrupted(pods["a"], "EvictionByEvictionAPI", True)),
        (11.0, "DELETED", disrupted(pods["b"], "EvictionByEvictionAPI", True)),
    ]
    result = analyse(pods, log, 0.0, 10.0, {"a": 1.0, "b": 1.5})
    assert result["budgets"]["web"]["max_down_from_sigterm"] == 2
