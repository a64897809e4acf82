"""The StatefulSet controller: pods `<name>-<ordinal>` with stable names.

Pods are created in ordinal order, each once the previous one is Running and Ready
(podManagementPolicy OrderedReady; Parallel creates them all at once). A missing pod is
recreated under the same name only when the old object is completely gone. Scale-down removes
the highest ordinal first, one at a time. A changed template rolls out from the highest ordinal
down, one pod at a time once all are Ready (RollingUpdate with partition; OnDelete waits for the
user). No PersistentVolumeClaims and no ControllerRevision objects.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from typing import Any

from nodeagent_testbed.sim.actors.base import (
    Controller,
    Key,
    OwnerIndex,
    controller_key,
    key_of,
    owned_by,
    pod_phase,
    pod_ready,
    spec_replicas,
    terminating,
    uid_of,
)
from nodeagent_testbed.sim.actors.templates import pod_from_template, template_hash
from nodeagent_testbed.sim.store import Change, Obj, Store

log = logging.getLogger(__name__)

REVISION_LABEL = "controller-revision-hash"


def _running_and_ready(pod: Obj) -> bool:
    return pod_phase(pod) == "Running" and pod_ready(pod) and not terminating(pod)


def _revision(pod: Obj) -> str | None:
    return (pod["metadata"].get("labels") or {}).get(REVISION_LABEL)


class StatefulSetController(Controller[Key]):
    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.pods = store.resource("", "v1", "pods")
        self.statefulsets = store.resource("apps", "v1", "statefulsets")
        self.index = OwnerIndex(self.pods.key)

    def on_change(self, change: Change) -> None:
        _, rkey, old, new = change
        if rkey == self.statefulsets.key:
            self.queue.add(key_of(new))
        elif rkey == self.pods.key:
            self.index.observe(change)
            for obj in (old, new):
                owner = controller_key(obj, "StatefulSet")
                if owner is not None:
                    self.queue.add(owner)

    def initial_keys(self) -> Iterable[Key]:
        self.index.rebuild(self.store.iter_kind(self.pods))
        return [key_of(s) for s in self.store.iter_kind(self.statefulsets)]

    def reconcile(self, key: Key) -> None:
        sts = self.store.find(self.statefulsets, *key)
        if sts is None:
            return
        spec = sts.get("spec") or {}
        revision = f"{key[1]}-{template_hash(spec.get('template') or {})}"
        if not terminating(sts):
            self._sync_pods(sts, revision)
        self._update_status(sts, revision)

    def _owned(self, sts: Obj) -> dict[int, Obj]:
        """The pods of `sts` by ordinal."""
        pattern = re.compile(re.escape(sts["metadata"]["name"]) + r"-(\d+)")
        out = {}
        for k in self.index.dependents(uid_of(sts)):
            pod = self.store.find(self.pods, *k)
            match = pattern.fullmatch(k[1])
            if pod is not None and match:
                out[int(match.group(1))] = pod
        return out

    def _sync_pods(self, sts: Obj, revision: str) -> None:
        spec = sts.get("spec") or {}
        ns, name = key_of(sts)
        ordered = spec.get("podManagementPolicy", "OrderedReady") != "Parallel"
        replicas = spec_replicas(sts)
        for i in range(replicas):
            pod = self.store.find(self.pods, ns, f"{name}-{i}")
            if pod is None:
                self.store.create(self.pods, ns, self._new_pod(sts, i, revision))
            elif not owned_by(pod, sts):
                log.warning(
                    "statefulset %s/%s: pod %s belongs to another owner",
                    ns,
                    name,
                    pod["metadata"]["name"],
                )
            elif pod_phase(pod) in ("Failed", "Succeeded") and not terminating(pod):
                self.store.delete(self.pods, ns, pod["metadata"]["name"])
            elif not ordered or _running_and_ready(pod):
                continue
            if ordered:
                return  # wait for this ordinal before the next
        pods = self._owned(sts)
        for i in sorted((i for i in pods if i >= replicas), reverse=True):
            if not terminating(pods[i]):
                self.store.delete(self.pods, ns, pods[i]["metadata"]["name"])
            if ordered:
                return  # one at a time, each gone before the next
        strategy = spec.get("updateStrategy") or {}
        if strategy.get("type", "RollingUpdate") != "RollingUpdate":
            return
        if not all(i in pods and _running_and_ready(pods[i]) for i in range(replicas)):
            return
        partition = int((strategy.get("rollingUpdate") or {}).get("partition", 0))
        for i in range(replicas - 1, partition - 1, -1):
            if _revision(pods[i]) != revision:
                self.store.delete(self.pods, ns, pods[i]["metadata"]["name"])
                return

    def _new_pod(self, sts: Obj, ordinal: int, revision: str) -> Obj:
        spec = sts.get("spec") or {}
        name = f"{sts['metadata']['name']}-{ordinal}"
        pod = pod_from_template(
            sts,
            spec.get("template") or {},
            name=name,
            labels={
                REVISION_LABEL: revision,
                "statefulset.kubernetes.io/pod-name": name,
                "apps.kubernetes.io/pod-index": str(ordinal),
            },
        )
        pod["spec"]["hostname"] = name
        if spec.get("serviceName"):
            pod["spec"]["subdomain"] = spec["serviceName"]
        return pod

    def _update_status(self, sts: Obj, revision: str) -> None:
        pods = list(self._owned(sts).values())
        live = [p for p in pods if not terminating(p)]
        old: dict[str, Any] = sts.get("status") or {}
        updated = sum(1 for p in live if _revision(p) == revision)
        current_revision = old.get("currentRevision") or revision
        if updated == spec_replicas(sts) == len(live):
            current_revision = revision
        ready = sum(1 for p in pods if pod_phase(p) == "Running" and pod_ready(p))
        status: dict[str, Any] = {
            "observedGeneration": sts["metadata"].get("generation", 1),
            "replicas": len(pods),
            "readyReplicas": ready,
            "currentReplicas": sum(1 for p in live if _revision(p) == current_revision),
            "updatedReplicas": updated,
            "availableReplicas": ready,
            "currentRevision": current_revision,
            "updateRevision": revision,
            "collisionCount": old.get("collisionCount", 0),
        }
        for k in ("readyReplicas", "currentReplicas", "updatedReplicas"):
            if not status[k]:
                del status[k]  # omitempty in apps/v1
        if old != status:
            self.store.mutate(
                self.statefulsets, *key_of(sts), lambda o: o.update(status=status), "status"
            )
