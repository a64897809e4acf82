"""Whether a PodDisruptionBudget would refuse an eviction now, read from the informers' cache.

The Eviction API refuses (429) while a budget that selects the pod allows no disruption. Calling
it anyway costs a request per pod per retry and says nothing the budget's status does not; so
the imperative interceptor asks only when the cached budget leaves room, and the budget's next
change (its watch event) wakes the pods that wait for it. The server stays the authority: this
only holds back calls that would certainly be refused, and a wait is bounded (the caller tries
anyway once in a while).

A budget that certainly refuses: exactly one budget selects the pod (with two the server refuses
in its own way, and says so), its status is current (observedGeneration), and it allows no
disruption beyond the evictions already let through at this version of it. An unready pod is
never held back: the server may let it go under the budget's unhealthy-pod policy.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from nodeagent.model.bodies import condition_true, mapping, metadata_of, version_of
from nodeagent.model.selectors import SelectorError, label_selector_from_dict

__all__ = [
    "WAITING_PREFIX",
    "BudgetGate",
    "BudgetLedger",
    "Spent",
    "budget_gate",
    "pod_ready",
    "to_wake",
]

WAITING_PREFIX = "Waiting for disruption budget "
"""How the imperative interceptor's message starts while a budget holds its eviction back."""


@dataclass(frozen=True)
class Spent:
    """Evictions the server accepted under one budget since it last wrote its status: the
    cached ``disruptionsAllowed`` does not count them yet."""

    resource_version: str
    count: int


@dataclass(frozen=True)
class BudgetGate:
    """The one budget that selects the pod, and whether it leaves room for an eviction now."""

    key: str
    """``namespace/name`` of the budget."""
    version: str
    """Its resourceVersion, against which evictions let through are counted."""
    room: int
    """Disruptions it allows beyond those already let through (0: it would refuse)."""

    @property
    def name(self) -> str:
        return self.key.partition("/")[2]

    def waiting_message(self) -> str:
        return (
            f"{WAITING_PREFIX}{self.name} to allow a disruption (it allows none now); "
            "the eviction is asked for when it does."
        )


def pod_ready(pod: Mapping[str, Any]) -> bool:
    return condition_true(pod, "Ready")


def to_wake(
    pdb: Mapping[str, Any],
    waiting: Iterable[tuple[str, int, Mapping[str, Any] | None]],
    in_flight: Iterable[str],
) -> list[str]:
    """Which evictions to ask for now that ``pdb`` (its new version) may allow disruptions:
    ``waiting`` is (key, refused attempts, pod) of each eviction held back or refused. Those of
    pods the budget selects, as many as it allows, refused most first, then by key. One whose
    eviction call is in flight takes no wake-up: it is being asked for already, and a wake-up
    it took would leave one that waits to its fallback (no further change of the budget may
    come)."""
    allowed = mapping(pdb, "status").get("disruptionsAllowed")
    if not isinstance(allowed, int) or allowed <= 0:
        return []
    raw = mapping(pdb, "spec").get("selector")
    if not isinstance(raw, Mapping):
        return []  # policy/v1: no selector selects no pod
    try:
        selector = label_selector_from_dict(raw)
    except SelectorError:
        return []
    namespace = metadata_of(pdb).get("namespace")
    busy = set(in_flight)
    ready = sorted(
        (-retries, key)
        for key, retries, pod in waiting
        if key not in busy
        and pod is not None
        and metadata_of(pod).get("namespace") == namespace
        and selector.matches(_labels(pod))
    )
    return [key for _, key in ready[:allowed]]


def _labels(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    labels = metadata_of(pod).get("labels")
    return labels if isinstance(labels, Mapping) else {}


def budget_gate(
    pod: Mapping[str, Any],
    budgets: Iterable[Mapping[str, Any]],
    spent: Mapping[str, Spent],
) -> BudgetGate | None:
    """The budget gating the eviction of ``pod``, or None when the server must be asked.

    ``budgets``: the PodDisruptionBudgets of the pod's namespace. ``spent``: evictions let
    through per budget key (see :class:`Spent`)."""
    labels = _labels(pod)
    selecting: list[Mapping[str, Any]] = []
    for pdb in budgets:
        raw = mapping(pdb, "spec").get("selector")
        if not isinstance(raw, Mapping):
            continue  # policy/v1: no selector selects no pod (an empty one selects all)
        try:
            selector = label_selector_from_dict(raw)
        except SelectorError:
            return None  # the server judges what we cannot read
        if selector.matches(labels):
            selecting.append(pdb)
    if len(selecting) != 1 or not pod_ready(pod):
        return None
    pdb = selecting[0]
    pdb_md = metadata_of(pdb)
    status = mapping(pdb, "status")
    allowed = status.get("disruptionsAllowed")
    generation = pdb_md.get("generation")
    if not isinstance(allowed, int) or status.get("observedGeneration") != generation:
        return None
    key = f"{pdb_md.get('namespace')}/{pdb_md.get('name')}"
    version = version_of(pdb)
    used = spent.get(key)
    let_through = used.count if used is not None and used.resource_version == version else 0
    return BudgetGate(key, version, max(0, allowed - let_through))


class BudgetLedger:
    """The evictions an evictor let through under each budget since the budget's cached status
    (shared by its workers): without it, each eviction after the first under a budget that
    allows several is asked for, refused and retried until the budget's status catches up."""

    def __init__(self) -> None:
        self._spent: dict[str, Spent] = {}  # budget key -> evictions let through at a version

    def gate(
        self, pod: Mapping[str, Any], budgets: Iterable[Mapping[str, Any]]
    ) -> BudgetGate | None:
        """:func:`budget_gate`, counting what was let through."""
        return budget_gate(pod, budgets, self._spent)

    def let_through(self, gate: BudgetGate | None, count: int = 1) -> None:
        """Count an eviction about to be asked for against its budget's cached allowance
        (synchronously, so concurrent workers see it before the call goes out); -1 takes back
        one the server refused. Without a gate (no one budget decides alone) nothing."""
        if gate is None:
            return
        spent = self._spent.get(gate.key)
        before = spent.count if spent is not None and spent.resource_version == gate.version else 0
        self._spent[gate.key] = Spent(gate.version, max(0, before + count))

    def seen(self, pdb: Mapping[str, Any]) -> None:
        """A budget's new version (its watch event): its status counts those evictions now."""
        md = metadata_of(pdb)
        key = _key(md)
        spent = self._spent.get(key)
        if spent is not None and spent.resource_version != md.get("resourceVersion"):
            del self._spent[key]

    def forget(self, pdb: Mapping[str, Any]) -> None:
        self._spent.pop(_key(metadata_of(pdb)), None)


def _key(md: Mapping[str, Any]) -> str:
    return f"{md.get('namespace')}/{md.get('name')}"
