"""What a NodeMaintenance means (KEP-4212), defined once for the controllers and the node side:
its stage, whether its spec is valid, and how it relates to a node. That relation, from the
narrowest to the widest where they differ:

- :func:`selects`: its valid ``spec.nodeSelector`` matches the node now.
- :func:`covers`: it selects the node or reports on it in ``status.nodeStatuses`` (what the
  node's conditions and the pods-off rule go by: a drain stands even once a node is relabelled).
- :func:`involves`: it selects the node or holds nodeagent's cordon on it (the controller's
  grouping; a status entry alone does not count, as there is no node object to look at);
  :func:`maintenance_nodes` is the set form over all nodes, status entries included.
- :func:`holds_pods_off`: it covers the node, in Drain, not being deleted;
  :func:`holds_pods_off_this_boot` adds, for static pods, that a shutdown maintenance of an
  earlier boot holds nothing.

Which maintenance keeps evicted pods off a node. The DaemonSet interceptor's taint (DaemonSet
pods) and the static-pod interceptor's stash (static pods) follow the one rule
:func:`holds_pods_off`: a maintenance in stage Drain, not being deleted, that covers the node
(selects it, or reports on it in ``status.nodeStatuses``). KEP-4212: in Idle the controller
"should not touch the pods or nodes ... in any way"; Cordon only makes nodes unschedulable; pods
are evicted in Drain and, once gone, "should not be re-scheduled on the node ... until the node
maintenance is complete" - and the only stage after Drain is Complete, which deletion runs
first.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from nodeagent.model.bodies import (
    annotations_of,
    as_map,
    deleting,
    items,
    mapping,
    name_of,
    spec_stage,
)
from nodeagent.model.drainplan import (
    DrainPlanEntry,
    InvalidPlan,
    effective_plan,
    entries_from_dicts,
)
from nodeagent.model.names import CORDONED_BY_ANNOTATION
from nodeagent.model.nodeselectors import node_selector_matches, validate_node_selector
from nodeagent.model.shutdown import boot_of, is_ours

__all__ = [
    "DELETE_PODS",
    "ESCALATIONS",
    "Stage",
    "Validity",
    "cordoned_by",
    "covers",
    "deadline_escalation",
    "drain_plan_hash",
    "effective_stage",
    "holds_pods_off",
    "holds_pods_off_this_boot",
    "involves",
    "maintenance_nodes",
    "node_drain_targets",
    "node_status",
    "selected_nodes",
    "selects",
    "started_stages",
    "status_nodes",
    "validate",
]

ESCALATIONS = ("None", "DeletePods")
INT32_MAX = 2**31 - 1
"""What may happen once a drain deadline has passed (spec.drainDeadlineEscalation)."""
DELETE_PODS = "DeletePods"


def deadline_escalation(nm: Mapping[str, Any], default: str = "None") -> str:
    """``spec.drainDeadlineEscalation``, else ``default``."""
    spec = nm.get("spec")
    raw = spec.get("drainDeadlineEscalation") if isinstance(spec, Mapping) else None
    return raw if isinstance(raw, str) and raw in ESCALATIONS else default


_ALLOWED = "Idle -> Cordon | Drain | Complete, Cordon -> Drain | Complete, Drain -> Complete"


class Stage(StrEnum):
    """NodeMaintenance stages in the only order they may be taken."""

    IDLE = "Idle"
    CORDON = "Cordon"
    DRAIN = "Drain"
    COMPLETE = "Complete"

    @property
    def rank(self) -> int:
        return _STAGE_RANK[self]

    @property
    def holds_cordon(self) -> bool:
        return self in (Stage.CORDON, Stage.DRAIN)


_STAGE_RANK = {s: i for i, s in enumerate(Stage)}


def effective_stage(nm: Mapping[str, Any]) -> Stage | None:
    """The stage to act on: Complete while the maintenance is being deleted ("Deleting a
    maintenance that is not Idle runs Complete first"); None for an unknown stage value."""
    if deleting(nm):
        return Stage.COMPLETE
    try:
        return Stage(spec_stage(nm))
    except ValueError:
        return None


def started_stages(nm: Mapping[str, Any]) -> list[Stage]:
    """The stages ``status.stageStatuses`` records as started."""
    out: list[Stage] = []
    for entry in items(mapping(nm, "status"), "stageStatuses"):
        try:
            out.append(Stage(str(as_map(entry).get("name"))))
        except ValueError:
            continue
    return out


def drain_plan_hash(nm: Mapping[str, Any]) -> str:
    """Fingerprint of ``spec.drainPlan`` as written (recorded in ``status.drainPlanHash``)."""
    raw = mapping(nm, "spec").get("drainPlan")
    text = json.dumps(raw, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Validity:
    """``reason`` is the Valid condition's reason; ``plan`` the effective plan when valid."""

    valid: bool
    reason: str
    message: str
    plan: tuple[DrainPlanEntry, ...] = ()


def validate(nm: Mapping[str, Any]) -> Validity:
    """What the CRD's schema and CEL rules would reject, plus the drain plan's own rules."""
    raw_stage = spec_stage(nm)
    try:
        stage = Stage(raw_stage)
    except ValueError:
        return Validity(
            False,
            "InvalidStage",
            f"spec.stage: unknown stage {raw_stage!r}; must be one of "
            + ", ".join(s.value for s in Stage),
        )
    started = started_stages(nm)
    if started:
        furthest = max(started, key=lambda s: s.rank)
        if stage.rank < furthest.rank:
            return Validity(
                False,
                "InvalidStageTransition",
                f"spec.stage: cannot go back from {furthest.value} to {stage.value}; "
                f"allowed transitions are {_ALLOWED}",
            )
    spec = mapping(nm, "spec")
    selector = spec.get("nodeSelector")
    if not isinstance(selector, Mapping):
        return Validity(False, "InvalidNodeSelector", "spec.nodeSelector: required")
    problems = validate_node_selector(selector)
    if problems:
        return Validity(
            False, "InvalidNodeSelector", "; ".join("spec.nodeSelector." + p for p in problems)
        )
    deadline = spec.get("drainDeadlineSeconds")
    if deadline is not None and (
        isinstance(deadline, bool)
        or not isinstance(deadline, int)
        or not 1 <= deadline <= INT32_MAX
    ):
        return Validity(
            False,
            "InvalidDrainDeadline",
            f"spec.drainDeadlineSeconds: must be a whole number of seconds from 1 to "
            f"{INT32_MAX}, got {deadline!r}",
        )
    escalation = spec.get("drainDeadlineEscalation")
    if escalation is not None and escalation not in ESCALATIONS:
        return Validity(
            False,
            "InvalidDrainDeadline",
            f"spec.drainDeadlineEscalation: must be one of {', '.join(ESCALATIONS)}, "
            f"got {escalation!r}",
        )
    recorded = mapping(nm, "status").get("drainPlanHash")
    if isinstance(recorded, str) and recorded and recorded != drain_plan_hash(nm):
        return Validity(
            False,
            "InvalidDrainPlan",
            "spec.drainPlan: changed after the maintenance was created; drainPlan is immutable",
        )
    raw_plan = spec.get("drainPlan")
    try:
        if raw_plan is not None and not isinstance(raw_plan, list):
            raise InvalidPlan("spec.drainPlan: must be a list")
        plan_entries = effective_plan(raw_plan)
    except InvalidPlan as e:
        return Validity(False, "InvalidDrainPlan", str(e))
    return Validity(True, "Valid", "spec is valid", tuple(plan_entries))


# --- which nodes --------------------------------------------------------------------------------


def _valid_selector(nm: Mapping[str, Any]) -> Mapping[str, Any] | None:
    selector = mapping(nm, "spec").get("nodeSelector")
    return (
        selector if isinstance(selector, Mapping) and not validate_node_selector(selector) else None
    )


def selects(nm: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """Whether ``spec.nodeSelector`` (a valid one) selects ``node``."""
    selector = _valid_selector(nm)
    return selector is not None and node_selector_matches(selector, node)


def selected_nodes(nm: Mapping[str, Any], nodes: Mapping[str, Mapping[str, Any]]) -> frozenset[str]:
    """Names of the nodes ``spec.nodeSelector`` selects (none for an invalid selector)."""
    selector = _valid_selector(nm)  # validated once, not per node
    if selector is None:
        return frozenset()
    return frozenset(n for n, node in nodes.items() if node_selector_matches(selector, node))


def status_nodes(nm: Mapping[str, Any]) -> set[str]:
    """The nodes named in ``status.nodeStatuses``."""
    out: set[str] = set()
    for entry in items(mapping(nm, "status"), "nodeStatuses"):
        name = mapping(entry, "nodeRef").get("name")
        if isinstance(name, str) and name:
            out.add(name)
    return out


def node_status(nm: Mapping[str, Any], node_name: str) -> Mapping[str, Any] | None:
    """The maintenance's ``status.nodeStatuses`` entry for node ``node_name``, if any."""
    for entry in items(mapping(nm, "status"), "nodeStatuses"):
        if isinstance(entry, Mapping) and mapping(entry, "nodeRef").get("name") == node_name:
            return entry
    return None


def node_drain_targets(nm: Mapping[str, Any], node_name: str) -> tuple[DrainPlanEntry, ...]:
    """The drainTargets the maintenance resolved for node ``node_name`` (none without an entry
    for it). Raises :class:`InvalidPlan` naming the field when they do not parse."""
    where = f"NodeMaintenance {name_of(nm)} status.nodeStatuses[{node_name}].drainTargets"
    return tuple(entries_from_dicts((node_status(nm, node_name) or {}).get("drainTargets"), where))


def covers(nm: Mapping[str, Any], node_name: str, node: Mapping[str, Any] | None) -> bool:
    """Whether the maintenance is about node ``node_name``: it selects the node (``node``, its
    object, when known) or reports on it in ``status.nodeStatuses`` (the controller keeps the
    node there while the drain it resolved for it stands, even once the node is relabelled)."""
    return node_name in status_nodes(nm) or (node is not None and selects(nm, node))


def holds_pods_off(nm: Mapping[str, Any], node_name: str, node: Mapping[str, Any] | None) -> bool:
    """Whether the maintenance keeps the pods it evicts off node ``node_name`` (the DaemonSet
    taint, the stashed static pods): it is in Drain, not being deleted, and covers the node
    (see the module docstring for why)."""
    return effective_stage(nm) == Stage.DRAIN and covers(nm, node_name, node)


def holds_pods_off_this_boot(
    nm: Mapping[str, Any], node_name: str, node: Mapping[str, Any] | None, boot_id: str
) -> bool:
    """:func:`holds_pods_off`, except that nodeagent's shutdown maintenance of an earlier boot of
    the node holds nothing: the static pods' rule, as their manifests are put back at start-up,
    before the kubelet runs, so that the node can come back."""
    if is_ours(nm, node_name) and boot_of(nm) not in (None, boot_id):
        return False
    return holds_pods_off(nm, node_name, node)


def cordoned_by(node: Mapping[str, Any]) -> list[str] | None:
    """The maintenances holding nodeagent's cordon of `node`; None when nodeagent holds none."""
    raw = annotations_of(node).get(CORDONED_BY_ANNOTATION)
    if not isinstance(raw, str):
        return None
    return [n for n in (part.strip() for part in raw.split(",")) if n]


def involves(nm: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """Whether the maintenance selects ``node`` or holds a cordon on it."""
    return name_of(nm) in (cordoned_by(node) or ()) or selects(nm, node)


def maintenance_nodes(
    nm: Mapping[str, Any],
    nodes: Mapping[str, Mapping[str, Any]],
    selected: frozenset[str] | None = None,
) -> frozenset[str]:
    """Every node the maintenance has to do with: selected now (``selected``, if the caller
    has it), reported in its status, or cordoned on its behalf."""
    name = name_of(nm)
    cordoned = (n for n, node in nodes.items() if name in (cordoned_by(node) or ()))
    if selected is None:
        selected = selected_nodes(nm, nodes)
    return selected.union(cordoned, status_nodes(nm))
