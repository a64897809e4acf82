"""The DaemonSet controller: one pod per eligible node, bound with spec.nodeName.

Eligibility follows nodeShouldRunDaemonPod: nodeSelector and required node affinity must
match; an untolerated NoExecute taint means no pod (an existing one is deleted); an untolerated
NoSchedule taint means no new pod but an existing one keeps running. Daemon pods get the
tolerations the real controller adds, so cordoned, not-ready and pressured nodes still run
them. A deleted daemon pod is replaced once the old object is gone. A changed template rolls
out by deleting outdated pods, at most maxUnavailable nodes at a time (OnDelete waits).
"""

from __future__ import annotations

import copy
import logging
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from nodeagent_testbed.sim.actors.base import (
    Controller,
    Key,
    OwnerIndex,
    controller_key,
    int_or_percent,
    key_of,
    omit_zero,
    parse_time,
    pod_phase,
    pod_ready,
    terminating,
    uid_of,
)
from nodeagent_testbed.sim.actors.placement import matches_node_affinity, untolerated_taint
from nodeagent_testbed.sim.actors.predicates import any_tolerates
from nodeagent_testbed.sim.actors.templates import pod_from_template, template_hash
from nodeagent_testbed.sim.store import Change, Obj, Store

log = logging.getLogger(__name__)

REVISION_LABEL = "controller-revision-hash"

# what the real DaemonSet controller adds to every daemon pod (util.AddOrUpdateDaemonPodTolerations)
DAEMON_TOLERATIONS: tuple[dict[str, str], ...] = (
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
)
HOST_NETWORK_TOLERATION = {
    "key": "node.kubernetes.io/network-unavailable",
    "operator": "Exists",
    "effect": "NoSchedule",
}


def daemon_pod_spec(template: dict[str, Any]) -> dict[str, Any]:
    spec = copy.deepcopy(template.get("spec") or {})
    tolerations = spec.setdefault("tolerations", [])
    extra = list(DAEMON_TOLERATIONS)
    if spec.get("hostNetwork"):
        extra.append(HOST_NETWORK_TOLERATION)
    for t in extra:
        if not any_tolerates(tolerations, {**t, "value": ""}):
            tolerations.append(dict(t))
    return spec


def placement(spec: dict[str, Any], node: Obj) -> tuple[bool, bool]:
    """(should run a new pod, may keep an existing one) on `node`."""
    if not matches_node_affinity(spec, node):
        return False, False
    if untolerated_taint(spec, node, ("NoExecute",)) is not None:
        return False, False
    if untolerated_taint(spec, node, ("NoSchedule",)) is not None:
        return False, True
    return True, True


def _newest_last(pod: Obj) -> tuple[float, str]:
    return (parse_time(pod["metadata"].get("creationTimestamp")) or 0.0, pod["metadata"]["name"])


class DaemonSetController(Controller[Key]):
    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.pods = store.resource("", "v1", "pods")
        self.nodes = store.resource("", "v1", "nodes")
        self.daemonsets = store.resource("apps", "v1", "daemonsets")
        self.index = OwnerIndex(self.pods.key)

    def on_change(self, change: Change) -> None:
        kind, rkey, old, new = change
        if rkey == self.daemonsets.key:
            self.queue.add(key_of(new))
        elif rkey == self.pods.key:
            self.index.observe(change)
            for obj in (old, new):
                owner = controller_key(obj, "DaemonSet")
                if owner is not None:
                    self.queue.add(owner)
        elif rkey == self.nodes.key and (
            kind == "DELETED" or _placement_view(old) != _placement_view(new)
        ):
            for ds in self.store.iter_kind(self.daemonsets):
                self.queue.add(key_of(ds))

    def initial_keys(self) -> Iterable[Key]:
        self.index.rebuild(self.store.iter_kind(self.pods))
        return [key_of(ds) for ds in self.store.iter_kind(self.daemonsets)]

    def reconcile(self, key: Key) -> None:
        ds = self.store.find(self.daemonsets, *key)
        if ds is None:
            return
        template = (ds.get("spec") or {}).get("template") or {}
        spec = daemon_pod_spec(template)
        revision = template_hash(template)
        by_node: defaultdict[str, list[Obj]] = defaultdict(list)
        for k in self.index.dependents(uid_of(ds)):
            pod = self.store.find(self.pods, *k)
            if pod is not None:
                by_node[(pod.get("spec") or {}).get("nodeName") or ""].append(pod)
        counts: defaultdict[str, int] = defaultdict(int)
        outdated: list[Obj] = []
        manage = not terminating(ds)
        for node in self.store.list(self.nodes):
            node_name = node["metadata"]["name"]
            should_run, may_keep = placement(spec, node)
            pods = sorted(by_node.pop(node_name, []), key=_newest_last)
            live = [p for p in pods if not terminating(p)]
            if manage:
                live = self._sync_node(
                    ds, spec, node_name, pods, live, should_run, may_keep, revision
                )
            if should_run:
                counts["desired"] += 1
                if live:
                    pod = live[0]
                    counts["current"] += 1
                    ready = pod_phase(pod) == "Running" and pod_ready(pod)
                    counts["ready"] += ready
                    counts["updated"] += _revision(pod) == revision
                    if _revision(pod) != revision:
                        outdated.append(pod)
            elif live:
                counts["misscheduled"] += 1
        if manage:
            for pods in by_node.values():  # bound to nodes that no longer exist
                for pod in pods:
                    self.store.delete(self.pods, *key_of(pod), grace_period=0)
            self._roll(ds, counts, outdated)
        self._update_status(ds, counts)

    def _sync_node(
        self,
        ds: Obj,
        spec: dict[str, Any],
        node_name: str,
        pods: list[Obj],
        live: list[Obj],
        should_run: bool,
        may_keep: bool,
        revision: str,
    ) -> list[Obj]:
        """Create or delete daemon pods on one node; returns the live pods left there."""
        if should_run and not pods:
            pod = pod_from_template(
                ds,
                {**(ds["spec"].get("template") or {}), "spec": spec},
                labels={
                    REVISION_LABEL: revision,
                    "pod-template-generation": str(ds["metadata"].get("generation", 1)),
                },
            )
            pod["spec"]["nodeName"] = node_name
            return [self.store.create(self.pods, ds["metadata"]["namespace"], pod)]
        keep: list[Obj] = []
        for pod in live:
            failed = pod_phase(pod) == "Failed"
            if (should_run or may_keep) and not failed and not keep:
                keep.append(pod)
            else:
                self.store.delete(self.pods, *key_of(pod))
        return keep

    def _roll(self, ds: Obj, counts: dict[str, int], outdated: list[Obj]) -> None:
        strategy = (ds.get("spec") or {}).get("updateStrategy") or {}
        if strategy.get("type", "RollingUpdate") != "RollingUpdate":
            return
        raw = (strategy.get("rollingUpdate") or {}).get("maxUnavailable", 1)
        budget = int_or_percent(raw, counts["desired"], round_up=True)
        budget -= counts["desired"] - counts["ready"]
        # outdated pods that are unavailable anyway go at once, the others within the budget
        for pod in sorted(outdated, key=pod_ready):
            if pod_ready(pod):
                if budget <= 0:
                    return
                budget -= 1
            self.store.delete(self.pods, *key_of(pod))

    def _update_status(self, ds: Obj, counts: dict[str, int]) -> None:
        status = omit_zero(
            {
                "currentNumberScheduled": counts["current"],
                "numberMisscheduled": counts["misscheduled"],
                "desiredNumberScheduled": counts["desired"],
                "numberReady": counts["ready"],
                "observedGeneration": ds["metadata"].get("generation", 1),
                "updatedNumberScheduled": counts["updated"],
                "numberAvailable": counts["ready"],
                "numberUnavailable": counts["desired"] - counts["ready"],
            },
            "currentNumberScheduled",
            "numberMisscheduled",
            "desiredNumberScheduled",
            "numberReady",
        )
        if (ds.get("status") or {}) != status:
            self.store.mutate(
                self.daemonsets, *key_of(ds), lambda o: o.update(status=status), "status"
            )


def _revision(pod: Obj) -> str | None:
    return (pod["metadata"].get("labels") or {}).get(REVISION_LABEL)


def _placement_view(node: Obj | None) -> Any:
    if node is None:
        return None
    return (node["metadata"].get("labels"), (node.get("spec") or {}).get("taints"))
