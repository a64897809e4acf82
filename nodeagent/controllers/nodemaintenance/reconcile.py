"""The NodeMaintenance decision (KEP-4212 "NodeMaintenance Controller", DESIGN 2.1): state in,
intended actions out. Pure: no I/O and no clock; the shell in ``controller.py`` gathers the
inputs from its informers and applies the actions in this order:

1. add the finalizer;
2. cordon nodes (``cordon``);
3. write the status (compare-and-swap on the maintenance's resourceVersion) - progress is
   recorded before anything acts on it, so drainTargets never run ahead of what is stored;
4. write the drain status of the other maintenances of the same drainTargets resolution
   (``neighbours``; the resolution is one computation, stored for all of them at once);
5. emit the events;
6. EvictionRequests: delete, create, add the requester, remove the requester;
7. uncordon nodes (``uncordon``);
8. remove the finalizer.

Ownership of cordons. A node nodeagent cordoned carries the annotation
``nodeagent.io/cordoned-by: <names>`` naming the maintenances (in Cordon or Drain) that hold
it. A node that was already unschedulable without that annotation was cordoned by someone else
and is never uncordoned. A node is uncordoned when the last holder lets go and no other
maintenance in Cordon or Drain selects it; otherwise the hold passes to those maintenances.

EvictionRequests. All maintenances ask with the one requester name ``nodemaintenance.k8s.io``,
so the requester is removed from a pod's request only when no maintenance in Drain targets the
pod any more. Evicted requests that only we asked for, and canceled requests nobody asks for,
are deleted (KEP-4563: requesters may delete them once Evicted or Canceled).

Validation. The CRD's CEL rules (stage transitions, immutable drainPlan) are not evaluated by
every API server (the simulated one skips CEL), so the same checks are made here: a stage that
moved backwards (judged against ``status.stageStatuses``), a drainPlan that differs from the one
recorded in ``status.drainPlanHash``, an invalid nodeSelector or drain plan make the
maintenance ``Valid=False`` with a message naming the problem, and nothing else is touched
(except on deletion, which always runs Complete so the finalizer can go).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from nodeagent.model.drainplan import (
    DrainPlanEntry,
    InvalidPlan,
    effective_plan,
    entries_from_dicts,
)
from nodeagent.model.draintargets import (
    DRAIN_STAGE,
    MaintenanceDrain,
    MaintenanceView,
    PodInfo,
    Resolution,
    resolve,
)
from nodeagent.model.interceptors import InvalidInterceptors, target_interceptors
from nodeagent.model.selectors import node_selector_matches, validate_node_selector

__all__ = [
    "CORDONED_BY_ANNOTATION",
    "FINALIZER",
    "NODE_LABEL",
    "REQUESTER",
    "Actions",
    "EvictionRequestCreate",
    "EvictionRequestDelete",
    "Inputs",
    "NodePatch",
    "RecordedEvent",
    "RequesterPatch",
    "Stage",
    "StatusUpdate",
    "Validity",
    "connected",
    "covers",
    "decide",
    "drain_plan_hash",
    "effective_stage",
    "maintenance_nodes",
    "selected_nodes",
    "status_nodes",
    "validate",
]

FINALIZER = "nodeagent.io/maintenance-completion"
REQUESTER = "nodemaintenance.k8s.io"
CORDONED_BY_ANNOTATION = "nodeagent.io/cordoned-by"
NODE_LABEL = "nodeagent.io/node"

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


# --- small accessors ---------------------------------------------------------------------------


def _as_map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _map(obj: object, key: str) -> Mapping[str, Any]:
    return _as_map(obj.get(key) if isinstance(obj, Mapping) else None)


def _list(obj: object, key: str) -> list[Any]:
    value = obj.get(key) if isinstance(obj, Mapping) else None
    return value if isinstance(value, list) else []


def _name(obj: Mapping[str, Any]) -> str:
    return str(_map(obj, "metadata").get("name") or "")


def _deleting(obj: Mapping[str, Any]) -> bool:
    return _map(obj, "metadata").get("deletionTimestamp") is not None


def _has_finalizer(obj: Mapping[str, Any]) -> bool:
    return FINALIZER in (_map(obj, "metadata").get("finalizers") or ())


def _spec_stage(nm: Mapping[str, Any]) -> str:
    raw = _map(nm, "spec").get("stage")
    return raw if isinstance(raw, str) and raw else Stage.IDLE.value


def _time(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _condition(status: Mapping[str, Any], type_: str) -> Mapping[str, Any] | None:
    for cond in _list(status, "conditions"):
        if isinstance(cond, Mapping) and cond.get("type") == type_:
            return cond
    return None


def _condition_true(obj: Mapping[str, Any], type_: str) -> bool:
    cond = _condition(_map(obj, "status"), type_)
    return cond is not None and cond.get("status") == "True"


def _requesters(er: Mapping[str, Any]) -> list[str]:
    return [
        str(r.get("name"))
        for r in _list(_map(er, "spec"), "requesters")
        if isinstance(r, Mapping) and r.get("name")
    ]


def _cordoned_by(node: Mapping[str, Any]) -> list[str] | None:
    """The maintenances holding nodeagent's cordon of `node`; None when nodeagent holds none."""
    raw = _map(_map(node, "metadata"), "annotations").get(CORDONED_BY_ANNOTATION)
    if not isinstance(raw, str):
        return None
    return [n for n in (part.strip() for part in raw.split(",")) if n]


def _unschedulable(node: Mapping[str, Any]) -> bool:
    return _map(node, "spec").get("unschedulable") is True


# --- stage, validity, selection -----------------------------------------------------------------


def effective_stage(nm: Mapping[str, Any]) -> Stage | None:
    """The stage to act on: Complete while the maintenance is being deleted ("Deleting a
    maintenance that is not Idle runs Complete first"); None for an unknown stage value."""
    if _deleting(nm):
        return Stage.COMPLETE
    try:
        return Stage(_spec_stage(nm))
    except ValueError:
        return None


def _started_stages(nm: Mapping[str, Any]) -> list[Stage]:
    out: list[Stage] = []
    for entry in _list(_map(nm, "status"), "stageStatuses"):
        try:
            out.append(Stage(str(_as_map(entry).get("name"))))
        except ValueError:
            continue
    return out


def drain_plan_hash(nm: Mapping[str, Any]) -> str:
    """Fingerprint of ``spec.drainPlan`` as written (recorded in ``status.drainPlanHash``)."""
    raw = _map(nm, "spec").get("drainPlan")
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
    raw_stage = _spec_stage(nm)
    try:
        stage = Stage(raw_stage)
    except ValueError:
        return Validity(
            False,
            "InvalidStage",
            f"spec.stage: unknown stage {raw_stage!r}; must be one of "
            + ", ".join(s.value for s in Stage),
        )
    started = _started_stages(nm)
    if started:
        furthest = max(started, key=lambda s: s.rank)
        if stage.rank < furthest.rank:
            return Validity(
                False,
                "InvalidStageTransition",
                f"spec.stage: cannot go back from {furthest.value} to {stage.value}; "
                f"allowed transitions are {_ALLOWED}",
            )
    spec = _map(nm, "spec")
    selector = spec.get("nodeSelector")
    if not isinstance(selector, Mapping):
        return Validity(False, "InvalidNodeSelector", "spec.nodeSelector: required")
    problems = validate_node_selector(selector)
    if problems:
        return Validity(
            False, "InvalidNodeSelector", "; ".join("spec.nodeSelector." + p for p in problems)
        )
    recorded = _map(nm, "status").get("drainPlanHash")
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


def selected_nodes(nm: Mapping[str, Any], nodes: Mapping[str, Mapping[str, Any]]) -> frozenset[str]:
    """Names of the nodes ``spec.nodeSelector`` selects (none for an invalid selector)."""
    selector = _map(nm, "spec").get("nodeSelector")
    if not isinstance(selector, Mapping) or validate_node_selector(selector):
        return frozenset()
    return frozenset(n for n, node in nodes.items() if node_selector_matches(selector, node))


def status_nodes(nm: Mapping[str, Any]) -> set[str]:
    """The nodes named in ``status.nodeStatuses``."""
    out: set[str] = set()
    for entry in _list(_map(nm, "status"), "nodeStatuses"):
        name = _map(entry, "nodeRef").get("name")
        if isinstance(name, str) and name:
            out.add(name)
    return out


def covers(nm: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """Whether the maintenance selects ``node`` or holds a cordon on it."""
    if _name(nm) in (_cordoned_by(node) or ()):
        return True
    selector = _map(nm, "spec").get("nodeSelector")
    return (
        isinstance(selector, Mapping)
        and not validate_node_selector(selector)
        and node_selector_matches(selector, node)
    )


def maintenance_nodes(
    nm: Mapping[str, Any], nodes: Mapping[str, Mapping[str, Any]]
) -> frozenset[str]:
    """Every node the maintenance has to do with: selected now, reported in its status, or
    cordoned on its behalf."""
    return frozenset(n for n, node in nodes.items() if covers(nm, node)) | status_nodes(nm)


def connected(
    start: Iterable[str], node_sets: Mapping[str, frozenset[str]]
) -> tuple[set[str], set[str]]:
    """The maintenances (by name) transitively sharing nodes with ``start``, and their nodes.

    ``node_sets`` maps every maintenance to its nodes (:func:`maintenance_nodes`)."""
    by_node: dict[str, list[str]] = {}
    for name, ns in node_sets.items():
        for n in ns:
            by_node.setdefault(n, []).append(name)
    seen = {s for s in start if s in node_sets}
    frontier = list(seen)
    nodes: set[str] = set()
    while frontier:
        current = frontier.pop()
        for n in node_sets[current]:
            if n in nodes:
                continue
            nodes.add(n)
            for other in by_node.get(n, ()):
                if other not in seen:
                    seen.add(other)
                    frontier.append(other)
    return seen, nodes


# --- inputs and actions ------------------------------------------------------------------------


@dataclass(frozen=True)
class Inputs:
    """What one reconcile of ``maintenance`` looks at.

    ``maintenances`` holds at least every maintenance connected to this one through shared
    nodes (it may hold all of them), ``maintenance`` included. ``nodes`` holds every node.
    ``pods`` holds the pods bound to each node of those maintenances (a missing node has none).
    ``eviction_requests`` maps pod UID (the request's name) to the EvictionRequest, for at
    least the pods on those nodes and the requests labelled with one of them.
    """

    maintenance: Mapping[str, Any]
    maintenances: Sequence[Mapping[str, Any]]
    nodes: Mapping[str, Mapping[str, Any]]
    pods: Mapping[str, Sequence[Mapping[str, Any]]]
    eviction_requests: Mapping[str, Mapping[str, Any]]
    now: datetime


@dataclass(frozen=True)
class NodePatch:
    """Set ``spec.unschedulable`` (None: leave it) and the cordoned-by annotation (None:
    remove it) on ``node``, if it is still at ``resource_version``."""

    node: str
    resource_version: str
    unschedulable: bool | None
    cordoned_by: str | None

    def to_patch(self) -> dict[str, Any]:
        """A JSON merge patch with the resourceVersion as precondition."""
        patch: dict[str, Any] = {
            "metadata": {
                "resourceVersion": self.resource_version,
                "annotations": {CORDONED_BY_ANNOTATION: self.cordoned_by},
            }
        }
        if self.unschedulable is not None:
            patch["spec"] = {"unschedulable": True if self.unschedulable else None}
        return patch


@dataclass(frozen=True)
class EvictionRequestCreate:
    namespace: str
    body: dict[str, Any]


@dataclass(frozen=True)
class RequesterPatch:
    """Replace ``spec.requesters`` of an EvictionRequest still at ``resource_version``."""

    namespace: str
    name: str
    resource_version: str
    requesters: tuple[str, ...]

    def to_patch(self) -> dict[str, Any]:
        return {
            "metadata": {"resourceVersion": self.resource_version},
            "spec": {"requesters": [{"name": r} for r in self.requesters]},
        }


@dataclass(frozen=True)
class EvictionRequestDelete:
    """Delete an EvictionRequest (preconditions: its uid and resourceVersion); ``recreate``
    means a fresh one is created right after (it was canceled but the pod is targeted)."""

    namespace: str
    name: str
    uid: str
    resource_version: str
    why: str


@dataclass(frozen=True)
class RecordedEvent:
    type: str  # Normal | Warning
    reason: str
    message: str


@dataclass(frozen=True)
class StatusUpdate:
    """A new status for another maintenance in Drain (the shared drain resolution), written if
    that maintenance is still at ``resource_version``, with the events it is worth."""

    name: str
    resource_version: str
    status: dict[str, Any]
    events: tuple[RecordedEvent, ...]


@dataclass(frozen=True)
class Actions:
    stage: Stage | None
    validity: Validity
    add_finalizer: bool = False
    cordon: tuple[NodePatch, ...] = ()
    status: dict[str, Any] | None = None
    """The whole new status, or None when it does not change."""
    events: tuple[RecordedEvent, ...] = ()
    neighbours: tuple[StatusUpdate, ...] = ()
    """Drain status of the other maintenances of the same resolution (see StatusUpdate)."""
    delete_evictions: tuple[EvictionRequestDelete, ...] = ()
    create_evictions: tuple[EvictionRequestCreate, ...] = ()
    requester_patches: tuple[RequesterPatch, ...] = ()
    uncordon: tuple[NodePatch, ...] = ()
    remove_finalizer: bool = False
    targeted: frozenset[str] = field(default_factory=frozenset)
    """UIDs of the pods this maintenance's nodes have targeted now (for logs and tests)."""

    @property
    def idle(self) -> bool:
        """Nothing to do."""
        return not (
            self.add_finalizer
            or self.cordon
            or self.status is not None
            or self.events
            or self.neighbours
            or self.delete_evictions
            or self.create_evictions
            or self.requester_patches
            or self.uncordon
            or self.remove_finalizer
        )


# --- the decision ------------------------------------------------------------------------------


@dataclass
class _Other:
    """Another maintenance (or this one), as the decision needs it."""

    obj: Mapping[str, Any]
    name: str
    stage: Stage | None
    validity: Validity
    selected: frozenset[str]

    def holds(self, node: str, annotation: Sequence[str]) -> bool:
        """Whether this maintenance keeps ``node`` cordoned."""
        if not self.validity.valid:
            # An invalid maintenance touches nothing: it keeps what it held until deleted.
            return self.stage != Stage.COMPLETE and self.name in annotation
        return self.stage is not None and self.stage.holds_cordon and node in self.selected


def _creation_key(nm: Mapping[str, Any]) -> tuple[str, str]:
    md = _map(nm, "metadata")
    return (str(md.get("creationTimestamp") or ""), str(md.get("name") or ""))


def _view(o: _Other) -> MaintenanceView | None:
    if o.stage != Stage.DRAIN or not o.validity.valid:
        return None
    status = _map(o.obj, "status")
    progress: dict[str, list[DrainPlanEntry]] = {}
    for entry in _list(status, "nodeStatuses"):
        node = _map(entry, "nodeRef").get("name")
        if not isinstance(node, str) or node not in o.selected:
            continue
        try:
            progress[node] = entries_from_dicts(_as_map(entry).get("drainTargets"), "drainTargets")
        except InvalidPlan:
            continue  # unreadable stored progress: recovered from the others, conservatively
    index = status.get("drainPlanIndex")
    entry_index = index if isinstance(index, int) and not isinstance(index, bool) else None
    if entry_index is not None and not 0 <= entry_index < len(o.validity.plan):
        entry_index = None
    return MaintenanceView(
        name=o.name,
        creation_key=_creation_key(o.obj),
        stage=DRAIN_STAGE,
        plan=o.validity.plan,
        nodes=o.selected,
        progress=progress,
        entry_index=entry_index,
    )


def _set_condition(
    conditions: list[dict[str, Any]],
    type_: str,
    status: str,
    reason: str,
    message: str,
    now: str,
    generation: int | None,
) -> None:
    for i, cond in enumerate(conditions):
        if cond.get("type") == type_:
            same = cond.get("status") == status
            new = {
                "type": type_,
                "status": status,
                "reason": reason,
                "message": message,
                "lastTransitionTime": cond.get("lastTransitionTime") if same else now,
            }
            if generation is not None:
                new["observedGeneration"] = generation
            if not new["lastTransitionTime"]:
                new["lastTransitionTime"] = now
            conditions[i] = new
            return
    new = {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": now,
    }
    if generation is not None:
        new["observedGeneration"] = generation
    conditions.append(new)


def _generation(nm: Mapping[str, Any]) -> int | None:
    gen = _map(nm, "metadata").get("generation")
    return gen if isinstance(gen, int) and not isinstance(gen, bool) else None


def _pod_infos(pods: Sequence[Mapping[str, Any]]) -> list[PodInfo]:
    return [PodInfo.from_pod(p) for p in pods]


def _node_of_request(
    er: Mapping[str, Any], pods_by_uid: Mapping[str, tuple[str, Mapping[str, Any]]]
) -> str | None:
    label = _map(_map(er, "metadata"), "labels").get(NODE_LABEL)
    if isinstance(label, str) and label:
        return label
    found = pods_by_uid.get(_name(er))
    return found[0] if found is not None else None


def _eviction_request_body(pod: Mapping[str, Any], node: str) -> dict[str, Any]:
    md = _map(pod, "metadata")
    labels = {k: v for k, v in _map(md, "labels").items() if isinstance(v, str)}
    labels[NODE_LABEL] = node
    return {
        "apiVersion": "nodeagent.io/v1alpha1",
        "kind": "EvictionRequest",
        "metadata": {
            "name": str(md.get("uid")),
            "namespace": str(md.get("namespace") or "default"),
            "labels": labels,
        },
        "spec": {
            "target": {"pod": {"name": str(md.get("name")), "uid": str(md.get("uid"))}},
            "requesters": [{"name": REQUESTER}],
        },
    }


def _note_ignored_interceptors(
    node_statuses: list[dict[str, Any]],
    drain: MaintenanceDrain,
    pods: Mapping[str, Sequence[Mapping[str, Any]]],
) -> None:
    """Say on a node's drainMessage which targeted pod has an interceptor annotation that the
    EvictionRequest controller ignores (it falls back to the defaults): the pod's owner learns
    why its interceptors were skipped where the drain is watched."""
    for ns, out in zip(drain.nodes, node_statuses, strict=True):
        targeted = {ref.uid for ref in ns.targeted_pods}
        bad: list[str] = []
        for pod in pods.get(ns.node, ()):
            md = _map(pod, "metadata")
            if md.get("uid") not in targeted:
                continue
            try:
                target_interceptors(pod)
            except InvalidInterceptors as exc:
                bad.append(f"pod {md.get('namespace')}/{md.get('name')}: {exc}")
        if bad:
            more = f" (and {len(bad) - 1} more pods)" if len(bad) > 1 else ""
            out["drainMessage"] += (
                f"; {min(bad)}{more}; the default interceptors are used instead"
            )


def _cordon_value(names: Iterable[str]) -> str:
    return ",".join(sorted(set(names)))


def _drain_status(
    status: dict[str, Any],
    conditions: list[dict[str, Any]],
    drain: MaintenanceDrain,
    plan_length: int,
    now: str,
    generation: int | None,
) -> list[RecordedEvent]:
    """Write a drain resolution into ``status`` (and its ``conditions``); the events it is
    worth."""
    events: list[RecordedEvent] = []
    old_index = status.get("drainPlanIndex")
    old_drained = next((c for c in conditions if c.get("type") == "Drained"), None)
    status["nodeStatuses"] = [ns.to_status() for ns in drain.nodes]
    status["drainPlanIndex"] = drain.entry_index
    entry = f"drain plan entry {drain.entry_index + 1} of {plan_length}: "
    entry += drain.current_entry.describe()
    if old_index != drain.entry_index:
        events.append(RecordedEvent("Normal", "DrainPlanEntry", entry[0].upper() + entry[1:]))
    events.extend(
        RecordedEvent("Warning", "FastForwarded", ff.message) for ff in drain.fast_forwards
    )
    if drain.drained:
        drained = ("True", "Drained", f"All pods of {len(drain.nodes)} nodes are gone")
        if old_drained is None or old_drained.get("status") != "True":
            events.append(RecordedEvent("Normal", "Drained", drained[2]))
    else:
        left = sum(ns.pods_pending_evacuation + ns.pods_evacuating for ns in drain.nodes)
        busy = sum(1 for ns in drain.nodes if not ns.drained)
        drained = (
            "False",
            "Draining",
            f"{left} pods left on {busy} of {len(drain.nodes)} nodes; {entry}",
        )
    _set_condition(conditions, "Drained", *drained, now, generation)
    return events


def _copy(status: Mapping[str, Any]) -> dict[str, Any]:
    copied = json.loads(json.dumps(status)) if status else {}
    assert isinstance(copied, dict)
    return copied


def _neighbour_statuses(
    others: Mapping[str, _Other], resolution: Resolution, me: str, now: str
) -> list[StatusUpdate]:
    """The drain resolution is one computation over all intersecting maintenances; store it
    for each of them at once, so that no maintenance's stored position lags behind the ones
    the others stored (a lagging one would look fast-forwarded, and wait on pods that the
    others' progress targets). Every maintenance in the resolution is valid and in Drain."""
    out: list[StatusUpdate] = []
    for name, drain in sorted(resolution.maintenances.items()):
        o = others.get(name)
        if name == me or o is None:
            continue
        old = _map(o.obj, "status")
        status = _copy(old)
        conditions = [dict(c) for c in _list(status, "conditions") if isinstance(c, Mapping)]
        events = _drain_status(
            status, conditions, drain, len(o.validity.plan), now, _generation(o.obj)
        )
        status["conditions"] = conditions
        if status != dict(old):
            rv = str(_map(o.obj, "metadata").get("resourceVersion") or "")
            out.append(StatusUpdate(name, rv, status, tuple(events)))
    return out


def selects_every_node(
    selected: frozenset[str], nodes: Mapping[str, Mapping[str, Any]]
) -> str | None:
    """KEP-4212 asks for a warning when a maintenance selects every node of the cluster (a
    cordon of all of them leaves nowhere to go); the message, or None."""
    if len(nodes) > 1 and selected >= set(nodes):
        return (
            f"The maintenance selects every node of the cluster ({len(nodes)}): pods it drains "
            "have nowhere to go until nodes come back"
        )
    return None


def decide(inp: Inputs) -> Actions:
    """Decide what to do for ``inp.maintenance``."""
    nm = inp.maintenance
    me = _name(nm)
    now = _time(inp.now)
    stage = effective_stage(nm)
    deleting = _deleting(nm)
    validity = validate(nm)

    if deleting and not _has_finalizer(nm):
        # Idle (or never handled): nothing was touched, nothing to undo; the API server
        # removes the object once the other finalizers (if any) are gone.
        return Actions(stage=stage, validity=validity)

    others: dict[str, _Other] = {}
    for obj in [*inp.maintenances, nm]:
        name = _name(obj)
        if not name:
            continue
        v = validity if name == me else validate(obj)
        others[name] = _Other(
            obj=obj,
            name=name,
            stage=effective_stage(obj),
            validity=v,
            selected=selected_nodes(obj, inp.nodes) if v.valid else frozenset(),
        )
    mine = others[me]
    # Touch nothing while invalid, except that Complete (asked for, or by deletion) always
    # undoes what the maintenance did: its cordons are known by the annotation, not the spec.
    acting = validity.valid or deleting or stage == Stage.COMPLETE
    act_stage = stage if acting else None

    # -- cordon ownership --------------------------------------------------------------------
    cordon: list[NodePatch] = []
    uncordon: list[NodePatch] = []
    cordon_events: list[RecordedEvent] = []
    holds_now = act_stage is not None and act_stage.holds_cordon
    if holds_now:
        for node_name in sorted(mine.selected):
            node = inp.nodes[node_name]
            annotation = _cordoned_by(node)
            rv = str(_map(node, "metadata").get("resourceVersion") or "")
            holders = {o.name for o in others.values() if o.holds(node_name, annotation or ())}
            holders.add(me)
            if not _unschedulable(node):
                cordon.append(NodePatch(node_name, rv, True, _cordon_value(holders)))
                cordon_events.append(
                    RecordedEvent("Normal", "Cordoned", f"Cordoned node {node_name}")
                )
            elif annotation is not None and _cordon_value(annotation) != _cordon_value(holders):
                cordon.append(NodePatch(node_name, rv, None, _cordon_value(holders)))
    if acting:
        keep = mine.selected if holds_now else frozenset()
        for node_name in sorted(inp.nodes):
            node = inp.nodes[node_name]
            annotation = _cordoned_by(node)
            if annotation is None or me not in annotation or node_name in keep:
                continue
            rv = str(_map(node, "metadata").get("resourceVersion") or "")
            remaining = {
                o.name for o in others.values() if o.name != me and o.holds(node_name, annotation)
            }
            if remaining:
                uncordon.append(NodePatch(node_name, rv, None, _cordon_value(remaining)))
            elif _unschedulable(node):
                uncordon.append(NodePatch(node_name, rv, False, None))
                cordon_events.append(
                    RecordedEvent("Normal", "Uncordoned", f"Uncordoned node {node_name}")
                )
            else:
                uncordon.append(NodePatch(node_name, rv, None, None))

    # -- drain resolution ----------------------------------------------------------------------
    views = [view for o in others.values() if (view := _view(o)) is not None]
    resolution: Resolution | None = None
    if views:
        nodes_needed = {n for v in views for n in v.nodes}
        pods_by_node = {n: _pod_infos(inp.pods.get(n, ())) for n in nodes_needed}
        resolution = resolve(views, pods_by_node)
    my_drain: MaintenanceDrain | None = (
        resolution.maintenances.get(me) if resolution is not None and acting else None
    )
    all_targeted: set[str] = set()
    if resolution is not None:
        for m in resolution.maintenances.values():
            for ns in m.nodes:
                all_targeted.update(ref.uid for ref in ns.targeted_pods)

    # -- status --------------------------------------------------------------------------------
    old_status = _map(nm, "status")
    status = _copy(old_status)
    events: list[RecordedEvent] = []
    generation = _generation(nm)
    if generation is not None:
        status["observedGeneration"] = generation
    conditions: list[dict[str, Any]] = [
        dict(c) for c in _list(status, "conditions") if isinstance(c, Mapping)
    ]
    old_valid = _condition(old_status, "Valid")
    _set_condition(
        conditions,
        "Valid",
        "True" if validity.valid else "False",
        validity.reason,
        validity.message,
        now,
        generation,
    )
    if not validity.valid and (
        old_valid is None
        or old_valid.get("status") != "False"
        or old_valid.get("message") != validity.message
    ):
        events.append(RecordedEvent("Warning", validity.reason, validity.message))
    if validity.valid and "drainPlanHash" not in status:
        status["drainPlanHash"] = drain_plan_hash(nm)

    if act_stage is not None:
        stage_statuses = [dict(s) for s in _list(status, "stageStatuses") if isinstance(s, Mapping)]
        if act_stage.value not in {s.get("name") for s in stage_statuses}:
            stage_statuses.append({"name": act_stage.value, "startTimestamp": now})
            if act_stage != Stage.IDLE:
                why = " (the maintenance is being deleted)" if deleting else ""
                events.append(
                    RecordedEvent("Normal", "StageStarted", f"Stage {act_stage.value} started{why}")
                )
            if act_stage in (Stage.CORDON, Stage.DRAIN) and not deleting:
                everyone = selects_every_node(mine.selected, inp.nodes)
                if everyone is not None:
                    events.append(RecordedEvent("Warning", "SelectsEveryNode", everyone))
        status["stageStatuses"] = stage_statuses
        events.extend(cordon_events)

        if act_stage == Stage.DRAIN and my_drain is not None:
            events.extend(
                _drain_status(status, conditions, my_drain, len(validity.plan), now, generation)
            )
            _note_ignored_interceptors(status["nodeStatuses"], my_drain, inp.pods)
        elif act_stage in (Stage.IDLE, Stage.CORDON):
            message = "Idle" if act_stage == Stage.IDLE else "Cordoned"
            node_statuses = []
            for node_name in sorted(mine.selected):
                infos = [p for p in _pod_infos(inp.pods.get(node_name, ())) if p.present]
                leaving = sum(1 for p in infos if p.terminating)
                node_statuses.append(
                    {
                        "nodeRef": {"name": node_name},
                        "drainTargets": [],
                        "drainMessage": message,
                        "podsPendingEvacuation": len(infos) - leaving,
                        "podsEvacuating": leaving,
                    }
                )
            status["nodeStatuses"] = node_statuses
            _set_condition(
                conditions,
                "Drained",
                "False",
                "DrainNotRequested",
                f"The stage is {act_stage.value}",
                now,
                generation,
            )
        # Complete: the last drain status and the Drained condition stay as they were.
    status["conditions"] = conditions
    new_status: dict[str, Any] | None = status if status != dict(old_status) else None
    neighbours = (
        _neighbour_statuses(others, resolution, me, now)
        if resolution is not None and acting
        else []
    )

    # -- eviction requests ---------------------------------------------------------------------
    creates: list[EvictionRequestCreate] = []
    deletes: list[EvictionRequestDelete] = []
    requester_patches: list[RequesterPatch] = []
    my_targeted: set[str] = set()
    if acting:
        scope = maintenance_nodes(nm, inp.nodes) | mine.selected
        pods_by_uid: dict[str, tuple[str, Mapping[str, Any]]] = {}
        for node_name in scope:
            for pod in inp.pods.get(node_name, ()):
                uid = _map(pod, "metadata").get("uid")
                if isinstance(uid, str) and uid:
                    pods_by_uid[uid] = (node_name, pod)
        handled: set[str] = set()
        if my_drain is not None and act_stage == Stage.DRAIN:
            for ns in my_drain.nodes:
                for ref in ns.targeted_pods:
                    my_targeted.add(ref.uid)
                    handled.add(ref.uid)
                    found = pods_by_uid.get(ref.uid)
                    if found is None:
                        continue
                    er = inp.eviction_requests.get(ref.uid)
                    body = _eviction_request_body(found[1], ns.node)
                    if er is None:
                        creates.append(EvictionRequestCreate(ref.namespace, body))
                        continue
                    er_md = _map(er, "metadata")
                    er_rv = str(er_md.get("resourceVersion") or "")
                    if _condition_true(er, "Canceled"):
                        # A canceled request for a pod that is targeted again: start anew.
                        if not _deleting(er):
                            deletes.append(
                                EvictionRequestDelete(
                                    ref.namespace,
                                    ref.uid,
                                    str(er_md.get("uid") or ""),
                                    er_rv,
                                    "recreate",
                                )
                            )
                            creates.append(EvictionRequestCreate(ref.namespace, body))
                        continue
                    requesters = _requesters(er)
                    if REQUESTER not in requesters and not _deleting(er):
                        requester_patches.append(
                            RequesterPatch(ref.namespace, ref.uid, er_rv, (*requesters, REQUESTER))
                        )
        for uid, er in sorted(inp.eviction_requests.items()):
            if uid in handled or _deleting(er):
                continue
            er_node = _node_of_request(er, pods_by_uid)
            if er_node is None or er_node not in scope:
                continue
            requesters = _requesters(er)
            er_md = _map(er, "metadata")
            namespace = str(er_md.get("namespace") or "default")
            er_rv = str(er_md.get("resourceVersion") or "")
            if _condition_true(er, "Evicted"):
                if set(requesters) <= {REQUESTER}:
                    deletes.append(
                        EvictionRequestDelete(
                            namespace, uid, str(er_md.get("uid") or ""), er_rv, "evicted"
                        )
                    )
                continue
            # While draining, a request whose pod is gone stays for the eviction request
            # controller to mark Evicted; on Complete every request is withdrawn.
            withdraw = act_stage != Stage.DRAIN or uid in pods_by_uid
            if REQUESTER in requesters and uid not in all_targeted and withdraw:
                kept = tuple(r for r in requesters if r != REQUESTER)
                requester_patches.append(RequesterPatch(namespace, uid, er_rv, kept))
            elif not requesters and _condition_true(er, "Canceled"):
                deletes.append(
                    EvictionRequestDelete(
                        namespace, uid, str(er_md.get("uid") or ""), er_rv, "canceled"
                    )
                )

    add_finalizer = (
        acting
        and not deleting
        and stage is not None
        and stage != Stage.IDLE
        and not _has_finalizer(nm)
    )
    return Actions(
        stage=stage,
        validity=validity,
        add_finalizer=add_finalizer,
        cordon=tuple(cordon),
        status=new_status,
        events=tuple(events),
        neighbours=tuple(neighbours),
        delete_evictions=tuple(deletes),
        create_evictions=tuple(creates),
        requester_patches=tuple(requester_patches),
        uncordon=tuple(uncordon),
        remove_finalizer=deleting and _has_finalizer(nm),
        targeted=frozenset(my_targeted),
    )
