"""The default scheduler: binds each pending pod to the least loaded node that fits it."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable
from typing import Any

from nodeagent_testbed.sim.actors.base import (
    Controller,
    Key,
    key_of,
    pod_phase,
    set_condition,
    terminating,
)
from nodeagent_testbed.sim.actors.placement import unfit_reason
from nodeagent_testbed.sim.store import Change, Obj, Store, now_iso

log = logging.getLogger(__name__)

SCHEDULER_NAME = "default-scheduler"


def _wants_scheduling(pod: Obj) -> bool:
    spec = pod.get("spec") or {}
    return (
        not spec.get("nodeName")
        and not terminating(pod)
        and spec.get("schedulerName", SCHEDULER_NAME) == SCHEDULER_NAME
        and pod_phase(pod) not in ("Succeeded", "Failed")
    )


def _fit_view(node: Obj | None) -> Any:
    """The parts of a node that decide whether pods fit it (heartbeats are not among them)."""
    if node is None:
        return None
    conditions = (node.get("status") or {}).get("conditions") or []
    return (
        node["metadata"].get("labels"),
        node["metadata"].get("deletionTimestamp"),
        (node.get("spec") or {}).get("unschedulable"),
        (node.get("spec") or {}).get("taints"),
        [(c.get("type"), c.get("status")) for c in conditions],
    )


class Scheduler(Controller[Key]):
    """Binds pods without spec.nodeName; pods that fit no node wait until a node changes.

    Filters: node Ready, not cordoned (unless the pod tolerates the unschedulable taint),
    NoSchedule/NoExecute taints tolerated, nodeSelector and required node affinity. Among the
    fitting nodes the one running the fewest pods wins, ties broken by name. No resources,
    no pod (anti-)affinity, no preemption.
    """

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.pods = store.resource("", "v1", "pods")
        self.nodes = store.resource("", "v1", "nodes")
        self._node_of: dict[Key, str] = {}
        self._load: Counter[str] = Counter()
        self._waiting: set[Key] = set()

    def on_change(self, change: Change) -> None:
        kind, rkey, old, new = change
        if rkey == self.pods.key:
            key = key_of(new)
            self._count(key, None if kind == "DELETED" else new)
            if kind != "DELETED" and _wants_scheduling(new):
                self.queue.add(key)
            else:
                self._waiting.discard(key)
        elif rkey == self.nodes.key and kind != "DELETED" and _fit_view(old) != _fit_view(new):
            for key in self._waiting:
                self.queue.add(key)

    def _count(self, key: Key, pod: Obj | None) -> None:
        node = None
        if pod is not None and pod_phase(pod) not in ("Succeeded", "Failed"):
            node = (pod.get("spec") or {}).get("nodeName")
        before = self._node_of.pop(key, None)
        if before is not None:
            self._load[before] -= 1
        if node:
            self._node_of[key] = node
            self._load[node] += 1

    def initial_keys(self) -> Iterable[Key]:
        self._node_of.clear()
        self._load.clear()
        for pod in self.store.iter_kind(self.pods):
            self._count(key_of(pod), pod)
            if _wants_scheduling(pod):
                yield key_of(pod)

    def reconcile(self, key: Key) -> None:
        pod = self.store.find(self.pods, *key)
        if pod is None or not _wants_scheduling(pod):
            self._waiting.discard(key)
            return
        spec = pod.get("spec") or {}
        nodes = self.store.list(self.nodes)
        reasons: Counter[str] = Counter()
        best: tuple[int, str] | None = None
        for node in nodes:
            why = unfit_reason(spec, node)
            if why is not None:
                reasons[why] += 1
                continue
            rank = (self._load[node["metadata"]["name"]], node["metadata"]["name"])
            if best is None or rank < best:
                best = rank
        if best is None:
            self._waiting.add(key)
            self._mark_unschedulable(key, _unschedulable_message(len(nodes), reasons))
            return
        self._waiting.discard(key)
        self._bind(key, best[1])

    def _bind(self, key: Key, node: str) -> None:
        def bind(p: Obj) -> None:
            p["spec"]["nodeName"] = node

        def scheduled(p: Obj) -> None:
            st = p.setdefault("status", {})
            st["conditions"] = set_condition(
                st.get("conditions") or [],
                {"type": "PodScheduled", "status": "True", "lastProbeTime": None},
                now_iso(),
            )
            for c in st["conditions"]:
                if c["type"] == "PodScheduled":
                    c.pop("reason", None)
                    c.pop("message", None)

        self.store.mutate(self.pods, *key, bind)
        self.store.mutate(self.pods, *key, scheduled, "status")
        log.debug("bound pod %s/%s to %s", key[0], key[1], node)

    def _mark_unschedulable(self, key: Key, message: str) -> None:
        def unschedulable(p: Obj) -> None:
            st = p.setdefault("status", {})
            st["conditions"] = set_condition(
                st.get("conditions") or [],
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": message,
                    "lastProbeTime": None,
                },
                now_iso(),
            )

        self.store.mutate(self.pods, *key, unschedulable, "status")


def _unschedulable_message(total: int, reasons: Counter[str]) -> str:
    if total == 0:
        return "no nodes available to schedule pods"
    parts = ", ".join(f"{n} {why}" for why, n in sorted(reasons.items()))
    return f"0/{total} nodes are available: {parts}."
