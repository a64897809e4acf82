"""The pure NodeMaintenance decision: the KEP-4212 examples replayed through `decide`, the
cordon ownership rules, EvictionRequests, validation, and properties over random clusters.

`World` plays the API server and the controller shell: it applies each decision's actions to
plain dicts and runs every maintenance until nothing is left to do.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nodeagent.controllers.nodemaintenance.signatures import progress_only
from nodeagent.model.bodies import as_eviction_request, as_maintenance
from nodeagent.model.drainplan import (
    INT32_MAX,
    PodType,
    classify,
    effective_plan,
    entries_from_dicts,
)
from nodeagent.model.draintargets.pods import PodInfoMemo
from nodeagent.model.draintargets.tracks import plan_targets, targets_within
from nodeagent.model.interceptors.imperative import imperative_refusal_message
from nodeagent.model.interceptors.requests import EvictionRequestView
from nodeagent.model.maintenance import Stage, effective_stage, maintenance_nodes, validate
from nodeagent.model.memo import ObjectMemo, Recall
from nodeagent.model.names import CORDONED_BY_ANNOTATION, FINALIZER, NODE_LABEL, REQUESTER
from nodeagent.model.nodemaintenance.actions import Actions, NodePatch
from nodeagent.model.nodemaintenance.decide import decide
from nodeagent.model.nodemaintenance.inputs import Inputs
from nodeagent.model.nodemaintenance.selection import connected

Obj = dict[str, Any]
T0 = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)


def entry(pod_type: str, priority: int, selector: dict[str, Any] | None = None) -> Obj:
    out: Obj = {"podPriority": priority, "podType": pod_type}
    if selector is not None:
        out = {"podSelector": selector, **out}
    return out


def by_names(names: Iterable[str]) -> Obj:
    return {
        "nodeSelectorTerms": [
            {
                "matchExpressions": [
                    {"key": "kubernetes.io/hostname", "operator": "In", "values": sorted(names)}
                ]
            }
        ]
    }


def merge(target: Obj, patch: Obj) -> None:
    """RFC 7386 JSON merge patch, in place."""
    for k, v in patch.items():
        if v is None:
            target.pop(k, None)
        elif isinstance(v, dict) and isinstance(target.get(k), dict):
            merge(target[k], v)
        else:
            target[k] = copy.deepcopy(v)


class World:
    def __init__(self, nodes: Iterable[str] = ("one", "two", "three", "four", "five")) -> None:
        self.rv = itertools.count(1)
        self.clock = T0
        self.nodes: dict[str, Obj] = {
            n: {
                "metadata": {
                    "name": n,
                    "labels": {"kubernetes.io/hostname": n},
                    "resourceVersion": self._rv(),
                },
                "spec": {},
            }
            for n in nodes
        }
        self.pods: dict[str, Obj] = {}  # by uid
        self.nms: dict[str, Obj] = {}
        self.ers: dict[str, Obj] = {}  # by name (pod uid)
        self.events: list[tuple[str, str, str, str]] = []  # (maintenance, type, reason, message)
        self.history: list[tuple[str, str, tuple[Any, ...]]] = []  # (nm, node, targets)
        self.uids = itertools.count(1)
        self.pod_info = PodInfoMemo()
        self.request_view = ObjectMemo(EvictionRequestView.from_obj)
        self.recall = Recall()

    def _rv(self) -> str:
        return str(next(self.rv))

    # building the world

    def pod(
        self,
        name: str,
        node: str,
        priority: int = 0,
        kind: str = "Default",
        labels: dict[str, str] | None = None,
        skip: bool = False,
        namespace: str = "default",
    ) -> Obj:
        uid = f"uid-{next(self.uids)}-{name}"
        meta: Obj = {
            "name": name,
            "namespace": namespace,
            "uid": uid,
            "labels": labels or {"app": name},
            "annotations": {},
            "resourceVersion": self._rv(),
        }
        if kind == "DaemonSet":
            meta["ownerReferences"] = [{"kind": "DaemonSet", "name": "ds", "controller": True}]
        if kind == "Static":
            meta["annotations"]["kubernetes.io/config.mirror"] = "hash"
        if skip:
            meta["annotations"]["nodeagent.io/drain"] = "skip"
        pod = {"metadata": meta, "spec": {"nodeName": node, "priority": priority}}
        self.pods[uid] = pod
        return pod

    def maintenance(
        self,
        name: str,
        nodes: Iterable[str],
        stage: str = "Drain",
        plan: list[Obj] | None = None,
        selector: Obj | None = None,
    ) -> Obj:
        self.clock += timedelta(seconds=1)
        spec: Obj = {"nodeSelector": selector or by_names(nodes), "stage": stage}
        if plan is not None:
            spec["drainPlan"] = plan
        nm = {
            "metadata": {
                "name": name,
                "generation": 1,
                "creationTimestamp": self.clock.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "resourceVersion": self._rv(),
                "uid": f"nm-{name}",
            },
            "spec": spec,
        }
        self.nms[name] = nm
        return nm

    def set_stage(self, name: str, stage: str) -> None:
        nm = self.nms[name]
        nm["spec"]["stage"] = stage
        nm["metadata"]["generation"] += 1
        nm["metadata"]["resourceVersion"] = self._rv()

    def delete(self, name: str) -> None:
        nm = self.nms[name]
        if not nm["metadata"].get("finalizers"):
            del self.nms[name]
            return
        nm["metadata"]["deletionTimestamp"] = "2024-05-01T12:00:00Z"

    def remove_pod(self, name: str) -> None:
        (uid,) = [u for u, p in self.pods.items() if p["metadata"]["name"] == name]
        del self.pods[uid]

    def cordon_by_hand(self, node: str) -> None:
        self.edit_node(node)["spec"]["unschedulable"] = True

    # the controller

    def inputs(self, name: str) -> Inputs:
        pods: dict[str, list[Obj]] = {}
        for pod in self.pods.values():
            pods.setdefault(pod["spec"]["nodeName"], []).append(pod)
        return Inputs(
            maintenance=as_maintenance(self.nms[name]),
            maintenances=[as_maintenance(nm) for nm in self.nms.values()],
            nodes=self.nodes,
            pods=pods,
            eviction_requests={k: as_eviction_request(er) for k, er in self.ers.items()},
            now=self.clock,
        )

    def decide(self, name: str) -> Actions:
        inputs = self.inputs(name)
        actions = decide(inputs)
        # the controller remembers what it reads of pods and requests, and what it derives per
        # node, across decisions: the same decision with its memos
        remembered = dataclasses.replace(
            inputs, pod_info=self.pod_info, request_view=self.request_view, recall=self.recall
        )
        assert decide(remembered) == actions
        return actions

    def apply(self, name: str, a: Actions) -> None:
        nm = self.nms[name]
        if a.add_finalizer:
            nm["metadata"].setdefault("finalizers", []).append(FINALIZER)
        for p in (*a.cordon, *a.uncordon):
            self._patch_node(p)
        if a.status is not None:
            nm["status"] = copy.deepcopy(a.status)
            nm["metadata"]["resourceVersion"] = self._rv()
            for ns in a.status.get("nodeStatuses") or []:
                self.history.append(
                    (name, ns["nodeRef"]["name"], tuple(map(str, ns["drainTargets"])))
                )
        self.events.extend((name, e.type, e.reason, e.message) for e in a.events)
        for u in a.neighbours:
            other = self.nms[u.name]
            assert other["metadata"]["resourceVersion"] == u.resource_version
            other["status"] = copy.deepcopy(u.status)
            other["metadata"]["resourceVersion"] = self._rv()
            self.events.extend((u.name, e.type, e.reason, e.message) for e in u.events)
        for d in a.delete_evictions:
            assert self.ers[d.name]["metadata"]["resourceVersion"] == d.resource_version
            del self.ers[d.name]
        for c in a.create_evictions:
            body = copy.deepcopy(c.body)
            assert body["metadata"]["name"] not in self.ers
            body["metadata"]["resourceVersion"] = self._rv()
            self.ers[body["metadata"]["name"]] = body
        for r in a.requester_patches:
            er = copy.deepcopy(self.ers[r.name])  # a new object, as an informer's cache makes
            assert er["metadata"]["resourceVersion"] == r.resource_version
            merge(er, r.to_patch())
            er["metadata"]["resourceVersion"] = self._rv()
            self.ers[r.name] = er
        for pd in a.delete_pods:  # the pod is leaving (its grace period), as on a cluster
            pod = self.pods[pd.uid]  # a new object, as an informer's cache makes one
            leaving = {**pod["metadata"], "deletionTimestamp": "2024-05-01T10:00:00Z"}
            self.pods[pd.uid] = {**pod, "metadata": leaving}
        if a.remove_finalizer:
            del self.nms[name]

    def edit_node(self, name: str) -> Obj:
        """A new object for node ``name`` to change, as an informer's cache replaces one."""
        node = self.nodes[name] = copy.deepcopy(self.nodes[name])
        return node

    def _patch_node(self, p: NodePatch) -> None:
        node = self.edit_node(p.node)
        assert node["metadata"]["resourceVersion"] == p.resource_version, "stale node patch"
        patch = p.to_patch()
        del patch["metadata"]["resourceVersion"]
        merge(node, patch)
        if not node["metadata"].get("annotations"):
            node["metadata"].pop("annotations", None)
        node["metadata"]["resourceVersion"] = self._rv()

    def settle(self, limit: int = 200) -> None:
        """Reconcile every maintenance until none has anything left to do."""
        for _ in range(limit):
            busy = False
            for name in sorted(self.nms):
                if name not in self.nms:
                    continue
                a = self.decide(name)
                if not a.idle:
                    busy = True
                    self.apply(name, a)
            if not busy:
                return
        raise AssertionError("the decisions never settled")

    # reading the world

    def status(self, nm: str, node: str) -> Obj:
        for ns in self.nms[nm].get("status", {}).get("nodeStatuses") or []:
            if ns["nodeRef"]["name"] == node:
                return dict(ns)
        raise KeyError((nm, node))

    def view(self, nm: str, node: str) -> tuple[str, list[Obj]]:
        s = self.status(nm, node)
        return s["drainMessage"], s["drainTargets"]

    def requested(self) -> set[str]:
        return {
            er["spec"]["target"]["pod"]["name"]
            for er in self.ers.values()
            if {"name": REQUESTER} in er["spec"]["requesters"]
        }

    def condition(self, nm: str, type_: str) -> Obj | None:
        for c in self.nms[nm].get("status", {}).get("conditions") or []:
            if c["type"] == type_:
                return dict(c)
        return None

    def cordoned(self, node: str) -> tuple[bool, str | None]:
        n = self.nodes[node]
        return (
            n["spec"].get("unschedulable") is True,
            (n["metadata"].get("annotations") or {}).get(CORDONED_BY_ANNOTATION),
        )

    def reasons(self, nm: str) -> list[str]:
        return [r for n, _, r, _ in self.events if n == nm]


# --- the KEP examples ---------------------------------------------------------------------------


PLAN_A = [entry("Default", 5000), entry("Default", 15000), entry("DaemonSet", 3000)]
PLAN_B = [entry("Default", 10000), entry("Default", 15000), entry("DaemonSet", 4000)]
PLAN_C = [entry("Default", 2000), entry("Default", 15000)]


def test_kep_pod_selection_and_drain_targets_example() -> None:
    w = World()
    for node, prios in {
        "one": [4000, 8000, 14000],
        "two": [4000, 12000],
        "three": [9000, 14000],
        "four": [1000, 3000],
    }.items():
        for p in prios:
            w.pod(f"{node}-{p}", node, p)
    w.maintenance("maintenance-a", ["one", "two"], plan=PLAN_A)
    w.maintenance("maintenance-b", ["one", "three"], plan=PLAN_B)
    w.settle()
    d5, d10, d15 = entry("Default", 5000), entry("Default", 10000), entry("Default", 15000)
    assert w.view("maintenance-a", "one") == ("Evacuating", [d5])
    assert w.view("maintenance-a", "two") == ("Evacuating", [d5])
    assert w.view("maintenance-b", "one") == ("Evacuating (limited by maintenance-a)", [d5])
    assert w.view("maintenance-b", "three") == ("Evacuating", [d10])
    assert w.requested() == {"one-4000", "two-4000", "three-9000"}
    assert w.status("maintenance-a", "one")["podsEvacuating"] == 1
    assert w.status("maintenance-a", "one")["podsPendingEvacuation"] == 2

    # "If the node three is drained, then it has to wait for the node one"
    w.remove_pod("three-9000")
    w.settle()
    assert w.view("maintenance-b", "three") == ("Waiting for node one.", [d10])
    assert w.status("maintenance-b", "three")["podsEvacuating"] == 0

    # "If the node one is drained, we still have to wait for the maintenance-a to drain node two"
    w.remove_pod("one-4000")
    w.settle()
    assert w.view("maintenance-a", "one") == ("Waiting for node two.", [d5])
    assert w.view("maintenance-a", "two") == ("Evacuating", [d5])
    assert w.view("maintenance-b", "one") == ("Waiting for node two (maintenance-a).", [d5])
    assert w.view("maintenance-b", "three") == ("Waiting for node two (maintenance-a).", [d10])

    # "Once the node two drains, we can increment the drainTargets."
    w.remove_pod("two-4000")
    w.settle()
    assert w.view("maintenance-a", "one") == ("Evacuating (limited by maintenance-b)", [d10])
    assert w.view("maintenance-a", "two") == ("Evacuating", [d15])
    assert w.view("maintenance-b", "one") == ("Evacuating", [d10])
    assert w.view("maintenance-b", "three") == ("Waiting for node one.", [d10])
    assert w.requested() >= {"one-8000", "two-12000"}
    assert "one-14000" not in w.requested()
    assert [n for n, _, r, _ in w.events if r == "DrainPlanEntry"].count("maintenance-a") == 2

    # "If an intersecting maintenance-c is created, it will be fast-forwarded for node one"
    w.maintenance("maintenance-c", ["one", "four"], plan=PLAN_C)
    w.settle()
    assert w.view("maintenance-c", "one") == (
        "Evacuating (fast-forwarded by older maintenance-b)",
        [d10],
    )
    assert w.view("maintenance-c", "four") == ("Evacuating", [entry("Default", 2000)])
    ((kind, message),) = [(t, m) for n, t, r, m in w.events if r == "FastForwarded"]
    assert kind == "Warning"
    assert message == (
        "drainTargets of node one fast-forwarded to [Default<=10000] by older maintenance "
        "maintenance-b, ahead of this maintenance's drainPlan entry Default<=2000"
    )
    assert "four-3000" not in w.requested() and "four-1000" in w.requested()


def test_kep_pod_types_and_label_selectors_progression() -> None:
    w = World()
    postgres = {"matchLabels": {"app": "postgres"}}
    w.pod("web", "five", 500)
    w.pod("pg", "five", 1500, labels={"app": "postgres"})
    w.pod("batch", "five", 1500)
    w.pod("ds-low", "five", 900, kind="DaemonSet")
    w.pod("ds-high", "five", 2000001000, kind="DaemonSet")
    w.pod("etcd", "five", 2000001000, kind="Static")
    w.pod("agent", "five", 2000001000, kind="DaemonSet", skip=True)
    plan = [
        entry("Default", 1000),
        entry("Default", 2000, postgres),
        entry("Default", INT32_MAX),
        entry("DaemonSet", 1000),
        entry("DaemonSet", INT32_MAX),
        entry("Static", INT32_MAX),
    ]
    w.maintenance("m", ["five"], plan=plan)
    progression = []
    for pod in ("web", "pg", "batch", "ds-low", "ds-high", "etcd"):
        w.settle()
        progression.append((w.status("m", "five")["drainTargets"], sorted(w.requested())))
        w.remove_pod(pod)
    w.settle()
    d, pg = "Default", postgres
    assert progression == [
        ([entry(d, 1000), entry(d, 1000, pg)], ["web"]),
        ([entry(d, 1000), entry(d, 2000, pg)], ["pg", "web"]),
        # the KEP's default entries are merged in: 1000000000 comes before 2147483647
        ([entry(d, 1000000000), entry(d, 1000000000, pg)], ["batch", "pg", "web"]),
        (
            [entry(d, INT32_MAX), entry(d, INT32_MAX, pg), entry("DaemonSet", 1000)],
            ["batch", "ds-low", "pg", "web"],
        ),
        (
            [entry(d, INT32_MAX), entry(d, INT32_MAX, pg), entry("DaemonSet", 2000001000)],
            ["batch", "ds-high", "ds-low", "pg", "web"],
        ),
        (
            [
                entry(d, INT32_MAX),
                entry(d, INT32_MAX, pg),
                entry("DaemonSet", INT32_MAX),
                entry("Static", 2000001000),
            ],
            ["batch", "ds-high", "ds-low", "etcd", "pg", "web"],
        ),
    ]
    # the skipped pod is never targeted and does not keep the node from being drained
    assert (w.condition("m", "Drained") or {})["status"] == "True"
    assert "agent" not in w.requested()
    assert w.status("m", "five")["drainMessage"] == "Drained"
    assert w.status("m", "five")["podsPendingEvacuation"] == 0


# --- stages, finalizer, status ------------------------------------------------------------------


def test_idle_touches_nothing_but_reports_the_selected_nodes() -> None:
    w = World()
    w.pod("web", "one")
    w.maintenance("m", ["one", "two"], stage="Idle")
    a = w.decide("m")
    assert not (a.add_finalizer or a.cordon or a.uncordon or a.create_evictions or a.events)
    assert a.status is not None
    w.apply("m", a)
    assert [s["name"] for s in w.nms["m"]["status"]["stageStatuses"]] == ["Idle"]
    assert w.status("m", "one")["podsPendingEvacuation"] == 1
    assert w.cordoned("one") == (False, None)
    assert (w.condition("m", "Valid") or {})["status"] == "True"
    assert w.decide("m").idle  # settled: nothing changes on a second pass


def test_a_settled_maintenance_has_nothing_to_do_and_times_do_not_move() -> None:
    w = World()
    w.pod("web", "one")
    w.maintenance("m", ["one"])
    w.settle()
    before = copy.deepcopy(w.nms["m"]["status"])
    w.clock += timedelta(hours=1)
    assert w.decide("m").idle
    w.remove_pod("web")
    w.settle()
    after = w.nms["m"]["status"]
    valid = [c for c in after["conditions"] if c["type"] == "Valid"]
    assert valid == [c for c in before["conditions"] if c["type"] == "Valid"]
    drained = next(c for c in after["conditions"] if c["type"] == "Drained")
    assert drained["status"] == "True"
    assert drained["lastTransitionTime"] == "2024-05-01T11:00:01Z"
    assert after["stageStatuses"] == before["stageStatuses"]
    assert after["observedGeneration"] == 1


def test_stage_statuses_and_events_follow_the_stages() -> None:
    w = World()
    w.maintenance("m", ["one"], stage="Idle")
    w.settle()
    for stage in ("Cordon", "Drain", "Complete"):
        w.clock += timedelta(minutes=1)
        w.set_stage("m", stage)
        w.settle()
    stages = w.nms["m"]["status"]["stageStatuses"]
    assert [s["name"] for s in stages] == ["Idle", "Cordon", "Drain", "Complete"]
    assert len({s["startTimestamp"] for s in stages}) == 4
    assert [m for n, _, r, m in w.events if r == "StageStarted"] == [
        "Stage Cordon started",
        "Stage Drain started",
        "Stage Complete started",
    ]
    assert w.nms["m"]["status"]["observedGeneration"] == 4


def test_the_finalizer_is_added_when_the_maintenance_acts_and_removed_after_completion() -> None:
    w = World()
    w.pod("web", "one")
    w.maintenance("m", ["one"])
    a = w.decide("m")
    assert a.add_finalizer and not a.remove_finalizer
    w.settle()
    assert w.requested() == {"web"} and w.cordoned("one") == (True, "m")
    w.delete("m")
    a = w.decide("m")
    assert a.stage == Stage.COMPLETE and a.remove_finalizer
    assert [p.node for p in a.uncordon] == ["one"]
    assert [r.requesters for r in a.requester_patches] == [()]
    assert "Stage Complete started (the maintenance is being deleted)" in [
        e.message for e in a.events
    ]
    w.apply("m", a)
    assert "m" not in w.nms
    assert w.cordoned("one") == (False, None)
    assert w.requested() == set()


def test_deleting_without_our_finalizer_does_nothing() -> None:
    w = World()
    nm = w.maintenance("m", ["one"], stage="Idle")
    nm["metadata"]["deletionTimestamp"] = "2024-05-01T12:00:00Z"
    nm["metadata"]["finalizers"] = ["someone.else/keep"]
    assert w.decide("m").idle
    assert effective_stage(nm) == Stage.COMPLETE


# --- cordon ownership -----------------------------------------------------------------------------


def test_cordon_ownership_is_shared_handed_over_and_never_taken_from_a_human() -> None:
    w = World()
    w.cordon_by_hand("three")
    w.maintenance("a", ["one", "two"], stage="Cordon")
    w.maintenance("b", ["two", "three"], stage="Cordon")
    w.settle()
    assert w.cordoned("one") == (True, "a")
    assert w.cordoned("two") == (True, "a,b")
    assert w.cordoned("three") == (True, None)
    assert w.reasons("a").count("Cordoned") == 2 and w.reasons("b").count("Cordoned") == 0

    w.set_stage("a", "Complete")
    w.settle()
    assert w.cordoned("one") == (False, None)
    assert w.cordoned("two") == (True, "b")
    assert "Uncordoned" in w.reasons("a")

    w.set_stage("b", "Complete")
    w.settle()
    assert w.cordoned("two") == (False, None)
    assert w.cordoned("three") == (True, None)


def test_a_node_left_by_the_selector_is_released_and_a_later_holder_takes_over() -> None:
    w = World()
    w.maintenance("a", ["one", "two"], stage="Cordon")
    w.settle()
    # b selects node two but has not run yet when a lets go of it
    w.maintenance("b", ["two"], stage="Cordon")
    w.nms["a"]["spec"]["nodeSelector"] = by_names(["one"])
    w.nms["a"]["metadata"]["generation"] += 1
    a = w.decide("a")
    assert [(p.node, p.unschedulable, p.cordoned_by) for p in a.uncordon] == [("two", None, "b")]
    w.apply("a", a)
    assert w.cordoned("two") == (True, "b")


def test_a_hand_uncordoned_node_is_cordoned_again() -> None:
    w = World()
    w.maintenance("a", ["one"], stage="Cordon")
    w.settle()
    w.edit_node("one")["spec"]["unschedulable"] = False
    w.settle()
    assert w.cordoned("one") == (True, "a")


def test_stale_names_in_the_annotation_are_dropped() -> None:
    w = World()
    w.maintenance("a", ["one"], stage="Cordon")
    w.settle()
    w.edit_node("one")["metadata"]["annotations"][CORDONED_BY_ANNOTATION] = "a,gone"
    w.settle()
    assert w.cordoned("one") == (True, "a")


# --- eviction requests --------------------------------------------------------------------------


def test_eviction_request_shape() -> None:
    w = World()
    pod = w.pod("web", "one", labels={"app": "web", "tier": "front"}, namespace="shop")
    w.maintenance("m", ["one"])
    w.settle()
    uid = pod["metadata"]["uid"]
    assert w.ers[uid] == {
        "apiVersion": "nodeagent.io/v1alpha1",
        "kind": "EvictionRequest",
        "metadata": {
            "name": uid,
            "namespace": "shop",
            "labels": {"app": "web", "tier": "front", NODE_LABEL: "one"},
            # owned by its pod: the garbage collector deletes it with the pod
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "web", "uid": uid}],
            "resourceVersion": w.ers[uid]["metadata"]["resourceVersion"],
        },
        "spec": {
            "target": {"pod": {"name": "web", "uid": uid}},
            "requesters": [{"name": REQUESTER}],
        },
    }


def er_for(w: World, pod: Obj, requesters: list[str], **conditions: str) -> Obj:
    uid = pod["metadata"]["uid"]
    er: Obj = {
        "metadata": {
            "name": uid,
            "namespace": pod["metadata"]["namespace"],
            "uid": f"er-{uid}",
            "resourceVersion": w._rv(),
        },
        "spec": {
            "target": {"pod": {"name": pod["metadata"]["name"], "uid": uid}},
            "requesters": [{"name": r} for r in requesters],
        },
        "status": {
            "conditions": [{"type": t, "status": s} for t, s in conditions.items()],
        },
    }
    w.ers[uid] = er
    return er


def test_existing_requests_get_the_requester_and_keep_the_others() -> None:
    w = World()
    pod = w.pod("web", "one")
    er_for(w, pod, ["descheduler.example.com"])
    w.maintenance("m", ["one"])
    a = w.decide("m")
    assert not a.create_evictions
    assert [r.requesters for r in a.requester_patches] == [("descheduler.example.com", REQUESTER)]
    w.settle()
    w.set_stage("m", "Complete")
    w.settle()
    assert w.ers[pod["metadata"]["uid"]]["spec"]["requesters"] == [
        {"name": "descheduler.example.com"}
    ]


def test_a_canceled_request_for_a_targeted_pod_is_recreated() -> None:
    w = World()
    pod = w.pod("web", "one")
    er_for(w, pod, [], Canceled="True")
    w.maintenance("m", ["one"])
    a = w.decide("m")
    assert [(d.name, d.why) for d in a.delete_evictions] == [(pod["metadata"]["uid"], "recreate")]
    assert [c.body["metadata"]["name"] for c in a.create_evictions] == [pod["metadata"]["uid"]]


def test_finished_requests_of_gone_pods_are_deleted_when_only_we_asked() -> None:
    # ours are owned by their pods and go with them (garbage collection); one that is not
    # owned (made by an earlier version, say) is deleted when only we asked for it
    w = World()
    gone = w.pod("gone", "one")
    shared = w.pod("shared", "one")
    owned = w.pod("owned", "one")
    w.maintenance("m", ["one"])
    w.settle()
    for p in (gone, shared, owned):
        er = copy.deepcopy(w.ers[p["metadata"]["uid"]])  # new objects, as an informer makes
        er["status"] = {"conditions": [{"type": "Evicted", "status": "True"}]}
        if p is gone:
            del er["metadata"]["ownerReferences"]
        if p is shared:
            er["spec"]["requesters"].append({"name": "other.example.com"})
        w.ers[p["metadata"]["uid"]] = er
    for name in ("gone", "shared", "owned"):
        w.remove_pod(name)
    a = w.decide("m")
    assert [(d.name, d.why) for d in a.delete_evictions] == [(gone["metadata"]["uid"], "evicted")]
    assert not a.requester_patches


def test_requests_of_gone_pods_keep_the_requester_while_draining() -> None:
    w = World()
    w.pod("web", "one")
    w.pod("db", "one", 5000)
    w.maintenance("m", ["one"], plan=[entry("Default", 1000)])
    w.settle()
    w.remove_pod("web")
    w.settle()
    assert w.requested() == {"web", "db"}


def test_complete_keeps_the_requester_where_another_drain_targets_the_pod() -> None:
    w = World()
    w.pod("web", "one")
    w.pod("api", "two")
    w.maintenance("a", ["one", "two"])
    w.maintenance("b", ["two"])
    w.settle()
    assert w.requested() == {"web", "api"}
    w.set_stage("a", "Complete")
    w.settle()
    assert w.requested() == {"api"}
    assert w.cordoned("two") == (True, "b") and w.cordoned("one") == (False, None)


# --- validation -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "reason", "message"),
    [
        (
            {"drainPlan": [entry("Default", 10), entry("Default", 10)]},
            "InvalidDrainPlan",
            "spec.drainPlan[1]: duplicate of spec.drainPlan[0]",
        ),
        (
            {"drainPlan": [entry("Static", 10), entry("DaemonSet", 10)]},
            "InvalidDrainPlan",
            "spec.drainPlan[1]: podType DaemonSet comes after podType Static (entry 0); entries "
            "must be ordered Default, DaemonSet, Static by ascending priority",
        ),
        (
            {"nodeSelector": {"nodeSelectorTerms": []}},
            "InvalidNodeSelector",
            "spec.nodeSelector.nodeSelectorTerms: must have at least one node selector term",
        ),
        (
            {
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "spec.x", "operator": "In", "values": ["a"]}]}
                    ]
                }
            },
            "InvalidNodeSelector",
            "spec.nodeSelector.nodeSelectorTerms[0].matchFields[0].key: only metadata.name is "
            "supported",
        ),
        (
            {"stage": "Later"},
            "InvalidStage",
            "spec.stage: unknown stage 'Later'; must be one of Idle, Cordon, Drain, Complete",
        ),
    ],
)
def test_invalid_specs_are_reported_and_touch_nothing(spec: Obj, reason: str, message: str) -> None:
    w = World()
    w.pod("web", "one")
    nm = w.maintenance("m", ["one"])
    nm["spec"].update(spec)
    a = w.decide("m")
    assert not (a.add_finalizer or a.cordon or a.uncordon or a.create_evictions)
    assert not (a.requester_patches or a.delete_evictions or a.remove_finalizer)
    assert [(e.type, e.reason, e.message) for e in a.events] == [("Warning", reason, message)]
    assert a.status is not None
    assert set(a.status) == {"observedGeneration", "conditions", "summary"}
    blocked = f"{reason}: {message}"  # one line of at most 160 characters
    blocked = blocked if len(blocked) <= 160 else blocked[:157] + "..."
    assert a.status["summary"] == {"blockedBy": blocked}
    (valid,) = a.status["conditions"]
    assert (valid["type"], valid["status"], valid["reason"], valid["message"]) == (
        "Valid",
        "False",
        reason,
        message,
    )
    w.apply("m", a)
    assert w.decide("m").idle  # reported once


def test_a_backwards_stage_or_changed_plan_stops_the_maintenance_where_it_is() -> None:
    w = World()
    w.pod("web", "one")
    w.maintenance("m", ["one"], plan=[entry("Default", 10)])
    w.settle()
    w.set_stage("m", "Cordon")
    a = w.decide("m")
    assert a.validity.reason == "InvalidStageTransition"
    assert a.validity.message == (
        "spec.stage: cannot go back from Drain to Cordon; allowed transitions are Idle -> Cordon "
        "| Drain | Complete, Cordon -> Drain | Complete, Drain -> Complete"
    )
    assert not (a.cordon or a.uncordon or a.requester_patches)
    w.settle()
    assert w.cordoned("one") == (True, "m") and w.requested() == {"web"}
    w.set_stage("m", "Drain")
    w.nms["m"]["spec"]["drainPlan"] = [entry("Default", 20)]
    assert validate(w.nms["m"]).message == (
        "spec.drainPlan: changed after the maintenance was created; drainPlan is immutable"
    )
    # deletion still completes an invalid maintenance, so the finalizer can go
    w.delete("m")
    w.settle()
    assert "m" not in w.nms and w.cordoned("one") == (False, None) and w.requested() == set()


def test_an_invalid_maintenance_keeps_its_cordon_against_others() -> None:
    w = World()
    w.maintenance("a", ["one"], stage="Cordon")
    w.maintenance("b", ["one"], stage="Cordon")
    w.settle()
    w.set_stage("a", "Idle")  # backwards: a is invalid and still holds node one
    w.set_stage("b", "Complete")
    w.settle()
    assert w.cordoned("one") == (True, "a")


# --- membership helpers --------------------------------------------------------------------------


def test_connected_components_through_shared_nodes() -> None:
    sets = {
        "a": frozenset({"one", "two"}),
        "b": frozenset({"two", "three"}),
        "c": frozenset({"three"}),
        "d": frozenset({"four"}),
    }
    assert connected(["a"], sets) == ({"a", "b", "c"}, {"one", "two", "three"})
    assert connected(["d"], sets) == ({"d"}, {"four"})
    assert connected(["missing"], sets) == (set(), set())


def test_maintenance_nodes_include_status_and_held_nodes() -> None:
    w = World()
    nm = w.maintenance("m", ["one"])
    nm["status"] = {"nodeStatuses": [{"nodeRef": {"name": "two"}}]}
    w.edit_node("three")["metadata"]["annotations"] = {CORDONED_BY_ANNOTATION: "x,m"}
    assert maintenance_nodes(nm, w.nodes) == {"one", "two", "three"}


# --- properties -----------------------------------------------------------------------------------


NODES = ("n1", "n2", "n3", "n4")
PRIORITIES = (0, 1000, 5000, 1000000000, 2000000000, 2000001000)
TYPES = ("Default", "DaemonSet", "Static")


@st.composite
def worlds(draw: st.DrawFn) -> World:
    w = World(NODES)
    for i in range(draw(st.integers(1, 12))):
        w.pod(
            f"p{i}",
            draw(st.sampled_from(NODES)),
            draw(st.sampled_from(PRIORITIES)),
            draw(st.sampled_from(TYPES)),
            labels={"tier": draw(st.sampled_from(["a", "b"]))},
            skip=draw(st.booleans()) and draw(st.integers(0, 5)) == 0,
        )
    for j in range(draw(st.integers(1, 3))):
        nodes = draw(st.sets(st.sampled_from(NODES), min_size=1, max_size=3))
        raw = draw(
            st.lists(
                st.tuples(
                    st.sampled_from(TYPES),
                    st.sampled_from((100, 1000, 3000, 5000, 15000)),
                    st.booleans(),
                ),
                max_size=4,
                unique=True,
            )
        )
        plan = [
            entry(t, p, {"matchLabels": {"tier": "a"}} if sel else None)
            for t, p, sel in sorted(raw, key=lambda x: (TYPES.index(x[0]), x[1], not x[2]))
        ]
        w.maintenance(f"m{j}", nodes, plan=plan)
    return w


def node_targets(w: World, nm: str, node: str) -> list[Any]:
    return entries_from_dicts(w.status(nm, node)["drainTargets"], "t")


def dump(w: World, other: str, node: str) -> str:
    lines = [f"other={other} node={node}"]
    for name, nm in w.nms.items():
        status = nm.get("status", {})
        nodes = sorted(maintenance_nodes(nm, w.nodes))
        lines.append(f"{name} {nodes} index={status.get('drainPlanIndex')}")
        lines.append(f"   plan={nm['spec'].get('drainPlan')}")
        for ns in status.get("nodeStatuses") or []:
            lines.append(f"   {ns['nodeRef']['name']}: {ns['drainTargets']} {ns['drainMessage']}")
    for p in w.pods.values():
        lines.append(f"pod {p['metadata']['name']} {p['spec']['nodeName']} {classify(p)}")
    return "\n".join(lines)


def check_invariants(w: World, previous: dict[tuple[str, str], list[Any]]) -> None:
    for name, nm in w.nms.items():
        status = nm.get("status") or {}
        plan = effective_plan(nm["spec"].get("drainPlan"))
        index = status.get("drainPlanIndex", 0)
        for ns in status.get("nodeStatuses") or []:
            node = ns["nodeRef"]["name"]
            targets = entries_from_dicts(ns["drainTargets"], "t")
            # never backwards
            if (name, node) in previous:
                assert targets_within(previous[(name, node)], targets), (name, node)
            previous[(name, node)] = targets
            # all maintenances were created together: nobody runs ahead of anyone's entry
            for other, onm in w.nms.items():
                if node in maintenance_nodes(onm, w.nodes):
                    oplan = effective_plan(onm["spec"].get("drainPlan"))
                    oindex = (onm.get("status") or {}).get("drainPlanIndex", 0)
                    assert targets_within(targets, plan_targets(oplan, oindex)), dump(
                        w, other, node
                    )
            assert targets_within(targets, plan_targets(plan, index))
            # Static only once no Default or DaemonSet pod is left around the node
            if any(t.pod_type == PodType.STATIC for t in targets):
                around = connected(
                    [name], {n: maintenance_nodes(o, w.nodes) for n, o in w.nms.items()}
                )[1]
                for pod in w.pods.values():
                    c = classify(pod)
                    if pod["spec"]["nodeName"] in around and not c.skip:
                        assert c.pod_type == PodType.STATIC, (name, node, pod["metadata"]["name"])
    # evictions are only ever requested for targeted, unskipped pods
    for er in w.ers.values():
        target = w.pods.get(er["metadata"]["name"])
        if target is not None and {"name": REQUESTER} in er["spec"]["requesters"]:
            assert not classify(target).skip


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(w=worlds(), data=st.data())
def test_random_drains_are_safe_and_finish(w: World, data: st.DataObject) -> None:
    previous: dict[tuple[str, str], list[Any]] = {}
    w.settle()
    check_invariants(w, previous)
    for _ in range(40):
        targeted = sorted(
            {
                er["spec"]["target"]["pod"]["name"]
                for er in w.ers.values()
                if er["metadata"]["name"] in w.pods
            }
        )
        if not targeted:
            break
        for name in data.draw(st.sets(st.sampled_from(targeted), min_size=1)):
            w.remove_pod(name)
        w.settle()
        check_invariants(w, previous)
    # evicting whatever is requested always drains every maintenance
    for name in w.nms:
        assert (w.condition(name, "Drained") or {}).get("status") == "True", name
    left = {p["metadata"]["name"] for p in w.pods.values() if not classify(p).skip}
    covered = set().union(*(maintenance_nodes(nm, w.nodes) for nm in w.nms.values()))
    assert not {
        n
        for n in left
        if w.pods
        and any(
            p["metadata"]["name"] == n and p["spec"]["nodeName"] in covered for p in w.pods.values()
        )
    }
    # completing everything withdraws every request and uncordons every node
    for name in list(w.nms):
        w.set_stage(name, "Complete")
    w.settle()
    assert w.requested() == set()
    assert all(w.cordoned(n) == (False, None) for n in NODES)


def test_a_maintenance_of_every_node_warns_once_per_stage() -> None:
    w = World(nodes=("one", "two"))
    w.maintenance("all", ["one", "two"], stage="Cordon")
    w.maintenance("some", ["one"], stage="Cordon")
    w.settle()
    w.set_stage("all", "Drain")
    w.settle()
    warned = [(n, m) for n, t, r, m in w.events if r == "SelectsEveryNode"]
    assert [n for n, _ in warned] == ["all", "all"]
    assert warned[0][1].startswith("The maintenance selects every node of the cluster (2)")
    assert all(t == "Warning" for _, t, r, _ in w.events if r == "SelectsEveryNode")


def test_complete_undoes_the_cordon_even_after_an_invalid_plan_edit() -> None:
    """Where CEL is not enforced, drainPlan can be changed; the maintenance is then invalid and
    acts no more, but Complete must still uncordon what it cordoned."""
    w = World(nodes=("one", "two"))
    w.maintenance("m", ["one"], stage="Cordon", plan=[entry("Default", 10)])
    w.settle()
    assert w.cordoned("one") == (True, "m")
    nm = w.nms["m"]
    nm["spec"]["drainPlan"] = [entry("Default", 20)]
    nm["metadata"]["generation"] += 1
    w.settle()
    assert (w.condition("m", "Valid") or {}).get("status") == "False"
    w.set_stage("m", "Complete")
    w.settle()
    assert w.cordoned("one") == (False, None)


def test_an_ignored_interceptor_annotation_is_named_on_the_drain_message() -> None:
    # The EvictionRequest controller ignores a malformed nodeagent.io/eviction-interceptors
    # annotation (the defaults take its place); the drain says so where it is watched.
    w = World()
    bad = w.pod("web", "one")
    bad["metadata"]["annotations"]["nodeagent.io/eviction-interceptors"] = ",".join(
        f"i{n}.example.com" for n in range(16)
    )
    w.pod("db", "one")
    w.maintenance("m", ["one"])
    w.settle()
    message = w.status("m", "one")["drainMessage"]
    assert message.startswith("Evacuating; pod default/web: annotation nodeagent.io/eviction-")
    assert message.endswith("; the default interceptors are used instead"), message
    assert "16 interceptors" in message and "db" not in message
    w.remove_pod("web")
    w.remove_pod("db")
    w.settle()
    assert w.status("m", "one")["drainMessage"] == "Drained"


# --- status.summary (the kubectl get columns) ---------------------------------------------------


def summary(w: World, nm: str) -> Obj:
    return dict(w.nms[nm]["status"]["summary"])


def refused(w: World, pod: str, retries: int, cause: str) -> None:
    """The EvictionRequest controller's imperative interceptor reports a refused eviction."""
    (uid,) = [u for u, p in w.pods.items() if p["metadata"]["name"] == pod]
    er = copy.deepcopy(w.ers[uid])  # a new object, as an informer's cache makes one
    w.ers[uid] = er
    er["status"] = {
        "interceptors": [
            {
                "name": "imperative-eviction.k8s.io",
                "message": imperative_refusal_message(retries, cause),
            }
        ]
    }
    er["metadata"]["resourceVersion"] = w._rv()


PDB_REFUSAL = (
    "429 TooManyRequests: Cannot evict pod as it would violate the pod's disruption budget. "
    "The disruption budget web-pdb needs 2 healthy pods and has 2 currently"
)


def test_summary_counts_nodes_and_pods_and_names_the_entry() -> None:
    w = World()
    w.pod("web", "one")
    w.pod("db", "one", 2000)
    w.pod("cache", "two", 2000)
    w.maintenance("m", ["one", "two", "three"], stage="Idle", plan=[entry("Default", 1000)])
    w.settle()
    assert summary(w, "m") == {"nodes": "3 selected", "podsLeft": 3}
    w.set_stage("m", "Cordon")
    w.settle()
    assert summary(w, "m") == {"nodes": "3 cordoned", "podsLeft": 3}

    w.set_stage("m", "Drain")
    w.settle()
    # node two waits for node one's pods of the first entry
    assert summary(w, "m") == {
        "nodes": "1/3 drained",
        "podsLeft": 3,
        "entry": "Default<=1000 (1 of 13)",
        "blockedBy": "node two: Waiting for node one.",
    }
    w.remove_pod("web")
    w.settle()
    assert summary(w, "m") == {
        "nodes": "1/3 drained",
        "podsLeft": 2,
        "entry": "Default<=1000000000 (2 of 13)",
    }
    w.remove_pod("db")
    w.remove_pod("cache")
    w.settle()
    assert summary(w, "m") == {
        "nodes": "3/3 drained",
        "podsLeft": 0,
        "entry": "Static<=2147483647 (13 of 13)",  # a drained maintenance ends its plan
    }
    w.set_stage("m", "Complete")
    w.settle()
    assert summary(w, "m")["nodes"] == "3/3 drained"


def test_blocked_by_another_maintenance() -> None:
    w = World()
    for node, prios in {"one": [4000, 8000], "three": [9000, 14000]}.items():
        for p in prios:
            w.pod(f"{node}-{p}", node, p)
    w.maintenance("maintenance-a", ["one", "two"], plan=PLAN_A)
    w.maintenance("maintenance-b", ["one", "three"], plan=PLAN_B)
    w.settle()
    assert "blockedBy" not in summary(w, "maintenance-a")
    assert summary(w, "maintenance-b")["blockedBy"] == (
        "node one: Evacuating (limited by maintenance-a)"
    )
    assert summary(w, "maintenance-b")["entry"] == "Default<=10000 (1 of 15)"


def test_blocked_by_a_refused_eviction_names_the_pod_and_the_budget() -> None:
    w = World()
    w.pod("web-1", "one")
    w.pod("web-2", "one")
    w.maintenance("m", ["one"])
    w.settle()
    assert "blockedBy" not in summary(w, "m")
    refused(w, "web-2", 1, PDB_REFUSAL)
    w.settle()
    assert summary(w, "m")["blockedBy"] == (
        "pod default/web-2: eviction refused by PodDisruptionBudget web-pdb"
    )
    # every retry changes the request, not what the summary shows: nothing to write
    refused(w, "web-2", 2, PDB_REFUSAL.replace("has 2", "has 1"))
    assert w.decide("m").idle
    # the first refused pod by name; another cause is shown as the API server said it
    refused(w, "web-1", 1, "500 InternalError: etcd timeout")
    w.settle()
    assert summary(w, "m")["blockedBy"] == (
        "pod default/web-1: eviction refused by 500 InternalError: etcd timeout"
    )
    # the pods go: nothing holds the maintenance any more
    w.remove_pod("web-1")
    w.remove_pod("web-2")
    w.settle()
    assert summary(w, "m") == {
        "nodes": "1/1 drained",
        "podsLeft": 0,
        "entry": "Static<=2147483647 (12 of 12)",
    }


def test_complete_drops_blocked_by_and_invalid_says_why() -> None:
    w = World()
    w.pod("web", "one")
    w.maintenance("m", ["one"])
    w.settle()
    refused(w, "web", 1, PDB_REFUSAL)
    w.settle()
    assert "blockedBy" in summary(w, "m")
    w.nms["m"]["spec"]["drainPlan"] = [entry("Default", 5)]  # changed: immutable
    w.nms["m"]["metadata"]["generation"] += 1
    w.settle()
    blocked = summary(w, "m")["blockedBy"]
    assert blocked.startswith("InvalidDrainPlan: ") and "\n" not in blocked
    assert summary(w, "m")["podsLeft"] == 1  # the last drain status stays
    w.set_stage("m", "Complete")
    w.settle()
    assert "blockedBy" not in summary(w, "m")
    assert summary(w, "m")["nodes"] == "0/1 drained"


def test_only_pods_left_is_progress() -> None:
    old = {"summary": {"nodes": "0/1 drained", "podsLeft": 3, "blockedBy": "x"}}
    assert progress_only(old, {"summary": {**old["summary"], "podsLeft": 2}})
    assert not progress_only(old, {"summary": {**old["summary"], "nodes": "1/1 drained"}})
    assert not progress_only(old, {"summary": {"nodes": "0/1 drained", "podsLeft": 2}})


def test_a_terminating_pod_gets_no_new_request() -> None:
    # Its request went with it (owned, garbage-collected) while the pod informer still shows
    # it terminating: asking again would only make a request for a pod about to vanish.
    w = World()
    web = w.pod("web", "one")
    w.maintenance("m", ["one"])
    w.settle()
    uid = web["metadata"]["uid"]
    assert uid in w.ers
    web["metadata"]["deletionTimestamp"] = "2030-01-01T12:00:00Z"
    del w.ers[uid]
    a = w.decide("m")
    assert not a.create_evictions
