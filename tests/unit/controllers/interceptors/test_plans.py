"""The cluster-side interceptors' decisions, pure (nodeagent.model.interceptors.plans)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from nodeagent.controllers.interceptors.common import WAITING
from nodeagent.model.drainplan import PodType, classify, entries_from_dicts, targets_cover
from nodeagent.model.interceptors.plans import (
    annotate_rule,
    daemonset_turn,
    has_taint,
    plan_annotate,
    plan_daemonset,
    plan_withdraw,
    taint_patch,
    untaint_patch,
)
from nodeagent.model.interceptors.requests import CANCELED, EvictionRequestView
from nodeagent.model.interceptors.settings import AnnotateRule
from nodeagent.model.interceptors.targets import SelectorInterceptor
from nodeagent.model.maintenance import Stage, holds_pods_off
from nodeagent.model.names import DAEMONSET_INTERCEPTOR, MAINTENANCE_TAINT, TAINT_TEXT
from nodeagent.model.selectors import LabelSelector

RULES = {
    name: AnnotateRule(SelectorInterceptor(name, LabelSelector()), f"{name}/move", "true")
    for name in ("a.example.com", "b.example.com", "c.example.com")
}


def pod(uid: str = "u1", phase: str = "Running", **annotations: str) -> dict[str, Any]:
    return {
        "metadata": {"name": "web-1", "namespace": "ns", "uid": uid, "annotations": annotations},
        "status": {"phase": phase},
    }


def request(
    active: str | None,
    processed: tuple[str, ...] = (),
    completed: tuple[str, ...] = (),
    canceled: bool = False,
) -> EvictionRequestView:
    status: dict[str, Any] = {
        "activeInterceptors": [{"name": active}] if active else [],
        "processedInterceptors": [{"name": n} for n in processed],
        "interceptors": [{"name": n, "completionTime": "2030-01-01T12:00:00Z"} for n in completed],
    }
    if canceled:
        status["conditions"] = [{"type": CANCELED, "status": "True"}]
    return EvictionRequestView.from_obj(
        {
            "metadata": {"name": "u1", "namespace": "ns"},
            "spec": {"target": {"pod": {"name": "web-1", "uid": "u1"}}},
            "status": status,
        }
    )


def test_the_rule_whose_turn_it_is() -> None:
    assert annotate_rule(request("a.example.com"), RULES) is RULES["a.example.com"]
    assert annotate_rule(request("other.example.com"), RULES) is None
    assert annotate_rule(request(None), RULES) is None
    assert annotate_rule(request("a.example.com", completed=("a.example.com",)), RULES) is None
    assert annotate_rule(request("a.example.com", canceled=True), RULES) is None


def test_gone_or_terminal_pod_completes() -> None:
    rule = RULES["a.example.com"]
    assert plan_annotate(rule, None).complete
    assert plan_annotate(rule, pod(phase="Succeeded")).complete
    assert plan_annotate(rule, pod(phase="Failed")).complete


def test_annotates_once_then_waits() -> None:
    rule = RULES["a.example.com"]
    first = plan_annotate(rule, pod())
    assert not first.complete and first.annotate
    assert first.message.endswith(WAITING) and "a.example.com/move=true" in first.message
    again = plan_annotate(rule, pod(**{"a.example.com/move": "true"}))
    assert not again.annotate and again.message == first.message
    other_value = plan_annotate(rule, pod(**{"a.example.com/move": "false"}))
    assert other_value.annotate


names = st.sampled_from(sorted(RULES))


@given(
    active=st.none() | names,
    processed=st.lists(names, unique=True).map(tuple),
    completed=st.lists(names, unique=True).map(tuple),
    annotated=st.sets(names),
    same_pod=st.booleans(),
)
def test_withdraw_takes_off_only_what_an_unfinished_turn_may_have_set(
    active: str | None,
    processed: tuple[str, ...],
    completed: tuple[str, ...],
    annotated: set[str],
    same_pod: bool,
) -> None:
    view = request(active, processed, completed, canceled=True)
    cached = pod("u1" if same_pod else "u2", **{RULES[n].annotation_key: "true" for n in annotated})
    withdrawn = {rule.name for rule in plan_withdraw(view, cached, RULES)}
    expected = {n for n in annotated if (n == active or n in processed) and n not in completed}
    assert withdrawn == (expected if same_pod else set())
    assert plan_withdraw(view, None, RULES) == []


# -- the DaemonSet interceptor ------------------------------------------------------------------

NODES = ("node-1", "node-2")
DS_TARGET = {"podType": "DaemonSet", "podPriority": 1000}
DEFAULT_TARGET = {"podType": "Default", "podPriority": 1000}


def ds_pod(
    node: str | None = "node-1",
    *,
    daemonset: bool = True,
    priority: int = 0,
    phase: str = "Running",
    terminating: bool = False,
    tolerations: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    owner = {"kind": "DaemonSet" if daemonset else "ReplicaSet", "name": "ds", "controller": True}
    md: dict[str, Any] = {
        "name": "ds-1",
        "namespace": "ns",
        "uid": "u1",
        "ownerReferences": [owner],
    }
    if terminating:
        md["deletionTimestamp"] = "2030-01-01T12:00:00Z"
    spec: dict[str, Any] = {"priority": priority}
    if node is not None:
        spec["nodeName"] = node
    if tolerations is not None:
        spec["tolerations"] = tolerations
    return {"metadata": md, "spec": spec, "status": {"phase": phase}}


def maintenance(
    stage: str = "Drain",
    targets: dict[str, list[dict[str, Any]]] | None = None,
    *,
    deleting: bool = False,
    selector_node: str | None = None,
) -> dict[str, Any]:
    md: dict[str, Any] = {"name": "nm", "creationTimestamp": "2030-01-01T11:00:00Z"}
    if deleting:
        md["deletionTimestamp"] = "2030-01-01T12:00:00Z"
    spec: dict[str, Any] = {"stage": stage}
    if selector_node is not None:
        spec["nodeSelector"] = {
            "nodeSelectorTerms": [
                {
                    "matchFields": [
                        {"key": "metadata.name", "operator": "In", "values": [selector_node]}
                    ]
                }
            ]
        }
    statuses = [
        {"nodeRef": {"name": node}, "drainTargets": drain}
        for node, drain in (targets if targets is not None else {"node-1": [DS_TARGET]}).items()
    ]
    return {"metadata": md, "spec": spec, "status": {"nodeStatuses": statuses}}


def node(name: str = "node-1", *taints: dict[str, Any], rv: str = "7") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "resourceVersion": rv, "labels": {}},
        "spec": {"taints": list(taints)} if taints else {},
    }


def ds_request(
    active: str | None = DAEMONSET_INTERCEPTOR, *, completed: bool = False, canceled: bool = False
) -> EvictionRequestView:
    status: dict[str, Any] = {
        "activeInterceptors": [{"name": active}] if active else [],
        "interceptors": (
            [{"name": DAEMONSET_INTERCEPTOR, "completionTime": "2030-01-01T12:00:00Z"}]
            if completed
            else []
        ),
    }
    if canceled:
        status["conditions"] = [{"type": CANCELED, "status": "True"}]
    return EvictionRequestView.from_obj(
        {
            "metadata": {"name": "u1", "namespace": "ns"},
            "spec": {"target": {"pod": {"name": "ds-1", "uid": "u1"}}},
            "status": status,
        }
    )


def test_the_daemonset_interceptors_turn() -> None:
    assert daemonset_turn(ds_request())
    assert not daemonset_turn(ds_request("a.example.com"))
    assert not daemonset_turn(ds_request(None))
    assert not daemonset_turn(ds_request(completed=True))
    assert not daemonset_turn(ds_request(canceled=True))


def test_gone_or_terminal_daemonset_pod_completes() -> None:
    for gone in (None, ds_pod(phase="Succeeded"), ds_pod(phase="Failed")):
        assert plan_daemonset(gone, [maintenance()]).action == "complete"


def test_a_pod_not_of_a_daemonset_finishes_untouched() -> None:
    plan = plan_daemonset(
        ds_pod(daemonset=False), [maintenance(targets={"node-1": [DEFAULT_TARGET]})]
    )
    assert plan.action == "finish" and "not owned by a DaemonSet" in plan.message
    assert not plan.taint_node and not plan.delete


def test_declined_unless_a_draining_maintenance_targets_the_pod() -> None:
    for maintenances in (
        [],
        [maintenance("Idle")],
        [maintenance("Cordon")],
        [maintenance("Complete")],
        [maintenance(deleting=True)],
        [maintenance(targets={"node-2": [DS_TARGET]})],
        [maintenance(targets={"node-1": [DEFAULT_TARGET]})],
        [maintenance(targets={"node-1": [{"podType": "DaemonSet", "podPriority": -1}]})],
        [maintenance(targets={"node-1": [{"podType": "Nope", "podPriority": 0}]})],
    ):
        plan = plan_daemonset(ds_pod(), maintenances)
        assert plan.action == "decline", maintenances
        assert plan.message.startswith("Declined: ") and "of node node-1 now" in plan.message
        assert not plan.taint_node and not plan.delete
    unscheduled = plan_daemonset(ds_pod(None), [maintenance()])
    assert unscheduled.action == "decline" and "(unscheduled)" in unscheduled.message


def test_a_targeted_pod_is_tainted_off_and_deleted() -> None:
    plan = plan_daemonset(ds_pod(), [maintenance("Idle"), maintenance()])
    assert plan.action == "evict" and plan.taint_node == "node-1" and plan.delete
    assert plan.message == (
        f"Tainted node node-1 with {TAINT_TEXT}; deleted the pod gracefully; {WAITING}"
    )
    again = plan_daemonset(ds_pod(terminating=True), [maintenance()])
    assert again.action == "evict" and not again.delete and again.message == plan.message


def test_a_pod_tolerating_the_taint_is_named() -> None:
    tolerating = ds_pod(tolerations=[{"key": MAINTENANCE_TAINT["key"], "operator": "Exists"}])
    plan = plan_daemonset(tolerating, [maintenance()])
    assert plan.action == "evict"
    assert plan.message.endswith(
        f"The pod tolerates {TAINT_TEXT}, so its DaemonSet may recreate it on the node."
    )


def test_taint_patch_adds_ours_once_guarded_by_the_resource_version() -> None:
    other = {"key": "example.com/x", "effect": "NoExecute"}
    assert taint_patch(node("node-1", other)) == {
        "metadata": {"resourceVersion": "7"},
        "spec": {"taints": [other, dict(MAINTENANCE_TAINT)]},
    }
    assert taint_patch(node("node-1", dict(MAINTENANCE_TAINT))) is None
    assert taint_patch(None) is None


def test_untaint_patch_keeps_the_others_taints() -> None:
    other = {"key": "example.com/x", "effect": "NoExecute"}
    tainted = node("node-1", other, dict(MAINTENANCE_TAINT))
    assert untaint_patch(tainted, "node-1", []) == {
        "metadata": {"resourceVersion": "7"},
        "spec": {"taints": [other]},
    }
    alone = untaint_patch(node("node-1", dict(MAINTENANCE_TAINT)), "node-1", [])
    assert alone is not None and alone["spec"] == {"taints": None}
    assert untaint_patch(node("node-1", other), "node-1", []) is None
    assert untaint_patch(None, "node-1", []) is None


# Drain (not being deleted) half the time, so that plans that act are common
stages = st.just("Drain") | st.sampled_from([*Stage, "Bogus"])
drain_targets = st.lists(
    st.sampled_from(
        [
            DS_TARGET,
            DEFAULT_TARGET,
            {"podType": "DaemonSet", "podPriority": 10},
            {"podType": "Static", "podPriority": 1000},
        ]
    ),
    min_size=1,
    max_size=3,
)
maintenances_st = st.lists(
    st.builds(
        maintenance,
        stages,
        st.dictionaries(st.sampled_from(NODES), drain_targets, min_size=1, max_size=2),
        deleting=st.sampled_from([False, False, True]),
        selector_node=st.none() | st.sampled_from(NODES),
    ),
    max_size=3,
)


@given(
    maintenances=maintenances_st,
    node_name=st.none() | st.sampled_from(NODES),
    daemonset=st.booleans(),
    priority=st.sampled_from([0, 500, 2000]),
    phase=st.sampled_from(["Running", "Pending", "Succeeded"]),
    terminating=st.booleans(),
)
def test_never_taints_or_deletes_unless_a_drain_targets_the_pod_on_its_node(
    maintenances: list[dict[str, Any]],
    node_name: str | None,
    daemonset: bool,
    priority: int,
    phase: str,
    terminating: bool,
) -> None:
    target = ds_pod(
        node_name, daemonset=daemonset, priority=priority, phase=phase, terminating=terminating
    )
    plan = plan_daemonset(target, maintenances)
    targeted = any(
        nm["spec"]["stage"] == Stage.DRAIN
        and "deletionTimestamp" not in nm["metadata"]
        and any(
            ns["nodeRef"]["name"] == node_name
            and targets_cover(entries_from_dicts(ns["drainTargets"], "t"), target)
            for ns in nm["status"]["nodeStatuses"]
        )
        for nm in maintenances
    )
    acts = bool(plan.taint_node) or plan.delete
    if acts:
        assert targeted and classify(target).pod_type is PodType.DAEMONSET
        assert plan.taint_node == (node_name or "") and phase != "Succeeded"
    expected = (
        "complete"
        if phase == "Succeeded"
        else "finish"
        if not daemonset
        else "evict"
        if targeted
        else "decline"
    )
    assert plan.action == expected
    if plan.action == "evict":
        assert plan.delete is not terminating


@given(maintenances=maintenances_st, name=st.sampled_from(NODES))
def test_the_taint_comes_off_only_when_no_maintenance_holds_pods_off(
    maintenances: list[dict[str, Any]], name: str
) -> None:
    tainted = node(name, dict(MAINTENANCE_TAINT))
    patch = untaint_patch(tainted, name, maintenances)
    held = any(holds_pods_off(nm, name, tainted) for nm in maintenances)
    assert (patch is None) == held
    if patch is not None:
        assert not has_taint({"spec": patch["spec"]})
