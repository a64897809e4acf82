"""The drain plan a NodeMaintenance would follow, computed without changing anything
(``nodeagent plan``).

Pure: the maintenance, the nodes, the pods of the selected nodes and the PodDisruptionBudgets
come in as plain JSON-shaped dicts; a :class:`Preview` comes out. Every decision is the
controller's own: :func:`~nodeagent.model.maintenance.validate` for the spec and its effective
plan, :func:`~nodeagent.model.maintenance.selects` for the nodes,
:meth:`~nodeagent.model.draintargets.PodInfo.from_pod` for what a pod is (its type, priority,
whether it is skipped or terminal) and :func:`~nodeagent.model.draintargets.plan_targets` for
the drainTargets in force at each entry. A pod goes in the first entry whose drainTargets
target it: the entry at which the controller asks for its eviction.

The order is that of this maintenance alone: another maintenance sharing a node can hold it back
or fast-forward it (KEP-4212 "DrainTargets"), which the controller reports on the node's
drainMessage once it drains.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nodeagent.model.bodies import describe, mapping, metadata_of, name_of
from nodeagent.model.drainplan import DRAIN_SKIP, DrainPlanEntry, PodType, targets_cover_class
from nodeagent.model.draintargets import PodInfo, plan_targets
from nodeagent.model.interceptors import pod_phase
from nodeagent.model.maintenance import selects, spec_stage, validate
from nodeagent.model.names import DRAIN_ANNOTATION
from nodeagent.model.selectors import LabelSelector, SelectorError, label_selector_from_dict

__all__ = [
    "MULTIPLE_BUDGETS",
    "NO_DISRUPTION_ALLOWED",
    "EntryPreview",
    "InvalidMaintenance",
    "NeverEvicted",
    "NodePreview",
    "PodPreview",
    "Preview",
    "Refusal",
    "preview",
    "refusals",
    "render_text",
]

NO_DISRUPTION_ALLOWED = "NoDisruptionAllowed"
"""The budget's ``status.disruptionsAllowed`` is 0 (or not computed yet): the Eviction API
answers 429."""
MULTIPLE_BUDGETS = "MultipleBudgets"
"""The pod is under more than one budget: the Eviction API refuses it whatever they allow."""


class InvalidMaintenance(ValueError):
    """The maintenance's spec is invalid; the message names the object and the field, e.g.
    ``NodeMaintenance kernel: spec.drainPlan[2]: duplicate of spec.drainPlan[0]``."""


@dataclass(frozen=True)
class Refusal:
    """A PodDisruptionBudget (in the pod's namespace) that would refuse the pod's eviction."""

    budget: str
    reason: str
    """:data:`NO_DISRUPTION_ALLOWED` or :data:`MULTIPLE_BUDGETS`."""


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


# --- PodDisruptionBudgets -----------------------------------------------------------------------


@dataclass(frozen=True)
class _Budget:
    namespace: str
    name: str
    selector: LabelSelector
    allowed: int


def _budgets(pdbs: Iterable[Mapping[str, Any]]) -> dict[str, list[_Budget]]:
    """By namespace. A budget whose selector cannot be parsed is left out (the API server's
    validation would not have let it in); an absent ``disruptionsAllowed`` counts as 0, its Go
    zero value: the Eviction API refuses under a budget whose status is not computed yet."""
    out: dict[str, list[_Budget]] = {}
    for pdb in pdbs:
        md = metadata_of(pdb)
        try:
            selector = label_selector_from_dict(mapping(pdb, "spec").get("selector"))
        except SelectorError:
            continue
        allowed = mapping(pdb, "status").get("disruptionsAllowed")
        if isinstance(allowed, bool) or not isinstance(allowed, int):
            allowed = 0
        namespace = str(md.get("namespace") or "default")
        out.setdefault(namespace, []).append(
            _Budget(namespace, str(md.get("name") or ""), selector, allowed)
        )
    return out


def _refusals_of(info: PodInfo, budgets: Mapping[str, Sequence[_Budget]]) -> tuple[Refusal, ...]:
    matching = sorted(
        (b for b in budgets.get(info.namespace, ()) if b.selector.matches(info.labels)),
        key=lambda b: b.name,
    )
    if len(matching) > 1:
        return tuple(Refusal(b.name, MULTIPLE_BUDGETS) for b in matching)
    return tuple(Refusal(b.name, NO_DISRUPTION_ALLOWED) for b in matching if b.allowed <= 0)


def refusals(pod: Mapping[str, Any], pdbs: Iterable[Mapping[str, Any]]) -> tuple[Refusal, ...]:
    """The budgets that would refuse the eviction of ``pod`` now: those of its namespace whose
    selector matches it and that allow no disruption, or all of them when more than one matches
    (the Eviction API refuses a pod under several budgets)."""
    return _refusals_of(PodInfo.from_pod(pod), _budgets(pdbs))


# --- the preview --------------------------------------------------------------------------------


def _never_reason(info: PodInfo, pod: Mapping[str, Any]) -> str | None:
    if info.pod_class.skip:
        return f"{DRAIN_ANNOTATION}: {DRAIN_SKIP}"
    if info.terminal:
        return f"completed ({pod_phase(pod)})"
    return None


def preview(
    nm: Mapping[str, Any],
    nodes: Iterable[Mapping[str, Any]],
    pods: Iterable[Mapping[str, Any]],
    pdbs: Iterable[Mapping[str, Any]] = (),
) -> Preview:
    """The plan ``nm`` would follow on the nodes it selects among ``nodes``, for ``pods`` (those
    bound elsewhere are ignored) under the budgets ``pdbs``. Raises :class:`InvalidMaintenance`
    when the controller would find the spec invalid (``Valid=False``)."""
    validity = validate(nm)
    if not validity.valid:
        raise InvalidMaintenance(f"{describe(nm, 'NodeMaintenance')}: {validity.message}")
    plan = validity.plan
    node_list = list(nodes)
    selected = sorted({name_of(n) for n in node_list if selects(nm, n)})
    by_node: dict[str, list[Mapping[str, Any]]] = {n: [] for n in selected}
    for pod in pods:
        node = mapping(pod, "spec").get("nodeName")
        if isinstance(node, str) and node in by_node:
            by_node[node].append(pod)
    targets = [plan_targets(plan, i) for i in range(len(plan))]
    budgets = _budgets(pdbs)
    out: list[NodePreview] = []
    for node in selected:
        per_entry: list[list[PodPreview]] = [[] for _ in plan]
        never: list[NeverEvicted] = []
        for pod in by_node[node]:
            info = PodInfo.from_pod(pod)
            shown = PodPreview(
                namespace=info.namespace,
                name=info.name,
                priority=info.pod_class.priority,
                pod_type=info.pod_class.pod_type,
                refused_by=_refusals_of(info, budgets),
                terminating=info.terminating,
            )
            reason = _never_reason(info, pod)
            index = None
            if reason is None:
                index = next(
                    (
                        i
                        for i, t in enumerate(targets)
                        if targets_cover_class(t, info.pod_class, info.labels)
                    ),
                    None,
                )
                if index is None:
                    reason = "no entry of the drain plan covers it"
            if index is None:
                never.append(NeverEvicted(shown, reason or ""))
            else:
                per_entry[index].append(shown)
        out.append(
            NodePreview(
                name=node,
                entries=tuple(
                    EntryPreview(i, entry, tuple(sorted(per_entry[i], key=_pod_order)))
                    for i, entry in enumerate(plan)
                ),
                never_evicted=tuple(sorted(never, key=lambda x: _pod_order(x.pod))),
            )
        )
    return Preview(
        maintenance=name_of(nm),
        stage=spec_stage(nm),
        plan=plan,
        nodes_seen=len(node_list),
        nodes=tuple(out),
    )


def _pod_order(pod: PodPreview) -> tuple[str, str]:
    return (pod.namespace, pod.name)


# --- text ---------------------------------------------------------------------------------------

_PRIORITY_WIDTH = len(str(-(2**31)))
_TYPE_WIDTH = max(len(t.value) for t in PodType)
_INDENT = "    "


def _refusal_text(pod: PodPreview) -> str:
    if not pod.refused_by:
        return "-"
    names = ", ".join(r.budget for r in pod.refused_by)
    if any(r.reason == MULTIPLE_BUDGETS for r in pod.refused_by):
        return f"{names} (more than one budget)"
    return names


def _rows(
    pods: Iterable[tuple[PodPreview, str]], pod_width: int, last_width: int, width: int
) -> list[str]:
    """One row per pod; a name too long for its column goes on lines of its own (cut where
    longer than the table), and the last column wraps under itself."""
    lines: list[str] = []
    for pod, last in pods:
        status = " (terminating)" if pod.terminating else ""
        name = pod.key + status
        wrapped = textwrap.wrap(last, last_width, break_on_hyphens=False) or [""]
        if len(name) > pod_width:
            room = width - len(_INDENT)
            lines += [_INDENT + name[i : i + room] for i in range(0, len(name), room)]
            name = ""
        head = (
            f"{_INDENT}{name:<{pod_width}}  {pod.priority:>{_PRIORITY_WIDTH}}  "
            f"{pod.pod_type.value:<{_TYPE_WIDTH}}  "
        )
        lines.append(head + wrapped[0])
        lines += [" " * len(head) + w for w in wrapped[1:]]
    return [line.rstrip() for line in lines]


def _count(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def render_text(p: Preview, width: int = 100) -> str:
    """The preview as a text table no wider than ``width`` (at least 60) columns: the selected
    nodes, then per node the entries that target pods, in order, and the pods never evicted."""
    width = max(width, 60)
    fixed = len(_INDENT) + 2 + _PRIORITY_WIDTH + 2 + _TYPE_WIDTH + 2
    all_pods = [
        pod.key + (" (terminating)" if pod.terminating else "")
        for n in p.nodes
        for pod in [*(q for e in n.entries for q in e.pods), *(x.pod for x in n.never_evicted)]
    ]
    pod_width = min(max([len("POD"), *map(len, all_pods)]), (width - fixed) * 3 // 5)
    last_width = width - fixed - pod_width
    name = p.maintenance or "(unnamed)"
    selected = ", ".join(n.name for n in p.nodes) or "none"
    lines = [
        *textwrap.wrap(
            f"NodeMaintenance {name} (stage {p.stage}): {len(p.nodes)} of {p.nodes_seen} nodes "
            f"selected: {selected}",
            width,
            subsequent_indent="  ",
            break_on_hyphens=False,
        ),
        *textwrap.wrap(
            f"Drain plan: {len(p.plan)} entries; the order is this maintenance's alone (another "
            f"maintenance sharing a node can hold it back). Nothing was changed.",
            width,
            break_on_hyphens=False,
        ),
    ]
    for node in p.nodes:
        used = [e for e in node.entries if e.pods]
        if not used and not node.never_evicted:
            lines += ["", *textwrap.wrap(f"node {node.name}: no pods", width)]
            continue
        lines += [
            "",
            *textwrap.wrap(
                f"node {node.name}: {_count(node.to_evict, 'pod')} to evict in {len(used)} of "
                f"{len(node.entries)} entries, {len(node.never_evicted)} never evicted",
                width,
            ),
        ]
        header = (
            f"{_INDENT}{'POD':<{pod_width}}  {'PRIORITY':>{_PRIORITY_WIDTH}}  "
            f"{'TYPE':<{_TYPE_WIDTH}}  "
        )
        for e in used:
            entry = f"  entry {e.index + 1}/{len(node.entries)}: {e.entry.describe()}"
            lines += textwrap.wrap(entry, width, subsequent_indent="    ")
            if e is used[0]:
                lines.append(header + "REFUSED BY (PDB)")
            lines += _rows(((q, _refusal_text(q)) for q in e.pods), pod_width, last_width, width)
        if node.never_evicted:
            lines += ["  never evicted:", header + "WHY"]
            lines += _rows(
                ((x.pod, x.reason) for x in node.never_evicted), pod_width, last_width, width
            )
    return "\n".join(lines) + "\n"
