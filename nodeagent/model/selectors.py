"""Kubernetes label keys and values, label selectors (as objects) and field values as field
selectors compare them.

Pure functions over plain JSON-shaped objects, used by the controllers (which resolve
PodDisruptionBudget selectors). Semantics follow k8s.io/apimachinery's ``labels`` and
``validation`` packages. The simulated API server has its own implementation of these and of the
string forms (label and field selector syntax), which only it parses:
`nodeagent_testbed.sim.selectors`, held to this module by property tests. Node selectors:
:mod:`nodeagent.model.nodeselectors`; tolerations: :mod:`nodeagent.model.tolerations`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
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
    "string_list",
    "validate_label_key",
    "validate_label_value",
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


_SELECTOR_FIELDS = ("matchLabels", "matchExpressions")
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
    errors = [f"{name}: unknown field" for name in d if name not in _SELECTOR_FIELDS]
    requirements = [
        *_match_labels_requirements(d.get("matchLabels"), errors),
        *_match_expressions_requirements(d.get("matchExpressions"), errors),
    ]
    if errors:
        raise SelectorError("invalid label selector: " + "; ".join(errors))
    return LabelSelector(tuple(requirements))


def _match_labels_requirements(raw: object, errors: list[str]) -> list[Requirement]:
    """matchLabels' requirements (key=value each); what is wrong is reported in ``errors``."""
    if raw is None:
        return []
    if not isinstance(raw, Mapping):
        errors.append("matchLabels: must be an object")
        return []
    requirements: list[Requirement] = []
    for key, value in raw.items():
        where = f"matchLabels[{key!r}]"
        if not isinstance(value, str):
            errors.append(f"{where}: value must be a string")
        elif (why := _label_pair_problem(key, value)) is not None:
            errors.append(f"{where}: {why}")
        else:
            requirements.append(Requirement(key, Operator.EQUALS, (value,)))
    return requirements


def _match_expressions_requirements(raw: object, errors: list[str]) -> list[Requirement]:
    """matchExpressions' requirements; what is wrong is reported in ``errors``."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        errors.append("matchExpressions: must be a list")
        return []
    requirements: list[Requirement] = []
    for i, expr in enumerate(raw):
        req = _expression_requirement(expr, f"matchExpressions[{i}]", errors)
        if req is not None:
            requirements.append(req)
    return requirements


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
    values = string_list(expr.get("values"), f"{where}.values", errors)
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


def string_list(raw: object, where: str, errors: list[str]) -> list[str]:
    """The strings of a list field; what is not one is reported in ``errors``."""
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
