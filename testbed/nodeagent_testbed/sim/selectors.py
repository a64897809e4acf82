"""The string forms of label and field selectors, as kube-apiserver parses them from a list or
watch request (k8s.io/apimachinery's ``labels`` and ``fields`` packages): only the simulated API
server needs them; the agent builds selector objects (`nodeagent.model.selectors`)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from nodeagent.model.selectors import (
    LabelSelector,
    Operator,
    Requirement,
    SelectorError,
    field_value,
    validate_label_key,
    validate_label_value,
)

__all__ = [
    "FieldRequirement",
    "FieldSelector",
    "parse_field_selector",
    "parse_label_selector",
]


# Tokens of the selector string grammar. Identifiers run until whitespace or one of these.
_SPECIAL_CHARS = frozenset("=!(),<>")


@dataclass(frozen=True)
class _Token:
    kind: Literal["ident", "op", "end"]
    text: str
    pos: int


def _tokenize(s: str) -> Iterator[_Token]:
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if c.isspace():
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
            while i < n and not s[i].isspace() and s[i] not in _SPECIAL_CHARS:
                i += 1
            yield _Token("ident", s[start:i], start)
    yield _Token("end", "", n)


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
            return LabelSelector()
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
        if (why := validate_label_key(tok.text)) is not None:
            raise self._fail(f"invalid label key {tok.text!r}: {why}")
        return tok.text

    def _value(self, tok: _Token) -> str:
        if (why := validate_label_value(tok.text)) is not None:
            raise self._fail(f"invalid label value {tok.text!r}: {why}")
        return tok.text

    def _requirement(self) -> Requirement:
        if self._peek().text == "!":
            self._next()
            return Requirement(self._key(), Operator.DOES_NOT_EXIST)
        key = self._key()
        tok = self._peek()
        if tok.kind == "end" or tok.text == ",":
            return Requirement(key, Operator.EXISTS)
        self._next()
        if tok.text in ("=", "==", "!="):
            op = Operator.NOT_EQUALS if tok.text == "!=" else Operator.EQUALS
            nxt = self._peek()
            if nxt.kind == "end" or nxt.text == ",":
                return Requirement(key, op, ("",))  # `a=` compares against the empty value
            if nxt.kind != "ident":
                raise self._unexpected(nxt, f"a value after {key}{tok.text}")
            return Requirement(key, op, (self._value(self._next()),))
        if tok.kind == "ident" and tok.text in ("in", "notin"):
            op = Operator.IN if tok.text == "in" else Operator.NOT_IN
            return Requirement(key, op, self._value_set(key, tok.text))
        raise self._unexpected(tok, f"an operator (=, ==, !=, in, notin) after {key!r}")

    def _value_set(self, key: str, op: str) -> tuple[str, ...]:
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
                current = self._value(tok)
            elif tok.text in (",", ")"):
                values.append(current)
                current = ""
                if tok.text == ")":
                    return tuple(values)
            else:
                raise self._unexpected(tok, f"a value, ',' or ')' in the values of {key!r}")


def parse_label_selector(s: str) -> LabelSelector:
    """Parse the label selector string syntax (``a=b``, ``a==b``, ``a!=b``, ``a in (x,y)``,
    ``a notin (x)``, ``a``, ``!a``, comma separated). The empty string matches everything."""
    return _LabelParser(s).parse()


# --- field selectors ---------------------------------------------------------------------------


# Field paths are dotted names; anything else (an escape, '!', whitespace) cannot round-trip
# through the string form and names no field the API server supports anyway.
_FIELD_PATH_RE = re.compile(r"[A-Za-z0-9_\-]+(?:\.[A-Za-z0-9_\-]+)*")


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
