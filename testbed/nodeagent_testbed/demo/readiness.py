"""A stand-in for readiness probes on the simulated cluster.

The simulated kubelet reports a pod Ready the moment it starts, so a replacement pod restores
its disruption budget at once and a PodDisruptionBudget never holds an eviction back. Real
services take a while to pass their readiness probe: a pod annotated
`demo.nodeagent.io/ready-after-seconds` here reports Ready only that long after it started,
which is what makes the budgets refuse evictions (429) for a moment during the demo.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from nodeagent_testbed.sim.actors.base import set_condition
from nodeagent_testbed.sim.store import Change, Obj, Store, now_iso

log = logging.getLogger(__name__)

READY_AFTER = "demo.nodeagent.io/ready-after-seconds"
_READINESS_CONDITIONS = ("ContainersReady", "Ready")


def _ready_after(pod: Obj) -> float | None:
    raw = (pod["metadata"].get("annotations") or {}).get(READY_AFTER)
    try:
        return None if raw is None else max(0.0, float(raw))
    except ValueError:
        return None


def _is_ready(pod: Obj) -> bool:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return bool(c.get("status") == "True")
    return False


class ReadinessDelay:
    """Install with `store.listeners.append(delay.on_change)`; `close()` drops pending timers."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.pods = store.resource("", "v1", "pods")
        self._held: set[str] = set()  # uids whose readiness was held back once
        self._timers: dict[str, asyncio.TimerHandle] = {}

    def on_change(self, change: Change) -> None:
        kind, rkey, _, pod = change
        if rkey != self.pods.key or kind == "DELETED":
            return
        uid = str(pod["metadata"].get("uid"))
        delay = _ready_after(pod)
        if delay is None or uid in self._held or pod["metadata"].get("deletionTimestamp"):
            return
        if (pod.get("status") or {}).get("phase") != "Running" or not _is_ready(pod):
            return
        self._held.add(uid)
        try:
            self._set(pod, "False")
        except Exception:  # a listener must never break the store's commit
            log.exception("demo readiness: could not hold back %s", pod["metadata"]["name"])
            return
        loop = asyncio.get_running_loop()
        self._timers[uid] = loop.call_later(
            delay, self._ready, pod["metadata"]["namespace"], pod["metadata"]["name"], uid
        )

    def _ready(self, namespace: str, name: str, uid: str) -> None:
        self._timers.pop(uid, None)
        pod = self.store.find(self.pods, namespace, name)
        if pod is None or pod["metadata"].get("uid") != uid:
            return
        if pod["metadata"].get("deletionTimestamp"):
            return
        try:
            self._set(pod, "True")
        except Exception:
            log.exception("demo readiness: could not report %s Ready", name)

    def _set(self, pod: Obj, status: str) -> None:
        now = now_iso()

        def readiness(p: Obj) -> None:
            st: dict[str, Any] = p.setdefault("status", {})
            conditions = st.get("conditions") or []
            for type_ in _READINESS_CONDITIONS:
                cond: dict[str, Any] = {"type": type_, "status": status, "lastProbeTime": None}
                if status == "False":
                    cond["reason"] = "ReadinessProbePending"
                conditions = set_condition(conditions, cond, now)
                if status == "True":
                    for c in conditions:
                        if c["type"] == type_:
                            c.pop("reason", None)
            st["conditions"] = conditions
            for cs in st.get("containerStatuses") or []:
                cs["ready"] = status == "True"

        m = pod["metadata"]
        self.store.mutate(self.pods, m["namespace"], m["name"], readiness, "status")

    def close(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
