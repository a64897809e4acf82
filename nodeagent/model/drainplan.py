"""The NodeMaintenance drain plan (KEP-4212 "Pod Selection"): entries, the effective plan, and
which pods an entry or a list of drainTargets covers.

Pure: plain JSON-shaped dicts in, frozen dataclasses out. The resolution of drainTargets across
intersecting maintenances lives in :mod:`nodeagent.model.draintargets`.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from nodeagent.model.bodies import mapping, metadata_of
from nodeagent.model.names import BUILTIN_PRIORITIES, DRAIN_ANNOTATION, MIRROR_ANNOTATION
from nodeagent.model.selectors import (
    LabelSelector,
    Operator,
    SelectorError,
    label_selector_from_dict,
)

__all__ = [
    "DEFAULT_ENTRIES",
    "DRAIN_SKIP",
    "INT32_MAX",
    "INT32_MIN",
    "DrainPlanEntry",
    "InvalidPlan",
    "PodClass",
    "PodType",
    "classify",
    "effective_plan",
    "entries_from_dicts",
    "entry_covers",
    "format_entries",
    "pod_labels",
    "targets_cover",
    "targets_cover_class",
]

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1

DRAIN_SKIP = "skip"
"""``nodeagent.io/drain: skip``: the pod is never targeted and never blocks a drain (DESIGN 2.1)."""


class InvalidPlan(ValueError):
    """A drainPlan (or stored drainTargets) is malformed; the message names the bad entry,
    e.g. ``spec.drainPlan[2]: duplicate of spec.drainPlan[0]``."""


class PodType(StrEnum):
    """KEP-4212 PodType. Declaration order is the plan order: Default, DaemonSet, Static."""

    DEFAULT = "Default"
    DAEMONSET = "DaemonSet"
    STATIC = "Static"

    # Hashed as its value, in C: the resolution looks tracks (type, selector) up in dicts
    # thousands of times per decision, and Enum's own hash is a Python call. It also agrees
    # with equality, which is the str's.
    __hash__ = str.__hash__

    @property
    def rank(self) -> int:
        return _TYPE_RANK[self]


_TYPE_RANK = {t: i for i, t in enumerate(PodType)}
_TYPE_NAMES = ", ".join(t.value for t in PodType)


def _selector_string(selector: LabelSelector | None) -> str:
    if selector is None:
        return ""
    if selector.match_nothing:  # cannot come from a podSelector object; keep sorting total
        return "\x00nothing"
    return selector.to_string()


@functools.total_ordering
@dataclass(frozen=True)
class DrainPlanEntry:
    """One ``spec.drainPlan`` (or ``status.nodeStatuses[].drainTargets``) entry.

    ``pod_selector`` is None for the plain entry; an empty podSelector (``{}``) selects every pod
    and is normalised to None. The selector's object form is regenerated from the parsed
    selector by :meth:`to_dict` (matchLabels for equality requirements, matchExpressions for the
    rest), so equal entries always print the same way.

    Entries sort by the plan order key (:attr:`plan_key`): pod type Default < DaemonSet <
    Static, then ascending priority, then entries with a podSelector before the plain entry of
    the same type and priority; the selector string breaks the remaining ties so the order is
    total.
    """

    pod_selector: LabelSelector | None
    pod_priority: int
    pod_type: PodType

    def __post_init__(self) -> None:
        if self.pod_selector is not None and self.pod_selector.is_everything:
            object.__setattr__(self, "pod_selector", None)

    @classmethod
    def plain(cls, pod_type: PodType, pod_priority: int) -> DrainPlanEntry:
        return cls(None, pod_priority, pod_type)

    @classmethod
    def from_dict(cls, d: object, where: str) -> DrainPlanEntry:
        """Parse one entry object; errors raise InvalidPlan prefixed with ``where``."""
        if not isinstance(d, Mapping):
            raise InvalidPlan(f"{where}: must be an object")
        for name in d:
            if name not in ("podSelector", "podPriority", "podType"):
                raise InvalidPlan(f'{where}: unknown field "{name}"')
        raw_type = d.get("podType")
        if raw_type is None:
            # The KEP's spec comment orders podTypes "nil -> DaemonSet -> Static": unset is Default.
            pod_type = PodType.DEFAULT
        else:
            try:
                pod_type = PodType(raw_type)
            except ValueError:
                raise InvalidPlan(
                    f"{where}.podType: unknown pod type {raw_type!r}; must be one of {_TYPE_NAMES}"
                ) from None
        priority = d.get("podPriority")
        if priority is None:
            raise InvalidPlan(f"{where}.podPriority: required")
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise InvalidPlan(f"{where}.podPriority: must be an integer, not {priority!r}")
        if not INT32_MIN <= priority <= INT32_MAX:
            raise InvalidPlan(
                f"{where}.podPriority: {priority} is out of the int32 range "
                f"[{INT32_MIN}, {INT32_MAX}]"
            )
        raw_selector = d.get("podSelector")
        selector: LabelSelector | None = None
        if raw_selector is not None:
            if not isinstance(raw_selector, Mapping):
                raise InvalidPlan(f"{where}.podSelector: must be an object")
            try:
                selector = label_selector_from_dict(raw_selector)
            except SelectorError as e:
                raise InvalidPlan(f"{where}.podSelector: {e}") from None
        return cls(selector, priority, pod_type)

    def to_dict(self) -> dict[str, Any]:
        """The API object form, as written to ``drainTargets``."""
        out: dict[str, Any] = {}
        if self.pod_selector is not None:
            out["podSelector"] = _selector_to_dict(self.pod_selector)
        out["podPriority"] = self.pod_priority
        out["podType"] = self.pod_type.value
        return out

    @property
    def plan_key(self) -> tuple[int, int, int]:
        """(type rank, priority, 0 with a podSelector / 1 plain): what a plan must ascend by."""
        return (self.pod_type.rank, self.pod_priority, 0 if self.pod_selector is not None else 1)

    @property
    def sort_key(self) -> tuple[int, int, int, str]:
        return (*self.plan_key, _selector_string(self.pod_selector))

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, DrainPlanEntry):
            return NotImplemented
        return self.sort_key < other.sort_key

    def describe(self) -> str:
        """Short human form for messages: ``Default<=5000``, ``Default{app=db}<=2000``."""
        sel = f"{{{_selector_string(self.pod_selector)}}}" if self.pod_selector else ""
        return f"{self.pod_type.value}{sel}<={self.pod_priority}"


def _selector_to_dict(selector: LabelSelector) -> dict[str, Any]:
    match_labels: dict[str, str] = {}
    expressions: list[dict[str, Any]] = []
    for r in selector.requirements:
        match r.operator:
            case Operator.EQUALS if r.key not in match_labels:
                match_labels[r.key] = r.values[0]
            case Operator.EQUALS | Operator.IN:
                expressions.append({"key": r.key, "operator": "In", "values": list(r.values)})
            case Operator.NOT_EQUALS | Operator.NOT_IN:
                expressions.append({"key": r.key, "operator": "NotIn", "values": list(r.values)})
            case Operator.EXISTS:
                expressions.append({"key": r.key, "operator": "Exists"})
            case Operator.DOES_NOT_EXIST:
                expressions.append({"key": r.key, "operator": "DoesNotExist"})
    out: dict[str, Any] = {}
    if match_labels:
        out["matchLabels"] = match_labels
    if expressions:
        out["matchExpressions"] = expressions
    return out


def format_entries(entries: Iterable[DrainPlanEntry]) -> str:
    """``[Default<=10000, Default{app=db}<=10000]``, for messages and Events."""
    return "[" + ", ".join(e.describe() for e in entries) + "]"


_DEFAULT_PRIORITIES = (
    1_000_000_000,  # highest priority for user defined priority classes
    BUILTIN_PRIORITIES["system-cluster-critical"],
    BUILTIN_PRIORITIES["system-node-critical"],
    INT32_MAX,  # maximum value
)

DEFAULT_ENTRIES: tuple[DrainPlanEntry, ...] = tuple(
    DrainPlanEntry.plain(t, p) for t in PodType for p in _DEFAULT_PRIORITIES
)
"""The 12 entries KEP-4212 guarantees in every drainPlan, in plan order."""


def entries_from_dicts(raw: object, where: str) -> list[DrainPlanEntry]:
    """Parse a list of entry objects (e.g. stored drainTargets) without any ordering checks."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise InvalidPlan(f"{where}: must be a list")
    return [DrainPlanEntry.from_dict(d, f"{where}[{i}]") for i, d in enumerate(raw)]


def _order_problem(entry: DrainPlanEntry, prev: DrainPlanEntry, prev_index: int) -> str | None:
    if entry.pod_type.rank < prev.pod_type.rank:
        return (
            f"podType {entry.pod_type.value} comes after podType {prev.pod_type.value} "
            f"(entry {prev_index})"
        )
    if entry.pod_type == prev.pod_type and entry.pod_priority < prev.pod_priority:
        return (
            f"podPriority {entry.pod_priority} of type {entry.pod_type.value} comes after "
            f"podPriority {prev.pod_priority} (entry {prev_index})"
        )
    if entry.plan_key[:2] == prev.plan_key[:2] and entry.plan_key < prev.plan_key:
        return (
            f"an entry with a podSelector comes after the plain entry of the same podType and "
            f"podPriority (entry {prev_index}); concrete selectors must come first"
        )
    return None


def effective_plan(spec_drain_plan: Sequence[object] | None) -> list[DrainPlanEntry]:
    """``spec.drainPlan`` plus the missing :data:`DEFAULT_ENTRIES`, in plan order.

    The user's plan must already be ordered (KEP-4212 NodeMaintenanceSpec.DrainPlan: "podType
    fields should be in the following order: nil -> DaemonSet -> Static"; "priority fields
    should be in ascending order for each podType"; "If the priority and podType are the same,
    concrete selectors are executed first") and free of duplicates ("Duplicate entries are not
    allowed": same podType, podPriority and podSelector). Several selector entries of the same
    type and priority keep the user's order. Raises InvalidPlan naming the first bad entry.
    """
    if spec_drain_plan is None:
        return list(DEFAULT_ENTRIES)
    if isinstance(spec_drain_plan, str | bytes) or not isinstance(spec_drain_plan, Sequence):
        raise InvalidPlan("spec.drainPlan: must be a list")
    entries = entries_from_dicts(list(spec_drain_plan), "spec.drainPlan")
    seen: dict[DrainPlanEntry, int] = {}
    for i, entry in enumerate(entries):
        where = f"spec.drainPlan[{i}]"
        if entry in seen:
            raise InvalidPlan(f"{where}: duplicate of spec.drainPlan[{seen[entry]}]")
        seen[entry] = i
        if i > 0 and (problem := _order_problem(entry, entries[i - 1], i - 1)) is not None:
            raise InvalidPlan(
                f"{where}: {problem}; entries must be ordered Default, DaemonSet, Static by "
                f"ascending priority"
            )
    merged = entries + [d for d in DEFAULT_ENTRIES if d not in seen]
    merged.sort(key=lambda e: e.plan_key)  # stable: user order among equal keys survives
    return merged


@dataclass(frozen=True)
class PodClass:
    """What the drain plan needs to know about a pod."""

    pod_type: PodType
    priority: int
    skip: bool = False


def _is_daemonset_controller(ref: object) -> bool:
    return (
        isinstance(ref, Mapping)
        and ref.get("controller") is True
        and ref.get("kind") == "DaemonSet"
    )


def classify(pod: Mapping[str, Any]) -> PodClass:
    """Static for mirror pods (annotation ``kubernetes.io/config.mirror``), DaemonSet when the
    controlling ownerReference is a DaemonSet, else Default; ``spec.priority`` (0 when unset);
    ``skip`` for ``nodeagent.io/drain: skip``."""
    metadata = metadata_of(pod)
    annotations = mapping(metadata, "annotations")
    if MIRROR_ANNOTATION in annotations:
        pod_type = PodType.STATIC
    elif any(_is_daemonset_controller(ref) for ref in metadata.get("ownerReferences") or ()):
        pod_type = PodType.DAEMONSET
    else:
        pod_type = PodType.DEFAULT
    priority = mapping(pod, "spec").get("priority")
    if isinstance(priority, bool) or not isinstance(priority, int):
        priority = 0
    return PodClass(pod_type, priority, annotations.get(DRAIN_ANNOTATION) == DRAIN_SKIP)


def pod_labels(pod: Mapping[str, Any]) -> Mapping[str, str]:
    labels = mapping(metadata_of(pod), "labels")
    return {k: v for k, v in labels.items() if isinstance(v, str)}


def entry_covers(entry: DrainPlanEntry, pod_class: PodClass, labels: Mapping[str, str]) -> bool:
    """KEP DrainPlanEntry: same podType, "Pods with a priority less or equal to this value are
    selected", and the podSelector (if any) matches. ``skip`` is not looked at here."""
    return (
        entry.pod_type == pod_class.pod_type
        and pod_class.priority <= entry.pod_priority
        and (entry.pod_selector is None or entry.pod_selector.matches(labels))
    )


def targets_cover_class(
    targets: Iterable[DrainPlanEntry], pod_class: PodClass, labels: Mapping[str, str]
) -> bool:
    """Whether a node's drainTargets target a pod: some entry covers it, and it is not skipped.

    drainTargets accumulate (KEP "PodTypes and Label Selectors Progression": the Default entries
    stay in the list once DaemonSet entries appear), so one covering entry is enough.
    """
    if pod_class.skip:
        return False
    return any(entry_covers(e, pod_class, labels) for e in targets)


def targets_cover(targets: Iterable[DrainPlanEntry], pod: Mapping[str, Any]) -> bool:
    """:func:`targets_cover_class` for a pod object."""
    return targets_cover_class(targets, classify(pod), pod_labels(pod))
