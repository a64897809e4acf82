"""What a drainTargets resolution returns: per maintenance its plan position and, per node,
the ``status.nodeStatuses[]`` entry, the pods to request evictions for and fast-forwards."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nodeagent.model.drainplan import DrainPlanEntry, format_entries
from nodeagent.model.draintargets.pods import PodRef

__all__ = ["FastForward", "MaintenanceDrain", "NodeDrainStatus", "Resolution"]


@dataclass(frozen=True)
class NodeDrainStatus:
    """One ``status.nodeStatuses[]`` entry, plus the pods to request evictions for."""

    node: str
    drain_targets: tuple[DrainPlanEntry, ...]
    drain_message: str
    targeted_pods: tuple[PodRef, ...]
    pods_pending_evacuation: int
    pods_evacuating: int
    drained: bool

    def to_status(self) -> dict[str, Any]:
        return {
            "nodeRef": {"name": self.node},
            "drainTargets": [e.to_dict() for e in self.drain_targets],
            "drainMessage": self.drain_message,
            "podsPendingEvacuation": self.pods_pending_evacuation,
            "podsEvacuating": self.pods_evacuating,
        }


@dataclass(frozen=True)
class FastForward:
    """``maintenance`` got drainTargets on ``node`` beyond its own plan position because
    ``by`` had already progressed there; reported once, when it happens."""

    maintenance: str
    node: str
    by: str
    by_older: bool
    targets: tuple[DrainPlanEntry, ...]
    entry: DrainPlanEntry

    @property
    def message(self) -> str:
        who = f"older maintenance {self.by}" if self.by_older else f"maintenance {self.by}"
        return (
            f"drainTargets of node {self.node} fast-forwarded to {format_entries(self.targets)} "
            f"by {who}, ahead of this maintenance's drainPlan entry {self.entry.describe()}"
        )


@dataclass(frozen=True)
class MaintenanceDrain:
    name: str
    entry_index: int
    current_entry: DrainPlanEntry
    nodes: tuple[NodeDrainStatus, ...]
    drained: bool
    """Every non-skipped pod of every selected node is gone or terminal."""
    fast_forwards: tuple[FastForward, ...]

    def node(self, name: str) -> NodeDrainStatus:
        for status in self.nodes:
            if status.node == name:
                return status
        raise KeyError(name)


@dataclass(frozen=True)
class Resolution:
    maintenances: Mapping[str, MaintenanceDrain]
    """Drain-stage maintenances only, by name."""

    def __getitem__(self, name: str) -> MaintenanceDrain:
        return self.maintenances[name]

    def __contains__(self, name: object) -> bool:
        return name in self.maintenances

    @property
    def fast_forwards(self) -> tuple[FastForward, ...]:
        return tuple(ff for m in self.maintenances.values() for ff in m.fast_forwards)
