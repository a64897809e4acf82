"""What the `kubelet.k8s.io` interceptor decides, as pure functions of API objects.

- Which NodeMaintenances hold this node's static pods down
  (`nodeagent.model.maintenance.holds_pods_off_this_boot`): those that hold the node's evicted
  pods off it (`holds_pods_off`: in stage `Drain`, not being
  deleted, selecting the node by `spec.nodeSelector` or naming it in `status.nodeStatuses` - the
  rule the DaemonSet taint follows too), except the agent's shutdown maintenance of an earlier
  boot (whose manifests are put back at start-up, before the kubelet runs, so that the node can
  come back).
- Whether a static pod is targeted: one of those maintenances lists, in
  `status.nodeStatuses[this node].drainTargets`, a `Static` entry covering the pod's priority
  (and labels).
- Our `status.interceptors[]` entry of an EvictionRequest, or our `nodeagent.io/static-pod`
  entry of an upstream Eviction's `status.responders[]`: read and written as the same typed
  entry (`InterceptorStatus`, under the names and fields of our CRD), patched in alone.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from nodeagent.model.bodies import items, mapping, metadata_of, name_of, version_of
from nodeagent.model.drainplan import (
    DrainPlanEntry,
    InvalidPlan,
    targets_cover,
)
from nodeagent.model.interceptors.requests import CANCELED, EVICTED
from nodeagent.model.interceptors.status import InterceptorStatus, with_interceptor_status
from nodeagent.model.lifecycle.eviction import FAILED, TARGET_EVICTED
from nodeagent.model.lifecycle.ourresponders import (
    ResponderNames,
    as_interceptor_entry,
    responder_entry,
)
from nodeagent.model.maintenance import holds_pods_off_this_boot, node_drain_targets
from nodeagent.model.names import (
    BUILTIN_PRIORITIES,
    KUBELET_INTERCEPTOR,
    MIRROR_ANNOTATION,
    STATIC_POD_RESPONDER,
)

__all__ = [
    "Coverage",
    "EvictionView",
    "coverage",
    "expected_finish",
    "grace_period",
    "manifest_pod",
    "manifest_priority",
    "progress_status",
]

log = logging.getLogger(__name__)

DEFAULT_GRACE_SECONDS = 30
_NAMES = ResponderNames(())  # ours alone: the node agents run no annotate-and-wait rule


@dataclass(frozen=True)
class Coverage:
    """The maintenances holding the node, oldest first, and their drainTargets for it."""

    holding: tuple[Mapping[str, Any], ...] = ()
    targets: tuple[tuple[str, tuple[DrainPlanEntry, ...]], ...] = ()  # (maintenance, targets)
    problems: tuple[str, ...] = ()

    @property
    def holds(self) -> bool:
        return bool(self.holding)

    @property
    def names(self) -> list[str]:
        return [name_of(nm) for nm in self.holding]

    def covering(self, pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """The oldest holding maintenance whose drainTargets for the node target `pod`."""
        for nm, (_, targets) in zip(self.holding, self.targets, strict=True):
            if targets_cover(targets, pod):
                return nm
        return None

    def describe_targets(self) -> str:
        parts = [
            f"{name}: [{', '.join(e.describe() for e in targets)}]"
            for name, targets in self.targets
        ]
        return "; ".join(parts) or "none"


def _age_key(nm: Mapping[str, Any]) -> tuple[str, str]:
    meta = metadata_of(nm)
    return str(meta.get("creationTimestamp") or ""), str(meta.get("name") or "")


def coverage(
    maintenances: Iterable[Mapping[str, Any]],
    node: Mapping[str, Any] | None,
    node_name: str,
    boot_id: str,
) -> Coverage:
    holding = sorted(
        (nm for nm in maintenances if holds_pods_off_this_boot(nm, node_name, node, boot_id)),
        key=_age_key,
    )
    targets: list[tuple[str, tuple[DrainPlanEntry, ...]]] = []
    problems: list[str] = []
    for nm in holding:
        try:
            entries = node_drain_targets(nm, node_name)
        except InvalidPlan as e:
            problems.append(str(e))
            entries = ()
        targets.append((name_of(nm), entries))
    return Coverage(tuple(holding), tuple(targets), tuple(problems))


# --- static pods from manifests -------------------------------------------------------------


def manifest_priority(
    pod: Mapping[str, Any], priority_classes: Mapping[str, Mapping[str, Any]]
) -> int | None:
    """The priority the API gives the mirror pod of a manifest's pod (the Priority admission
    plugin): `spec.priority` as written, else its class's value, else the global default
    class's, else 0. None when the class does not exist (the API refuses such a mirror pod)."""
    spec = mapping(pod, "spec")
    class_name = spec.get("priorityClassName")
    if class_name:
        value = BUILTIN_PRIORITIES.get(str(class_name))
        if value is not None:
            return value
        pc = priority_classes.get(str(class_name))
        if pc is None:
            return None
        return _int(pc.get("value"))
    priority = spec.get("priority")
    if isinstance(priority, int) and not isinstance(priority, bool):
        return priority
    defaults = [pc for pc in priority_classes.values() if pc.get("globalDefault") is True]
    if defaults:
        return min(_int(pc.get("value")) for pc in defaults)
    return 0


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def manifest_pod(pod: Mapping[str, Any], priority: int) -> dict[str, Any]:
    """The parts of the would-be mirror pod that drain targets look at."""
    meta = metadata_of(pod)
    return {
        "metadata": {
            "labels": dict(mapping(meta, "labels")),
            "annotations": {**mapping(meta, "annotations"), MIRROR_ANNOTATION: "manifest"},
        },
        "spec": {"priority": priority},
    }


# --- EvictionRequests ------------------------------------------------------------------------


@dataclass(frozen=True)
class EvictionView:
    """What the interceptor needs from an EvictionRequest."""

    namespace: str
    name: str
    resource_version: str
    pod_name: str
    pod_uid: str
    active: bool  # kubelet.k8s.io is the active interceptor
    finished: bool  # Evicted or Canceled
    evicted: bool  # Evicted: the pod is gone, or replaced by one with another UID
    entry: InterceptorStatus | None  # our status.interceptors[] entry
    interceptors: tuple[Mapping[str, Any], ...]
    upstream: bool = False
    """An upstream Eviction (`interceptors` are its `status.responders`)."""
    frozen: bool = False
    """Our entry can no longer be written: on an upstream Eviction our turn ended (the server
    keeps a finished responder's entry as it was)."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def completed(self) -> bool:
        return self.entry is not None and self.entry.completion_time is not None

    @property
    def pod_ref(self) -> dict[str, Any]:
        """The request's pod as an Event's object (the node agent never reads the pod)."""
        meta = {"namespace": self.namespace, "name": self.pod_name, "uid": self.pod_uid}
        return {"apiVersion": "v1", "kind": "Pod", "metadata": meta}

    @classmethod
    def of_eviction(cls, eviction: Mapping[str, Any]) -> EvictionView:
        """An upstream Eviction, read as a request of our CRD (`ourresponders`)."""
        status = mapping(eviction, "status")
        true = {c.get("type") for c in items(status, "conditions") if c.get("status") == "True"}
        state = next((t.get("state") for t in items(status, "targetResponders") if _ours(t)), None)
        responders = tuple(r for r in items(status, "responders") if isinstance(r, Mapping))
        # the controller lists every responder's entry from the start: ours counts once our
        # turn came
        entry = next((r for r in responders if _ours(r)), None) if state != "Inactive" else None
        return cls(
            *_identity(eviction),
            active=state == "Active",
            finished=bool(true & {TARGET_EVICTED, FAILED}),
            evicted=TARGET_EVICTED in true,
            entry=(
                InterceptorStatus.from_dict(as_interceptor_entry(entry, _NAMES))
                if entry is not None
                else None
            ),
            interceptors=responders,
            upstream=True,
            frozen=state not in ("Active", "Inactive") or bool(true & {TARGET_EVICTED, FAILED}),
        )

    @classmethod
    def of(cls, evr: Mapping[str, Any]) -> EvictionView:
        status = mapping(evr, "status")
        conditions = [c for c in status.get("conditions") or () if isinstance(c, Mapping)]
        true = {str(c.get("type")) for c in conditions if c.get("status") == "True"}
        interceptors = tuple(i for i in status.get("interceptors") or () if isinstance(i, Mapping))
        entry = next((i for i in interceptors if i.get("name") == KUBELET_INTERCEPTOR), None)
        active = status.get("activeInterceptors") or ()
        return cls(
            *_identity(evr),
            active=isinstance(active, Sequence) and KUBELET_INTERCEPTOR in active,
            finished=bool(true & {EVICTED, CANCELED}),
            evicted=EVICTED in true,
            entry=InterceptorStatus.from_dict(entry) if entry is not None else None,
            interceptors=interceptors,
        )


class _Identity(NamedTuple):
    """The first fields of an `EvictionView`, alike for both APIs."""

    namespace: str
    name: str
    resource_version: str
    pod_name: str
    pod_uid: str


def _identity(obj: Mapping[str, Any]) -> _Identity:
    meta = metadata_of(obj)
    pod = mapping(mapping(mapping(obj, "spec"), "target"), "pod")
    return _Identity(
        str(meta.get("namespace") or ""),
        str(meta.get("name") or ""),
        version_of(obj),
        str(pod.get("name") or ""),
        str(pod.get("uid") or ""),
    )


def grace_period(pod: Mapping[str, Any] | None) -> int:
    value = mapping(pod, "spec").get("terminationGracePeriodSeconds") if pod else None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return DEFAULT_GRACE_SECONDS


def expected_finish(start: datetime, pod: Mapping[str, Any] | None) -> datetime:
    """When the kubelet should be done stopping the pod: its grace period after we started."""
    return start + timedelta(seconds=grace_period(pod))


def progress_status(view: EvictionView, entry: InterceptorStatus) -> dict[str, Any]:
    """A JSON merge patch for the status subresource that replaces our entry (and only ours:
    the list is written whole, guarded by the resourceVersion it was read at)."""
    if view.upstream:
        ours = responder_entry(entry, _NAMES)
        status = {"responders": [ours if _ours(r) else dict(r) for r in view.interceptors]}
    else:
        status = {"interceptors": with_interceptor_status(view.interceptors, entry)}
    return {"metadata": {"resourceVersion": view.resource_version}, "status": status}


def _ours(entry: Mapping[str, Any]) -> bool:
    return entry.get("name") == STATIC_POD_RESPONDER
