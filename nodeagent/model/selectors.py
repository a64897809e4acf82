"""Kubernetes label selectors (as objects), node selectors and taint toleration.

Pure functions over plain JSON-shaped objects, used by the controllers (which resolve
PodDisruptionBudget selectors, node affinity and tolerations) and by the simulated API server.
Semantics follow k8s.io/apimachinery's ``labels`` package and k8s.io/component-helpers' node
affinity code. The string forms (label and field selector syntax) only the simulated API
server parses: `nodeagent_testbed.sim.selectors`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

__all__ = [
    "DNS_SUBDOMAIN",
    "DNS_SUBDOMAIN_MAX",
    "LabelSelector",
    "Operator",
    "Requirement",
    "SelectorError",
    "field_value",
    "label_selector_from_dict",
    "node_selector_matches",
    "tolerates",
    "validate_label_key",
    "validate_label_value",
    "validate_node_selector",
]


class SelectorError(ValueError):
    """A selector string or object is malformed; the message names the offending part."""


# --- label keys and values (apimachinery/pkg/util/validation) ---------------------------------

_NAME_RE = re.compile(r"(?:[A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
DNS_SUBDOMAIN = re.compile(r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*")
"""An RFC 1123 DNS subdomain (use ``fullmatch``): object names, label key prefixes, host names."""
DNS_SUBDOMAIN_MAX = 253
"""The longest DNS subdomain, hence the longest name of most objects."""
_NAME_MAX = 63


def validate_label_key(key: str) -> str | None:
    """Return why ``key`` is not a valid label key (a qualified name), or None if it is."""
    prefix, slash, name = key.rpartition("/")
    if slash:
        if not prefix:
            return "prefix part must be non-empty"
        if "/" in prefix:
            return "a qualified name may contain at most one '/'"
        if len(prefix) > DNS_SUBDOMAIN_MAX:
            return f"prefix part must be no more than {DNS_SUBDOMAIN_MAX} characters"
        if not DNS_SUBDOMAIN.fullmatch(prefix):
            return "prefix part must be a lowercase DNS subdomain"
    if not name:
        return "name part must be non-empty"
    if len(name) > _NAME_MAX:
        return f"name part must be no more than {_NAME_MAX} characters"
    if not _NAME_RE.fullmatch(name):
        return (
            "name part must consist of alphanumeric characters, '-', '_' or '.', "
            "and must start and end with an alphanumeric character"
        )
    return None


def validate_label_value(value: str) -> str | None:
    """Return why ``value`` is not a valid label value, or None if it is (empty is valid)."""
    if not value:
        return None
    if len(value) > _NAME_MAX:
        return f"must be no more than {_NAME_MAX} characters"
    if not _NAME_RE.fullmatch(value):
        return (
            "must consist of alphanumeric characters, '-', '_' or '.', "
            "and must start and end with an alphanumeric character"
        )
    return None


# --- label selectors ---------------------------------------------------------------------------


class Operator(StrEnum):
    """Label requirement operators; values are the spelling used in selector strings."""

    EQUALS = "="
    NOT_EQUALS = "!="
    IN = "in"
    NOT_IN = "notin"
    EXISTS = "exists"
    DOES_NOT_EXIST = "!"


_SET_OPERATORS = (Operator.IN, Operator.NOT_IN)
_SINGLE_VALUE_OPERATORS = (Operator.EQUALS, Operator.NOT_EQUALS)


@dataclass(frozen=True)
class Requirement:
    """One ``key <op> values`` term. Set operators keep their values sorted and unique so
    that equal requirements compare equal whatever order the values were written in."""

    key: str
    operator: Operator
    values: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # Validated here too, so a selector built in code always has a string form the API
        # server accepts.
        if (why := validate_label_key(self.key)) is not None:
            raise SelectorError(f"invalid label key {self.key!r}: {why}")
        for value in self.values:
            if (why := validate_label_value(value)) is not None:
                raise SelectorError(f"{self.key}: invalid label value {value!r}: {why}")
        if self.operator in _SET_OPERATORS:
            if not self.values:
                raise SelectorError(f"{self.key}: values must be non-empty for {self.operator}")
            object.__setattr__(self, "values", tuple(sorted(set(self.values))))
        elif self.operator in _SINGLE_VALUE_OPERATORS:
            if len(self.values) != 1:
                raise SelectorError(
                    f"{self.key}: exactly one value is required for {self.operator}"
                )
        elif self.values:
            raise SelectorError(f"{self.key}: values must be empty for {self.operator.name}")

    def matches(self, labels: Mapping[str, str]) -> bool:
        match self.operator:
            case Operator.EXISTS:
                return self.key in labels
            case Operator.DOES_NOT_EXIST:
                return self.key not in labels
            case Operator.EQUALS | Operator.IN:
                return self.key in labels and labels[self.key] in self.values
            case Operator.NOT_EQUALS | Operator.NOT_IN:
                # Absent labels satisfy negative requirements, as in apimachinery.
                return self.key not in labels or labels[self.key] not in self.values

    def to_string(self) -> str:
        match self.operator:
            case Operator.EXISTS:
                return self.key
            case Operator.DOES_NOT_EXIST:
                return f"!{self.key}"
            case Operator.EQUALS | Operator.NOT_EQUALS:
                return f"{self.key}{self.operator}{self.values[0]}"
            case Operator.IN | Operator.NOT_IN:
                return f"{self.key} {self.operator} ({','.join(self.values)})"


@dataclass(frozen=True)
class LabelSelector:
    """A conjunction of requirements. No requirements matches everything; ``nothing()`` (what
    a null metav1.LabelSelector converts to) matches no object at all."""

    requirements: tuple[Requirement, ...] = ()
    match_nothing: bool = False

    def __post_init__(self) -> None:
        if self.match_nothing and self.requirements:
            raise SelectorError("a match-nothing selector cannot carry requirements")
        # Stable sort by key, like apimachinery, so equal selectors compare equal.
        object.__setattr__(
            self, "requirements", tuple(sorted(self.requirements, key=lambda r: r.key))
        )

    @classmethod
    def everything(cls) -> LabelSelector:
        return cls()

    @classmethod
    def nothing(cls) -> LabelSelector:
        return cls(match_nothing=True)

    @property
    def is_everything(self) -> bool:
        return not self.requirements and not self.match_nothing

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.match_nothing:
            return False
        return all(r.matches(labels) for r in self.requirements)

    def to_string(self) -> str:
        """The selector string syntax, e.g. ``app=web,tier in (a,b)``.

        Raises SelectorError for the match-nothing selector: it has no string form, and the
        empty string would mean the opposite (apimachinery renders it as "" anyway, which is
        exactly the bug a list call must not inherit).
        """
        if self.match_nothing:
            raise SelectorError("the match-nothing selector has no string form")
        return ",".join(r.to_string() for r in self.requirements)


_SELECTOR_OPERATORS = {
    "In": Operator.IN,
    "NotIn": Operator.NOT_IN,
    "Exists": Operator.EXISTS,
    "DoesNotExist": Operator.DOES_NOT_EXIST,
}


def label_selector_from_dict(d: Mapping[str, Any] | None) -> LabelSelector:
    """Convert a metav1.LabelSelector object.

    ``None`` converts to the match-nothing selector, as apimachinery's LabelSelectorAsSelector
    does (a PodDisruptionBudget with a null selector selects no pods); where null means "all"
    (e.g. a NetworkPolicy podSelector) the caller decides before calling. ``{}`` matches
    everything. Unknown fields are rejected: a misspelt ``matchLabel`` would otherwise turn
    into an empty selector that matches every pod.
    """
    if d is None:
        return LabelSelector.nothing()
    errors: list[str] = []
    requirements: list[Requirement] = []
    for name in d:
        if name not in ("matchLabels", "matchExpressions"):
            errors.append(f"{name}: unknown field")

    match_labels = d.get("matchLabels")
    if match_labels is not None:
        if not isinstance(match_labels, Mapping):
            errors.append("matchLabels: must be an object")
        else:
            for key, value in match_labels.items():
                where = f"matchLabels[{key!r}]"
                if not isinstance(value, str):
                    errors.append(f"{where}: value must be a string")
                elif (why := _label_pair_problem(key, value)) is not None:
                    errors.append(f"{where}: {why}")
                else:
                    requirements.append(Requirement(key, Operator.EQUALS, (value,)))

    expressions = d.get("matchExpressions")
    if expressions is not None:
        if not isinstance(expressions, list):
            errors.append("matchExpressions: must be a list")
        else:
            for i, expr in enumerate(expressions):
                req = _expression_requirement(expr, f"matchExpressions[{i}]", errors)
                if req is not None:
                    requirements.append(req)

    if errors:
        raise SelectorError("invalid label selector: " + "; ".join(errors))
    return LabelSelector(tuple(requirements))


def _label_pair_problem(key: str, value: str) -> str | None:
    if (why := validate_label_key(key)) is not None:
        return f"invalid label key {key!r}: {why}"
    if (why := validate_label_value(value)) is not None:
        return f"invalid label value {value!r}: {why}"
    return None


def _expression_requirement(expr: object, where: str, errors: list[str]) -> Requirement | None:
    if not isinstance(expr, Mapping):
        errors.append(f"{where}: must be an object")
        return None
    before = len(errors)
    key = expr.get("key")
    if not isinstance(key, str):
        errors.append(f"{where}.key: must be a string")
    elif (why := validate_label_key(key)) is not None:
        errors.append(f"{where}.key: invalid label key {key!r}: {why}")
    raw_op = expr.get("operator")
    op = _SELECTOR_OPERATORS.get(raw_op) if isinstance(raw_op, str) else None
    if raw_op is None:
        errors.append(f"{where}.operator: must be specified")
    elif op is None:
        errors.append(f'{where}.operator: unknown operator "{raw_op}"')
    values = _string_list(expr.get("values"), f"{where}.values", errors)
    if op in _SET_OPERATORS and not values:
        errors.append(f"{where}.values: must be non-empty when operator is In or NotIn")
    elif op in (Operator.EXISTS, Operator.DOES_NOT_EXIST) and values:
        errors.append(f"{where}.values: must be empty when operator is Exists or DoesNotExist")
    for j, value in enumerate(values):
        if (why := validate_label_value(value)) is not None:
            errors.append(f"{where}.values[{j}]: invalid label value {value!r}: {why}")
    if len(errors) > before or op is None or not isinstance(key, str):
        return None
    return Requirement(key, op, tuple(values))


def _string_list(raw: object, where: str, errors: list[str]) -> list[str]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        errors.append(f"{where}: must be a list of strings")
        return []
    values: list[str] = []
    for j, value in enumerate(raw):
        if isinstance(value, str):
            values.append(value)
        else:
            errors.append(f"{where}[{j}]: must be a string")
    return values


# The API server builds field sets from Go structs, so an omitted bool or int field reads as
# its zero value there, not as "". Without this, `spec.unschedulable=false` (how clients ask
# for schedulable nodes) would never match a node that was never cordoned.
_ZERO_VALUES: Mapping[str, str] = {
    "spec.unschedulable": "false",
    "spec.hostNetwork": "false",
    "status.replicas": "0",
}


def field_value(obj: Mapping[str, Any], path: str) -> str | None:
    """The string form of a dotted field path as field selectors compare it.

    Missing fields (and nulls) read as "" (or the Go zero value of the few selectable bool and
    int fields), booleans as "true"/"false", numbers in decimal. Objects and lists return None,
    which equals no selector value.
    """
    current: Any = obj
    for part in path.split("."):
        current = current.get(part) if isinstance(current, Mapping) else None
    if current is None:
        return _ZERO_VALUES.get(path, "")
    if isinstance(current, bool):
        return "true" if current else "false"
    if isinstance(current, str | int | float):
        return str(current)
    return None


# --- node selectors (core/v1 NodeSelector) -----------------------------------------------------

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
    values = _string_list(req.get("values"), f"{where}.values", errors)
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
    values = _string_list(req.get("values"), f"{where}.values", errors)
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


# --- taints and tolerations --------------------------------------------------------------------


def _toleration_tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    # core/v1 Toleration.ToleratesTaint; an empty effect or key is a wildcard for that part.
    effect = toleration.get("effect") or ""
    if effect and effect != (taint.get("effect") or ""):
        return False
    key = toleration.get("key") or ""
    if key and key != (taint.get("key") or ""):
        return False
    match toleration.get("operator") or "Equal":
        case "Equal":
            return bool((toleration.get("value") or "") == (taint.get("value") or ""))
        case "Exists":
            return True
        case _:
            return False


def tolerates(tolerations: Sequence[Mapping[str, Any]], taint: Mapping[str, Any]) -> bool:
    """Whether any of ``tolerations`` tolerates ``taint`` (core/v1 semantics: operator Equal by
    default, Exists ignores the value, an empty key with Exists matches every taint, an empty
    effect matches every effect)."""
    return any(_toleration_tolerates(t, taint) for t in tolerations)
