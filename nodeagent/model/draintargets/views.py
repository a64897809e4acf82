"""What a drainTargets resolution reads of each NodeMaintenance."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from nodeagent.model.drainplan import DrainPlanEntry

__all__ = ["DRAIN_STAGE", "MaintenanceView"]

DRAIN_STAGE = "Drain"


@dataclass(frozen=True)
class MaintenanceView:
    """What :func:`~nodeagent.model.draintargets.resolution.resolve` needs of one
    NodeMaintenance.

    ``creation_key`` is ``(metadata.creationTimestamp, metadata.name)``: smaller is older.
    ``plan`` is the effective plan (:func:`~nodeagent.model.drainplan.effective_plan`).
    ``progress`` maps node name to the drainTargets stored in ``status.nodeStatuses``.
    ``entry_index`` is the plan position returned last time, if the controller kept it.
    Only maintenances in stage Drain take part; the others are ignored.
    ``shown`` is the name messages give it (default ``name``): a maintenance resolved node by
    node takes part as one view per node, each with a name of its own.
    """

    name: str
    creation_key: tuple[str, str]
    stage: str
    plan: Sequence[DrainPlanEntry]
    nodes: frozenset[str]
    progress: Mapping[str, Sequence[DrainPlanEntry]] = field(default_factory=dict)
    entry_index: int | None = None
    shown: str = ""

    @property
    def label(self) -> str:
        return self.shown or self.name

    def __post_init__(self) -> None:
        if not self.plan:
            raise ValueError(f"{self.name}: the effective drain plan is never empty")
