"""core/v1 NodeSelector: validation and matching, as k8s.io/component-helpers' node affinity
code does them (used by the controllers for a maintenance's nodeSelector and by the simulated
scheduler)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from nodeagent.model.selectors import field_value, string_list, validate_label_key

__all__ = ["node_selector_matches", "validate_node_selector"]

_NODE_OPERATORS = frozenset(("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"))
_INT64_RE = re.compile(r"[+-]?[0-9]+")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_NODE_FIELD_KEYS = frozenset(("metadata.name",))


def _parse_int64(s: str) -> int | None:
    """Go's strconv.ParseInt(s, 10, 64): no whitespace or underscores, unlike int()."""
    if not _INT64_RE.fullmatch(s):
        return None
    n = int(s)
    return n if _INT64_MIN <= n <= _INT64_MAX else None


def _node_expression_errors(req: object, where: str) -> list[str]:
    errors: list[str] = []
    if not isinstance(req, Mapping):
        return [f"{where}: must be an object"]
    key = req.get("key")
    if not isinstance(key, str):
        errors.append(f"{where}.key: must be a string")
    elif (why := validate_label_key(key)) is not None:
        errors.append(f"{where}.key: invalid label key {key!r}: {why}")
    op = req.get("operator")
    values = string_list(req.get("values"), f"{where}.values", errors)
    if op is None:
        errors.append(f"{where}.operator: must be specified")
    elif op not in _NODE_OPERATORS:
        errors.append(f'{where}.operator: unknown operator "{op}"')
    elif op in ("In", "NotIn") and not values:
        errors.append(f"{where}.values: must be non-empty when operator is In or NotIn")
    elif op in ("Exists", "DoesNotExist") and values:
        errors.append(f"{where}.values: must be empty when operator is Exists or DoesNotExist")
    elif op in ("Gt", "Lt"):
        if len(values) != 1:
            errors.append(f"{where}.values: must have exactly one element when operator is {op}")
        elif _parse_int64(values[0]) is None:
            errors.append(f"{where}.values[0]: must be an integer when operator is {op}")
    return errors


def _node_field_errors(req: object, where: str) -> list[str]:
    errors: list[str] = []
    if not isinstance(req, Mapping):
        return [f"{where}: must be an object"]
    if req.get("key") not in _NODE_FIELD_KEYS:
        errors.append(f"{where}.key: only metadata.name is supported")
    op = req.get("operator")
    values = string_list(req.get("values"), f"{where}.values", errors)
    if op is None:
        errors.append(f"{where}.operator: must be specified")
    elif op not in ("In", "NotIn"):
        errors.append(f'{where}.operator: "{op}" is not supported, only In and NotIn')
    elif len(values) != 1:
        errors.append(f"{where}.values: must have exactly one element for a field requirement")
    return errors


def _node_term_errors(term: object, where: str) -> list[str]:
    if not isinstance(term, Mapping):
        return [f"{where}: must be an object"]
    errors: list[str] = []
    for name, check in (
        ("matchExpressions", _node_expression_errors),
        ("matchFields", _node_field_errors),
    ):
        reqs = term.get(name)
        if reqs is None:
            continue
        if not isinstance(reqs, list):
            errors.append(f"{where}.{name}: must be a list")
            continue
        for i, req in enumerate(reqs):
            errors.extend(check(req, f"{where}.{name}[{i}]"))
    return errors


def validate_node_selector(ns: Mapping[str, Any]) -> list[str]:
    """Errors in a core/v1 NodeSelector, each prefixed with its field path; empty if valid."""
    terms = ns.get("nodeSelectorTerms")
    if terms is None or (isinstance(terms, list) and not terms):
        return ["nodeSelectorTerms: must have at least one node selector term"]
    if not isinstance(terms, list):
        return ["nodeSelectorTerms: must be a list"]
    errors: list[str] = []
    for i, term in enumerate(terms):
        errors.extend(_node_term_errors(term, f"nodeSelectorTerms[{i}]"))
    return errors


def _node_expression_matches(req: Mapping[str, Any], labels: Mapping[str, Any]) -> bool:
    key, op = req["key"], req["operator"]
    values: list[str] = req.get("values") or []
    present = key in labels
    match op:
        case "In":
            return present and labels[key] in values
        case "NotIn":
            return not present or labels[key] not in values
        case "Exists":
            return present
        case "DoesNotExist":
            return not present
        case _:  # Gt / Lt: both sides must be integers, and an absent label never matches
            if not present or not isinstance(labels[key], str):
                return False
            actual, bound = _parse_int64(labels[key]), _parse_int64(values[0])
            if actual is None or bound is None:
                return False
            return actual > bound if op == "Gt" else actual < bound


def _node_field_matches(req: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    equal = field_value(node, req["key"]) == req["values"][0]
    return equal if req["operator"] == "In" else not equal


def _node_term_matches(term: object, node: Mapping[str, Any], labels: Mapping[str, Any]) -> bool:
    # An invalid term matches nothing rather than failing the whole selector, as in
    # component-helpers' LazyErrorNodeSelector; an empty term also matches nothing.
    if _node_term_errors(term, "") or not isinstance(term, Mapping):
        return False
    expressions: Sequence[Mapping[str, Any]] = term.get("matchExpressions") or []
    fields: Sequence[Mapping[str, Any]] = term.get("matchFields") or []
    if not expressions and not fields:
        return False
    return all(_node_expression_matches(r, labels) for r in expressions) and all(
        _node_field_matches(r, node) for r in fields
    )


def node_selector_matches(node_selector: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """Whether ``node`` satisfies a core/v1 NodeSelector: terms are ORed, the requirements
    within a term ANDed. Invalid or empty terms never match; see validate_node_selector."""
    terms = node_selector.get("nodeSelectorTerms")
    if not isinstance(terms, list):
        return False
    metadata = node.get("metadata")
    labels = metadata.get("labels") if isinstance(metadata, Mapping) else None
    if not isinstance(labels, Mapping):
        labels = {}
    return any(_node_term_matches(term, node, labels) for term in terms)
