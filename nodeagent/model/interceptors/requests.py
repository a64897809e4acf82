"""What the controllers read of one EvictionRequest object, and its terminal conditions."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from nodeagent.model.bodies import (
    deleting,
    find_condition,
    is_true,
    metadata_of,
    owned_by,
    version_of,
)
from nodeagent.model.interceptors.status import InterceptorStatus
from nodeagent.model.names import NODE_LABEL
from nodeagent.model.times import parse_time

__all__ = ["CANCELED", "EVICTED", "EvictionRequestView"]

EVICTED = "Evicted"
CANCELED = "Canceled"


def _names(raw: object) -> tuple[str, ...]:
    if not isinstance(raw, list):
        return ()
    out: list[str] = []
    for item in raw:
        name = item.get("name") if isinstance(item, Mapping) else item
        if isinstance(name, str) and name and name not in out:
            out.append(name)
    return tuple(out)


@dataclass(frozen=True)
class EvictionRequestView:
    """What the controllers need of one EvictionRequest object."""

    namespace: str
    name: str
    uid: str
    generation: int
    creation_time: datetime | None
    target_name: str
    target_uid: str
    requesters: tuple[str, ...]
    target_interceptors: tuple[str, ...] | None
    active: str | None
    processed: tuple[str, ...]
    interceptors: Mapping[str, InterceptorStatus] = field(default_factory=dict)
    conditions: tuple[Mapping[str, Any], ...] = ()
    owned_by_target: bool = False
    """The target pod is an owner: the garbage collector deletes the request with the pod."""
    resource_version: str = ""
    deleting: bool = False
    node: str | None = None
    """The node its requester labelled it with (``nodeagent.io/node``)."""

    @classmethod
    def from_obj(cls, obj: Mapping[str, Any]) -> EvictionRequestView:
        md = metadata_of(obj)
        spec = obj.get("spec")
        spec = spec if isinstance(spec, Mapping) else {}
        status = obj.get("status")
        status = status if isinstance(status, Mapping) else {}
        target = spec.get("target")
        pod = target.get("pod") if isinstance(target, Mapping) else None
        pod = pod if isinstance(pod, Mapping) else {}
        generation = md.get("generation")
        targets = status.get("targetInterceptors")
        entries: dict[str, InterceptorStatus] = {}
        for raw in status.get("interceptors") or ():
            if isinstance(raw, Mapping):
                entry = InterceptorStatus.from_dict(raw)
                if entry.name:
                    entries.setdefault(entry.name, entry)
        active = _names(status.get("activeInterceptors"))
        conditions = tuple(c for c in status.get("conditions") or () if isinstance(c, Mapping))
        labels = md.get("labels")
        node = labels.get(NODE_LABEL) if isinstance(labels, Mapping) else None
        return cls(
            namespace=str(md.get("namespace") or ""),
            name=str(md.get("name") or ""),
            uid=str(md.get("uid") or ""),
            generation=generation if isinstance(generation, int) else 0,
            creation_time=parse_time(md.get("creationTimestamp")),
            target_name=str(pod.get("name") or ""),
            target_uid=str(pod.get("uid") or ""),
            requesters=_names(spec.get("requesters")),
            target_interceptors=_names(targets) if isinstance(targets, list) and targets else None,
            active=active[0] if active else None,
            processed=_names(status.get("processedInterceptors")),
            interceptors=entries,
            conditions=conditions,
            owned_by_target=owned_by(obj, str(pod.get("uid") or "")),
            resource_version=version_of(obj),
            deleting=deleting(obj),
            node=node if isinstance(node, str) and node else None,
        )

    def condition(self, type_: str) -> Mapping[str, Any] | None:
        return find_condition(self.conditions, type_)

    def is_true(self, type_: str) -> bool:
        return is_true(self.condition(type_))

    @property
    def evicted(self) -> bool:
        return self.is_true(EVICTED)

    @property
    def canceled(self) -> bool:
        return self.is_true(CANCELED)

    @property
    def finished(self) -> bool:
        """Evicted or Canceled: the controller takes no further action."""
        return self.evicted or self.canceled

    def entry(self, name: str) -> InterceptorStatus:
        return self.interceptors.get(name) or InterceptorStatus(name)

    def activated_at(self) -> datetime | None:
        """When the active interceptor got its turn: its entry's startTime, which the
        controller records when the turn starts; for the first interceptor the request's
        creation (the KEP's fallback) when nothing was recorded."""
        if self.active is None:
            return None
        recorded = self.entry(self.active).start_time
        if recorded is not None:
            return recorded
        if (
            not self.processed
            and self.target_interceptors
            and self.active == (self.target_interceptors[0])
        ):
            return self.creation_time
        return None
