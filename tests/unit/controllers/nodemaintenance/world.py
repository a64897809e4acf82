"""`World` plays the API server and the controller shell for the pure NodeMaintenance
decision: it applies each decision's actions to plain dicts and runs every maintenance until
nothing is left to do. With it, the KEP-4212 example plans and the helpers that build drain plan
entries, read `status.summary` and report a refused eviction."""

from __future__ import annotations

import copy
import dataclasses
import itertools
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from nodeagent.model.bodies import as_eviction_request, as_maintenance
from nodeagent.model.draintargets.pods import PodInfoMemo
from nodeagent.model.interceptors.imperative import imperative_refusal_message
from nodeagent.model.interceptors.requests import EvictionRequestView
from nodeagent.model.memo import ObjectMemo, Recall
from nodeagent.model.names import CORDONED_BY_ANNOTATION, FINALIZER, REQUESTER
from nodeagent.model.nodemaintenance.actions import Actions, NodePatch
from nodeagent.model.nodemaintenance.decide import decide
from nodeagent.model.nodemaintenance.inputs import Inputs

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


# the KEP's example plans
PLAN_A = [entry("Default", 5000), entry("Default", 15000), entry("DaemonSet", 3000)]
PLAN_B = [entry("Default", 10000), entry("Default", 15000), entry("DaemonSet", 4000)]
PLAN_C = [entry("Default", 2000), entry("Default", 15000)]


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
