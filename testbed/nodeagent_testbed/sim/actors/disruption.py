"""The disruption controller: keeps the status of every policy/v1 PodDisruptionBudget current.

The eviction subresource spends a disruption itself (status.disruptionsAllowed - 1 and an entry
in status.disruptedPods); this controller honours those entries until the pod is terminating or
gone, or two minutes have passed (DeletionTimeout), and then recomputes the budget.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Any

from nodeagent_testbed.sim.actors.base import (
    Controller,
    Key,
    condition,
    controller_ref,
    int_or_percent,
    key_of,
    parse_time,
    pod_ready,
    set_condition,
    spec_replicas,
    terminating,
)
from nodeagent_testbed.sim.selectors import (
    LabelSelector,
    SelectorError,
    label_selector_as_selector,
)
from nodeagent_testbed.sim.store import Change, Obj, Store, now_iso

log = logging.getLogger(__name__)

DELETION_TIMEOUT = 120.0  # seconds an evicted pod may take to start terminating


class BudgetError(Exception):
    """The budget cannot be computed; the controller fails safe (no disruptions allowed)."""


def _is_percent(value: Any) -> bool:
    return isinstance(value, str) and value.endswith("%")


class DisruptionController(Controller[Key]):
    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.pods = store.resource("", "v1", "pods")
        self.pdbs = store.resource("policy", "v1", "poddisruptionbudgets")
        self.replicasets = store.resource("apps", "v1", "replicasets")
        self.deployments = store.resource("apps", "v1", "deployments")
        self.statefulsets = store.resource("apps", "v1", "statefulsets")
        self._scaled = {rt.key for rt in (self.replicasets, self.deployments, self.statefulsets)}
        # parsed spec.selector by PDB uid, with the generation it was parsed at
        self._selectors: dict[str, tuple[int, LabelSelector | str]] = {}

    def _selector(self, pdb: Obj) -> LabelSelector:
        m = pdb["metadata"]
        generation = int(m.get("generation", 1))
        cached = self._selectors.get(m["uid"])
        if cached is None or cached[0] != generation:
            try:
                parsed: LabelSelector | str = label_selector_as_selector(
                    (pdb.get("spec") or {}).get("selector")
                )
            except SelectorError as e:
                parsed = str(e)
            cached = self._selectors[m["uid"]] = (generation, parsed)
        if isinstance(cached[1], str):
            raise BudgetError(cached[1])
        return cached[1]

    def on_change(self, change: Change) -> None:
        kind, rkey, old, new = change
        if rkey == self.pdbs.key:
            if kind == "DELETED":
                self._selectors.pop(new["metadata"]["uid"], None)
            else:
                self.queue.add(key_of(new))
        elif rkey == self.pods.key:
            labels = [(o["metadata"].get("labels") or {}) for o in (old, new) if o is not None]
            for pdb in self.store.list(self.pdbs, new["metadata"].get("namespace")):
                try:
                    selector = self._selector(pdb)
                except BudgetError:
                    continue
                if any(selector.matches(lb) for lb in labels):
                    self.queue.add(key_of(pdb))
        elif rkey in self._scaled and (
            old is None or kind == "DELETED" or spec_replicas(old) != spec_replicas(new)
        ):
            for pdb in self.store.list(self.pdbs, new["metadata"].get("namespace")):
                self.queue.add(key_of(pdb))

    def initial_keys(self) -> Iterable[Key]:
        return [key_of(pdb) for pdb in self.store.iter_kind(self.pdbs)]

    def reconcile(self, key: Key) -> None:
        pdb = self.store.find(self.pdbs, *key)
        if pdb is None:
            return
        try:
            pods = self.store.list(self.pods, key[0], labels=self._selector(pdb))
            expected, desired = self._expected_and_desired(pdb, pods)
        except (BudgetError, ValueError) as e:  # ValueError: a malformed int-or-percent
            self._fail_safe(pdb, str(e))
            return
        now = time.time()
        disrupted, recheck = _live_disruptions(pdb, pods, now)
        healthy = sum(
            1
            for p in pods
            if pod_ready(p) and not terminating(p) and p["metadata"]["name"] not in disrupted
        )
        # no pods expected (yet): no disruption, whatever is healthy
        allowed = max(0, healthy - desired) if expected > 0 else 0
        old = pdb.get("status") or {}
        generation = pdb["metadata"].get("generation", 1)
        status: dict[str, Any] = {
            "observedGeneration": generation,
            "disruptionsAllowed": allowed,
            "currentHealthy": healthy,
            "desiredHealthy": desired,
            "expectedPods": expected,
        }
        if disrupted:
            status["disruptedPods"] = disrupted
        status["conditions"] = set_condition(
            old.get("conditions") or [],
            {
                "type": "DisruptionAllowed",
                "status": "True" if allowed > 0 else "False",
                "reason": "SufficientPods" if allowed > 0 else "InsufficientPods",
                "message": "",
                "observedGeneration": generation,
            },
            now_iso(),
        )
        if old != status:
            self.store.mutate(self.pdbs, *key, lambda o: o.update(status=status), "status")
        if recheck is not None:
            self.queue.add_after(key, recheck - now)

    def _expected_and_desired(self, pdb: Obj, pods: list[Obj]) -> tuple[int, int]:
        """(expectedPods, desiredHealthy) as getExpectedPodCount computes them."""
        spec = pdb.get("spec") or {}
        max_unavailable, min_available = spec.get("maxUnavailable"), spec.get("minAvailable")
        if max_unavailable is not None:
            expected = self._expected_scale(pods)
            unavailable = int_or_percent(max_unavailable, expected, round_up=True)
            return expected, max(0, expected - unavailable)
        if min_available is not None:
            if _is_percent(min_available):
                expected = self._expected_scale(pods)
                return expected, int_or_percent(min_available, expected, round_up=True)
            return len(pods), int(min_available)
        return 0, 0

    def _expected_scale(self, pods: list[Obj]) -> int:
        """The sum of spec.replicas of the controllers of `pods`, each counted once (pods of
        all the ReplicaSets of a Deployment count the Deployment once); pods of no controller
        count for nothing (the real controller only warns of them)."""
        scales: dict[str, int] = {}
        for pod in pods:
            ref = controller_ref(pod)
            if ref is None:
                continue
            owner = self._scaled_owner(pod["metadata"]["namespace"], ref)
            if owner is None:
                raise BudgetError(f'found no controllers for pod "{pod["metadata"]["name"]}"')
            scales[owner["metadata"]["uid"]] = spec_replicas(owner)
        return sum(scales.values())

    def _scaled_owner(self, ns: str, ref: dict[str, Any]) -> Obj | None:
        kinds = {"ReplicaSet": self.replicasets, "StatefulSet": self.statefulsets}
        rt = kinds.get(str(ref.get("kind")))
        owner = self.store.find(rt, ns, str(ref.get("name"))) if rt is not None else None
        if owner is None or owner["metadata"]["uid"] != ref.get("uid"):
            return None
        up = controller_ref(owner)
        if rt is self.replicasets and up is not None and up.get("kind") == "Deployment":
            d = self.store.find(self.deployments, ns, str(up.get("name")))
            if d is not None and d["metadata"]["uid"] == up.get("uid"):
                return d
        return owner

    def _fail_safe(self, pdb: Obj, message: str) -> None:
        before = condition(pdb, "DisruptionAllowed") or {}
        if before.get("message") != message:
            log.warning(
                "poddisruptionbudget %s/%s: %s",
                pdb["metadata"].get("namespace"),
                pdb["metadata"]["name"],
                message,
            )

        def fail(o: Obj) -> None:
            st = o.setdefault("status", {})
            st["disruptionsAllowed"] = 0
            cond = {
                "type": "DisruptionAllowed",
                "status": "False",
                "reason": "SyncFailed",
                "message": message,
            }
            if "observedGeneration" in st:  # the generation the budget was last computed for
                cond["observedGeneration"] = st["observedGeneration"]
            st["conditions"] = set_condition(st.get("conditions") or [], cond, now_iso())

        self.store.mutate(self.pdbs, *key_of(pdb), fail, "status")


def _live_disruptions(pdb: Obj, pods: list[Obj], now: float) -> tuple[dict[str, str], float | None]:
    """The status.disruptedPods entries still in force, and when the oldest one expires."""
    by_name = {p["metadata"]["name"]: p for p in pods}
    live: dict[str, str] = {}
    recheck: float | None = None
    for name, stamp in ((pdb.get("status") or {}).get("disruptedPods") or {}).items():
        pod = by_name.get(name)
        at = parse_time(stamp)
        if pod is None or terminating(pod) or at is None:
            continue
        expires = at + DELETION_TIMEOUT
        if expires <= now:
            log.info("pod %s was expected to be deleted but it was not", name)
            continue
        live[name] = stamp
        recheck = expires if recheck is None else min(recheck, expires)
    return live, recheck
