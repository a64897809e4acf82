"""What the eviction bridge writes: the EvictionRequest it asks for a pod's eviction with, or
its requester added to the request someone else made (the maintenances' `RequesterPatch`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nodeagent.model.names import BRIDGE_REQUESTER
from nodeagent.model.nodemaintenance.actions import EvictionRequestCreate, RequesterPatch
from nodeagent.model.nodemaintenance.requests import eviction_request_body

__all__ = [
    "EnsureUpstreamRequest",
    "EvictionRequestCreate",
    "RecreateRequest",
    "RequesterPatch",
    "Write",
    "request_body",
]


def request_body(pod: Mapping[str, Any]) -> dict[str, Any]:
    """The EvictionRequest for ``pod`` with the bridge as its requester (the bridge remembers
    the pod's departure from the informers' events, not from the request, which the garbage
    collector deletes with the pod)."""
    return eviction_request_body(pod, BRIDGE_REQUESTER)


@dataclass(frozen=True)
class RecreateRequest:
    """Delete the canceled request (preconditions: ``uid`` and ``resource_version``), then
    create ``body``: a canceled request never starts again."""

    namespace: str
    name: str
    uid: str
    resource_version: str
    body: dict[str, Any]


@dataclass(frozen=True)
class EnsureUpstreamRequest:
    """The bridge's upstream request (`model.bridge.upstream`): create ``body``, or when it is
    there already set its intent to Eviction."""

    namespace: str
    body: dict[str, Any]

    @property
    def name(self) -> str:
        return str(self.body["metadata"]["name"])


Write = EvictionRequestCreate | RequesterPatch | RecreateRequest | EnsureUpstreamRequest
"""``RequesterPatch``: the bridge's requester added to a request someone else made (a conflict
means it changed: the client's next attempt decides again)."""
