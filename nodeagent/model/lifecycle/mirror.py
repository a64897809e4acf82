"""The NodeMaintenance controller's requests on the upstream API, seen and written as the ones of
our CRD, pure. Its decision (`model.nodemaintenance`) reads EvictionRequests named after their
pod's UID, with a list of requesters and the conditions Evicted and Canceled; on
`lifecycle.k8s.io` each requester has a request of its own with an intent, and the outcome is on
the target's Eviction. :func:`as_crd_request` shows one of ours (with its Eviction) as the
decision reads requests; :func:`upstream_body` and :func:`intent` turn the decision's writes
into ours."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nodeagent.model.bodies import Obj, condition, deleting, items, mapping, metadata_of
from nodeagent.model.interceptors.requests import CANCELED, EVICTED
from nodeagent.model.lifecycle.eviction import EVICTIONS_API_VERSION, FAILED, TARGET_EVICTED
from nodeagent.model.names import (
    IMPERATIVE_INTERCEPTOR,
    IMPERATIVE_RESPONDER,
    REQUESTER,
    UPSTREAM_REQUESTER,
)

__all__ = [
    "NAME_PREFIX",
    "as_crd_request",
    "intent",
    "is_ours",
    "upstream_body",
    "upstream_name",
]

NAME_PREFIX = "nodemaintenance-"
"""Our request of a pod is `nodemaintenance-<pod UID>`: one per pod for every maintenance
(they share one requester name), and clear of other requesters' names."""


def upstream_name(pod_uid: str) -> str:
    return NAME_PREFIX + pod_uid


def is_ours(request: Mapping[str, Any]) -> bool:
    return mapping(request, "spec").get("requester") == UPSTREAM_REQUESTER


def intent(requesters: tuple[str, ...]) -> str:
    """The intent that stands for the decision's requesters list: ours in it or not."""
    return "Eviction" if REQUESTER in requesters else "Withdrawn"


def upstream_body(
    crd_body: Mapping[str, Any],
    requester: str = UPSTREAM_REQUESTER,
    prefix: str = NAME_PREFIX,
) -> Obj:
    """Our upstream request for the CRD request the decision would create (same target,
    labels and owner: the garbage collector removes it with its pod), named `prefix` and the
    pod's UID; the eviction bridge's with its own `requester` and `prefix`."""
    md = metadata_of(crd_body)
    target = mapping(mapping(crd_body, "spec"), "target")
    return {
        "apiVersion": EVICTIONS_API_VERSION,
        "kind": "EvictionRequest",
        "metadata": {
            "name": prefix + str(md.get("name")),
            "namespace": md.get("namespace"),
            "labels": dict(mapping(md, "labels")),
            "ownerReferences": list(items(md, "ownerReferences")),
        },
        "spec": {"target": dict(target), "requester": requester, "intent": "Eviction"},
    }


def as_crd_request(request: Mapping[str, Any], eviction: Mapping[str, Any] | None) -> Obj:
    """Our upstream `request` and its target's `eviction`, as the CRD request the decision
    reads: named after the pod's UID, our requester listed while our intent is Eviction,
    Evicted when the Eviction says TargetEvicted, Canceled when we withdrew or it failed, and
    the evictor's message (a budget's refusal) as the imperative interceptor's."""
    md = metadata_of(request)
    target = mapping(mapping(mapping(request, "spec"), "target"), "pod")
    wanted = mapping(request, "spec").get("intent") == "Eviction"
    ev_status = mapping(eviction, "status")
    evicted = _true(ev_status, TARGET_EVICTED)
    conditions = []
    if evicted:
        conditions.append(_condition(EVICTED, "PodDeleted", "the Eviction says TargetEvicted"))
    elif not wanted or _true(ev_status, FAILED):
        why = "withdrawn" if not wanted else str((condition(ev_status, FAILED) or {}).get("reason"))
        conditions.append(_condition(CANCELED, "Canceled", f"the upstream request: {why}"))
    meta: Obj = {
        "name": str(target.get("uid")),
        "namespace": md.get("namespace"),
        "uid": md.get("uid"),
        "resourceVersion": md.get("resourceVersion"),
        "creationTimestamp": md.get("creationTimestamp"),
        "labels": dict(mapping(md, "labels")),
        "ownerReferences": list(items(md, "ownerReferences")),
    }
    if deleting(request):
        meta["deletionTimestamp"] = md.get("deletionTimestamp")
    return {
        "apiVersion": "nodeagent.io/v1alpha1",
        "kind": "EvictionRequest",
        "metadata": meta,
        "spec": {
            "target": {"pod": dict(target)},
            "requesters": [{"name": REQUESTER}] if wanted else [],
        },
        "status": {"conditions": conditions, "interceptors": _evictor_entry(ev_status)},
    }


def _evictor_entry(status: Mapping[str, Any]) -> list[Obj]:
    for r in items(status, "responders"):
        if isinstance(r, Mapping) and r.get("name") == IMPERATIVE_RESPONDER and r.get("message"):
            return [{"name": IMPERATIVE_INTERCEPTOR, "message": r["message"]}]
    return []


def _true(status: Mapping[str, Any], type_: str) -> bool:
    c = condition(status, type_)
    return c is not None and c.get("status") == "True"


def _condition(type_: str, reason: str, message: str) -> Obj:
    return {"type": type_, "status": "True", "reason": reason, "message": message}
