"""What a preview shows: per selected node, the pods each entry of the plan targets first, the
pods never evicted and why; and its ``-o json`` form."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nodeagent.model.drainplan import DrainPlanEntry, PodType
from nodeagent.model.preview.refusals import Refusal

__all__ = ["EntryPreview", "NeverEvicted", "NodePreview", "PodPreview", "Preview"]


@dataclass(frozen=True)
class PodPreview:
    namespace: str
    name: str
    priority: int
    pod_type: PodType
    refused_by: tuple[Refusal, ...] = ()
    terminating: bool = False

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class NeverEvicted:
    """A pod of a selected node that no entry targets, and why."""

    pod: PodPreview
    reason: str


@dataclass(frozen=True)
class EntryPreview:
    index: int
    entry: DrainPlanEntry
    pods: tuple[PodPreview, ...]
    """The pods first targeted at this entry, by namespace and name."""


@dataclass(frozen=True)
class NodePreview:
    name: str
    entries: tuple[EntryPreview, ...]
    """Every entry of the effective plan, in plan order (most cover no pod)."""
    never_evicted: tuple[NeverEvicted, ...]

    @property
    def to_evict(self) -> int:
        return sum(len(e.pods) for e in self.entries)


@dataclass(frozen=True)
class Preview:
    maintenance: str
    stage: str
    plan: tuple[DrainPlanEntry, ...]
    nodes_seen: int
    """How many nodes the selector was matched against."""
    nodes: tuple[NodePreview, ...]
    """The selected nodes, by name."""

    def to_dict(self) -> dict[str, Any]:
        """The ``-o json`` form."""
        return {
            "maintenance": self.maintenance,
            "stage": self.stage,
            "nodesSeen": self.nodes_seen,
            "selectedNodes": [n.name for n in self.nodes],
            "drainPlan": [_entry_dict(i, e) for i, e in enumerate(self.plan)],
            "nodes": [
                {
                    "name": n.name,
                    "entries": [
                        {**_entry_dict(e.index, e.entry), "pods": [_pod_dict(p) for p in e.pods]}
                        for e in n.entries
                    ],
                    "neverEvicted": [
                        {**_pod_dict(x.pod), "reason": x.reason} for x in n.never_evicted
                    ],
                }
                for n in self.nodes
            ],
        }


def _entry_dict(index: int, entry: DrainPlanEntry) -> dict[str, Any]:
    return {"index": index, "entry": entry.describe(), **entry.to_dict()}


def _pod_dict(pod: PodPreview) -> dict[str, Any]:
    return {
        "namespace": pod.namespace,
        "name": pod.name,
        "priority": pod.priority,
        "podType": pod.pod_type.value,
        "terminating": pod.terminating,
        "refusedBy": [{"name": r.budget, "reason": r.reason} for r in pod.refused_by],
    }
