"""An Eviction's labels and owners: every requester and responder by role and the pod's node
in labels, every request of the target as an owner."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from nodeagent.model.bodies import Obj, items, mapping, metadata_of, owned_by
from nodeagent.model.names import NODE_LABEL

__all__ = [
    "EVICTIONS_API_VERSION",
    "collected_with_pod",
    "metadata_patch",
    "owners",
    "role_labels",
]

EVICTIONS_API_VERSION = "lifecycle.k8s.io/v1alpha1"
"""The apiVersion of Evictions and EvictionRequests."""


def collected_with_pod(
    uid: str,
    requests: Sequence[Mapping[str, Any]],
    pod: Mapping[str, Any] | None,
    eviction: Mapping[str, Any] | None = None,
) -> bool:
    """Whether the garbage collector removes the pod of `uid`'s requests and `eviction` now,
    so that a write would mostly be a 404: the pod is deleted and owned every request of it
    (as the NodeMaintenance controller's are), or they are gone already and `eviction` had only
    requests as owners. With the pod still there nothing is collected: an Eviction whose
    requests were deleted is told nobody wants it, as upstream's controller tells it."""
    if pod is not None and metadata_of(pod).get("uid") == uid:
        return False
    if requests:
        return all(owned_by(r, uid) for r in requests)
    refs = [o for o in items(metadata_of(eviction), "ownerReferences") if isinstance(o, Mapping)]
    return bool(refs) and all(o.get("kind") == "EvictionRequest" for o in refs)


def metadata_patch(
    ours: Mapping[str, Any],
    requests: Sequence[Mapping[str, Any]],
    status: Mapping[str, Any],
    node: str | None,
) -> tuple[str, Obj] | None:
    """Labels naming every requester and responder by role and the pod's node, and an owner
    reference to every request of the target (kept for deleted ones: the collector drops the
    Eviction when the last owner is gone, while one left without owners would stay
    forever)."""
    md = metadata_of(ours)
    requesters = {
        str(r.get("name")): r.get("intent", "Withdrawn")
        for r in items(status, "requesters")
        if isinstance(r, Mapping)
    }
    responders = [str(r.get("name")) for r in items(status, "targetResponders")]
    labels = role_labels(requesters, responders, node)
    have = mapping(md, "labels")
    missing = {k: v for k, v in labels.items() if have.get(k) != v}
    refs = owners(items(md, "ownerReferences"), requests)
    patch: Obj = {}
    if missing:
        patch["labels"] = missing
    if len(refs) != len(items(md, "ownerReferences")):
        patch["ownerReferences"] = refs
    if not patch:
        return None
    return str(md["name"]), {"metadata": patch}


def role_labels(
    requesters: Mapping[str, object], responders: Sequence[str], node: str | None
) -> dict[str, str]:
    roles = {name: "requester" for name in requesters}
    for name in responders:
        roles[name] = "requester-responder" if name in roles else "responder"
    return roles | ({NODE_LABEL: node} if node else {})


def owners(have: Sequence[Any], requests: Sequence[Mapping[str, Any]]) -> list[Obj]:
    out = [dict(o) for o in have if isinstance(o, Mapping)]
    known = {o.get("uid") for o in out}
    for r in requests:
        md = metadata_of(r)
        if md.get("uid") not in known:
            known.add(md.get("uid"))
            out.append(
                {
                    "apiVersion": EVICTIONS_API_VERSION,
                    "kind": "EvictionRequest",
                    "name": md.get("name"),
                    "uid": md.get("uid"),
                }
            )
    return out
