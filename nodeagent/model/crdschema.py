"""What a CRD's structural schema refuses in an object, as kube-apiserver checks it on a create
under `kubectl apply`'s strict field validation: unknown fields, `type`, `nullable`, `enum`,
`required`, `minimum`/`maximum`, `minLength`/`maxLength`, `minItems`/`maxItems`,
`maxProperties`, `items` and `additionalProperties`. Messages are worded as the API server
words them. Not checked: CEL rules (`x-kubernetes-validations`; a new object's are transition
rules here), `pattern`, `format`, defaults. Pure; `nodeagent plan` uses it on a file, so that it
refuses what the API server would."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

__all__ = ["schema_errors"]

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
}


def schema_errors(value: Any, schema: Mapping[str, Any], path: str) -> list[str]:
    """``path: message`` for each thing the schema refuses in ``value`` (empty: none)."""
    return list(_check(value, schema, path))


def _check(value: Any, schema: Mapping[str, Any], path: str) -> Iterator[str]:
    if value is None:
        if not schema.get("nullable"):
            yield f"{path}: Invalid value: null: must not be null"
        return
    kind = schema.get("type")
    if kind is not None and not _is(value, kind):
        yield f'{path}: Invalid value: "{_type_name(value)}": {path} in body must be of type {kind}'
        return
    yield from _bounds(value, schema, path)
    if isinstance(value, dict):
        yield from _object(value, schema, path)
    elif isinstance(value, list) and isinstance(items := schema.get("items"), Mapping):
        for i, item in enumerate(value):
            yield from _check(item, items, f"{path}[{i}]")


def _is(value: Any, kind: str) -> bool:
    if isinstance(value, bool):
        return kind == "boolean"
    return isinstance(value, _TYPES.get(kind, (object,)))


def _type_name(value: Any) -> str:
    for name in _TYPES:
        if _is(value, name):
            return "integer" if name == "number" and isinstance(value, int) else name
    return type(value).__name__


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


_SIZED: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
}

# keyword -> (what it bounds, True for a lower bound, what the API server says: {v} the value,
# {n} its size, {limit} the keyword's value)
_BOUNDS: dict[str, tuple[str, bool, str]] = {
    "minimum": ("number", True, "Invalid value: {v}: should be greater than or equal to {limit}"),
    "maximum": ("number", False, "Invalid value: {v}: should be less than or equal to {limit}"),
    "minLength": ("string", True, 'Invalid value: "{v}": should be at least {limit} chars long'),
    "maxLength": ("string", False, "Too long: may not be more than {limit} bytes"),
    "minItems": ("array", True, "Invalid value: {n}: should have at least {limit} items"),
    "maxItems": ("array", False, "Too many: {n}: must have at most {limit} items"),
    "maxProperties": ("object", False, "Too many: {n}: must have at most {limit} items"),
}


def _bounds(value: Any, schema: Mapping[str, Any], path: str) -> Iterator[str]:
    if "enum" in schema and value not in schema["enum"]:
        supported = ", ".join(f'"{v}"' for v in schema["enum"])
        yield f'{path}: Unsupported value: "{value}": supported values: {supported}'
    for keyword, (bounded, lower, said) in _BOUNDS.items():
        limit = schema.get(keyword)
        if limit is None:
            continue
        if bounded == "number":
            if not _number(value):
                continue
            size = value
        elif _SIZED[bounded](value):
            size = len(value)
        else:
            continue
        if size < limit if lower else size > limit:
            yield f"{path}: " + said.format(v=value, n=size, limit=limit)


def _object(value: dict[Any, Any], schema: Mapping[str, Any], path: str) -> Iterator[str]:
    properties: Mapping[str, Any] = schema.get("properties") or {}
    for name in schema.get("required") or ():
        if name not in value:
            yield f"{path}.{name}: Required value"
    extra = schema.get("additionalProperties")
    for key, item in value.items():
        where = f"{path}.{key}"
        if key in properties:
            yield from _check(item, properties[key], where)
        elif isinstance(extra, Mapping):
            yield from _check(item, extra, where)
        elif not (extra is True or schema.get("x-kubernetes-preserve-unknown-fields")):
            yield f'unknown field "{where}"'
