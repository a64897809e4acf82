"""drainTargets resolution across intersecting NodeMaintenances (KEP-4212 "Pod Selection",
"Pod Selection and DrainTargets Example", NodeMaintenanceNodeStatus.DrainTargets).

Pure and deterministic: :func:`resolve` takes views of the maintenances (with the progress they
stored last time) and the pods of their nodes, and returns per maintenance and node the new
drainTargets, drainMessage, counters, the pods to request evictions for, and fast-forward notes.

Model
-----
*Target sets.* A drainTargets list is a set of tracks ``(podType, podSelector)`` each with a
priority; a pod is targeted when some track of its type, with no selector or a matching one,
reaches its priority (targets accumulate, KEP "PodTypes and Label Selectors Progression").
"A covers B" is judged track by track (:func:`targets_within`): selector implication is not
analysed, which errs on the side of targeting less.

*Position.* Each Drain maintenance is at one entry of its effective plan and *wants* the
targets of the plan up to that entry (:func:`plan_targets`). The position is not part of the
KEP status, so the controller should persist :attr:`MaintenanceDrain.entry_index` and pass it
back as :attr:`MaintenanceView.entry_index`; without it (or if it lags) the position is
recovered from the stored drainTargets, conservatively.

*Per node.* "If there are multiple NodeMaintenances for a node, the least powerful DrainTargets
among them are selected and set for all the NodeMaintenances for that node" and "DrainTargets
cannot backtrack": ``targets(node) = stored progress of every maintenance on the node (the
floor) joined with the meet of their wants``. A younger maintenance whose want is below the
floor is thereby fast-forwarded ("it will be fast-forwarded for node one regardless of its
drainPlan"), which is reported so the controller can emit an Event.

*Advancing.* A maintenance moves to its next entry when its own want is in force on all its
nodes and no targeted pod is left on its nodes or on the nodes of the maintenances it
intersects. The KEP: "The next entry in the plan can be selected once all the nodes of a
NodeMaintenance have finished evacuation and all the NodeMaintenances of intersecting nodes
have finished evacuation for the current drain targets." That is one hop (a maintenance sharing
a node), not the whole connected group; the example cannot tell the two apart (maintenance-b
waits for node two of maintenance-a, which it intersects through node one), so the text
decides. Chains still wait on each other through the per-node meet: a maintenance limited on a
node cannot advance until the limiting one does. Resolution repeats until nothing advances, so
entries that target no pod are passed at once.

If maintenances with incomparable selector entries limit each other and nothing is left to
evacuate around them, none would ever be at its entry; then the one(s) with the lowest current
entry advance (plan order key), which cannot target more than any want allows.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nodeagent.model.drainplan import (
    DrainPlanEntry,
    PodClass,
    PodType,
    classify,
    entry_covers,
    format_entries,
    pod_labels,
)
from nodeagent.model.interceptors import InvalidInterceptors, target_interceptors
from nodeagent.model.memo import ObjectMemo
from nodeagent.model.selectors import LabelSelector

__all__ = [
    "DRAIN_STAGE",
    "MSG_DRAINED",
    "MSG_EVACUATING",
    "FastForward",
    "MaintenanceDrain",
    "MaintenanceView",
    "NodeDrainStatus",
    "NodePods",
    "PodInfo",
    "PodInfoMemo",
    "PodInfoOf",
    "PodRef",
    "Resolution",
    "join_targets",
    "meet_targets",
    "normalize_targets",
    "plan_targets",
    "resolve",
    "targets_within",
]

DRAIN_STAGE = "Drain"
MSG_EVACUATING = "Evacuating"
MSG_DRAINED = "Drained"
_MAX_NAMED_NODES = 5

# --- target sets -------------------------------------------------------------------------------

_Track = tuple[PodType, LabelSelector | None]
_Tracks = dict[_Track, int]


def _cov(tracks: Mapping[_Track, int], track: _Track) -> int | None:
    """Highest priority ``tracks`` reach for pods of ``track``: its own entry or the plain one."""
    plain = tracks.get((track[0], None))
    if track[1] is None:
        return plain
    own = tracks.get(track)
    if own is None:
        return plain
    return own if plain is None else max(own, plain)


def _normalize(entries: Iterable[DrainPlanEntry]) -> _Tracks:
    exact: _Tracks = {}
    for e in entries:
        key = (e.pod_type, e.pod_selector)
        exact[key] = max(exact.get(key, e.pod_priority), e.pod_priority)
    return {t: p for t in exact if (p := _cov(exact, t)) is not None}


def _within(a: Mapping[_Track, int], b: Mapping[_Track, int]) -> bool:
    for t, p in a.items():
        c = _cov(b, t)
        if c is None or c < p:
            return False
    return True


def _meet(sets: Sequence[Mapping[_Track, int]]) -> _Tracks:
    if not sets:
        return {}
    tracks = {t for s in sets for t in s}
    out: _Tracks = {}
    for t in tracks:
        covs = [_cov(s, t) for s in sets]
        if all(c is not None for c in covs):
            out[t] = min(c for c in covs if c is not None)
    return out


def _join(sets: Iterable[Mapping[_Track, int]]) -> _Tracks:
    materialized = list(sets)
    tracks = {t for s in materialized for t in s}
    out: _Tracks = {}
    for t in tracks:
        covs = [c for s in materialized if (c := _cov(s, t)) is not None]
        out[t] = max(covs)
    return out


def _target_order(item: tuple[_Track, int]) -> tuple[int, int, str, int]:
    (pod_type, selector), priority = item
    # Plain track first, then selector tracks: the order of the KEP's drainTargets examples.
    if selector is None:
        return (pod_type.rank, 0, "", priority)
    return (pod_type.rank, 1, selector.to_string(), priority)


def _entries(tracks: Mapping[_Track, int]) -> tuple[DrainPlanEntry, ...]:
    return tuple(
        DrainPlanEntry(sel, prio, pod_type)
        for (pod_type, sel), prio in sorted(tracks.items(), key=_target_order)
    )


def normalize_targets(entries: Iterable[DrainPlanEntry]) -> tuple[DrainPlanEntry, ...]:
    """One entry per (podType, podSelector), selector entries raised to the plain entry of their
    type, ordered by type, plain entry first, then by selector."""
    return _entries(_normalize(entries))


def targets_within(inner: Iterable[DrainPlanEntry], outer: Iterable[DrainPlanEntry]) -> bool:
    """Whether ``outer`` targets every pod ``inner`` targets (judged track by track)."""
    return _within(_normalize(inner), _normalize(outer))


def meet_targets(*sets: Iterable[DrainPlanEntry]) -> tuple[DrainPlanEntry, ...]:
    """The least powerful targets: within every one of ``sets``."""
    return _entries(_meet([_normalize(s) for s in sets]))


def join_targets(*sets: Iterable[DrainPlanEntry]) -> tuple[DrainPlanEntry, ...]:
    """The targets covering every one of ``sets``."""
    return _entries(_join(_normalize(s) for s in sets))


def _plan_tracks(plan: Sequence[DrainPlanEntry], index: int) -> _Tracks:
    reached = plan[: index + 1]
    reached_types = {e.pod_type for e in reached}
    exact = _normalize(reached)
    tracks = {(e.pod_type, e.pod_selector) for e in plan if e.pod_type in reached_types}
    # Selector tracks of a reached type show up as soon as a plain entry covers them, as in the
    # KEP progression, whose first drainTargets are Default<=1000 and Default{app=postgres}<=1000.
    return {t: p for t in tracks if (p := _cov(exact, t)) is not None}


def plan_targets(plan: Sequence[DrainPlanEntry], index: int) -> tuple[DrainPlanEntry, ...]:
    """The drainTargets a maintenance wants at entry ``index`` of its effective plan."""
    if not 0 <= index < len(plan):
        raise IndexError(f"entry {index} is outside a drain plan of {len(plan)} entries")
    return _entries(_plan_tracks(plan, index))


# --- inputs ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PodRef:
    namespace: str
    name: str
    uid: str


@dataclass(frozen=True)
class PodInfo:
    """A pod of a selected node. ``terminal``: phase Succeeded or Failed (counts as gone);
    ``terminating``: deletionTimestamp set (still there, but leaving)."""

    namespace: str
    name: str
    uid: str
    pod_class: PodClass
    labels: Mapping[str, str] = field(default_factory=dict, hash=False)
    terminal: bool = False
    terminating: bool = False
    interceptors_error: str | None = None
    """Why the pod's interceptors annotation is ignored (malformed), if it is."""

    @functools.cached_property
    def ref(self) -> PodRef:
        return PodRef(self.namespace, self.name, self.uid)

    @property
    def present(self) -> bool:
        """Counts for the drain: not terminal and not skipped."""
        return not self.terminal and not self.pod_class.skip

    @classmethod
    def from_pod(cls, pod: Mapping[str, Any]) -> PodInfo:
        metadata = pod.get("metadata")
        md: Mapping[str, Any] = metadata if isinstance(metadata, Mapping) else {}
        status = pod.get("status")
        phase = status.get("phase") if isinstance(status, Mapping) else None
        try:
            target_interceptors(pod)
            interceptors_error = None
        except InvalidInterceptors as exc:
            interceptors_error = str(exc)
        return cls(
            namespace=str(md.get("namespace") or "default"),
            name=str(md.get("name") or ""),
            uid=str(md.get("uid") or ""),
            pod_class=classify(pod),
            labels=pod_labels(pod),
            terminal=phase in ("Succeeded", "Failed"),
            terminating=md.get("deletionTimestamp") is not None,
            interceptors_error=interceptors_error,
        )


PodInfoOf = Callable[[Mapping[str, Any]], PodInfo]
"""How a decision gets a pod's PodInfo: :meth:`PodInfo.from_pod`, or a :class:`PodInfoMemo`."""


class PodInfoMemo(ObjectMemo[PodInfo]):
    """:meth:`PodInfo.from_pod` remembered per pod object."""

    def __init__(self) -> None:
        super().__init__(PodInfo.from_pod)


@dataclass(frozen=True)
class Covered:
    """The pods of a node that a set of drainTargets covers (present ones only)."""

    pods: tuple[PodInfo, ...]
    refs: tuple[PodRef, ...]
    """Their references, by namespace, name and UID."""
    evacuating: int
    """The node's present pods that are leaving: covered, or terminating anyway."""


class NodePods:
    """One node's pods as a resolution reads them, with what it derives from them kept with
    them: the pods left, and those each set of drainTargets covers. A controller that keeps
    one while the node's pods stay the same objects derives nothing again for that node, so a
    decision costs what changed rather than every pod of the maintenance."""

    def __init__(self, pods: Iterable[PodInfo]) -> None:
        self._pods = tuple(pods)
        self.present = tuple(p for p in self._pods if p.present)
        self.leaving = sum(1 for p in self.present if p.terminating)
        """Present pods that are terminating."""
        self.ignored_interceptors = tuple(p for p in self._pods if p.interceptors_error)
        """Pods whose interceptors annotation is malformed (ignored)."""
        self._covered: dict[tuple[tuple[_Track, int], ...], Covered] = {}

    def __iter__(self) -> Iterator[PodInfo]:
        return iter(self._pods)

    def covered(self, tracks: Mapping[_Track, int]) -> Covered:
        key = tuple(sorted(tracks.items(), key=_target_order))
        found = self._covered.get(key)
        if found is None:
            entries = _entries(tracks)
            pods = tuple(
                p
                for p in self.present
                if any(entry_covers(e, p.pod_class, p.labels) for e in entries)
            )
            uids = {p.uid for p in pods}
            found = self._covered[key] = Covered(
                pods=pods,
                refs=tuple(sorted({p.ref for p in pods}, key=_ref_order)),
                evacuating=sum(1 for p in self.present if p.uid in uids or p.terminating),
            )
        return found


_NO_PODS = NodePods(())


@dataclass(frozen=True)
class MaintenanceView:
    """What :func:`resolve` needs of one NodeMaintenance.

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


# --- outputs -----------------------------------------------------------------------------------


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


# --- resolution --------------------------------------------------------------------------------


class _Resolver:
    def __init__(
        self, views: Sequence[MaintenanceView], pods_by_node: Mapping[str, Iterable[PodInfo]]
    ) -> None:
        # Oldest first; index i is the age rank, so ties anywhere resolve to the oldest.
        self.views = sorted(views, key=lambda v: v.creation_key)
        self.pods = {
            node: pods if isinstance(pods, NodePods) else NodePods(pods)
            for node, pods in pods_by_node.items()
        }
        n = len(self.views)
        self.plans = [tuple(v.plan) for v in self.views]
        self._prefix: list[dict[int, _Tracks]] = [{} for _ in range(n)]
        self.members: dict[str, list[int]] = {}
        for i, v in enumerate(self.views):
            for node in v.nodes:
                self.members.setdefault(node, []).append(i)
        self.stored: list[dict[str, _Tracks]] = [
            {node: _normalize(v.progress[node]) for node in v.nodes if node in v.progress}
            for v in self.views
        ]
        self.floor: dict[str, _Tracks] = {
            node: _join(self.stored[i].get(node, {}) for i in idx)
            for node, idx in self.members.items()
        }
        self.neighbours: list[set[int]] = [
            {j for node in v.nodes for j in self.members[node]} for v in self.views
        ]
        self.hood_nodes: list[set[str]] = [
            {node for j in self.neighbours[i] for node in self.views[j].nodes} for i in range(n)
        ]
        self.pos = self._initial_positions()
        self.targets: dict[str, _Tracks] = {}
        self.covered: dict[str, Covered] = {}
        self._waiting_messages: dict[int, str] = {}

    # plan positions

    def prefix(self, i: int, index: int) -> _Tracks:
        cache = self._prefix[i]
        if index not in cache:
            cache[index] = _plan_tracks(self.plans[i], index)
        return cache[index]

    def want(self, i: int) -> _Tracks:
        return self.prefix(i, self.pos[i])

    def last(self, i: int) -> int:
        return len(self.plans[i]) - 1

    def _reached(self, i: int) -> dict[str, int]:
        """Per node, the last plan entry whose targets the stored drainTargets hold (-1: none)."""
        reached: dict[str, int] = {}
        for node in self.views[i].nodes:
            stored = self.stored[i].get(node)
            k = -1
            if stored:
                while k < self.last(i) and _within(self.prefix(i, k + 1), stored):
                    k += 1
            reached[node] = k
        return reached

    def _initial_positions(self) -> list[int]:
        """Plan positions: the persisted entry_index, else recovered from stored drainTargets.

        Every entry before the current one was in force on every node when it completed, so
        the least entry reached on any node is a lower bound; it is one short exactly when the
        maintenance is limited on those nodes by another one. Without a persisted index, take
        the next entry when the maintenance's own progress shows on some node and every node
        behind is explained by another maintenance's want (then targets are unaffected either
        way; only messages and the next step depend on it). The lower bound also guards a
        persisted index that lags.
        """
        reached = [self._reached(i) for i in range(len(self.views))]
        base = [
            min(max(0, min(r.values(), default=0)), self.last(i)) for i, r in enumerate(reached)
        ]
        positions: list[int] = []
        for i, v in enumerate(self.views):
            k = base[i]
            if v.entry_index is not None:
                positions.append(min(max(k, v.entry_index), self.last(i)))
                continue
            if k < self.last(i) and any(r > k for r in reached[i].values()):
                nxt = self.prefix(i, k + 1)
                behind = [node for node, r in reached[i].items() if r <= k]
                if all(
                    any(
                        j != i and not _within(nxt, self.prefix(j, base[j]))
                        for j in self.members[node]
                    )
                    for node in behind
                ):
                    k += 1
            positions.append(k)
        return positions

    # per-node state

    def compute_nodes(self, nodes: Iterable[str]) -> None:
        for node in nodes:
            wants = [self.want(j) for j in self.members[node]]
            tracks = _join((self.floor[node], _meet(wants)))
            self.targets[node] = tracks
            self.covered[node] = self.pods.get(node, _NO_PODS).covered(tracks)

    def targeted(self, node: str) -> bool:
        """Whether covered pods are left on ``node``."""
        return bool(self.covered[node].pods)

    def at_entry(self, i: int) -> bool:
        want = self.want(i)
        return all(_within(want, self.targets[node]) for node in self.views[i].nodes)

    def hood_settled(self, i: int) -> bool:
        return not any(self.covered[node].pods for node in self.hood_nodes[i])

    def limiters(self, i: int, node: str) -> list[int]:
        want = self.want(i)
        if _within(want, self.targets[node]):
            return []
        return [j for j in self.members[node] if j != i and not _within(want, self.want(j))]

    def run(self) -> None:
        self.compute_nodes(self.members)
        while True:
            movable = [i for i in range(len(self.views)) if self.pos[i] < self.last(i)]
            advance = [i for i in movable if self.at_entry(i) and self.hood_settled(i)]
            if not advance:
                advance = self._deadlocked([i for i in movable if self.hood_settled(i)])
            if not advance:
                return
            for i in advance:
                self.pos[i] += 1
            self.compute_nodes({node for i in advance for node in self.views[i].nodes})

    def _deadlocked(self, settled: list[int]) -> list[int]:
        """Settled maintenances not at their entry, limited only by each other: advance the
        lowest current entry of each such cluster (see the module docstring)."""
        stuck = {i for i in settled if not self.at_entry(i)}
        limited_by = {
            i: {j for node in self.views[i].nodes for j in self.limiters(i, node)} for i in stuck
        }
        changed = True
        while changed:
            changed = False
            for i in sorted(stuck):
                if not limited_by[i] <= stuck:
                    stuck.discard(i)
                    changed = True
        advance: list[int] = []
        remaining = set(stuck)
        while remaining:
            seed = min(remaining)
            cluster, frontier = {seed}, [seed]
            while frontier:
                i = frontier.pop()
                for j in limited_by[i] | {k for k in stuck if i in limited_by[k]}:
                    if j not in cluster:
                        cluster.add(j)
                        frontier.append(j)
            remaining -= cluster
            lowest = min(self.plans[i][self.pos[i]].sort_key for i in cluster)
            advance += [i for i in cluster if self.plans[i][self.pos[i]].sort_key == lowest]
        return sorted(advance)

    # attribution and messages

    def _least(self, candidates: list[int], power: Mapping[int, _Tracks]) -> int:
        """The candidate with minimal ``power`` (track-wise), the oldest among equals."""
        minimal = [
            c
            for c in candidates
            if not any(
                _within(power[o], power[c]) and not _within(power[c], power[o]) for o in candidates
            )
        ]
        return min(minimal or candidates)

    def fast_forwarded_by(self, i: int, node: str) -> int | None:
        want = self.want(i)
        if _within(self.targets[node], want):
            return None
        holders = [
            j
            for j in self.members[node]
            if j != i and not _within(self.stored[j].get(node, {}), want)
        ]
        if not holders:
            return None  # the progress is this maintenance's own, stored earlier
        return self._least(holders, {j: self.want(j) for j in holders})

    def limited_by(self, i: int, node: str) -> int | None:
        limiters = self.limiters(i, node)
        if not limiters:
            return None
        floor = self.floor[node]
        return self._least(limiters, {j: _join((floor, self.want(j))) for j in limiters})

    def waiting_message(self, i: int) -> str:
        """Name the nearest nodes that still have targeted pods: this maintenance's own first,
        then those of the maintenances it intersects, and so on outwards (the same for every
        node of the maintenance: worked out once)."""
        found = self._waiting_messages.get(i)
        if found is None:
            found = self._waiting_messages[i] = self._waiting_message(i)
        return found

    def _waiting_message(self, i: int) -> str:
        seen_m, seen_nodes = {i}, set[str]()
        level = [i]
        while level:
            found: dict[str, int | None] = {}
            for j in level:  # level is oldest first, so a node goes to its oldest holder
                for node in sorted(self.views[j].nodes):
                    if node not in seen_nodes and node not in found and self.targeted(node):
                        found[node] = None if j == i else j
            if found:
                return _waiting_text(
                    [
                        (node, None if j is None else self.views[j].label)
                        for node, j in found.items()
                    ]
                )
            seen_nodes |= {node for j in level for node in self.views[j].nodes}
            nxt = sorted({k for j in level for k in self.neighbours[j]} - seen_m)
            seen_m |= set(nxt)
            level = nxt
        return "Waiting"

    def node_status(self, i: int, node: str) -> NodeDrainStatus:
        tracks = self.targets[node]
        covered = self.covered[node]
        present = self.pods.get(node, _NO_PODS).present
        if covered.pods:
            message = MSG_EVACUATING
            if (ff := self.fast_forwarded_by(i, node)) is not None:
                older = "older " if ff < i else ""
                message += f" (fast-forwarded by {older}{self.views[ff].label})"
            elif (lim := self.limited_by(i, node)) is not None:
                message += f" (limited by {self.views[lim].label})"
        elif not present:
            message = MSG_DRAINED
        else:
            message = self.waiting_message(i)
        return NodeDrainStatus(
            node=node,
            drain_targets=_entries(tracks),
            drain_message=message,
            targeted_pods=covered.refs,
            pods_pending_evacuation=len(present) - covered.evacuating,
            pods_evacuating=covered.evacuating,
            drained=not present,
        )

    def fast_forward(self, i: int, node: str) -> FastForward | None:
        had = _join((self.stored[i].get(node, {}), self.want(i)))
        if _within(self.targets[node], had):
            return None
        by = self.fast_forwarded_by(i, node)
        if by is None:
            return None
        return FastForward(
            maintenance=self.views[i].label,
            node=node,
            by=self.views[by].label,
            by_older=by < i,
            targets=_entries(self.targets[node]),
            entry=self.plans[i][self.pos[i]],
        )

    def result(self) -> Resolution:
        out: dict[str, MaintenanceDrain] = {}
        for i, v in enumerate(self.views):
            nodes = tuple(self.node_status(i, node) for node in sorted(v.nodes))
            ffs = tuple(ff for node in sorted(v.nodes) if (ff := self.fast_forward(i, node)))
            out[v.name] = MaintenanceDrain(
                name=v.name,
                entry_index=self.pos[i],
                current_entry=self.plans[i][self.pos[i]],
                nodes=nodes,
                drained=all(s.drained for s in nodes),
                fast_forwards=ffs,
            )
        return Resolution(out)


def _ref_order(ref: PodRef) -> tuple[str, str, str]:
    return (ref.namespace, ref.name, ref.uid)


def _waiting_text(found: list[tuple[str, str | None]]) -> str:
    """``Waiting for node one.``, ``Waiting for node two (maintenance-a).``,
    ``Waiting for nodes one, three, node two (maintenance-a).``"""
    groups: dict[str | None, list[str]] = {}
    for node, owner in found:
        groups.setdefault(owner, []).append(node)
    named, parts = 0, []
    for owner, nodes in groups.items():
        shown = nodes[: max(0, _MAX_NAMED_NODES - named)]
        if not shown:
            break
        named += len(shown)
        text = ("node " if len(shown) == 1 else "nodes ") + ", ".join(shown)
        parts.append(text + (f" ({owner})" if owner is not None else ""))
    more = len(found) - named
    return "Waiting for " + ", ".join(parts) + (f" and {more} more" if more else "") + "."


def resolve(
    maintenances: Iterable[MaintenanceView], pods_by_node: Mapping[str, Iterable[PodInfo]]
) -> Resolution:
    """Resolve drainTargets, messages and counters for every maintenance in stage Drain.

    ``pods_by_node`` holds the pods bound to each selected node (a node missing from it has no
    pods), best as :class:`NodePods` kept from one resolution to the next. Deterministic: the
    result depends only on the inputs, not on their order.
    """
    views = [m for m in maintenances if m.stage == DRAIN_STAGE]
    names = [v.name for v in views]
    if len(set(names)) != len(names):
        raise ValueError(f"maintenance names must be unique: {sorted(names)}")
    resolver = _Resolver(views, pods_by_node)
    resolver.run()
    return resolver.result()
