"""What the eviction bridge writes: the EvictionRequest it asks for a pod's eviction with, or
its requester added to the request someone else made."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nodeagent.model.bodies import labels_of, mapping, metadata_of
from nodeagent.model.names import BRIDGE_REQUESTER, NODE_LABEL

__all__ = ["AddRequester", "CreateRequest", "RecreateRequest", "Write", "request_body"]


def request_body(pod: Mapping[str, Any]) -> dict[str, Any]:
    """A ``nodeagent.io/v1alpha1`` EvictionRequest for ``pod``, named after its UID, with the
    bridge as its requester. Owned by the pod, so the garbage collector deletes it with the pod
    (the bridge remembers the pod's departure from the informers' events, not from the
    request)."""
    md = metadata_of(pod)
    name, uid = str(md.get("name") or ""), str(md.get("uid") or "")
    labels = {k: v for k, v in labels_of(pod).items() if isinstance(v, str)}
    node = mapping(pod, "spec").get("nodeName")
    if isinstance(node, str) and node:
        labels[NODE_LABEL] = node
    return {
        "apiVersion": "nodeagent.io/v1alpha1",
        "kind": "EvictionRequest",
        "metadata": {
            "name": uid,
            "namespace": str(md.get("namespace") or "default"),
            "labels": labels,
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": name, "uid": uid}],
        },
        "spec": {
            "target": {"pod": {"name": name, "uid": uid}},
            "requesters": [{"name": BRIDGE_REQUESTER}],
        },
    }


@dataclass(frozen=True)
class CreateRequest:
    """Create ``body`` (an AlreadyExists means another replica was first: not an error)."""

    namespace: str
    body: dict[str, Any]


@dataclass(frozen=True)
class AddRequester:
    """Replace ``spec.requesters`` of the request still at ``resource_version`` (a conflict
    means it changed: the client's next attempt decides again)."""

    namespace: str
    name: str
    resource_version: str
    requesters: tuple[str, ...]

    def to_patch(self) -> dict[str, Any]:
        """A JSON merge patch with the resourceVersion as precondition."""
        return {
            "metadata": {"resourceVersion": self.resource_version},
            "spec": {"requesters": [{"name": r} for r in self.requesters]},
        }


@dataclass(frozen=True)
class RecreateRequest:
    """Delete the canceled request (preconditions: ``uid`` and ``resource_version``), then
    create ``body``: a canceled request never starts again."""

    namespace: str
    name: str
    uid: str
    resource_version: str
    body: dict[str, Any]


Write = CreateRequest | AddRequester | RecreateRequest
