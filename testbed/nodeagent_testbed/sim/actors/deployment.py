"""The Deployment controller: one ReplicaSet per pod template, the current one scaled to
spec.replicas.

Simplification: a changed template creates the new ReplicaSet at full scale and scales the old
ones to zero at once (as the Recreate strategy would, without waiting for the old pods to go);
maxSurge/maxUnavailable, minReadySeconds, progressDeadlineSeconds and revisionHistoryLimit are
not modelled, and a paused Deployment is left alone apart from its status.
"""

from __future__ import annotations

import copy
import logging
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
    owner_reference,
    set_condition,
    spec_replicas,
    uid_of,
)
from nodeagent_testbed.sim.actors.templates import template_hash
from nodeagent_testbed.sim.store import Change, Obj, Store, now_iso

log = logging.getLogger(__name__)

HASH_LABEL = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"


def _revision(obj: Obj) -> int:
    try:
        return int((obj["metadata"].get("annotations") or {}).get(REVISION, 0))
    except ValueError:
        return 0


class DeploymentController(Controller[Key]):
    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.deployments = store.resource("apps", "v1", "deployments")
        self.replicasets = store.resource("apps", "v1", "replicasets")
        self.index = OwnerIndex(self.replicasets.key)

    def on_change(self, change: Change) -> None:
        _, rkey, old, new = change
        if rkey == self.deployments.key:
            self.queue.add(key_of(new))
        elif rkey == self.replicasets.key:
            self.index.observe(change)
            for obj in (old, new):
                owner = controller_key(obj, "Deployment")
                if owner is not None:
                    self.queue.add(owner)

    def initial_keys(self) -> Iterable[Key]:
        self.index.rebuild(self.store.iter_kind(self.replicasets))
        return [key_of(d) for d in self.store.iter_kind(self.deployments)]

    def reconcile(self, key: Key) -> None:
        d = self.store.find(self.deployments, *key)
        if d is None:
            return  # the garbage collector removes its ReplicaSets
        owned = [
            rs
            for k in self.index.dependents(uid_of(d))
            if (rs := self.store.find(self.replicasets, *k)) is not None
        ]
        spec = d.get("spec") or {}
        h = template_hash(spec.get("template") or {}, (d.get("status") or {}).get("collisionCount"))
        new = next(
            (rs for rs in owned if (rs["metadata"].get("labels") or {}).get(HASH_LABEL) == h), None
        )
        if not d["metadata"].get("deletionTimestamp") and not spec.get("paused"):
            name = f"{key[1]}-{h}"
            if new is None and self.store.find(self.replicasets, key[0], name) is not None:
                self._collision(d)  # the name is taken by a ReplicaSet that is not ours
                return
            new = self._sync_replicasets(d, h, new, [rs for rs in owned if rs is not new])
        self._update_status(d, new, owned)

    def _sync_replicasets(self, d: Obj, h: str, new: Obj | None, old: list[Obj]) -> Obj:
        replicas = spec_replicas(d)
        revision = max((_revision(rs) for rs in old), default=0) + 1
        if new is None:
            new = self.store.create(
                self.replicasets,
                d["metadata"]["namespace"],
                self._new_replicaset(d, h, replicas, revision),
            )
            log.info(
                "deployment %s: created replicaset %s",
                d["metadata"]["name"],
                new["metadata"]["name"],
            )
        elif spec_replicas(new) != replicas or _revision(new) < revision - 1:

            def scale(rs: Obj) -> None:
                rs["spec"]["replicas"] = replicas
                if _revision(rs) < revision - 1:  # rolled back to this template
                    rs["metadata"].setdefault("annotations", {})[REVISION] = str(revision)

            new = self.store.mutate(self.replicasets, *key_of(new), scale)
        for rs in old:
            if spec_replicas(rs) != 0:
                self.store.mutate(
                    self.replicasets, *key_of(rs), lambda o: o["spec"].update(replicas=0)
                )
        current = str(_revision(new))
        if (d["metadata"].get("annotations") or {}).get(REVISION) != current:
            self.store.mutate(
                self.deployments,
                *key_of(d),
                lambda o: o["metadata"].setdefault("annotations", {}).update({REVISION: current}),
            )
        return new

    def _collision(self, d: Obj) -> None:
        """Another object holds the name: hash the template with a bumped collisionCount."""
        log.info("deployment %s: replicaset name taken, bumping collisionCount", key_of(d))

        def bump(o: Obj) -> None:
            st = o.setdefault("status", {})
            st["collisionCount"] = int(st.get("collisionCount", 0)) + 1

        self.store.mutate(self.deployments, *key_of(d), bump, "status")

    def _new_replicaset(self, d: Obj, h: str, replicas: int, revision: int) -> Obj:
        spec = d.get("spec") or {}
        template = copy.deepcopy(spec.get("template") or {})
        tm = template.setdefault("metadata", {})
        tm["labels"] = {**(tm.get("labels") or {}), HASH_LABEL: h}
        selector = copy.deepcopy(spec.get("selector") or {})
        selector["matchLabels"] = {**(selector.get("matchLabels") or {}), HASH_LABEL: h}
        return {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                "name": f"{d['metadata']['name']}-{h}",
                "namespace": d["metadata"]["namespace"],
                "labels": dict(tm["labels"]),
                "annotations": {
                    REVISION: str(revision),
                    "deployment.kubernetes.io/desired-replicas": str(replicas),
                    "deployment.kubernetes.io/max-replicas": str(replicas),
                },
                "ownerReferences": [owner_reference(d)],
            },
            "spec": {
                "replicas": replicas,
                "selector": selector,
                "template": template,
                "minReadySeconds": spec.get("minReadySeconds", 0),
            },
        }

    def _update_status(self, d: Obj, new: Obj | None, owned: list[Obj]) -> None:
        # re-read: the ReplicaSets may just have been written
        rss = [rs for rs in (self.store.find(self.replicasets, *key_of(o)) for o in owned) if rs]
        if new is not None and all(rs["metadata"]["uid"] != new["metadata"]["uid"] for rs in rss):
            rss.append(new)

        def total(field: str, among: list[Obj]) -> int:
            return sum(int((rs.get("status") or {}).get(field, 0)) for rs in among)

        desired = spec_replicas(d)
        new_now = [rs for rs in rss if new is not None and rs["metadata"]["uid"] == uid_of(new)]
        available = total("availableReplicas", rss)
        updated = total("replicas", new_now)
        replicas = total("replicas", rss)
        old = d.get("status") or {}
        status: dict[str, Any] = omit_zero(
            {
                "observedGeneration": d["metadata"].get("generation", 1),
                "replicas": replicas,
                "updatedReplicas": updated,
                "readyReplicas": total("readyReplicas", rss),
                "availableReplicas": available,
                "unavailableReplicas": max(0, desired - available),
            }
        )
        if "collisionCount" in old:
            status["collisionCount"] = old["collisionCount"]
        status["conditions"] = self._conditions(
            d,
            new,
            old.get("conditions") or [],
            desired,
            available,
            complete=updated == desired and replicas == desired and available == desired,
        )
        if old != status:
            self.store.mutate(
                self.deployments, *key_of(d), lambda o: o.update(status=status), "status"
            )

    def _conditions(
        self,
        d: Obj,
        new: Obj | None,
        conditions: list[dict[str, Any]],
        desired: int,
        available: int,
        complete: bool,
    ) -> list[dict[str, Any]]:
        now = now_iso()
        strategy = (d.get("spec") or {}).get("strategy") or {}
        max_unavailable = 0
        if strategy.get("type", "RollingUpdate") == "RollingUpdate":
            raw = (strategy.get("rollingUpdate") or {}).get("maxUnavailable", "25%")
            max_unavailable = int_or_percent(raw, desired, round_up=False)
        ok = available >= desired - max_unavailable
        wanted: list[dict[str, Any]] = [
            {
                "type": "Available",
                "status": "True" if ok else "False",
                "reason": "MinimumReplicasAvailable" if ok else "MinimumReplicasUnavailable",
                "message": "Deployment has minimum availability."
                if ok
                else "Deployment does not have minimum availability.",
            }
        ]
        if new is not None:
            rs_name = new["metadata"]["name"]
            wanted.append(
                {
                    "type": "Progressing",
                    "status": "True",
                    "reason": "NewReplicaSetAvailable" if complete else "ReplicaSetUpdated",
                    "message": f'ReplicaSet "{rs_name}" has successfully progressed.'
                    if complete
                    else f'ReplicaSet "{rs_name}" is progressing.',
                }
            )
        for c in wanted:
            before = next((x for x in conditions if x.get("type") == c["type"]), None)
            same = before is not None and all(before.get(k) == v for k, v in c.items())
            c["lastUpdateTime"] = before.get("lastUpdateTime", now) if same and before else now
            conditions = set_condition(conditions, c, now)
        return conditions
