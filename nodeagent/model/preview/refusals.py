"""The PodDisruptionBudgets that would refuse a pod's eviction now, as the Eviction API judges
them: one that allows no disruption, or several at once."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nodeagent.model.bodies import mapping, metadata_of
from nodeagent.model.draintargets.pods import PodInfo
from nodeagent.model.selectors import LabelSelector, SelectorError, label_selector_from_dict

__all__ = [
    "MULTIPLE_BUDGETS",
    "NO_DISRUPTION_ALLOWED",
    "Budget",
    "Refusal",
    "budgets_by_namespace",
    "refusals",
    "refusals_of",
]

NO_DISRUPTION_ALLOWED = "NoDisruptionAllowed"
"""The budget's ``status.disruptionsAllowed`` is 0 (or not computed yet): the Eviction API
answers 429."""
MULTIPLE_BUDGETS = "MultipleBudgets"
"""The pod is under more than one budget: the Eviction API refuses it whatever they allow."""


@dataclass(frozen=True)
class Refusal:
    """A PodDisruptionBudget (in the pod's namespace) that would refuse the pod's eviction."""

    budget: str
    reason: str
    """:data:`NO_DISRUPTION_ALLOWED` or :data:`MULTIPLE_BUDGETS`."""


@dataclass(frozen=True)
class Budget:
    namespace: str
    name: str
    selector: LabelSelector
    allowed: int


def budgets_by_namespace(pdbs: Iterable[Mapping[str, Any]]) -> dict[str, list[Budget]]:
    """By namespace. A budget whose selector cannot be parsed is left out (the API server's
    validation would not have let it in); an absent ``disruptionsAllowed`` counts as 0, its Go
    zero value: the Eviction API refuses under a budget whose status is not computed yet."""
    out: dict[str, list[Budget]] = {}
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
            Budget(namespace, str(md.get("name") or ""), selector, allowed)
        )
    return out


def refusals_of(info: PodInfo, budgets: Mapping[str, Sequence[Budget]]) -> tuple[Refusal, ...]:
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
    return refusals_of(PodInfo.from_pod(pod), budgets_by_namespace(pdbs))
