"""Label and field selectors as kube-apiserver evaluates them: the sim's own, written apart from
the agent's `nodeagent.model.selectors` (a bug the two shared would pass every test on the sim;
tests/unit/sim/test_selector_strings.py holds them to each other over random input).

- Label keys and values are checked as k8s.io/apimachinery's `util/validation` does
  (`IsQualifiedName`, `IsValidLabelValue`), with its messages.
- `Requirement` and `LabelSelector` are `labels.Requirement` and `labels.Selector`, made by
  `new_requirement` (`labels.NewRequirement`), by parsing the string form a list or watch request
  carries (`parse_label_selector`, `labels.Parse`), or from a metav1.LabelSelector object
  (`label_selector_as_selector`, `metav1.LabelSelectorAsSelector`: null selects nothing, `{}`
  everything).
- `parse_field_selector` is `fields.ParseSelector`; `field_value` the value of a field as the
  server's field sets give it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from nodeagent_testbed.sim.errors import json_kind

__all__ = [
    "EVERYTHING",
    "NOTHING",
    "FieldRequirement",
    "FieldSelector",
    "LabelSelector",
    "Requirement",
    "SelectorError",
    "field_value",
    "label_key_errors",
    "label_selector_as_selector",
    "label_value_errors",
    "new_requirement",
    "parse_field_selector",
    "parse_label_selector",
]


class SelectorError(ValueError):
    """A selector string or object the server refuses; the message is the server's, as far as
    the sim words it so."""


# --- label keys and values (k8s.io/apimachinery/pkg/util/validation) ----------------------------

_QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE_FMT = f"({_QUALIFIED_NAME_FMT})?"
_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = f"{_DNS1123_LABEL_FMT}(\\.{_DNS1123_LABEL_FMT})*"
_QUALIFIED_NAME = re.compile(_QUALIFIED_NAME_FMT)
_LABEL_VALUE = re.compile(_LABEL_VALUE_FMT)
_DNS1123_SUBDOMAIN = re.compile(_DNS1123_SUBDOMAIN_FMT)
_QUALIFIED_NAME_MAX = 63
_LABEL_VALUE_MAX = 63
_DNS1123_SUBDOMAIN_MAX = 253


def _regex_error(what: str, fmt: str, *examples: str) -> str:
    """`validation.RegexError`: the rule, examples, and the regex itself."""
    shown = "".join(f"{' or ' if i else ''}'{e}', " for i, e in enumerate(examples))
    return f"{what} ({'e.g. ' + shown if examples else ''}regex used for validation is '{fmt}')"


_NAME_RULE = _regex_error(
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character",
    _QUALIFIED_NAME_FMT,
    "MyName",
    "my.name",
    "123-abc",
)


def _dns1123_subdomain_errors(value: str) -> list[str]:
    errors = []
    if len(value) > _DNS1123_SUBDOMAIN_MAX:
        errors.append(f"must be no more than {_DNS1123_SUBDOMAIN_MAX} characters")
    if not _DNS1123_SUBDOMAIN.fullmatch(value):
        rule = (
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
            "'-' or '.', and must start and end with an alphanumeric character"
        )
        errors.append(_regex_error(rule, _DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errors


def label_key_errors(key: str) -> list[str]:
    """`IsQualifiedName`: why `key` is no label key (an optional DNS subdomain and '/', then a
    name of at most 63 characters); empty if it is one."""
    parts = key.split("/")
    if len(parts) > 2:
        return [
            f"a qualified name {_NAME_RULE} with an optional DNS subdomain prefix and '/' "
            "(e.g. 'example.com/MyName')"
        ]
    errors = []
    if len(parts) == 2:
        if not parts[0]:
            errors.append("prefix part must be non-empty")
        else:
            errors += [f"prefix part {e}" for e in _dns1123_subdomain_errors(parts[0])]
    name = parts[-1]
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > _QUALIFIED_NAME_MAX:
        errors.append(f"name part must be no more than {_QUALIFIED_NAME_MAX} characters")
    if not _QUALIFIED_NAME.fullmatch(name):
        errors.append(f"name part {_NAME_RULE}")
    return errors


def label_value_errors(value: str) -> list[str]:
    """`IsValidLabelValue`: why `value` is no label value (empty is one); empty if it is one."""
    errors = []
    if len(value) > _LABEL_VALUE_MAX:
        errors.append(f"must be no more than {_LABEL_VALUE_MAX} characters")
    if not _LABEL_VALUE.fullmatch(value):
        rule = (
            "a valid label must be an empty string or consist of alphanumeric characters, '-', "
            "'_' or '.', and must start and end with an alphanumeric character"
        )
        errors.append(_regex_error(rule, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errors


# --- field errors, as k8s.io/apimachinery/pkg/util/validation/field prints them -----------------


_GO_ESCAPES: Mapping[str, str] = {
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
    "\\": "\\\\",
    '"': '\\"',
}


def _go_quote(text: str) -> str:
    """Go's `strconv.Quote` (`%q`), close enough: escapes, other unprintables by code."""
    out = []
    for c in text:
        if c in _GO_ESCAPES:
            out.append(_GO_ESCAPES[c])
        elif c.isprintable():
            out.append(c)
        elif ord(c) < 0x80:
            out.append(f"\\x{ord(c):02x}")
        else:
            out.append(f"\\u{ord(c):04x}" if ord(c) <= 0xFFFF else f"\\U{ord(c):08x}")
    return '"' + "".join(out) + '"'


def _go_value(value: str | Sequence[str] | None) -> str:
    """A bad value as `field.Invalid` shows it: a string quoted, a []string as Go's %#v."""
    if isinstance(value, str):
        return _go_quote(value)
    if value is None:
        return "[]string(nil)"
    return "[]string{" + ", ".join(_go_quote(v) for v in value) + "}"


def _invalid(path: str, value: str | Sequence[str] | None, detail: str) -> str:
    return f"{path}: Invalid value: {_go_value(value)}: {detail}"


def _aggregate(errors: list[str]) -> str:
    """`utilerrors.Aggregate.Error()`: one error as itself, more in brackets, each once."""
    unique = list(dict.fromkeys(errors))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"


def _child(path: str | None, name: str) -> str:
    return f"{path}.{name}" if path else name


# --- label requirements and selectors (k8s.io/apimachinery/pkg/labels) --------------------------

Operator = Literal["=", "==", "!=", "in", "notin", "exists", "!"]
"""`selection.Operator`s the sim supports (not Gt and Lt), spelt as Go spells them."""

_SET_OPERATORS = ("in", "notin")
_EXACT_OPERATORS = ("=", "==", "!=")
_UNARY_OPERATORS = ("exists", "!")


@dataclass(frozen=True)
class Requirement:
    """`labels.Requirement`: a key, an operator and its values (as given; `new_requirement`
    checks them)."""

    key: str
    operator: Operator
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.operator == "exists":
            return self.key in labels
        if self.operator == "!":
            return self.key not in labels
        found = self.key in labels and labels[self.key] in self.values
        # an absent label satisfies != and notin
        return found if self.operator in ("=", "==", "in") else not found

    def to_string(self) -> str:
        """`Requirement.String()`: `!k`, `k`, `k=v`, `k==v`, `k!=v`, `k in (a,b)` (values
        sorted)."""
        if self.operator == "!":
            return "!" + self.key
        if self.operator == "exists":
            return self.key
        values = ",".join(sorted(self.values))
        if self.operator in _SET_OPERATORS:
            return f"{self.key} {self.operator} ({values})"
        return f"{self.key}{self.operator}{values}"


def new_requirement(
    key: str, operator: Operator, values: Sequence[str] | None, path: str | None = None
) -> Requirement:
    """`labels.NewRequirement`: the requirement, or SelectorError with every reason the server
    gives against it (`values` None is Go's nil slice, which it prints differently)."""
    errors = []
    if why := label_key_errors(key):
        errors.append(_invalid(_child(path, "key"), key, "; ".join(why)))
    where = _child(path, "values")
    vals = tuple(values or ())
    if operator in _SET_OPERATORS and not vals:
        errors.append(
            _invalid(where, values, "for 'in', 'notin' operators, values set can't be empty")
        )
    elif operator in _EXACT_OPERATORS and len(vals) != 1:
        errors.append(
            _invalid(where, values, "exact-match compatibility requires one single value")
        )
    elif operator in _UNARY_OPERATORS and vals:
        errors.append(
            _invalid(where, values, "values set must be empty for exists and does not exist")
        )
    for i, value in enumerate(vals):
        if why := label_value_errors(value):
            errors.append(_invalid(f"{where}[{i}][{key}]", value, "; ".join(why)))
    if errors:
        raise SelectorError(_aggregate(errors))
    return Requirement(key, operator, vals)


@dataclass(frozen=True)
class LabelSelector:
    """`labels.Selector`: its requirements ANDed (none: everything), sorted by key as `Add`
    sorts them; `select_nothing` is `labels.Nothing()`, which matches no labels at all."""

    requirements: tuple[Requirement, ...] = ()
    select_nothing: bool = False

    def __post_init__(self) -> None:
        if self.select_nothing and self.requirements:
            raise SelectorError("labels.Nothing() takes no requirements")
        ordered = tuple(sorted(self.requirements, key=lambda r: r.key))
        object.__setattr__(self, "requirements", ordered)

    @property
    def is_everything(self) -> bool:
        """`Empty()`: the selector does not restrict anything."""
        return not self.requirements and not self.select_nothing

    def matches(self, labels: Mapping[str, str]) -> bool:
        return not self.select_nothing and all(r.matches(labels) for r in self.requirements)

    def to_string(self) -> str:
        """`Selector.String()`; SelectorError for `NOTHING`, which apimachinery prints as "",
        the string form of everything."""
        if self.select_nothing:
            raise SelectorError("the selector that matches nothing has no string form")
        return ",".join(r.to_string() for r in self.requirements)


EVERYTHING = LabelSelector()
NOTHING = LabelSelector(select_nothing=True)


# --- metav1.LabelSelector objects --------------------------------------------------------------

_EXPRESSION_OPERATORS: Mapping[str, Operator] = {
    "In": "in",
    "NotIn": "notin",
    "Exists": "exists",
    "DoesNotExist": "!",
}


def _cannot_decode(value: object, where: str, go_type: str) -> SelectorError:
    return SelectorError(
        f"json: cannot unmarshal {json_kind(value)} into Go struct field {where} of type {go_type}"
    )


def _decode_string(value: object, where: str) -> str:
    if value is None:
        return ""  # JSON null leaves a Go string its zero value
    if not isinstance(value, str):
        raise _cannot_decode(value, where, "string")
    return value


def _decode_strings(value: object, where: str) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise _cannot_decode(value, where, "[]string")
    return [_decode_string(v, where) for v in value]


@dataclass(frozen=True)
class _Expression:
    key: str
    operator: str
    values: list[str] | None


def _decode(obj: object) -> tuple[dict[str, str], list[_Expression]]:
    """A metav1.LabelSelector as the server's JSON decoder reads it (its default: fields it does
    not know dropped, null the zero value, a value of another type an error)."""
    if not isinstance(obj, Mapping):
        raise _cannot_decode(obj, "spec.selector", "v1.LabelSelector")
    raw_labels = obj.get("matchLabels")
    if raw_labels is not None and not isinstance(raw_labels, Mapping):
        raise _cannot_decode(raw_labels, "LabelSelector.matchLabels", "map[string]string")
    match_labels = {
        str(k): _decode_string(v, "LabelSelector.matchLabels")
        for k, v in (raw_labels or {}).items()
    }
    raw_expressions = obj.get("matchExpressions")
    if raw_expressions is not None and not isinstance(raw_expressions, list):
        raise _cannot_decode(
            raw_expressions, "LabelSelector.matchExpressions", "[]v1.LabelSelectorRequirement"
        )
    expressions = []
    for raw in raw_expressions or []:
        raw = {} if raw is None else raw
        if not isinstance(raw, Mapping):
            raise _cannot_decode(
                raw, "LabelSelector.matchExpressions", "v1.LabelSelectorRequirement"
            )
        expressions.append(
            _Expression(
                _decode_string(raw.get("key"), "LabelSelectorRequirement.key"),
                _decode_string(raw.get("operator"), "LabelSelectorRequirement.operator"),
                _decode_strings(raw.get("values"), "LabelSelectorRequirement.values"),
            )
        )
    return match_labels, expressions


def label_selector_as_selector(obj: object) -> LabelSelector:
    """`metav1.LabelSelectorAsSelector` of a selector object as the sim stores it: None (null)
    selects nothing, `{}` everything; the first invalid requirement is the error (matchLabels in
    key order, where Go's map order is random, then matchExpressions in order).

    The sim does not decode built-in objects as the server does before storing them, so this
    reads the object as the decoder would have: a misspelt `matchLabel` is dropped (the selector
    then selects every pod, as on a real cluster) and a null string is ""."""
    if obj is None:
        return NOTHING
    match_labels, expressions = _decode(obj)
    if not match_labels and not expressions:
        return EVERYTHING
    requirements = [new_requirement(k, "=", [v]) for k, v in sorted(match_labels.items())]
    for e in expressions:
        operator = _EXPRESSION_OPERATORS.get(e.operator)
        if operator is None:
            raise SelectorError(f"{_go_quote(e.operator)} is not a valid label selector operator")
        requirements.append(new_requirement(e.key, operator, e.values))
    return LabelSelector(tuple(requirements))


# --- the string form (labels.Parse) ------------------------------------------------------------

# Tokens of the selector string grammar. Identifiers run until whitespace or one of these.
_SPECIAL_CHARS = frozenset("=!(),<>")
_WHITESPACE = frozenset(" \t\r\n")  # the lexer's; other spaces are part of an identifier


@dataclass(frozen=True)
class _Token:
    kind: Literal["ident", "op", "end"]
    text: str
    pos: int


def _tokenize(s: str) -> Iterator[_Token]:
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if c in _WHITESPACE:
            i += 1
        elif c in _SPECIAL_CHARS:
            two = s[i : i + 2]
            if two in ("==", "!="):
                yield _Token("op", two, i)
                i += 2
            else:
                yield _Token("op", c, i)
                i += 1
        else:
            start = i
            while i < n and s[i] not in _WHITESPACE and s[i] not in _SPECIAL_CHARS:
                i += 1
            yield _Token("ident", s[start:i], start)
    yield _Token("end", "", n)


_BINARY_OPERATORS: Mapping[str, Operator] = {
    "=": "=",
    "==": "==",
    "!=": "!=",
    "in": "in",
    "notin": "notin",
}


class _LabelParser:
    def __init__(self, s: str) -> None:
        self._s = s
        self._tokens = list(_tokenize(s))
        self._i = 0

    def _peek(self) -> _Token:
        return self._tokens[self._i]

    def _next(self) -> _Token:
        tok = self._tokens[self._i]
        if tok.kind != "end":
            self._i += 1
        return tok

    def _fail(self, problem: str) -> SelectorError:
        return SelectorError(f"invalid label selector {self._s!r}: {problem}")

    def _unexpected(self, tok: _Token, expected: str) -> SelectorError:
        if tok.kind == "end":
            return self._fail(f"unexpected end of selector, expected {expected}")
        if tok.text in ("<", ">"):
            return self._fail(f"'{tok.text}' at position {tok.pos}: Gt/Lt are not supported")
        return self._fail(f"found {tok.text!r} at position {tok.pos}, expected {expected}")

    def parse(self) -> LabelSelector:
        if self._peek().kind == "end":
            return EVERYTHING
        requirements = [self._requirement()]
        while (tok := self._next()).kind != "end":
            if tok.text != ",":
                raise self._unexpected(tok, "',' or end of selector")
            requirements.append(self._requirement())
        return LabelSelector(tuple(requirements))

    def _key(self) -> str:
        tok = self._next()
        if tok.kind != "ident":
            raise self._unexpected(tok, "a label key")
        if why := label_key_errors(tok.text):
            # the parser's field path is nil, and printed so
            raise SelectorError(_invalid("<nil>", tok.text, "; ".join(why)))
        return tok.text

    def _requirement(self) -> Requirement:
        if self._peek().text == "!":
            self._next()
            return new_requirement(self._key(), "!", [])
        key = self._key()
        tok = self._peek()
        if tok.kind == "end" or tok.text == ",":
            return new_requirement(key, "exists", [])
        self._next()
        op = _BINARY_OPERATORS.get(tok.text)
        if op in _EXACT_OPERATORS:
            nxt = self._peek()
            if nxt.kind == "end" or nxt.text == ",":
                return new_requirement(key, op, [""])  # `a=`: the empty value
            if nxt.kind != "ident":
                raise self._unexpected(nxt, f"a value after {key}{tok.text}")
            return new_requirement(key, op, [self._next().text])
        if op is not None:
            # a set: its values sorted, each once
            return new_requirement(key, op, sorted(set(self._value_set(key, tok.text))))
        raise self._unexpected(tok, f"an operator (=, ==, !=, in, notin) after {key!r}")

    def _value_set(self, key: str, op: str) -> list[str]:
        tok = self._next()
        if tok.text != "(":
            raise self._unexpected(tok, f"'(' after {key} {op}")
        values: list[str] = []
        current = ""  # an element left empty, as in `(a,,b)` or `()`, is the empty value
        while True:
            tok = self._next()
            if tok.kind == "ident":
                if current:
                    raise self._unexpected(tok, f"',' or ')' in the values of {key!r}")
                current = tok.text
            elif tok.text in (",", ")"):
                values.append(current)
                current = ""
                if tok.text == ")":
                    return values
            else:
                raise self._unexpected(tok, f"a value, ',' or ')' in the values of {key!r}")


def parse_label_selector(s: str) -> LabelSelector:
    """`labels.Parse`: ``a=b``, ``a==b``, ``a!=b``, ``a in (x,y)``, ``a notin (x)``, ``a``,
    ``!a``, comma separated (not Gt and Lt: ``a>1``). The empty string matches everything.
    Syntax errors are the sim's words; an invalid key or value the server's."""
    return _LabelParser(s).parse()


# --- field selectors ---------------------------------------------------------------------------


# Field paths are dotted names; anything else (an escape, '!', whitespace) cannot round-trip
# through the string form and names no field the API server supports anyway.
_FIELD_PATH_RE = re.compile(r"[A-Za-z0-9_\-]+(?:\.[A-Za-z0-9_\-]+)*")


# The server builds a field set from the Go struct, so an omitted bool or int field reads as its
# zero value, not "": `spec.unschedulable=false` (how clients ask for schedulable nodes) matches a
# node never cordoned. The selectable fields of this kind the sim serves.
_GO_ZERO_VALUES: Mapping[str, str] = {
    "spec.hostNetwork": "false",  # pods
    "spec.unschedulable": "false",  # nodes
    "status.replicas": "0",  # replica sets
}


def field_value(obj: Mapping[str, Any], path: str) -> str | None:
    """The value a field selector compares at the dotted `path`: a string as it is, a bool as
    `true`/`false`, a number in decimal; missing (or null, or under a scalar) as "" or the Go
    zero value of the field; None for an object or list, which equals no value."""
    value: Any = obj
    for name in path.split("."):
        if not isinstance(value, Mapping):
            value = None
            break
        value = value.get(name)
    if value is None:
        return _GO_ZERO_VALUES.get(path, "")
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return f"{value}"
    return None


@dataclass(frozen=True)
class FieldRequirement:
    field: str
    operator: Literal["=", "!="]
    value: str

    def __post_init__(self) -> None:
        if not _FIELD_PATH_RE.fullmatch(self.field):
            raise SelectorError(f"invalid field path {self.field!r}")
        if self.operator not in ("=", "!="):
            raise SelectorError(f"{self.field}: unknown operator {self.operator!r}")

    def matches(self, obj: Mapping[str, Any]) -> bool:
        actual = field_value(obj, self.field)
        equal = actual is not None and actual == self.value
        return equal if self.operator == "=" else not equal

    def to_string(self) -> str:
        return f"{self.field}{self.operator}{_escape_field_value(self.value)}"


@dataclass(frozen=True)
class FieldSelector:
    """A conjunction of field requirements; no requirements matches everything."""

    requirements: tuple[FieldRequirement, ...] = ()

    @property
    def is_everything(self) -> bool:
        return not self.requirements

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return all(r.matches(obj) for r in self.requirements)

    def requires_exact_match(self, field_path: str) -> str | None:
        """The value ``field_path`` must equal for a match, if the selector pins it down
        (lets the API server serve ``spec.nodeName=x`` from an index)."""
        for r in self.requirements:
            if r.field == field_path and r.operator == "=":
                return r.value
        return None

    def to_string(self) -> str:
        return ",".join(r.to_string() for r in self.requirements)


_FIELD_ESCAPES = {"\\": "\\\\", ",": "\\,", "=": "\\="}


def _escape_field_value(value: str) -> str:
    return "".join(_FIELD_ESCAPES.get(c, c) for c in value)


def _split_unescaped(s: str, sep: str) -> list[str]:
    parts: list[str] = []
    start, i = 0, 0
    while i < len(s):
        if s[i] == "\\":
            i += 2
            continue
        if s[i] == sep:
            parts.append(s[start:i])
            start = i + 1
        i += 1
    parts.append(s[start:])
    return parts


def _split_field_term(term: str) -> tuple[str, Literal["=", "!="], str] | None:
    i = 0
    while i < len(term):
        if term[i] == "\\":
            i += 2
            continue
        for op in ("!=", "==", "="):
            if term.startswith(op, i):
                return term[:i], ("!=" if op == "!=" else "="), term[i + len(op) :]
        i += 1
    return None


def _unescape_field_value(raw: str, selector: str) -> str:
    out: list[str] = []
    chars = iter(raw)
    for c in chars:
        if c == "\\":
            nxt = next(chars, None)
            if nxt is None or nxt not in _FIELD_ESCAPES:
                seq = "\\" + (nxt or "")
                raise SelectorError(
                    f"invalid field selector {selector!r}: invalid escape sequence {seq!r} "
                    f"in value {raw!r}"
                )
            out.append(nxt)
        elif c in ",=":
            raise SelectorError(
                f"invalid field selector {selector!r}: unescaped {c!r} in value {raw!r}"
            )
        else:
            out.append(c)
    return "".join(out)


def parse_field_selector(s: str) -> FieldSelector:
    """Parse ``a=b``, ``a==b``, ``a!=b`` terms separated by commas.

    Values may escape ``\\``, ``,`` and ``=`` with a backslash, as in apimachinery. Whitespace
    around field names and values is ignored (no field a selector can name has any).
    """
    requirements: list[FieldRequirement] = []
    for part in _split_unescaped(s, ","):
        if not part.strip():
            continue
        split = _split_field_term(part)
        if split is None:
            raise SelectorError(
                f"invalid field selector {s!r}: {part.strip()!r} has no operator (=, ==, !=)"
            )
        name, op, raw = split
        name = name.strip()
        if not name:
            raise SelectorError(f"invalid field selector {s!r}: {part.strip()!r} has no field")
        if not _FIELD_PATH_RE.fullmatch(name):
            raise SelectorError(f"invalid field selector {s!r}: invalid field path {name!r}")
        requirements.append(FieldRequirement(name, op, _unescape_field_value(raw.strip(), s)))
    return FieldSelector(tuple(requirements))
