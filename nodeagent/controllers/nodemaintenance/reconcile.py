"""The NodeMaintenance decision as the shell and its tests import it: the decision itself lives
in :mod:`nodeagent.model.nodemaintenance` (one module per concern; its package docstring says
which, and the order in which the shell applies the actions)."""

from __future__ import annotations

from nodeagent.model.maintenance import (
    Stage,
    Validity,
    drain_plan_hash,
    effective_stage,
    involves,
    maintenance_nodes,
    selected_nodes,
    status_nodes,
    validate,
)
from nodeagent.model.names import CORDONED_BY_ANNOTATION, FINALIZER, NODE_LABEL, REQUESTER
from nodeagent.model.nodemaintenance.actions import (
    Actions,
    EvictionRequestCreate,
    EvictionRequestDelete,
    NodePatch,
    PodDelete,
    RequesterPatch,
    StatusUpdate,
)
from nodeagent.model.nodemaintenance.deadline import DEADLINE_CONDITION
from nodeagent.model.nodemaintenance.decide import decide
from nodeagent.model.nodemaintenance.inputs import Inputs
from nodeagent.model.nodemaintenance.requests import refusal
from nodeagent.model.nodemaintenance.selection import connected, recall_group

__all__ = [
    "CORDONED_BY_ANNOTATION",
    "DEADLINE_CONDITION",
    "FINALIZER",
    "NODE_LABEL",
    "REQUESTER",
    "Actions",
    "EvictionRequestCreate",
    "EvictionRequestDelete",
    "Inputs",
    "NodePatch",
    "PodDelete",
    "RequesterPatch",
    "Stage",
    "StatusUpdate",
    "Validity",
    "connected",
    "decide",
    "drain_plan_hash",
    "effective_stage",
    "involves",
    "maintenance_nodes",
    "recall_group",
    "refusal",
    "selected_nodes",
    "status_nodes",
    "validate",
]
