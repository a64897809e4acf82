"""The ReplicaSet controller: keeps spec.replicas pods of the template running."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from nodeagent_testbed.sim.actors.base import (
    Controller,
    Key,
    OwnerIndex,
    controller_key,
    key_of,
    omit_zero,
    parse_time,
    pod_active,
    pod_phase,
    pod_ready,
    spec_replicas,
    uid_of,
)
from nodeagent_testbed.sim.actors.templates import pod_from_template
from nodeagent_testbed.sim.store import Change, Obj, Store

log = logging.getLogger(__name__)

_PHASE_RANK = {"Pending": 0, "Unknown": 1, "Running": 2}


def deletion_order(pod: Obj) -> tuple[bool, int, bool, float, str]:
    """Pods to delete first sort first: unscheduled, pending, not ready, then the newest
    (a simplified controller.ActivePodsWithRanks)."""
    created = parse_time(pod["metadata"].get("creationTimestamp")) or 0.0
    return (
        bool((pod.get("spec") or {}).get("nodeName")),
        _PHASE_RANK.get(pod_phase(pod), 1),
        pod_ready(pod),
        -created,
        pod["metadata"]["name"],
    )


class ReplicaSetController(Controller[Key]):
    """Creates and deletes the pods a ReplicaSet controls (by controller reference; orphans are
    not adopted). Terminating and finished pods do not count as replicas. minReadySeconds is
    not modelled: a ready pod is available."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.pods = store.resource("", "v1", "pods")
        self.replicasets = store.resource("apps", "v1", "replicasets")
        self.index = OwnerIndex(self.pods.key)

    def on_change(self, change: Change) -> None:
        _, rkey, old, new = change
        if rkey == self.replicasets.key:
            self.queue.add(key_of(new))
        elif rkey == self.pods.key:
            self.index.observe(change)
            for obj in (old, new):
                owner = controller_key(obj, "ReplicaSet")
                if owner is not None:
                    self.queue.add(owner)

    def initial_keys(self) -> Iterable[Key]:
        self.index.rebuild(self.store.iter_kind(self.pods))
        return [key_of(rs) for rs in self.store.iter_kind(self.replicasets)]

    def reconcile(self, key: Key) -> None:
        rs = self.store.find(self.replicasets, *key)
        if rs is None:
            return  # the garbage collector removes its pods
        pods = [
            p
            for k in self.index.dependents(uid_of(rs))
            if (p := self.store.find(self.pods, *k)) is not None
        ]
        active = [p for p in pods if pod_active(p)]
        if not rs["metadata"].get("deletionTimestamp"):
            diff = spec_replicas(rs) - len(active)
            template = (rs.get("spec") or {}).get("template") or {}
            for _ in range(diff):
                active.append(self.store.create(self.pods, key[0], pod_from_template(rs, template)))
            if diff < 0:
                doomed = sorted(active, key=deletion_order)[:-diff]
                for pod in doomed:
                    self.store.delete(self.pods, *key_of(pod))
                gone = {id(p) for p in doomed}
                active = [p for p in active if id(p) not in gone]
        self._update_status(rs, active)

    def _update_status(self, rs: Obj, active: list[Obj]) -> None:
        want = ((rs.get("spec") or {}).get("template") or {}).get("metadata") or {}
        want_labels = (want.get("labels") or {}).items()
        ready = sum(1 for p in active if pod_ready(p))
        status = omit_zero(
            {
                "replicas": len(active),
                "fullyLabeledReplicas": sum(
                    1 for p in active if want_labels <= (p["metadata"].get("labels") or {}).items()
                ),
                "readyReplicas": ready,
                "availableReplicas": ready,
                "observedGeneration": rs["metadata"].get("generation", 1),
            },
            "replicas",
        )
        if (rs.get("status") or {}) != status:
            self.store.mutate(
                self.replicasets, *key_of(rs), lambda o: o.update(status=status), "status"
            )
