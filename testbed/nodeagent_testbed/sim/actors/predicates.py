"""The scheduler's predicates the simulated actors use, the sim's own (as
k8s.io/component-helpers writes them: `ToleratesTaint`, `MatchNodeSelectorTerms`), not the
agent's `nodeagent.model.tolerations` and `nodeagent.model.nodeselectors`: a bug the two share
would pass every test on the sim. `tests/unit/sim/actors/test_predicates.py` holds them to each
other over random input, and to examples of the scheduler's."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["any_tolerates", "node_matches_terms"]

_INT64 = re.compile(r"[+-]?[0-9]+")
_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
_PREFIX = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_INT64_RANGE = range(-(2**63), 2**63)


def _tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """`Toleration.ToleratesTaint`: an effect and key left empty match any; Exists ignores the
    value; any other operator than Equal and Exists tolerates nothing."""
    if toleration.get("effect") and toleration.get("effect") != taint.get("effect"):
        return False
    if toleration.get("key") and toleration.get("key") != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    return operator == "Equal" and (toleration.get("value") or "") == (taint.get("value") or "")


def any_tolerates(tolerations: Iterable[Mapping[str, Any]], taint: Mapping[str, Any]) -> bool:
    return any(_tolerates(t, taint) for t in tolerations)


def _label_key(key: str) -> bool:
    """A qualified name: an optional DNS subdomain prefix and a slash, then a name."""
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _PREFIX.fullmatch(prefix)):
        return False
    return _NAME.fullmatch(name) is not None


def _integer(text: object) -> int | None:
    if not isinstance(text, str) or not _INT64.fullmatch(text):
        return None
    value = int(text)
    return value if value in _INT64_RANGE else None


def _expression(requirement: Any, labels: Mapping[str, Any]) -> bool | None:
    """One matchExpressions requirement against the labels; None: the requirement is invalid
    (its term then matches nothing)."""
    if not isinstance(requirement, Mapping) or not isinstance(requirement.get("key"), str):
        return None
    if not _label_key(requirement["key"]):
        return None
    key, operator = requirement["key"], requirement.get("operator")
    values = requirement.get("values") or []
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        return None
    has, value = key in labels, labels.get(key)
    if operator in ("In", "NotIn"):
        if not values:
            return None
        return bool((has and value in values) == (operator == "In"))
    if operator in ("Exists", "DoesNotExist"):
        if values:
            return None
        return bool(has == (operator == "Exists"))
    if operator in ("Gt", "Lt"):
        bound = _integer(values[0]) if len(values) == 1 else None
        if bound is None:
            return None
        actual = _integer(value) if has else None
        if actual is None:
            return False
        return actual > bound if operator == "Gt" else actual < bound
    return None


def _field(requirement: Any, node: Mapping[str, Any]) -> bool | None:
    """One matchFields requirement: only metadata.name, In or NotIn with one value."""
    if not isinstance(requirement, Mapping) or requirement.get("key") != "metadata.name":
        return None
    values = requirement.get("values")
    operator = requirement.get("operator")
    if operator not in ("In", "NotIn") or not isinstance(values, list) or len(values) != 1:
        return None
    same = (node.get("metadata") or {}).get("name") == values[0]
    return bool(same == (operator == "In"))


def _term(term: Any, node: Mapping[str, Any], labels: Mapping[str, Any]) -> bool:
    if not isinstance(term, Mapping):
        return False
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not isinstance(expressions, list) or not isinstance(fields, list):
        return False
    if not expressions and not fields:
        return False  # an empty term matches no node
    answers = [_expression(r, labels) for r in expressions] + [_field(r, node) for r in fields]
    if None in answers:
        return False  # an invalid requirement voids its term, not the selector
    return all(answers)


def node_matches_terms(selector: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """A NodeSelector's terms ORed, each term's requirements ANDed."""
    terms = selector.get("nodeSelectorTerms")
    if not isinstance(terms, list):
        return False
    labels = (node.get("metadata") or {}).get("labels")
    labels = labels if isinstance(labels, Mapping) else {}
    return any(_term(t, node, labels) for t in terms)
