"""Pure helpers of the simulated actors: placement, ranking, hashes, conditions, budgets."""

from __future__ import annotations

import math
import time
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from nodeagent_testbed.sim.actors.base import int_or_percent, set_condition
from nodeagent_testbed.sim.actors.daemonset import daemon_pod_spec, placement
from nodeagent_testbed.sim.actors.disruption import DELETION_TIMEOUT, _live_disruptions
from nodeagent_testbed.sim.actors.placement import unfit_reason
from nodeagent_testbed.sim.actors.replicaset import deletion_order
from nodeagent_testbed.sim.actors.templates import pod_from_template, template_hash
from nodeagent_testbed.sim.store import Obj, now_iso


def node(
    name: str = "n", labels: dict[str, str] | None = None, ready: bool = True, **spec: Any
) -> Obj:
    return {
        "metadata": {"name": name, "labels": labels or {}},
        "spec": spec,
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def test_unfit_reasons() -> None:
    assert unfit_reason({}, node()) is None
    assert unfit_reason({}, node(ready=False)) == "node(s) were not ready"
    assert unfit_reason({}, node(unschedulable=True)) == "node(s) were unschedulable"
    tol = [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}]
    assert unfit_reason({"tolerations": tol}, node(unschedulable=True)) is None
    taints = [{"key": "k", "value": "v", "effect": "NoSchedule"}]
    assert unfit_reason({}, node(taints=taints)) == "node(s) had untolerated taint {k: v}"
    soft = [{"key": "k", "effect": "PreferNoSchedule"}]
    assert unfit_reason({}, node(taints=soft)) is None
    assert unfit_reason({"nodeSelector": {"a": "b"}}, node(labels={"a": "c"})) is not None
    assert unfit_reason({"nodeSelector": {"a": "b"}}, node(labels={"a": "b"})) is None
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}]}
                ]
            }
        }
    }
    assert unfit_reason({"affinity": affinity}, node("n")) is None
    assert unfit_reason({"affinity": affinity}, node("m")) is not None


def test_daemon_placement() -> None:
    spec = daemon_pod_spec({"spec": {"containers": []}})
    assert placement(spec, node(unschedulable=True, ready=False)) == (True, True)
    no_schedule = [{"key": "x", "effect": "NoSchedule"}]
    assert placement(spec, node(taints=no_schedule)) == (False, True)
    no_execute = [{"key": "x", "effect": "NoExecute"}]
    assert placement(spec, node(taints=no_execute)) == (False, False)
    pressure = [{"key": "node.kubernetes.io/disk-pressure", "effect": "NoSchedule"}]
    assert placement(spec, node(taints=pressure)) == (True, True)
    assert placement({**spec, "nodeSelector": {"a": "b"}}, node()) == (False, False)


def test_daemon_tolerations_are_added_once() -> None:
    spec = daemon_pod_spec({"spec": {"hostNetwork": True, "tolerations": [{"operator": "Exists"}]}})
    assert spec["tolerations"] == [{"operator": "Exists"}]  # already tolerates everything
    keys = {t["key"] for t in daemon_pod_spec({"spec": {"hostNetwork": True}})["tolerations"]}
    assert "node.kubernetes.io/network-unavailable" in keys
    assert "node.kubernetes.io/unschedulable" in keys


def test_deletion_order_prefers_unscheduled_pending_unready_new() -> None:
    def pod(name: str, node: str | None, phase: str, ready: bool, created: float) -> Obj:
        return {
            "metadata": {"name": name, "creationTimestamp": now_iso(created)},
            "spec": {"nodeName": node} if node else {},
            "status": {
                "phase": phase,
                "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            },
        }

    t = time.time()
    pods = [
        pod("old-ready", "n", "Running", True, t - 100),
        pod("new-ready", "n", "Running", True, t),
        pod("unready", "n", "Running", False, t - 100),
        pod("pending", "n", "Pending", False, t - 100),
        pod("unscheduled", None, "Pending", False, t - 100),
    ]
    ranked = [p["metadata"]["name"] for p in sorted(pods, key=deletion_order)]
    assert ranked == ["unscheduled", "pending", "unready", "new-ready", "old-ready"]


def test_template_hash() -> None:
    t = {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c"}]}}
    h = template_hash(t)
    reordered = {"spec": {"containers": [{"name": "c"}]}, "metadata": {"labels": {"a": "b"}}}
    assert h == template_hash(reordered)  # key order does not matter
    assert set(h) <= set("bcdfghjklmnpqrstvwxz2456789")
    assert h != template_hash(t, collision_count=1)
    assert h != template_hash({**t, "spec": {"containers": [{"name": "d"}]}})


def test_pod_from_template() -> None:
    owner = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": "rs", "namespace": "ns", "uid": "u"},
    }
    template: Obj = {
        "metadata": {"labels": {"a": "b"}, "annotations": {"x": "y"}},
        "spec": {"s": 1},
    }
    pod = pod_from_template(owner, template, labels={"extra": "1"})
    assert pod["metadata"]["generateName"] == "rs-"
    assert pod["metadata"]["labels"] == {"a": "b", "extra": "1"}
    assert pod["metadata"]["annotations"] == {"x": "y"}
    assert pod["metadata"]["ownerReferences"][0]["controller"] is True
    pod["spec"]["s"] = 2
    assert template["spec"]["s"] == 1
    assert pod_from_template(owner, template, name="rs-0")["metadata"]["name"] == "rs-0"


@given(st.integers(0, 100), st.integers(0, 1000))
def test_int_or_percent_rounds_percentages(pct: int, total: int) -> None:
    assert int_or_percent(f"{pct}%", total, round_up=True) == math.ceil(pct * total / 100)
    assert int_or_percent(f"{pct}%", total, round_up=False) == pct * total // 100
    assert int_or_percent(pct, total, round_up=True) == pct


def test_set_condition_moves_transition_time_only_on_status_change() -> None:
    conds = set_condition([], {"type": "Ready", "status": "True"}, "t1")
    assert conds == [{"type": "Ready", "status": "True", "lastTransitionTime": "t1"}]
    conds = set_condition(conds, {"type": "Ready", "status": "True", "reason": "R"}, "t2")
    assert conds[0]["lastTransitionTime"] == "t1" and conds[0]["reason"] == "R"
    conds = set_condition(conds, {"type": "Ready", "status": "False"}, "t3")
    assert conds[0]["lastTransitionTime"] == "t3"


def test_disrupted_pod_entries_are_pruned() -> None:
    now = time.time()

    def pod(name: str, deleting: bool = False) -> Obj:
        m: dict[str, Any] = {"name": name}
        if deleting:
            m["deletionTimestamp"] = now_iso(now)
        return {"metadata": m}

    pdb = {
        "status": {
            "disruptedPods": {
                "fresh": now_iso(now - 10),
                "old": now_iso(now - DELETION_TIMEOUT - 5),
                "terminating": now_iso(now - 10),
                "gone": now_iso(now - 10),
                "garbage": "not a time",
            }
        }
    }
    pods = [pod("fresh"), pod("old"), pod("terminating", deleting=True), pod("garbage")]
    live, recheck = _live_disruptions(pdb, pods, now)
    assert live == {"fresh": pdb["status"]["disruptedPods"]["fresh"]}
    assert recheck is not None and abs(recheck - (now - 10 + DELETION_TIMEOUT)) <= 1
    assert _live_disruptions({}, pods, now) == ({}, None)
