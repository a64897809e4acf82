"""What the Eviction decision (:mod:`.eviction`) returns: the writes that move one target's
Eviction on."""

from __future__ import annotations

from dataclasses import dataclass

from nodeagent.model.bodies import Obj

__all__ = ["EvictionPlan", "RequestStatus", "StatusWrite", "Target"]


@dataclass(frozen=True)
class Target:
    namespace: str
    name: str
    uid: str


@dataclass(frozen=True)
class StatusWrite:
    """An Eviction's whole status, written at the version it was decided from."""

    name: str
    resource_version: str
    status: Obj


@dataclass(frozen=True)
class RequestStatus:
    name: str
    status: Obj


@dataclass(frozen=True)
class EvictionPlan:
    create: Obj | None = None
    metadata: tuple[str, Obj] | None = None  # (Eviction name, merge patch of labels and owners)
    status: StatusWrite | None = None
    invalid: tuple[StatusWrite, ...] = ()  # duplicates of another's Eviction of the target
    requests: tuple[RequestStatus, ...] = ()
    requeue_after: float | None = None  # when the active responder's heartbeat lapses
