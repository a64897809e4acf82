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

Summary. ``status.summary`` is what ``kubectl get nm`` shows (printer columns cannot sum over
nodeStatuses): ``nodes`` (``2/5 drained``; ``5 cordoned`` or ``5 selected`` before Drain),
``podsLeft``, the current drain plan ``entry`` (``Default<=1000000000 (1 of 3)``) and
``blockedBy``, one line on what holds the maintenance now: the Valid=False reason, a targeted
pod whose eviction the imperative interceptor saw refused (named with the refusal's cause,
without the retry count), or the first undrained node that waits for other nodes or is limited
by another maintenance. Only podsLeft changes with every pod that leaves (the shell writes such
progress at a limited rate); the other fields change when what they show changes.

Drain slots. With ``Inputs.max_draining`` set (``nodeMaintenance.maxDrainingNodes``), at most
that many nodes drain at once across the cluster (:mod:`nodeagent.model.drainslots`); the
inputs then hold every maintenance in Drain. A node over the limit waits: it takes no part in
the drainTargets resolution (no EvictionRequest for its pods), is cordoned only with
``cordon_while_waiting``, and its drainMessage (and so ``summary.blockedBy``) says what it waits
for. Under a limit each node goes through the drain plan at its own pace (its position is
recovered from its own drainTargets): a node waiting for a slot must not hold back the nodes of
its maintenance that drain, and those must finish for the slot to pass on. Maintenances sharing
a node still meet on it. Admissions are returned (``Actions.admitted``) so the shell can count
them while its cache does not show them yet. A node agent's shutdown maintenance counts only
while that shutdown may be under way: once its node's kubelet reports another boot
(:func:`nodeagent.model.shutdown.shutdown_over`), it neither holds nor waits for a slot and
drains no more (its cordon stays until the agent completes it after the reboot).

Cost. A decision over a large maintenance is taken again on every change of its pods, so
what it derives per node (the pods as the drain reads them, those each drainTargets cover,
what their EvictionRequests call for) and per maintenance (its selected nodes, its stored
progress) is kept in ``Inputs.recall`` and derived again only when its part of the inputs
changed: an unchanged node costs a few lookups, not a pass over its pods. What is left per
decision is the assembly over nodes (their statuses, cordons). The result is the same with or
without it (the tests check both).

Drain deadline. ``spec.drainDeadlineSeconds``, else ``Inputs.drain_deadline``, counted from the
start of the Drain stage: once it passes with pods left, condition
``DrainDeadlineExceeded=True`` names the pods left and what refuses their eviction (the
PodDisruptionBudget), and a Warning Event says so once. Nothing is escalated. Before it passes
``Actions.requeue_after`` asks to decide again when it does.
"""

from __future__ import annotations

import dataclasses
import json
import operator
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from nodeagent.model.bodies import (
    ConditionStatus,
    EvictionRequest,
    NodeMaintenance,
    as_map,
    condition,
    condition_true,
    deleting,
    generation,
    items,
    mapping,
    name_of,
    set_condition,
)
from nodeagent.model.drainplan import (
    DrainPlanEntry,
    InvalidPlan,
    PodType,
    classify,
    entries_from_dicts,
)
from nodeagent.model.drainslots import Candidate, Slots, allot
from nodeagent.model.draintargets import (
    DRAIN_STAGE,
    MaintenanceDrain,
    MaintenanceView,
    NodeDrainStatus,
    NodePods,
    PodInfo,
    PodInfoOf,
    PodRef,
    Resolution,
    resolve,
)
from nodeagent.model.interceptors import (
    IMPERATIVE_INTERCEPTOR,
    EvictionRequestView,
    imperative_refusal_cause,
)
from nodeagent.model.maintenance import (
    CORDONED_BY_ANNOTATION,
    DELETE_PODS,
    FINALIZER,
    NODE_LABEL,
    REQUESTER,
    Stage,
    Validity,
    deadline_escalation,
    drain_plan_hash,
    effective_stage,
    selected_nodes,
    selects,
    status_nodes,
    validate,
)
from nodeagent.model.memo import Recall
from nodeagent.model.shutdown import shutdown_over
from nodeagent.model.times import format_time, parse_time

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
    "PodDelete",
    "RecordedEvent",
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

# --- small accessors ---------------------------------------------------------------------------


def _has_finalizer(obj: Mapping[str, Any]) -> bool:
    return FINALIZER in (mapping(obj, "metadata").get("finalizers") or ())


def _cordoned_by(node: Mapping[str, Any]) -> list[str] | None:
    """The maintenances holding nodeagent's cordon of `node`; None when nodeagent holds none."""
    raw = mapping(mapping(node, "metadata"), "annotations").get(CORDONED_BY_ANNOTATION)
    if not isinstance(raw, str):
        return None
    return [n for n in (part.strip() for part in raw.split(",")) if n]


def _unschedulable(node: Mapping[str, Any]) -> bool:
    return mapping(node, "spec").get("unschedulable") is True


# --- selection ---------------------------------------------------------------------------------


def involves(nm: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """Whether the maintenance selects ``node`` or holds a cordon on it."""
    return name_of(nm) in (_cordoned_by(node) or ()) or selects(nm, node)


def maintenance_nodes(
    nm: Mapping[str, Any],
    nodes: Mapping[str, Mapping[str, Any]],
    selected: frozenset[str] | None = None,
) -> frozenset[str]:
    """Every node the maintenance has to do with: selected now (``selected``, if the caller
    has it), reported in its status, or cordoned on its behalf."""
    name = name_of(nm)
    cordoned = (n for n, node in nodes.items() if name in (_cordoned_by(node) or ()))
    if selected is None:
        selected = selected_nodes(nm, nodes)
    return selected.union(cordoned, status_nodes(nm))


def recall_group(maintenance: str) -> str:
    """The Recall group of what decisions derive for a maintenance (a node's is its name; no
    node name has a "/")."""
    return f"nodemaintenance/{maintenance}"


def _selection(inp: Inputs, recall: Recall, nm: Mapping[str, Any]) -> frozenset[str]:
    """:func:`selected_nodes` of ``nm``, derived again only when its selector or a node
    changed."""
    key = (mapping(nm, "spec").get("nodeSelector"), tuple(inp.nodes), tuple(inp.nodes.values()))
    group = recall_group(name_of(nm))
    return recall(group, "selection", key, lambda: selected_nodes(nm, inp.nodes))


def connected(
    start: Iterable[str],
    node_sets: Mapping[str, AbstractSet[str]],
    by_node: Mapping[str, Iterable[str]] | None = None,
) -> tuple[set[str], set[str]]:
    """The maintenances (by name) transitively sharing nodes with ``start``, and their nodes.

    ``node_sets`` maps every maintenance to its nodes (:func:`maintenance_nodes`); ``by_node``
    is its reverse, if the caller keeps one."""
    if by_node is None:
        reverse: dict[str, list[str]] = {}
        for name, ns in node_sets.items():
            for n in ns:
                reverse.setdefault(n, []).append(name)
        by_node = reverse
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


RequestViewOf = Callable[[Mapping[str, Any]], EvictionRequestView]
"""How a decision reads an EvictionRequest: :meth:`EvictionRequestView.from_obj`, or an
:class:`~nodeagent.model.memo.ObjectMemo` of it."""


class _RequestViews(Mapping[str, EvictionRequestView]):
    """EvictionRequests by pod UID, each read when it is first looked up (a decision looks up
    each several times)."""

    def __init__(self, requests: Mapping[str, Mapping[str, Any]], view: RequestViewOf) -> None:
        self._requests = requests
        self._view = view
        self._read: dict[str, EvictionRequestView] = {}

    def __getitem__(self, uid: str) -> EvictionRequestView:
        found = self._read.get(uid)
        if found is None:
            found = self._read[uid] = self._view(self._requests[uid])
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(self._requests)

    def __len__(self) -> int:
        return len(self._requests)


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

    maintenance: NodeMaintenance
    maintenances: Sequence[NodeMaintenance]
    nodes: Mapping[str, Mapping[str, Any]]
    pods: Mapping[str, Sequence[Mapping[str, Any]]]
    eviction_requests: Mapping[str, EvictionRequest]
    now: datetime
    max_draining: int | None = None
    """How many nodes may drain at once (None: no limit). With a limit, ``maintenances``
    holds every maintenance in Drain too, and the other fields cover their nodes."""
    cordon_while_waiting: bool = False
    """Cordon a node in Drain while it waits for a drain slot."""
    admitting: frozenset[str] = frozenset()
    """Nodes admitted to drain whose admission the caches do not show yet."""
    drain_deadline: float | None = None
    """Seconds from the start of Drain, for maintenances without spec.drainDeadlineSeconds."""
    deadline_escalation: str = "None"
    """For maintenances without spec.drainDeadlineEscalation (see ESCALATIONS)."""
    pod_info: PodInfoOf = PodInfo.from_pod
    """A pod's PodInfo: the controller passes a memo of it (PodInfoMemo)."""
    request_view: RequestViewOf = EvictionRequestView.from_obj
    """An EvictionRequest as the decision reads it: the controller passes a memo of it."""
    recall: Recall | None = None
    """What decisions derive per node (its pods as the drain reads them, what their requests
    call for) and per maintenance (its selected nodes, its stored progress; group
    :func:`recall_group`), kept from one decision to the next: the controller passes one, so a
    decision derives again only what changed. None: derived afresh."""


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
class PodDelete:
    """Delete a pod past its disruption budget (the drain deadline's escalation), with its
    own grace period; precondition: its uid."""

    namespace: str
    name: str
    uid: str


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
    admitted: frozenset[str] = frozenset()
    """Nodes this decision lets start draining under the limit (see Drain slots)."""
    requeue_after: float | None = None
    """Decide again after this many seconds (the drain deadline), unless something else
    asks first."""
    delete_pods: tuple[PodDelete, ...] = ()
    """The drain deadline passed and its escalation is DeletePods: the targeted pods left."""

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
            or self.delete_pods
        )


# --- the decision ------------------------------------------------------------------------------


@dataclass
class _Other:
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


def _creation_key(nm: Mapping[str, Any]) -> tuple[str, str]:
    md = mapping(nm, "metadata")
    return (str(md.get("creationTimestamp") or ""), str(md.get("name") or ""))


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


def _view(o: _Other) -> MaintenanceView | None:
    if o.stage != Stage.DRAIN or not o.validity.valid:
        return None
    status = mapping(o.obj, "status")
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
        progress=o.progress,
        entry_index=entry_index,
    )


@dataclass(frozen=True, eq=False)
class _OnNode:
    """The pods bound to one node: as objects by UID, and as the drain reads them."""

    by_uid: Mapping[str, Mapping[str, Any]]
    pods: NodePods

    @classmethod
    def read(cls, objects: Sequence[Mapping[str, Any]], info: PodInfoOf) -> _OnNode:
        by_uid: dict[str, Mapping[str, Any]] = {}
        for pod in objects:
            uid = mapping(pod, "metadata").get("uid")
            if isinstance(uid, str) and uid:
                by_uid[uid] = pod
        return cls(by_uid, NodePods(info(p) for p in objects))


_Refused = tuple[str, str, str, str]
"""A targeted pod whose eviction is refused: namespace, name, UID, the refusal's cause."""


@dataclass(frozen=True)
class _NodeRequests:
    """What the EvictionRequests of a node's targeted pods call for."""

    uids: frozenset[str]
    """The targeted pods'."""
    creates: tuple[EvictionRequestCreate, ...]
    deletes: tuple[EvictionRequestDelete, ...]
    requester_patches: tuple[RequesterPatch, ...]
    refused: _Refused | None
    """The first (by namespace and name) whose eviction the imperative interceptor reports
    refused."""


def _eviction_request_body(pod: Mapping[str, Any], node: str) -> dict[str, Any]:
    md = mapping(pod, "metadata")
    labels = {k: v for k, v in mapping(md, "labels").items() if isinstance(v, str)}
    labels[NODE_LABEL] = node
    return {
        "apiVersion": "nodeagent.io/v1alpha1",
        "kind": "EvictionRequest",
        "metadata": {
            "name": str(md.get("uid")),
            "namespace": str(md.get("namespace") or "default"),
            "labels": labels,
            # the garbage collector deletes the request with its pod: no delete of ours
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": str(md.get("name")),
                    "uid": str(md.get("uid")),
                }
            ],
        },
        "spec": {
            "target": {"pod": {"name": str(md.get("name")), "uid": str(md.get("uid"))}},
            "requesters": [{"name": REQUESTER}],
        },
    }


def _note_ignored_interceptors(
    node_statuses: list[dict[str, Any]], drain: MaintenanceDrain, pods_on: _PodsOn
) -> None:
    """Say on a node's drainMessage which targeted pod has an interceptor annotation that the
    EvictionRequest controller ignores (it falls back to the defaults): the pod's owner learns
    why its interceptors were skipped where the drain is watched."""
    for ns, out in zip(drain.nodes, node_statuses, strict=True):
        ignored = pods_on(ns.node).ignored_interceptors
        if not ignored:
            continue
        targeted = {ref.uid for ref in ns.targeted_pods}
        bad = [
            f"pod {p.namespace}/{p.name}: {p.interceptors_error}"
            for p in ignored
            if p.uid in targeted
        ]
        if bad:
            more = f" (and {len(bad) - 1} more pods)" if len(bad) > 1 else ""
            out["drainMessage"] += f"; {min(bad)}{more}; the default interceptors are used instead"


def _cordon_value(names: Iterable[str]) -> str:
    return ",".join(sorted(set(names)))


_MAX_BLOCKED_BY = 160


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= _MAX_BLOCKED_BY else line[: _MAX_BLOCKED_BY - 3] + "..."


def _refused_pod(drain: MaintenanceDrain, requests: _Requests) -> str | None:
    """The first targeted pod (by namespace and name) whose eviction the imperative interceptor
    reports refused, with the refusal's cause."""
    refused = [r for ns in drain.nodes if (r := requests.on(ns).refused) is not None]
    if not refused:
        return None
    namespace, name, _, cause = min(refused)
    return f"pod {namespace}/{name}: eviction refused by {cause}"


def refusal(er: EvictionRequestView) -> str | None:
    """Why the imperative interceptor's evictions of a request's pod are refused (briefly, as
    ``status.summary.blockedBy`` shows it), or None. The shell reconciles the maintenances of
    a request's node when this changes."""
    entry = er.interceptors.get(IMPERATIVE_INTERCEPTOR)
    if er.finished or entry is None:
        return None
    return imperative_refusal_cause(entry.message)


def _booted_again(node: str) -> str:
    """The drainMessage of a shutdown maintenance's node that booted again since."""
    return f"Node {node} booted again since this shutdown: it drains no more and holds no slot"


def _waiting_node(drain: MaintenanceDrain) -> str | None:
    """The first undrained node that waits for other nodes or another maintenance, or whose
    shutdown is over."""
    for ns in drain.nodes:
        if not ns.drained and (
            ns.drain_message.startswith("Waiting")
            or "(limited by " in ns.drain_message
            or ns.drain_message == _booted_again(ns.node)
        ):
            return f"node {ns.node}: {ns.drain_message}"
    return None


def _drain_summary(
    drain: MaintenanceDrain, plan_length: int, requests: _Requests
) -> dict[str, Any]:
    """``status.summary`` in Drain (see the module's docstring)."""
    summary: dict[str, Any] = {
        "nodes": f"{sum(1 for ns in drain.nodes if ns.drained)}/{len(drain.nodes)} drained",
        "podsLeft": sum(ns.pods_pending_evacuation + ns.pods_evacuating for ns in drain.nodes),
        "entry": f"{drain.current_entry.describe()} ({drain.entry_index + 1} of {plan_length})",
    }
    if not drain.drained:
        blocked = _refused_pod(drain, requests) or _waiting_node(drain)
        if blocked is not None:
            summary["blockedBy"] = _one_line(blocked)
    return summary


def _drain_status(
    status: dict[str, Any],
    conditions: list[dict[str, Any]],
    drain: MaintenanceDrain,
    plan_length: int,
    now: datetime,
    observed: int | None,
    requests: _Requests,
    deadline: float | None,
) -> list[RecordedEvent]:
    """Write a drain resolution into ``status`` (and its ``conditions``); the events it is
    worth."""
    events: list[RecordedEvent] = []
    old_index = status.get("drainPlanIndex")
    old_drained = next((c for c in conditions if c.get("type") == "Drained"), None)
    status["nodeStatuses"] = [ns.to_status() for ns in drain.nodes]
    status["drainPlanIndex"] = drain.entry_index
    status["summary"] = _drain_summary(drain, plan_length, requests)
    entry = f"drain plan entry {drain.entry_index + 1} of {plan_length}: "
    entry += drain.current_entry.describe()
    if old_index != drain.entry_index:
        events.append(RecordedEvent("Normal", "DrainPlanEntry", entry[0].upper() + entry[1:]))
    events.extend(
        RecordedEvent("Warning", "FastForwarded", ff.message) for ff in drain.fast_forwards
    )
    if drain.drained:
        drained: tuple[ConditionStatus, str, str] = (
            "True",
            "Drained",
            f"All pods of {len(drain.nodes)} nodes are gone",
        )
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
    conditions[:] = set_condition(conditions, "Drained", *drained, now, observed)
    events.extend(
        _deadline_status(status, conditions, drain, deadline, now, observed, requests.views)
    )
    return events


DEADLINE_CONDITION = "DrainDeadlineExceeded"
_MAX_NAMED_PODS = 5


def deadline_seconds(nm: Mapping[str, Any], default: float | None) -> float | None:
    """``spec.drainDeadlineSeconds``, else ``default`` (None: no deadline)."""
    raw = mapping(nm, "spec").get("drainDeadlineSeconds")
    if isinstance(raw, int) and not isinstance(raw, bool) and raw > 0:
        return float(raw)
    return default


def _deadline_due(status: Mapping[str, Any], seconds: float) -> datetime | None:
    """When the drain deadline passes: ``seconds`` after the Drain stage started (None: its
    start is not recorded yet)."""
    started = next(
        (
            parse_time(as_map(s).get("startTimestamp"))
            for s in items(status, "stageStatuses")
            if as_map(s).get("name") == Stage.DRAIN.value
        ),
        None,
    )
    return None if started is None else started + timedelta(seconds=seconds)


def _blockers(drain: MaintenanceDrain, eviction_requests: Mapping[str, EvictionRequestView]) -> str:
    """The pods left that the drain targets, each with what refuses its eviction if anything
    does, then what the other nodes wait for."""
    refs = sorted(
        {ref for ns in drain.nodes for ref in ns.targeted_pods},
        key=lambda r: (r.namespace, r.name, r.uid),
    )
    parts: list[str] = []
    for ref in refs[:_MAX_NAMED_PODS]:
        er = eviction_requests.get(ref.uid)
        cause = refusal(er) if er is not None else None
        why = f" (eviction refused by {cause})" if cause is not None else ""
        parts.append(f"pod {ref.namespace}/{ref.name}{why}")
    if len(refs) > _MAX_NAMED_PODS:
        parts.append(f"{len(refs) - _MAX_NAMED_PODS} more targeted pods")
    waiting = [ns for ns in drain.nodes if not ns.drained and not ns.targeted_pods]
    if waiting:
        more = f" (and {len(waiting) - 1} more nodes)" if len(waiting) > 1 else ""
        parts.append(f"node {waiting[0].node}: {waiting[0].drain_message}{more}")
    return "; ".join(parts) or "pods left"


def _deadline_status(
    status: Mapping[str, Any],
    conditions: list[dict[str, Any]],
    drain: MaintenanceDrain,
    seconds: float | None,
    now: datetime,
    observed: int | None,
    eviction_requests: Mapping[str, EvictionRequestView],
) -> list[RecordedEvent]:
    """The DrainDeadlineExceeded condition; a Warning Event when it turns True."""
    old = next((c for c in conditions if c.get("type") == DEADLINE_CONDITION), None)
    if seconds is None:
        conditions[:] = [c for c in conditions if c.get("type") != DEADLINE_CONDITION]
        return []
    due = _deadline_due(status, seconds)
    if due is None:
        return []  # decided once the maintenance's own decision recorded the start of Drain
    if drain.drained:
        if old is None or old.get("status") != "True":  # once passed, it stays passed
            message = f"Drained before the deadline ({format_time(due)})"
            conditions[:] = set_condition(
                conditions, DEADLINE_CONDITION, "False", "Drained", message, now, observed
            )
        return []
    if now < due:
        message = f"The drain deadline is {format_time(due)} ({seconds:g}s after Drain started)"
        conditions[:] = set_condition(
            conditions, DEADLINE_CONDITION, "False", "WithinDeadline", message, now, observed
        )
        return []
    message = (
        f"The drain deadline ({seconds:g}s) passed at {format_time(due)}; still blocking: "
        + _blockers(drain, eviction_requests)
    )
    conditions[:] = set_condition(
        conditions, DEADLINE_CONDITION, "True", "DeadlineExceeded", message, now, observed
    )
    if old is None or old.get("status") != "True":
        return [RecordedEvent("Warning", DEADLINE_CONDITION, message)]
    return []


def _copy(status: Mapping[str, Any]) -> dict[str, Any]:
    copied = json.loads(json.dumps(status)) if status else {}
    assert isinstance(copied, dict)
    return copied


def _neighbour_statuses(
    others: Mapping[str, _Other],
    resolution: Resolution,
    me: str,
    now: datetime,
    requests: _Requests,
    default_deadline: float | None,
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
        old = mapping(o.obj, "status")
        status = _copy(old)
        conditions = [dict(c) for c in items(status, "conditions") if isinstance(c, Mapping)]
        events = _drain_status(
            status,
            conditions,
            drain,
            len(o.validity.plan),
            now,
            generation(o.obj),
            requests,
            deadline_seconds(o.obj, default_deadline),
        )
        status["conditions"] = conditions
        if status != dict(old):
            rv = str(mapping(o.obj, "metadata").get("resourceVersion") or "")
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


_UID = operator.attrgetter("uid")
_PodsOn = Callable[[str], NodePods]
"""A node's pods as the drain reads them."""


def _node_requests(
    node: str,
    on: _OnNode,
    refs: Sequence[PodRef],
    views: Mapping[str, EvictionRequestView],
) -> _NodeRequests:
    """Ask for the eviction of every targeted pod of ``node`` (``refs``): create its request,
    start a canceled one anew, or add our requester to someone else's; and which one's
    eviction is refused."""
    creates: list[EvictionRequestCreate] = []
    deletes: list[EvictionRequestDelete] = []
    patches: list[RequesterPatch] = []
    refused: list[_Refused] = []
    for ref in refs:
        er = views.get(ref.uid)
        if er is not None and (cause := refusal(er)) is not None:
            refused.append((ref.namespace, ref.name, ref.uid, cause))
        pod = on.by_uid.get(ref.uid)
        if pod is None:
            continue
        if er is None:
            # A terminating pod is leaving already; its request (if it had one) may be
            # gone with it before the pod informer shows the pod gone.
            if not deleting(pod):
                creates.append(
                    EvictionRequestCreate(ref.namespace, _eviction_request_body(pod, node))
                )
            continue
        if er.canceled:
            # A canceled request for a pod that is targeted again: start anew.
            if not er.deleting:
                deletes.append(
                    EvictionRequestDelete(
                        ref.namespace, ref.uid, er.uid, er.resource_version, "recreate"
                    )
                )
                creates.append(
                    EvictionRequestCreate(ref.namespace, _eviction_request_body(pod, node))
                )
            continue
        if REQUESTER not in er.requesters and not er.deleting:
            patches.append(
                RequesterPatch(
                    ref.namespace, ref.uid, er.resource_version, (*er.requesters, REQUESTER)
                )
            )
    return _NodeRequests(
        frozenset(ref.uid for ref in refs),
        tuple(creates),
        tuple(deletes),
        tuple(patches),
        min(refused, default=None),
    )


class _Bound:
    """The pods bound to each node as one decision reads them, derived again only when they
    changed."""

    def __init__(self, inp: Inputs, recall: Recall) -> None:
        self._pods = inp.pods
        self._info = inp.pod_info
        self._recall = recall

    def on(self, node: str) -> _OnNode:
        objects = self._pods.get(node, ())
        key = objects if isinstance(objects, tuple) else tuple(objects)
        return self._recall(node, "pods", key, lambda: _OnNode.read(key, self._info))

    def pods(self, node: str) -> NodePods:
        return self.on(node).pods


class _Requests:
    """The EvictionRequests as one decision reads them: by pod UID (each read once), and what
    they call for on each node, derived again only when the node's pods, its targeted pods or
    their requests changed."""

    def __init__(self, inp: Inputs, recall: Recall, bound: _Bound) -> None:
        self._objects = inp.eviction_requests
        self.views: Mapping[str, EvictionRequestView] = _RequestViews(
            inp.eviction_requests, inp.request_view
        )
        self._recall = recall
        self._bound = bound
        # node -> (its targeted pods, what they call for) in this decision: asked for twice
        self._decided: dict[str, tuple[tuple[PodRef, ...], _NodeRequests]] = {}

    def on(self, ns: NodeDrainStatus) -> _NodeRequests:
        refs = ns.targeted_pods
        decided = self._decided.get(ns.node)
        if decided is not None and decided[0] is refs:
            return decided[1]
        on = self._bound.on(ns.node)
        key = (on, refs, tuple(map(self._objects.get, map(_UID, refs))))
        found = self._recall(
            ns.node, "requests", key, lambda: _node_requests(ns.node, on, refs, self.views)
        )
        self._decided[ns.node] = (refs, found)
        return found


@dataclass(frozen=True)
class _Context:
    """What every step of one decision reads."""

    inp: Inputs
    me: str
    stage: Stage | None
    deleting: bool
    validity: Validity
    others: Mapping[str, _Other]
    """Every maintenance of the inputs by name, this one included."""
    acting: bool
    """Touch nothing while invalid, except that Complete (asked for, or by deletion) always
    undoes what the maintenance did: its cordons are known by the annotation, not the spec."""
    recall: Recall
    bound: _Bound
    requests: _Requests

    @property
    def nm(self) -> NodeMaintenance:
        return self.inp.maintenance

    @property
    def mine(self) -> _Other:
        return self.others[self.me]

    @property
    def act_stage(self) -> Stage | None:
        return self.stage if self.acting else None


def _others(inp: Inputs, me: str, validity: Validity, recall: Recall) -> dict[str, _Other]:
    """Every maintenance of the inputs as the decision needs it (``validity`` is this one's)."""
    others: dict[str, _Other] = {}
    for obj in [*inp.maintenances, inp.maintenance]:
        name = name_of(obj)
        if not name:
            continue
        v = validity if name == me else validate(obj)
        stage = effective_stage(obj)
        selected = _selection(inp, recall, obj) if v.valid else frozenset()
        progress: Mapping[str, Sequence[DrainPlanEntry]] = {}
        if stage == Stage.DRAIN and v.valid:
            status = mapping(obj, "status")  # a new object with every write of it
            progress = recall(
                recall_group(name),
                "progress",
                (status, selected),
                partial(_stored_progress, status, selected),
            )
        others[name] = _Other(obj, name, stage, v, selected, progress)
    return others


def _cordons(ctx: _Context, waiting: frozenset[str]) -> tuple[list[NodePatch], list[RecordedEvent]]:
    """Cordon the selected nodes (in Cordon and Drain) but ``waiting`` ones, naming every
    holder on each."""
    cordon: list[NodePatch] = []
    events: list[RecordedEvent] = []
    for node_name in sorted(ctx.mine.selected - waiting):
        node = ctx.inp.nodes[node_name]
        annotation = _cordoned_by(node)
        rv = str(mapping(node, "metadata").get("resourceVersion") or "")
        holders = {o.name for o in ctx.others.values() if o.holds(node_name, annotation or ())}
        holders.add(ctx.me)
        if not _unschedulable(node):
            cordon.append(NodePatch(node_name, rv, True, _cordon_value(holders)))
            events.append(RecordedEvent("Normal", "Cordoned", f"Cordoned node {node_name}"))
        elif annotation is not None and _cordon_value(annotation) != _cordon_value(holders):
            cordon.append(NodePatch(node_name, rv, None, _cordon_value(holders)))
    return cordon, events


def _uncordons(ctx: _Context, keep: frozenset[str]) -> tuple[list[NodePatch], list[RecordedEvent]]:
    """Let go of the cordons this maintenance holds outside ``keep``: the hold passes to the
    other holders, or the node is uncordoned when none is left."""
    uncordon: list[NodePatch] = []
    events: list[RecordedEvent] = []
    for node_name in sorted(ctx.inp.nodes):
        node = ctx.inp.nodes[node_name]
        annotation = _cordoned_by(node)
        if annotation is None or ctx.me not in annotation or node_name in keep:
            continue
        rv = str(mapping(node, "metadata").get("resourceVersion") or "")
        remaining = {
            o.name
            for o in ctx.others.values()
            if o.name != ctx.me and o.holds(node_name, annotation)
        }
        if remaining:
            uncordon.append(NodePatch(node_name, rv, None, _cordon_value(remaining)))
        elif _unschedulable(node):
            uncordon.append(NodePatch(node_name, rv, False, None))
            events.append(RecordedEvent("Normal", "Uncordoned", f"Uncordoned node {node_name}"))
        else:
            uncordon.append(NodePatch(node_name, rv, None, None))
    return uncordon, events


def _resolve(
    others: Mapping[str, _Other],
    pods_on: _PodsOn,
    slots: Slots | None,
    over: AbstractSet[str] = frozenset(),
) -> Resolution | None:
    """The drainTargets of every valid maintenance in Drain, resolved together (None: none).
    Under a limit, node by node and only on the nodes admitted (see Drain slots); ``over``:
    shutdown maintenances whose node booted again, which take no slot."""
    views = [view for o in others.values() if (view := _view(o)) is not None]
    if not views:
        return None
    if slots is None:
        nodes_needed = {n for v in views for n in v.nodes}
        return resolve(views, {n: pods_on(n) for n in nodes_needed})
    per_node = [
        dataclasses.replace(
            v,
            name=f"{v.name}/{node}",  # "/" is in no object name: unique
            shown=v.name,
            nodes=frozenset({node}),
            progress={node: v.progress[node]} if node in v.progress else {},
            entry_index=None,  # recovered from the node's own drainTargets
        )
        for v in views
        for node in sorted(v.nodes & slots.admitted)
    ]
    resolved = resolve(per_node, {n: pods_on(n) for v in per_node for n in v.nodes})
    parts: dict[str, list[MaintenanceDrain]] = {}
    for v in per_node:
        parts.setdefault(v.label, []).append(resolved[v.name])
    out: dict[str, MaintenanceDrain] = {}
    for v in views:
        mine = parts.get(v.name, [])
        waiting = [
            _waiting_status(n, pods_on(n), slots, v.name in over)
            for n in sorted(v.nodes - slots.admitted)
        ]
        nodes = sorted([*(ns for m in mine for ns in m.nodes), *waiting], key=lambda ns: ns.node)
        # The least advanced node's entry; a node that waits has not started the plan.
        index = 0 if waiting or not mine else min(m.entry_index for m in mine)
        out[v.name] = MaintenanceDrain(
            name=v.name,
            entry_index=index,
            current_entry=v.plan[index],
            nodes=tuple(nodes),
            drained=all(ns.drained for ns in nodes),
            fast_forwards=tuple(ff for m in mine for ff in m.fast_forwards),
        )
    return Resolution(out)


def _waiting_status(node: str, pods: NodePods, slots: Slots, booted: bool) -> NodeDrainStatus:
    """The drain status of a node that waits for a drain slot, or that ``booted`` again since
    its shutdown maintenance was made: nothing targeted."""
    return NodeDrainStatus(
        node=node,
        drain_targets=(),
        drain_message=_booted_again(node) if booted else slots.waiting_message(node),
        targeted_pods=(),
        pods_pending_evacuation=len(pods.present) - pods.leaving,
        pods_evacuating=pods.leaving,
        drained=not pods.present,
    )


def _over(inp: Inputs, others: Mapping[str, _Other]) -> frozenset[str]:
    """Under a limit, the shutdown maintenances in Drain whose node booted again since."""
    if inp.max_draining is None:
        return frozenset()
    return frozenset(
        o.name
        for o in others.values()
        if o.stage == Stage.DRAIN and shutdown_over(o.obj, inp.nodes)
    )


def _slots(
    inp: Inputs, others: Mapping[str, _Other], pods_on: _PodsOn, over: AbstractSet[str]
) -> Slots | None:
    """Which nodes may drain now under the limit (None: no limit); the ``over`` maintenances
    neither hold nor wait for a slot."""
    if inp.max_draining is None:
        return None
    candidates: list[Candidate] = []
    for o in others.values():
        if o.stage != Stage.DRAIN or not o.validity.valid or o.name in over:
            continue
        order = _creation_key(o.obj)
        for node in o.selected:
            candidates.append(
                Candidate(
                    node=node,
                    order=order,
                    admitted=bool(o.progress.get(node)) or node in inp.admitting,
                    busy=bool(pods_on(node).present),
                )
            )
    return allot(candidates, inp.max_draining)


def _validity_status(
    ctx: _Context, conditions: list[dict[str, Any]], observed: int | None
) -> list[RecordedEvent]:
    """Set the Valid condition; a warning when the maintenance turns (or stays, with another
    message) invalid."""
    validity = ctx.validity
    old_valid = condition(mapping(ctx.nm, "status"), "Valid")
    conditions[:] = set_condition(
        conditions,
        "Valid",
        "True" if validity.valid else "False",
        validity.reason,
        validity.message,
        ctx.inp.now,
        observed,
    )
    if not validity.valid and (
        old_valid is None
        or old_valid.get("status") != "False"
        or old_valid.get("message") != validity.message
    ):
        return [RecordedEvent("Warning", validity.reason, validity.message)]
    return []


def _stage_started(ctx: _Context, act_stage: Stage, status: dict[str, Any]) -> list[RecordedEvent]:
    """Record ``act_stage`` in ``status.stageStatuses`` when it starts, and say so."""
    events: list[RecordedEvent] = []
    now = format_time(ctx.inp.now)
    stage_statuses = [dict(s) for s in items(status, "stageStatuses") if isinstance(s, Mapping)]
    if act_stage.value not in {s.get("name") for s in stage_statuses}:
        stage_statuses.append({"name": act_stage.value, "startTimestamp": now})
        if act_stage != Stage.IDLE:
            why = " (the maintenance is being deleted)" if ctx.deleting else ""
            events.append(
                RecordedEvent("Normal", "StageStarted", f"Stage {act_stage.value} started{why}")
            )
        if act_stage in (Stage.CORDON, Stage.DRAIN) and not ctx.deleting:
            everyone = selects_every_node(ctx.mine.selected, ctx.inp.nodes)
            if everyone is not None:
                events.append(RecordedEvent("Warning", "SelectsEveryNode", everyone))
    status["stageStatuses"] = stage_statuses
    return events


def _undrained_node_statuses(ctx: _Context, act_stage: Stage) -> list[dict[str, Any]]:
    """The node statuses of Idle and Cordon: no drainTargets, the pods still there."""
    message = "Idle" if act_stage == Stage.IDLE else "Cordoned"
    node_statuses = []
    for node_name in sorted(ctx.mine.selected):
        pods = ctx.bound.pods(node_name)
        node_statuses.append(
            {
                "nodeRef": {"name": node_name},
                "drainTargets": [],
                "drainMessage": message,
                "podsPendingEvacuation": len(pods.present) - pods.leaving,
                "podsEvacuating": pods.leaving,
            }
        )
    return node_statuses


def _undrained_summary(
    node_statuses: Sequence[Mapping[str, Any]], act_stage: Stage
) -> dict[str, Any]:
    """``status.summary`` in Idle and Cordon: the selected nodes and the pods on them."""
    done = "cordoned" if act_stage == Stage.CORDON else "selected"
    return {
        "nodes": f"{len(node_statuses)} {done}",
        "podsLeft": sum(
            int(ns["podsPendingEvacuation"]) + int(ns["podsEvacuating"]) for ns in node_statuses
        ),
    }


def _status(
    ctx: _Context, cordon_events: Sequence[RecordedEvent], my_drain: MaintenanceDrain | None
) -> tuple[dict[str, Any] | None, list[RecordedEvent]]:
    """The maintenance's new status (None when it does not change) and the events it is
    worth, cordon events included."""
    old_status = mapping(ctx.nm, "status")
    status = _copy(old_status)
    observed = generation(ctx.nm)
    if observed is not None:
        status["observedGeneration"] = observed
    conditions = [dict(c) for c in items(status, "conditions") if isinstance(c, Mapping)]
    events = _validity_status(ctx, conditions, observed)
    if ctx.validity.valid and "drainPlanHash" not in status:
        status["drainPlanHash"] = drain_plan_hash(ctx.nm)

    act_stage = ctx.act_stage
    if act_stage is not None:
        events.extend(_stage_started(ctx, act_stage, status))
        events.extend(cordon_events)
        if act_stage == Stage.DRAIN and my_drain is not None:
            plan_length = len(ctx.validity.plan)
            events.extend(
                _drain_status(
                    status,
                    conditions,
                    my_drain,
                    plan_length,
                    ctx.inp.now,
                    observed,
                    ctx.requests,
                    deadline_seconds(ctx.nm, ctx.inp.drain_deadline),
                )
            )
            _note_ignored_interceptors(status["nodeStatuses"], my_drain, ctx.bound.pods)
        elif act_stage in (Stage.IDLE, Stage.CORDON):
            status["nodeStatuses"] = _undrained_node_statuses(ctx, act_stage)
            status["summary"] = _undrained_summary(status["nodeStatuses"], act_stage)
            conditions[:] = set_condition(
                conditions,
                "Drained",
                "False",
                "DrainNotRequested",
                f"The stage is {act_stage.value}",
                ctx.inp.now,
                observed,
            )
        elif act_stage == Stage.COMPLETE and isinstance(status.get("summary"), dict):
            # The last drain status and the Drained condition stay as they were; nothing holds.
            status["summary"].pop("blockedBy", None)
    if not ctx.validity.valid and act_stage != Stage.COMPLETE:
        summary = as_map(status.get("summary"))
        blocked = f"{ctx.validity.reason}: {ctx.validity.message}"
        status["summary"] = {**summary, "blockedBy": _one_line(blocked)}
    status["conditions"] = conditions
    return (status if status != dict(old_status) else None), events


@dataclass
class _EvictionActions:
    creates: list[EvictionRequestCreate] = field(default_factory=list)
    deletes: list[EvictionRequestDelete] = field(default_factory=list)
    requester_patches: list[RequesterPatch] = field(default_factory=list)
    targeted: set[str] = field(default_factory=set)
    """UIDs of the pods this maintenance targets now."""


def _ask_for_targeted(ctx: _Context, my_drain: MaintenanceDrain, out: _EvictionActions) -> None:
    """Ask for the eviction of every pod this maintenance targets (see _node_requests)."""
    for ns in my_drain.nodes:
        asks = ctx.requests.on(ns)
        out.targeted |= asks.uids
        out.creates.extend(asks.creates)
        out.deletes.extend(asks.deletes)
        out.requester_patches.extend(asks.requester_patches)


def _withdraw(
    ctx: _Context, scope: frozenset[str], resolution: Resolution | None, out: _EvictionActions
) -> None:
    """The other requests on the nodes of ``scope``: delete Evicted ones only we asked for and
    canceled ones nobody asks for; withdraw our requester where no maintenance of the
    resolution targets the pod any more."""
    rest = sorted(ctx.inp.eviction_requests.keys() - out.targeted)
    if not rest:
        return
    all_targeted: frozenset[str] = frozenset().union(
        *(
            ctx.requests.on(ns).uids
            for m in (resolution.maintenances.values() if resolution is not None else ())
            for ns in m.nodes
        )
    )
    node_of_pod: dict[str, str] = {}  # pod UID -> its node, for the nodes of scope
    for node in scope:
        node_of_pod.update(dict.fromkeys(ctx.bound.on(node).by_uid, node))
    for uid in rest:
        er = ctx.requests.views[uid]
        if er.deleting:
            continue
        er_node = er.node if er.node is not None else node_of_pod.get(er.name)
        if er_node is None or er_node not in scope:
            continue
        requesters = er.requesters
        namespace = er.namespace or "default"
        er_rv, er_uid = er.resource_version, er.uid
        pod_here = uid in node_of_pod
        if er.evicted:
            gone_with_pod = not pod_here and er.owned_by_target
            if set(requesters) <= {REQUESTER} and not gone_with_pod:
                out.deletes.append(EvictionRequestDelete(namespace, uid, er_uid, er_rv, "evicted"))
            continue
        # While draining, a request whose pod is gone stays for the eviction request
        # controller to mark Evicted; on Complete every request is withdrawn.
        withdraw = ctx.act_stage != Stage.DRAIN or pod_here
        if REQUESTER in requesters and uid not in all_targeted and withdraw:
            kept = tuple(r for r in requesters if r != REQUESTER)
            out.requester_patches.append(RequesterPatch(namespace, uid, er_rv, kept))
        elif not requesters and er.canceled:
            out.deletes.append(EvictionRequestDelete(namespace, uid, er_uid, er_rv, "canceled"))


def _evictions(
    ctx: _Context, my_drain: MaintenanceDrain | None, resolution: Resolution | None
) -> _EvictionActions:
    """What to do with the EvictionRequests of the maintenance's nodes."""
    out = _EvictionActions()
    if not ctx.acting:
        return out
    selected = _selection(ctx.inp, ctx.recall, ctx.nm)
    scope = maintenance_nodes(ctx.nm, ctx.inp.nodes, selected) | ctx.mine.selected
    if my_drain is not None and ctx.act_stage == Stage.DRAIN:
        _ask_for_targeted(ctx, my_drain, out)
    _withdraw(ctx, scope, resolution, out)
    return out


def decide(inp: Inputs) -> Actions:
    """Decide what to do for ``inp.maintenance``."""
    nm = inp.maintenance
    me = name_of(nm)
    stage = effective_stage(nm)
    is_deleting = deleting(nm)
    validity = validate(nm)

    if is_deleting and not _has_finalizer(nm):
        # Idle (or never handled): nothing was touched, nothing to undo; the API server
        # removes the object once the other finalizers (if any) are gone.
        return Actions(stage=stage, validity=validity)

    recall = inp.recall if inp.recall is not None else Recall()
    bound = _Bound(inp, recall)
    ctx = _Context(
        inp=inp,
        me=me,
        stage=stage,
        deleting=is_deleting,
        validity=validity,
        others=_others(inp, me, validity, recall),
        acting=validity.valid or is_deleting or stage == Stage.COMPLETE,
        recall=recall,
        bound=bound,
        requests=_Requests(inp, recall, bound),
    )
    act_stage = ctx.act_stage
    holds_now = act_stage is not None and act_stage.holds_cordon
    over = _over(inp, ctx.others)
    slots = _slots(inp, ctx.others, ctx.bound.pods, over) if ctx.acting else None
    waiting = frozenset(slots.waiting) if slots is not None else frozenset()
    uncordoned = frozenset() if inp.cordon_while_waiting else waiting
    cordon, cordon_events = _cordons(ctx, uncordoned) if holds_now else ([], [])
    uncordon: list[NodePatch] = []
    if ctx.acting:
        uncordon, uncordon_events = _uncordons(ctx, ctx.mine.selected if holds_now else frozenset())
        cordon_events.extend(uncordon_events)

    resolution = _resolve(ctx.others, ctx.bound.pods, slots, over)
    my_drain = resolution.maintenances.get(me) if resolution is not None and ctx.acting else None
    status, events = _status(ctx, cordon_events, my_drain)
    neighbours = (
        _neighbour_statuses(ctx.others, resolution, me, inp.now, ctx.requests, inp.drain_deadline)
        if resolution is not None and ctx.acting
        else []
    )
    evictions = _evictions(ctx, my_drain, resolution)
    add_finalizer = (
        ctx.acting
        and not is_deleting
        and stage is not None
        and stage != Stage.IDLE
        and not _has_finalizer(nm)
    )
    return Actions(
        stage=stage,
        validity=validity,
        add_finalizer=add_finalizer,
        cordon=tuple(cordon),
        status=status,
        events=tuple(events),
        neighbours=tuple(neighbours),
        delete_evictions=tuple(evictions.deletes),
        create_evictions=tuple(evictions.creates),
        requester_patches=tuple(evictions.requester_patches),
        uncordon=tuple(uncordon),
        remove_finalizer=is_deleting and _has_finalizer(nm),
        admitted=frozenset(slots.newly) if slots is not None else frozenset(),
        requeue_after=_deadline_requeue(ctx, status, my_drain),
        delete_pods=tuple(_escalation(ctx, status, my_drain)),
    )


def _escalation(
    ctx: _Context, status: Mapping[str, Any] | None, drain: MaintenanceDrain | None
) -> list[PodDelete]:
    """With escalation DeletePods and the drain deadline passed: the targeted Default pods still
    there and not leaving (DaemonSet and static pods have interceptors that remove them)."""
    if drain is None or ctx.act_stage != Stage.DRAIN:
        return []
    if deadline_escalation(ctx.nm, ctx.inp.deadline_escalation) != DELETE_PODS:
        return []
    current = status if status is not None else mapping(ctx.nm, "status")
    if not condition_true({"status": current}, DEADLINE_CONDITION):
        return []
    out: list[PodDelete] = []
    for ns in drain.nodes:
        on = ctx.bound.on(ns.node)
        for ref in ns.targeted_pods:
            pod = on.by_uid.get(ref.uid)
            if pod is None or deleting(pod):
                continue
            if classify(pod).pod_type is PodType.DEFAULT:
                out.append(PodDelete(ref.namespace, ref.name, ref.uid))
    return out


def _deadline_requeue(
    ctx: _Context, status: Mapping[str, Any] | None, drain: MaintenanceDrain | None
) -> float | None:
    """Seconds until this maintenance's drain deadline passes, while it is ahead."""
    seconds = deadline_seconds(ctx.nm, ctx.inp.drain_deadline)
    if ctx.act_stage != Stage.DRAIN or drain is None or drain.drained or seconds is None:
        return None
    due = _deadline_due(status if status is not None else mapping(ctx.nm, "status"), seconds)
    if due is None:
        return None
    left = (due - ctx.inp.now).total_seconds()
    return left if left > 0 else None
