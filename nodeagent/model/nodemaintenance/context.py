"""What every step of one decision reads: each maintenance of the inputs with its validity,
selected nodes and stored progress (derived again only when its selector, a node or its status
changed), and the readers of pods and EvictionRequests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from nodeagent.model.bodies import (
    NodeMaintenance,
    as_map,
    deleting,
    items,
    mapping,
    name_of,
)
from nodeagent.model.drainplan import (
    DrainPlanEntry,
    InvalidPlan,
    entries_from_dicts,
)
from nodeagent.model.maintenance import (
    Stage,
    Validity,
    effective_stage,
    validate,
)
from nodeagent.model.memo import Recall
from nodeagent.model.nodemaintenance.inputs import Inputs
from nodeagent.model.nodemaintenance.pods import PodReader
from nodeagent.model.nodemaintenance.requests import RequestReader
from nodeagent.model.nodemaintenance.selection import recall_group, selection


@dataclass
class MaintenanceState:
    """Another maintenance (or this one), as the decision needs it."""

    obj: NodeMaintenance
    name: str
    stage: Stage | None
    validity: Validity
    selected: frozenset[str]
    progress: Mapping[str, Sequence[DrainPlanEntry]] = field(default_factory=dict)
    """In Drain and valid: the drainTargets it stored for each node it selects."""

    def holds(self, node: str, annotation: Sequence[str]) -> bool:
        """Whether this maintenance keeps ``node`` cordoned."""
        if not self.validity.valid:
            # An invalid maintenance touches nothing: it keeps what it held until deleted.
            return self.stage != Stage.COMPLETE and self.name in annotation
        return self.stage is not None and self.stage.holds_cordon and node in self.selected


def _stored_progress(
    status: Mapping[str, Any], selected: frozenset[str]
) -> dict[str, list[DrainPlanEntry]]:
    """The drainTargets a maintenance stored (``status``) for each node it selects."""
    progress: dict[str, list[DrainPlanEntry]] = {}
    for entry in items(status, "nodeStatuses"):
        node = mapping(entry, "nodeRef").get("name")
        if not isinstance(node, str) or node not in selected:
            continue
        try:
            progress[node] = entries_from_dicts(as_map(entry).get("drainTargets"), "drainTargets")
        except InvalidPlan:
            continue  # unreadable stored progress: recovered from the others, conservatively
    return progress


@dataclass(frozen=True)
class Context:
    """What every step of one decision reads."""

    inp: Inputs
    me: str
    stage: Stage | None
    deleting: bool
    validity: Validity
    others: Mapping[str, MaintenanceState]
    """Every maintenance of the inputs by name, this one included."""
    acting: bool
    """Touch nothing while invalid, except that Complete (asked for, or by deletion) always
    undoes what the maintenance did: its cordons are known by the annotation, not the spec."""
    recall: Recall
    bound: PodReader
    requests: RequestReader

    @property
    def nm(self) -> NodeMaintenance:
        return self.inp.maintenance

    @property
    def mine(self) -> MaintenanceState:
        return self.others[self.me]

    @property
    def act_stage(self) -> Stage | None:
        return self.stage if self.acting else None


def read_maintenances(
    inp: Inputs, me: str, validity: Validity, recall: Recall
) -> dict[str, MaintenanceState]:
    """Every maintenance of the inputs as the decision needs it (``validity`` is this one's)."""
    others: dict[str, MaintenanceState] = {}
    for obj in [*inp.maintenances, inp.maintenance]:
        name = name_of(obj)
        if not name:
            continue
        v = validity if name == me else validate(obj)
        stage = effective_stage(obj)
        selected = selection(inp, recall, obj) if v.valid else frozenset()
        progress: Mapping[str, Sequence[DrainPlanEntry]] = {}
        if stage == Stage.DRAIN and v.valid:
            status = mapping(obj, "status")  # a new object with every write of it
            progress = recall(
                recall_group(name),
                "progress",
                (status, selected),
                partial(_stored_progress, status, selected),
            )
        others[name] = MaintenanceState(obj, name, stage, v, selected, progress)
    return others


def read_context(inp: Inputs, validity: Validity) -> Context:
    """What the steps of one decision read, built once before them (``validity`` is the
    maintenance's own, already checked)."""
    nm = inp.maintenance
    me = name_of(nm)
    stage = effective_stage(nm)
    is_deleting = deleting(nm)
    recall = inp.recall if inp.recall is not None else Recall()
    bound = PodReader(inp, recall)
    return Context(
        inp=inp,
        me=me,
        stage=stage,
        deleting=is_deleting,
        validity=validity,
        others=read_maintenances(inp, me, validity, recall),
        acting=validity.valid or is_deleting or stage == Stage.COMPLETE,
        recall=recall,
        bound=bound,
        requests=RequestReader(inp, recall, bound),
    )
