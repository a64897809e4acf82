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
    "collected_with_requests",
    "metadata_patch",
    "owners",
    "role_labels",
]

EVICTIONS_API_VERSION = "lifecycle.k8s.io/v1alpha1"
"""The apiVersion of Evictions and EvictionRequests."""


def collected_with_pod(
    uid: str, requests: Sequence[Mapping[str, Any]], pod: Mapping[str, Any] | None
) -> bool:
    """Whether the pod of `uid` is deleted and owned every request of it (as the NodeMaintenance
    controller's are): the garbage collector deletes them, and with them the Eviction."""
    deleted = pod is None or metadata_of(pod).get("uid") != uid
    return deleted and bool(requests) and all(owned_by(r, uid) for r in requests)


def collected_with_requests(
    eviction: Mapping[str, Any],
    requests: Sequence[Mapping[str, Any]],
    uid: str,
    pod: Mapping[str, Any] | None,
) -> bool:
    """Whether the pod of `uid` is deleted, every request of it gone and the Eviction had only
    requests as owners: the garbage collector took the requests with the pod and deletes the
    Eviction next (a write now would mostly be a 404). With the pod still there the Eviction is
    told, as upstream's controller tells it, that nobody wants the eviction any more."""
    deleted = pod is None or metadata_of(pod).get("uid") != uid
    refs = [o for o in items(metadata_of(eviction), "ownerReferences") if isinstance(o, Mapping)]
    only_requests = bool(refs) and all(o.get("kind") == "EvictionRequest" for o in refs)
    return deleted and not requests and only_requests


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
