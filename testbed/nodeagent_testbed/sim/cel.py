"""CEL rules (`x-kubernetes-validations`) of custom resources, as kube-apiserver runs them.

`compile_rules` turns a version's `openAPIV3Schema` into a `Rules` tree once per CRD (the parsed
programs are shared by rule text across CRDs); `Rules.validate` evaluates it on every write, after
the structural schema found nothing that blocks it (`schema.admit_custom`). What
apiextensions-apiserver's `schema/cel` does, with the same wording:

- Rules run at every level of the schema that declares them (properties, `additionalProperties`,
  `items`, `allOf`), with `self` the value there, never on a null value.
- `self` is typed by the schema: `date-time`/`date` strings are timestamps, `duration` strings
  durations, `byte` strings bytes; lists with `x-kubernetes-list-type: map` or `set` compare equal
  whatever their order. At a resource root `metadata` shows only `name` and `generateName`.
- A rule that uses `oldSelf` (a transition rule) runs only when the old object has a value at that
  level: object fields correlate by name, list items only in `x-kubernetes-list-type: map` lists
  (by their map keys), `additionalProperties` by key. With `optionalOldSelf: true` it also runs
  without one, `oldSelf` being an optional (`hasValue()`, `value()`, `orValue(x)`).
- Ratcheting (CRDValidationRatcheting, on by default): a rule without `oldSelf` that fails on a
  value equal to the old one (or, where that value does not correlate, whose nearest correlated
  ancestor is equal) is a warning, not an error; the sim drops it.
- A failure is `<path>: Invalid value: <value>: <message>` (`reason` Forbidden, Required or
  Duplicate give those forms), the value omitted for objects and arrays; the path gets
  `fieldPath` appended; the message is `messageExpression`'s result, else `message`, else
  `failed rule: <rule>`. A runtime error is `<path>: Invalid value: "<type>": <error> evaluating
  rule: <rule>`. A root path is `<nil>`, as field.Path prints it.

The library is cel-python (celpy), pure Python. Not covered: type checking at CRD creation (only
syntax and `fieldPath` are checked), cost budgets, the Kubernetes CEL libraries (lists, regex,
quantity, url, ip, ...) and optional syntax (`?.`, `optional.of`): our CRDs use none of them.
"""

from __future__ import annotations

import base64
import functools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import celpy
import lark
from celpy import celtypes
from celpy.adapter import json_to_cel
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError

from nodeagent_testbed.sim.schema import ROOT_PATH, Cause, Schema, render

__all__ = ["Rules", "compile_rules"]

_MESSAGE_EXPRESSION_MAX = 5 * 1024  # celconfig.MaxEvaluatedMessageExpressionSizeBytes
_REASONS = {
    "FieldValueForbidden": "Forbidden",
    "FieldValueRequired": "Required value",
    "FieldValueDuplicate": "Duplicate value",
}
# CEL keywords and reserved words: property names that are escaped as __<name>__
_RESERVED = frozenset(
    [
        "as",
        "break",
        "const",
        "continue",
        "else",
        "false",
        "for",
        "function",
        "if",
        "import",
        "in",
        "let",
        "loop",
        "package",
        "namespace",
        "null",
        "return",
        "true",
        "var",
        "void",
        "while",
    ]
)
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


# --- values ------------------------------------------------------------------------------------


class _Optional:
    """CEL's optional type, as `oldSelf` is for an `optionalOldSelf` rule."""

    def __init__(self, value: Any) -> None:
        self.value = value


def _has_value(o: _Optional) -> celtypes.BoolType:
    return celtypes.BoolType(_optional(o).value is not None)


def _value(o: _Optional) -> Any:
    if _optional(o).value is None:
        raise ValueError("optional.none() dereference")
    return o.value


def _or_value(o: _Optional, default: Any) -> Any:
    return default if _optional(o).value is None else o.value


def _optional(o: Any) -> _Optional:
    if not isinstance(o, _Optional):
        raise TypeError("no such overload")
    return o


_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "hasValue": _has_value,
    "value": _value,
    "orValue": _or_value,
}


class _MapList(celtypes.ListType):
    """A list with x-kubernetes-list-type map: equal to a list with the same entries, by key, in
    any order (unstructuredMapList.Equal)."""

    def __init__(self, items: list[Any], keys: tuple[str, ...]) -> None:
        super().__init__(items)
        self.keys = tuple(_escape(k) for k in keys)  # as the items' CEL maps name them

    def _key(self, item: Any) -> tuple[Any, ...]:
        return tuple(item.get(k) if isinstance(item, dict) else None for k in self.keys)

    def __eq__(self, other: Any) -> bool:
        if not isinstance(other, list):
            raise TypeError(f"no such overload: list == {type(other).__name__}")
        if len(self) != len(other):
            return False
        mine = {self._key(i): i for i in self}
        seen = set()
        for item in other:
            k = self._key(item)
            if k not in mine or not bool(mine[k] == item):
                return False
            seen.add(k)
        return len(seen) == len(mine)

    def __ne__(self, other: Any) -> bool:
        return not self.__eq__(other)

    __hash__ = None  # type: ignore[assignment]


class _SetList(celtypes.ListType):
    """A list with x-kubernetes-list-type set: equal to a list of the same elements in any order
    (unstructuredSetList.Equal)."""

    def __eq__(self, other: Any) -> bool:
        if not isinstance(other, list):
            raise TypeError(f"no such overload: list == {type(other).__name__}")
        return (
            len(self) == len(other)
            and all(any(bool(a == b) for b in other) for a in self)
            and all(any(bool(a == b) for b in self) for a in other)
        )

    def __ne__(self, other: Any) -> bool:
        return not self.__eq__(other)

    __hash__ = None  # type: ignore[assignment]


_META_SCHEMA: Schema = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "generateName": {"type": "string"}},
}
_STRING: Schema = {"type": "string"}


def _escape(name: str) -> str:
    """cel.Escape: a property name as CEL sees it."""
    if name in _RESERVED:
        return f"__{name}__"
    if _IDENT.fullmatch(name):
        return name
    out = name.replace("__", "__underscores__")
    for ch, word in ((".", "dot"), ("-", "dash"), ("/", "slash")):
        out = out.replace(ch, f"__{word}__")
    return out


def _to_cel(s: Schema, x: Any, resource_root: bool = False) -> Any:
    """A JSON value as CEL sees it under schema `s` (UnstructuredToVal)."""
    if x is None:
        return None
    resource_root = resource_root or s.get("x-kubernetes-embedded-resource") is True
    if s.get("x-kubernetes-int-or-string") is True:
        return celtypes.StringType(x) if isinstance(x, str) else celtypes.IntType(x)
    t = s.get("type")
    if t == "object" and isinstance(x, dict):
        props: dict[str, Any] | None = s.get("properties")
        addl = s.get("additionalProperties")
        out = celtypes.MapType()
        if props is not None or resource_root:
            for k, v in x.items():
                if v is None:
                    continue  # a null field of an object is as good as absent
                if resource_root and k == "metadata" and isinstance(v, dict):
                    sub, v = _META_SCHEMA, {n: v[n] for n in ("name", "generateName") if n in v}
                elif props is not None and k in props:
                    sub = props[k]
                elif resource_root and k in ("apiVersion", "kind"):
                    sub = _STRING
                else:
                    continue
                out[celtypes.StringType(_escape(k))] = _to_cel(sub, v)
            return out
        if isinstance(addl, dict):
            for k, v in x.items():
                out[celtypes.StringType(k)] = _to_cel(addl, v)
            return out
        return json_to_cel(x) if s.get("x-kubernetes-preserve-unknown-fields") else out
    if t == "array" and isinstance(x, list):
        items: Schema = s.get("items") or {}
        elems = [_to_cel(items, v) for v in x]
        list_type = s.get("x-kubernetes-list-type")
        if list_type == "map":
            return _MapList(elems, tuple(s.get("x-kubernetes-list-map-keys") or ()))
        if list_type == "set":
            return _SetList(elems)
        return celtypes.ListType(elems)
    if t == "string" and isinstance(x, str):
        fmt = s.get("format")
        if fmt in ("date-time", "date"):
            return celtypes.TimestampType(x if fmt == "date-time" else f"{x}T00:00:00Z")
        if fmt == "duration":
            return celtypes.DurationType(x)
        if fmt == "byte":
            return celtypes.BytesType(base64.b64decode(x))
        return celtypes.StringType(x)
    if t == "integer" and isinstance(x, int | float) and not isinstance(x, bool):
        return celtypes.IntType(int(x))
    if t == "number" and isinstance(x, int | float) and not isinstance(x, bool):
        return celtypes.DoubleType(x)
    return json_to_cel(x)


# --- compilation -------------------------------------------------------------------------------


_ENV = celpy.Environment()


@functools.lru_cache(maxsize=1024)
def _program(text: str) -> tuple[celpy.Runner, bool]:
    """The program of a CEL expression and whether it refers to `oldSelf`; raises CELParseError."""
    ast = _ENV.compile(text)
    uses_old_self = any(
        isinstance(t, lark.Token) and t.type == "IDENT" and t.value == "oldSelf"
        for t in ast.scan_values(lambda v: isinstance(v, lark.Token))
    )
    return _ENV.program(ast, functions=_FUNCTIONS), uses_old_self


@dataclass(frozen=True)
class _Rule:
    rule: str
    program: celpy.Runner
    uses_old_self: bool
    optional_old_self: bool
    message: str  # ruleMessageOrDefault
    error_string: str  # ruleErrorString: how a runtime error names the rule
    message_expression: celpy.Runner | None
    field_path: str  # normalized fieldPath, "" for none
    reason: str | None


@dataclass
class Rules:
    """The x-kubernetes-validations of one schema node and of the nodes below it that have any."""

    schema: Schema  # the node's structural schema (its types)
    resource_root: bool
    rules: list[_Rule] = field(default_factory=list)
    properties: dict[str, Rules] = field(default_factory=dict)
    additional: Rules | None = None
    items: Rules | None = None
    all_of: list[Rules] = field(default_factory=list)

    def validate(self, obj: Any, old: Any) -> list[Cause]:
        """The failures of the rules on a write of `obj` over `old` (None on create)."""
        out: list[Cause] = []
        self._validate(obj, old, None, False, out)
        return out

    def _validate(
        self, obj: Any, old: Any, path: str | None, parent_equal: bool, out: list[Cause]
    ) -> None:
        if obj is None:
            return
        equal = bool(obj == old) if old is not None else parent_equal
        if self.rules:
            self._run(obj, old, path, equal, out)
        for a in self.all_of:
            a._validate(obj, old, path, parent_equal, out)
        if isinstance(obj, list) and self.items is not None:
            old_items = _correlate_items(self.schema, old)
            for i, v in enumerate(obj):
                self.items._validate(v, old_items(v), f"{path or ''}[{i}]", equal, out)
        elif isinstance(obj, dict):
            old_map = old if isinstance(old, dict) else {}
            for k, v in obj.items():
                sub = self.properties.get(k) if k in self.properties else self.additional
                if sub is not None:
                    sub._validate(v, old_map.get(k), _child(path, k), equal, out)

    def _run(self, obj: Any, old: Any, path: str | None, equal: bool, out: list[Cause]) -> None:
        self_val = _to_cel(self.schema, obj, self.resource_root)
        uses_old_self = any(r.uses_old_self for r in self.rules)
        old_val = _to_cel(self.schema, old, self.resource_root) if uses_old_self else None
        type_name = self.schema.get("type") or ""
        for r in self.rules:
            if r.uses_old_self and old is None and not r.optional_old_self:
                continue
            activation: dict[str, Any] = {"self": self_val}
            if r.uses_old_self:
                activation["oldSelf"] = _Optional(old_val) if r.optional_old_self else old_val
            try:
                result = r.program.evaluate(activation)
            except CELEvalError as e:
                out.append((path or ROOT_PATH, _runtime_error(e, r, type_name)))
                continue
            if isinstance(result, bool | celtypes.BoolType) and result:
                continue
            if not r.uses_old_self and equal:
                continue  # ratcheted: a warning on the real server
            detail = r.message
            if r.message_expression is not None:
                detail = _message(r.message_expression, self_val, old_val) or detail
            where = path or ROOT_PATH
            if r.field_path:
                where = f"{path}.{r.field_path}" if path else r.field_path
            out.append((where, _failure(r.reason, self.schema, obj, detail)))


def _child(path: str | None, key: str) -> str:
    return f"{path}.{key}" if path else key


def _correlate_items(s: Schema, old: Any) -> Callable[[Any], Any]:
    """The old item each new item is compared with: by map keys in a map list, else none."""
    keys = s.get("x-kubernetes-list-map-keys") or []
    if s.get("x-kubernetes-list-type") != "map" or not keys or not isinstance(old, list):
        return lambda _: None

    def key(item: Any) -> tuple[Any, ...] | None:
        if not isinstance(item, dict) or any(k not in item for k in keys):
            return None
        values = tuple(item[k] for k in keys)
        scalar = all(isinstance(v, str | int | float | bool) for v in values)
        return values if scalar else None

    by_key: dict[tuple[Any, ...], Any] = {}
    for item in old:
        k = key(item)
        if k is not None:
            by_key.setdefault(k, item)  # the first item with the key, as MapList.Get

    def old_item(item: Any) -> Any:
        k = key(item)
        return None if k is None else by_key.get(k)

    return old_item


def _failure(reason: str | None, s: Schema, value: Any, detail: str) -> str:
    """fieldErrorForReason's body."""
    shown = "" if s.get("type") in ("object", "array") else f": {render(value)}"
    if reason in ("FieldValueForbidden", "FieldValueRequired"):
        return f"{_REASONS[reason]}: {detail}"
    if reason == "FieldValueDuplicate":
        return f"Duplicate value{shown}"
    return f"Invalid value{shown}: {detail}"


def _runtime_error(e: CELEvalError, r: _Rule, type_name: str) -> str:
    text = _error_text(e)
    if text.startswith("no such overload"):
        detail = (
            f"'{text}': call arguments did not match a supported operator, function or macro "
            f"signature for rule: {r.error_string}"
        )
    else:
        detail = f"{text} evaluating rule: {r.error_string}"
    return f"Invalid value: {render(type_name)}: {detail}"


def _error_text(e: BaseException) -> str:
    """cel-go's words for celpy's errors, where they differ (celpy nests its errors in args)."""
    while isinstance(e, CELEvalError) and len(e.args) >= 3 and e.args[0] == "evaluation error":
        inner = e.args[2]
        if not (isinstance(inner, tuple) and inner):
            break
        e = CELEvalError(*inner)
    first = str(e.args[0]) if e.args else str(e)
    m = re.match(r"no such member in mapping: '(.*)'$", first)
    if m:
        return f"no such key: {m.group(1)}"
    return first


def _message(program: celpy.Runner, self_val: Any, old_val: Any) -> str | None:
    """A messageExpression's result, or None where kube-apiserver falls back to the message."""
    activation: dict[str, Any] = {"self": self_val}
    if old_val is not None:
        activation["oldSelf"] = old_val
    try:
        value = program.evaluate(activation)
    except CELEvalError:
        return None
    if not isinstance(value, str):
        return None
    text = value.strip()
    if not text or "\n" in text or len(text.encode()) > _MESSAGE_EXPRESSION_MAX:
        return None
    return text


def _normalize_field_path(json_path: str, s: Schema) -> str:
    """ValidFieldPath: `.a.b` or `['a.b']` through the schema's properties (or map keys), as
    field.Path prints the result; raises ValueError for a path the schema does not have."""
    out = ""
    for name in _tokens(json_path):
        props = s.get("properties")
        addl = s.get("additionalProperties")
        if props is not None:
            if name not in props:
                raise ValueError("does not refer to a valid field")
            s = props[name]
            out = f"{out}.{name}" if out else name
        elif isinstance(addl, dict):
            s = addl
            out = f"{out}[{name}]"
        else:
            raise ValueError("does not refer to a valid field")
    return out


def _tokens(json_path: str) -> Iterator[str]:
    i = 0
    while i < len(json_path):
        if json_path[i] == ".":
            m = re.compile(r"[^.\[\]]+").match(json_path, i + 1)
            if m is None:
                raise ValueError("unexpected end of JSON path")
            yield m.group(0)
            i = m.end()
        elif json_path.startswith("['", i):
            end = json_path.find("']", i + 2)
            if end < 0:
                raise ValueError("expected ] but got end of JSON path")
            yield json_path[i + 2 : end].replace("\\'", "'").replace("\\\\", "\\")
            i = end + 2
        else:
            raise ValueError(f"expected [ or . but got: {json_path[i:]}")


def compile_rules(
    schema: Schema | None, where: str = "openAPIV3Schema"
) -> tuple[Rules | None, list[Cause]]:
    """The rules of a version's schema (None if it declares none) and the problems that make
    kube-apiserver refuse the CRD: rules that do not parse, fieldPaths the schema lacks."""
    if schema is None:
        return None, []
    problems: list[Cause] = []
    return _build(schema, schema, True, where, problems), problems


def _build(
    vs: Schema, ns: Schema, resource_root: bool, where: str, problems: list[Cause]
) -> Rules | None:
    node = Rules(schema=ns, resource_root=resource_root)
    for i, decl in enumerate(vs.get("x-kubernetes-validations") or []):
        rule = _compile_rule(decl, ns, f"{where}.x-kubernetes-validations[{i}]", problems)
        if rule is not None:
            node.rules.append(rule)
    vprops: dict[str, Any] = vs.get("properties") or {}
    nprops: dict[str, Any] = ns.get("properties") or {}
    for k, sub in vprops.items():
        if isinstance(sub, dict) and isinstance(nprops.get(k), dict):
            child = _build(
                sub,
                nprops[k],
                nprops[k].get("x-kubernetes-embedded-resource") is True,
                f"{where}.properties[{k}]",
                problems,
            )
            if child is not None:
                node.properties[k] = child
    for key, attr in (("additionalProperties", "additional"), ("items", "items")):
        vsub, nsub = vs.get(key), ns.get(key)
        if isinstance(vsub, dict) and isinstance(nsub, dict):
            embedded = nsub.get("x-kubernetes-embedded-resource") is True
            setattr(node, attr, _build(vsub, nsub, embedded, f"{where}.{key}", problems))
    for i, sub in enumerate(vs.get("allOf") or []):
        if isinstance(sub, dict):
            child = _build(sub, ns, resource_root, f"{where}.allOf[{i}]", problems)
            if child is not None:
                node.all_of.append(child)
    if node.rules or node.properties or node.additional or node.items or node.all_of:
        return node
    return None


def _compile_rule(decl: Any, ns: Schema, where: str, problems: list[Cause]) -> _Rule | None:
    if not isinstance(decl, dict) or not isinstance(decl.get("rule"), str):
        problems.append((f"{where}.rule", "Required value"))
        return None
    text: str = decl["rule"]
    try:
        program, uses_old_self = _program(text)
    except CELParseError as e:
        problems.append(
            (f"{where}.rule", f"Invalid value: {render(text)}: compilation failed: {e}")
        )
        return None
    message_expression = None
    if isinstance(decl.get("messageExpression"), str):
        try:
            message_expression = _program(decl["messageExpression"])[0]
        except CELParseError as e:
            problems.append(
                (
                    f"{where}.messageExpression",
                    f"Invalid value: {render(decl['messageExpression'])}: "
                    f"messageExpression compilation failed: {e}",
                )
            )
    field_path = ""
    if isinstance(decl.get("fieldPath"), str) and decl["fieldPath"]:
        try:
            field_path = _normalize_field_path(decl["fieldPath"], ns)
        except ValueError as e:
            problems.append(
                (f"{where}.fieldPath", f"Invalid value: {render(decl['fieldPath'])}: {e}")
            )
    optional_old_self = decl.get("optionalOldSelf") is True
    if optional_old_self and not uses_old_self:
        problems.append(
            (
                f"{where}.optionalOldSelf",
                "Forbidden: may not be set if oldSelf is not used in rule",
            )
        )
    message = str(decl.get("message") or "").strip()
    return _Rule(
        rule=text,
        program=program,
        uses_old_self=uses_old_self,
        optional_old_self=optional_old_self,
        message=message or f"failed rule: {text.strip()}",
        error_string=message or text.strip(),
        message_expression=message_expression,
        field_path=field_path,
        reason=decl.get("reason") if isinstance(decl.get("reason"), str) else None,
    )
