"""Typed API bodies (kopf's ``structs/bodies``): the NodeMaintenance and EvictionRequest objects
as the decision code reads them, the accessors that read untrusted objects safely, and meta/v1
Conditions.

The TypedDicts describe the CRDs in ``nodeagent/manifests/crds`` (every key optional: an object
from the API server may lack any of them, and the readers check types). An object from an
informer is a plain ``dict``; :func:`as_maintenance` and :func:`as_eviction_request` give it
its type where it enters a decision.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, TypedDict, cast

from nodeagent.model.times import format_time

__all__ = [
    "Condition",
    "ConditionStatus",
    "Event",
    "EventType",
    "EvictionRequest",
    "EvictionRequestSpec",
    "EvictionRequestStatus",
    "InterceptorEntry",
    "NodeMaintenance",
    "NodeMaintenanceSpec",
    "NodeMaintenanceStatus",
    "NodeStatus",
    "Obj",
    "ObjectMeta",
    "StageStatus",
    "annotations_of",
    "as_eviction_request",
    "as_maintenance",
    "as_map",
    "condition",
    "condition_true",
    "deleting",
    "describe",
    "find_condition",
    "generation",
    "is_true",
    "items",
    "labels_of",
    "mapping",
    "metadata_of",
    "name_of",
    "set_condition",
    "spec_stage",
    "uid_of",
    "version_of",
]

Obj = dict[str, Any]
"""An API object, list or event as decoded JSON (no generated model classes): the one alias."""
ConditionStatus = Literal["True", "False", "Unknown"]
EventType = Literal["Normal", "Warning"]


@dataclass(frozen=True)
class Event:
    """An Event a decision asks to record, about the object it decided on, or (``on_pod``) about
    the pod that object concerns: what the pod's owner should see in ``kubectl describe pod``."""

    type: EventType
    reason: str
    message: str
    on_pod: bool = False


class ObjectMeta(TypedDict, total=False):
    name: str
    namespace: str
    uid: str
    resourceVersion: str
    generation: int
    creationTimestamp: str
    deletionTimestamp: str
    labels: dict[str, str]
    annotations: dict[str, str]
    finalizers: list[str]


class Condition(TypedDict, total=False):
    type: str
    status: ConditionStatus
    observedGeneration: int
    lastTransitionTime: str
    reason: str
    message: str


# --- NodeMaintenance (nodeagent.io/v1alpha1, KEP-4212) ------------------------------------------


class NodeMaintenanceSpec(TypedDict, total=False):
    nodeSelector: dict[str, Any]
    stage: str
    drainPlan: list[dict[str, Any]]
    reason: str


class StageStatus(TypedDict, total=False):
    name: str
    startTimestamp: str


class NodeStatus(TypedDict, total=False):
    nodeRef: dict[str, str]
    drainTargets: list[dict[str, Any]]
    drainMessage: str
    podsPendingEvacuation: int
    podsEvacuating: int


class NodeMaintenanceStatus(TypedDict, total=False):
    observedGeneration: int
    drainPlanIndex: int
    drainPlanHash: str
    stageStatuses: list[StageStatus]
    nodeStatuses: list[NodeStatus]
    conditions: list[Condition]


class NodeMaintenance(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: NodeMaintenanceSpec
    status: NodeMaintenanceStatus


# --- EvictionRequest (nodeagent.io/v1alpha1, KEP-4563) ------------------------------------------


class EvictionRequestSpec(TypedDict, total=False):
    target: dict[str, dict[str, str]]
    requesters: list[dict[str, str]]


class InterceptorEntry(TypedDict, total=False):
    name: str
    heartbeatTime: str
    expectedFinishTime: str
    startTime: str
    completionTime: str
    message: str


class EvictionRequestStatus(TypedDict, total=False):
    observedGeneration: int
    conditions: list[Condition]
    targetInterceptors: list[dict[str, str]]
    activeInterceptors: list[str]
    processedInterceptors: list[str]
    interceptors: list[InterceptorEntry]


class EvictionRequest(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: EvictionRequestSpec
    status: EvictionRequestStatus


def as_maintenance(obj: Mapping[str, Any]) -> NodeMaintenance:
    """``obj`` typed as a NodeMaintenance (no check: the readers check what they read)."""
    return cast("NodeMaintenance", obj)


def as_eviction_request(obj: Mapping[str, Any]) -> EvictionRequest:
    """``obj`` typed as an EvictionRequest (no check: the readers check what they read)."""
    return cast("EvictionRequest", obj)


# --- reading untrusted objects -------------------------------------------------------------------


def as_map(value: object) -> Mapping[str, Any]:
    """``value`` if it is a mapping, else an empty one."""
    return value if isinstance(value, Mapping) else {}


def mapping(obj: object, key: str) -> Mapping[str, Any]:
    """``obj[key]`` if ``obj`` is a mapping and that is one, else an empty mapping."""
    return as_map(obj.get(key) if isinstance(obj, Mapping) else None)


def items(obj: object, key: str) -> list[Any]:
    """``obj[key]`` if ``obj`` is a mapping and that is a list, else an empty list."""
    value = obj.get(key) if isinstance(obj, Mapping) else None
    return value if isinstance(value, list) else []


def metadata_of(obj: object) -> Mapping[str, Any]:
    """``obj.metadata`` if it is a mapping, else an empty one."""
    return mapping(obj, "metadata")


def labels_of(obj: object) -> Mapping[str, Any]:
    """``obj.metadata.labels`` if it is a mapping, else an empty one."""
    return mapping(metadata_of(obj), "labels")


def annotations_of(obj: object) -> Mapping[str, Any]:
    """``obj.metadata.annotations`` if it is a mapping, else an empty one."""
    return mapping(metadata_of(obj), "annotations")


def uid_of(obj: object) -> str:
    """``obj.metadata.uid``, or "" (also for no object)."""
    return str(metadata_of(obj).get("uid") or "")


def version_of(obj: object) -> str:
    """``obj.metadata.resourceVersion``, or "" (also for no object)."""
    version = metadata_of(obj).get("resourceVersion")
    return "" if version is None else str(version)


def merge_patch(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """`new` as a JSON merge patch (RFC 7386) onto `old`: keys of `old` that `new` lacks are
    null, since a merge patch leaves the keys it does not name as they were; maps in both are
    patched the same way down. Lists are replaced whole anyway."""
    out = dict(new)
    for key, was in old.items():
        now = new.get(key)
        if key not in new:
            out[key] = None
        elif isinstance(was, Mapping) and isinstance(now, Mapping):
            out[key] = merge_patch(was, now)
    return out


def owned_by(obj: object, uid: str) -> bool:
    """Whether `obj` names the object of `uid` among its owners (the garbage collector deletes
    it once that owner and any others are gone)."""
    return bool(uid) and any(
        isinstance(ref, Mapping) and ref.get("uid") == uid
        for ref in items(metadata_of(obj), "ownerReferences")
    )


def name_of(obj: Mapping[str, Any]) -> str:
    return str(metadata_of(obj).get("name") or "")


def describe(obj: Mapping[str, Any], kind: str = "object") -> str:
    """`Kind namespace/name` (or `Kind name`) for messages; `kind` when the object names none,
    `?` for a missing name."""
    md = metadata_of(obj)
    name = str(md.get("name") or "?")
    namespace = md.get("namespace")
    what = str(obj.get("kind") or kind)
    return f"{what} {namespace}/{name}" if namespace else f"{what} {name}"


def deleting(obj: Mapping[str, Any]) -> bool:
    """Whether the object carries a deletionTimestamp."""
    return bool(metadata_of(obj).get("deletionTimestamp"))


def generation(obj: Mapping[str, Any]) -> int | None:
    gen = metadata_of(obj).get("generation")
    return gen if isinstance(gen, int) and not isinstance(gen, bool) else None


# --- meta/v1 Conditions ---------------------------------------------------------------------------


def spec_stage(nm: Mapping[str, Any]) -> str:
    """A NodeMaintenance's ``spec.stage`` as written (Idle when absent)."""
    raw = mapping(nm, "spec").get("stage")
    return raw if isinstance(raw, str) and raw else "Idle"


def find_condition(conditions: Iterable[object], type_: str) -> Mapping[str, Any] | None:
    """The first condition of ``type_`` among ``conditions`` (entries not mappings skipped)."""
    for cond in conditions:
        if isinstance(cond, Mapping) and cond.get("type") == type_:
            return cond
    return None


def condition(status: Mapping[str, Any], type_: str) -> Mapping[str, Any] | None:
    """The condition of ``type_`` in ``status.conditions``, if any."""
    return find_condition(items(status, "conditions"), type_)


def is_true(cond: Mapping[str, Any] | None) -> bool:
    """Whether a condition is there with status True."""
    return cond is not None and cond.get("status") == "True"


def condition_true(obj: Mapping[str, Any], type_: str) -> bool:
    """Whether ``obj``'s condition ``type_`` has status True (a Pod's Ready, a NodeMaintenance's
    Drained, a Node's managed conditions)."""
    return is_true(condition(mapping(obj, "status"), type_))


def set_condition(
    conditions: Iterable[Mapping[str, Any]],
    type_: str,
    status: ConditionStatus,
    reason: str,
    message: str,
    now: datetime,
    observed_generation: int | None = None,
) -> list[dict[str, Any]]:
    """Conditions with ``type_`` set (meta/v1 Condition); lastTransitionTime changes only when
    the status does."""
    out: list[dict[str, Any]] = []
    found = False
    for raw in conditions:
        c = dict(raw)
        if c.get("type") == type_ and not found:
            found = True
            transition = c.get("lastTransitionTime") if c.get("status") == status else None
            c = _condition(type_, status, reason, message, transition or format_time(now))
            if observed_generation is not None:
                c["observedGeneration"] = observed_generation
        out.append(c)
    if not found:
        c = _condition(type_, status, reason, message, format_time(now))
        if observed_generation is not None:
            c["observedGeneration"] = observed_generation
        out.append(c)
    return out


def _condition(
    type_: str, status: ConditionStatus, reason: str, message: str, transition: str
) -> dict[str, Any]:
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": transition,
    }
