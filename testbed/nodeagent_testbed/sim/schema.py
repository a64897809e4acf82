"""Structural schemas of custom resources, handled as kube-apiserver handles them for CRDs.

Writes of a custom resource go through `admit_custom`, which does what the apiextensions-apiserver
does with the version's `openAPIV3Schema`, in the same order:

1. **Pruning** (`prune`): fields not declared in `properties` are dropped, unless the object's
   schema says `x-kubernetes-preserve-unknown-fields: true` or gives `additionalProperties`.
   `apiVersion`, `kind` and `metadata` always stay at the root (and inside
   `x-kubernetes-embedded-resource` objects); `metadata` itself is not pruned here.
2. **Defaulting** (`apply_defaults`): a property with a `default` that is missing, or `null` while
   not `nullable`, gets a deep copy of the default; defaulting recurses into existing objects, into
   array items and into the defaults just applied. A `null` that is neither nullable nor defaulted
   is dropped, as `PruneNonNullableNullsWithoutDefaults` does.
3. **Validation** (`validate`): `type` (incl. `x-kubernetes-int-or-string`), `nullable`, `enum`,
   `required`, `minimum`/`maximum` (+ `exclusiveMinimum`/`exclusiveMaximum`), `multipleOf`,
   `minLength`/`maxLength`, `pattern`, `format` (`date-time` and `date`, loosely; other formats are
   not checked), `minItems`/`maxItems`, `minProperties`/`maxProperties`, `items`,
   `additionalProperties`, `allOf`/`anyOf`/`oneOf`/`not` (with terse messages), and
   `x-kubernetes-list-type: set|map` uniqueness (reported after the schema errors, as the real
   server does). `metadata.name` must be a DNS-1123 subdomain.

Errors are `(field path, message)` pairs such as
``("spec.drainPlan[2].podType", 'Unsupported value: "Foo": supported values: "Default", "Static"')``
worded as the API server words them (field.Error bodies built from go-openapi messages), ready for
`nodeagent_testbed.sim.errors.invalid`.

4. **CEL rules** (`x-kubernetes-validations`, `nodeagent_testbed.sim.cel`), given the CRD's
   compiled `Rules` and the old object on update, unless a schema error of a kind that blocks them
   (unsupported value, required, too long, too many, wrong type) was found: then one more error
   says they were not checked, as kube-apiserver's.

Not covered: validation ratcheting of the schema checks on update; `x-kubernetes-map-type`;
pruning of unknown `metadata` fields; formats other than `date-time`/`date`. Patterns are Python
regular expressions (close to RE2 for the patterns CRDs use).

`validate_crd_schema` performs the light structural checks a CRD's schema gets on create.
Everything here is pure: no I/O, inputs other than the object being admitted are not modified.
"""

from __future__ import annotations

import copy
import datetime
import json
import math
import re
from typing import TYPE_CHECKING, Any, TypeGuard

from nodeagent_testbed.sim.errors import cause_type

if TYPE_CHECKING:
    from nodeagent_testbed.sim.cel import Rules

Schema = dict[str, Any]
Cause = tuple[str, str]  # (field path, message)

__all__ = [
    "ROOT_PATH",
    "Cause",
    "Schema",
    "admit_custom",
    "apply_defaults",
    "prune",
    "render",
    "validate",
    "validate_crd_schema",
    "validate_name",
]

_ROOT_FIELDS = ("apiVersion", "kind", "metadata")
_TYPES = ("array", "boolean", "integer", "number", "object", "string")
_LIST_TYPES = ("atomic", "map", "set")

_DNS1123_SUBDOMAIN_FMT = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_DNS1123_SUBDOMAIN = re.compile(_DNS1123_SUBDOMAIN_FMT)
_DNS1123_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    f"for validation is '{_DNS1123_SUBDOMAIN_FMT}')"
)
_DNS1123_SUBDOMAIN_MAX = 253

# go-openapi's strfmt accepts RFC 3339 and a few ISO 8601 variants; so do we, loosely
_DATE_TIME = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?"
    r"(?:[Zz]|[+-]\d{2}:?\d{2})?$"
)
_DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})$")
# schema errors after which kube-apiserver does not run the CEL rules (hasBlockingErr)
_BLOCKING = frozenset(
    (
        "FieldValueNotSupported",
        "FieldValueRequired",
        "FieldValueTooLong",
        "FieldValueTooMany",
        "FieldValueTypeInvalid",
    )
)
# the field of an error about the whole object: field.Path prints a nil path so
ROOT_PATH = "<nil>"
_NOT_CHECKED: Cause = (
    ROOT_PATH,
    "Invalid value: null: some validation rules were not checked because the object was invalid; "
    "correct the existing errors to complete validation",
)


# --- public API --------------------------------------------------------------------------------


def admit_custom(
    schema: Schema | None,
    obj: dict[str, Any],
    old: dict[str, Any] | None = None,
    rules: Rules | None = None,
    dropped: list[str] | None = None,
) -> list[Cause]:
    """Prune, default and validate a custom resource in place, as the API server does on write;
    `old` is the stored object on update, `rules` the schema's compiled CEL rules, `dropped`
    gets the paths of the fields pruning dropped.

    Returns the validation errors (empty when the object is valid). With no schema only the name
    is checked and the object is kept as it is.
    """
    causes = validate_name(obj)
    dropped = dropped if dropped is not None else []
    if schema is not None:
        dropped.extend(prune(schema, obj))
        apply_defaults(schema, obj)
        causes.extend(validate(schema, obj))
        if rules is not None:
            if any(cause_type(m) in _BLOCKING for _, m in causes):
                causes.append(_NOT_CHECKED)
            else:
                causes.extend(rules.validate(obj, old))
    return causes


def prune(schema: Schema | None, obj: dict[str, Any]) -> list[str]:
    """Drop unknown fields from `obj` in place; returns their paths (for unknown-field warnings)."""
    dropped: list[str] = []
    if schema is not None:
        _prune(schema, obj, "", dropped, root=True)
    return dropped


def apply_defaults(schema: Schema | None, obj: dict[str, Any]) -> None:
    """Apply `default`s in place and drop nulls that are neither nullable nor defaulted."""
    if schema is not None:
        _default(schema, obj, root=True)


def validate(schema: Schema, obj: Any) -> list[Cause]:
    """The schema violations of `obj` (assumed pruned and defaulted); unknown fields are ignored."""
    v = _Validator()
    v.node(schema, obj, "", root=True)
    return v.causes + v.list_causes


def validate_name(obj: dict[str, Any]) -> list[Cause]:
    """`metadata.name` must be a DNS-1123 subdomain, as for every custom resource."""
    md = obj.get("metadata")
    name = md.get("name") if isinstance(md, dict) else None
    if not isinstance(name, str) or not name:
        return []  # a missing name is the store's business (generateName, "name is required")
    causes: list[Cause] = []
    value = render(name)
    if len(name) > _DNS1123_SUBDOMAIN_MAX:
        causes.append(
            ("metadata.name", f"Invalid value: {value}: must be no more than 253 characters")
        )
    if not _DNS1123_SUBDOMAIN.fullmatch(name):
        causes.append(("metadata.name", f"Invalid value: {value}: {_DNS1123_SUBDOMAIN_MSG}"))
    return causes


def validate_crd_schema(schema: Any, root: str = "openAPIV3Schema") -> list[str]:
    """Light structural checks of a CRD version's `openAPIV3Schema`; messages are prefixed with
    `root` (pass e.g. ``spec.versions[0].schema.openAPIV3Schema``)."""
    out: list[str] = []
    if not isinstance(schema, dict):
        return [f"{root}: Required value: a structural schema is required"]
    t = schema.get("type")
    if not t:
        out.append(f"{root}.type: Required value: must not be empty at the root")
    elif t != "object":
        out.append(f"{root}.type: Invalid value: {render(t)}: must be object at the root")
    if schema.get("nullable") is True:
        out.append(f"{root}.nullable: Forbidden: must be false at the root")
    md = (schema.get("properties") or {}).get("metadata")
    if isinstance(md, dict):
        extra = sorted(set(md.get("properties") or {}) - {"name", "generateName"})
        if extra or set(md) - {"type", "properties", "description"}:
            out.append(
                f"{root}.properties[metadata]: Forbidden: must not specify anything other than "
                "name and generateName, but metadata is implicitly specified"
            )
    _check(schema, root, out, needs_type=False)
    return out


# --- pruning and defaulting --------------------------------------------------------------------


def _prune(s: Any, x: Any, path: str, dropped: list[str], root: bool = False) -> None:
    if not isinstance(s, dict) or s.get("x-kubernetes-int-or-string") is True:
        return
    if isinstance(x, dict):
        props: dict[str, Any] = s.get("properties") or {}
        addl = s.get("additionalProperties")
        keep_unknown = s.get("x-kubernetes-preserve-unknown-fields") is True or addl is True
        keep_meta = root or s.get("x-kubernetes-embedded-resource") is True
        for k in list(x):
            if keep_meta and k in _ROOT_FIELDS:
                if k != "metadata" and k in props:
                    _prune(props[k], x[k], _child(path, k), dropped)
                continue
            if k in props:
                _prune(props[k], x[k], _child(path, k), dropped)
            elif isinstance(addl, dict):
                _prune(addl, x[k], _child(path, k), dropped)
            elif not keep_unknown:
                del x[k]
                dropped.append(_child(path, k))
    elif isinstance(x, list):
        items = s.get("items")
        if isinstance(items, dict):
            for i, v in enumerate(x):
                _prune(items, v, f"{path}[{i}]", dropped)


def _non_nullable_null(v: Any, s: Schema) -> bool:
    return v is None and s.get("nullable") is not True


def _default(s: Any, x: Any, root: bool = False) -> None:
    if not isinstance(s, dict):
        return
    if isinstance(x, dict):
        props: dict[str, Any] = s.get("properties") or {}
        for k, ps in props.items():
            if root and k in _ROOT_FIELDS:
                continue
            if (
                isinstance(ps, dict)
                and "default" in ps
                and (k not in x or _non_nullable_null(x[k], ps))
            ):
                x[k] = copy.deepcopy(ps["default"])
        addl = s.get("additionalProperties")
        for k in list(x):
            if root and k in _ROOT_FIELDS:
                continue
            sub = props.get(k) if k in props else addl
            if not isinstance(sub, dict):
                continue
            if _non_nullable_null(x[k], sub):
                if "default" not in sub:
                    del x[k]
                    continue
                x[k] = copy.deepcopy(sub["default"])
            _default(sub, x[k])
    elif isinstance(x, list):
        items = s.get("items")
        if isinstance(items, dict):
            for i in range(len(x)):
                if _non_nullable_null(x[i], items) and "default" in items:
                    x[i] = copy.deepcopy(items["default"])
                _default(items, x[i])


# --- validation --------------------------------------------------------------------------------


class _Validator:
    def __init__(self) -> None:
        self.causes: list[Cause] = []
        self.list_causes: list[Cause] = []  # x-kubernetes-list-type errors come last

    def invalid(self, path: str, value: Any, detail: str) -> None:
        self.causes.append((path, f"Invalid value: {render(value)}: {detail}"))

    def node(self, s: Any, x: Any, path: str, root: bool = False) -> None:
        if not isinstance(s, dict):
            return
        if x is None and s.get("nullable") is True:
            return
        if not self._type(s, x, path):
            return
        enum = s.get("enum")
        if isinstance(enum, list) and not any(_json_equal(x, e) for e in enum):
            values = ", ".join(_quote(e if isinstance(e, str) else _compact(e)) for e in enum)
            detail = f": supported values: {values}" if values else ""
            self.causes.append((path, f"Unsupported value: {render(x)}{detail}"))
        if isinstance(x, str):
            self._string(s, x, path)
        elif _is_number(x):
            self._number(s, x, path)
        elif isinstance(x, list):
            self._array(s, x, path)
        elif isinstance(x, dict):
            self._object(s, x, path, root)
        self._combinators(s, x, path)

    def _type(self, s: Schema, x: Any, path: str) -> bool:
        got = _json_type(x)
        if s.get("x-kubernetes-int-or-string") is True:
            if isinstance(x, str) or _has_type(x, "integer"):
                return True
            for want in ("integer", "string"):
                self.invalid(path, got, f'{path} in body must be of type {want}: "{got}"')
            return False
        declared = s.get("type")
        if not declared or not isinstance(declared, str) or _has_type(x, declared):
            return True
        self.invalid(path, got, f'{path} in body must be of type {declared}: "{got}"')
        return False

    def _string(self, s: Schema, x: str, path: str) -> None:
        n = len(x)  # go-openapi counts runes
        mx = s.get("maxLength")
        if isinstance(mx, int) and n > mx:
            unit = "byte" if mx == 1 else "bytes"
            self.causes.append((path, f"Too long: may not be more than {mx} {unit}"))
        mn = s.get("minLength")
        if isinstance(mn, int) and n < mn:
            self.invalid(path, x, f"{path} in body should be at least {mn} chars long")
        pattern = s.get("pattern")
        if isinstance(pattern, str):
            try:
                ok = re.search(pattern, x) is not None
            except re.error:
                ok = True  # validate_crd_schema reports bad patterns
            if not ok:
                self.invalid(path, x, f"{path} in body should match '{pattern}'")
        fmt = s.get("format")
        if fmt in ("date-time", "date") and not _format_ok(fmt, x):
            self.invalid(path, x, f'{path} in body must be of type {fmt}: "{x}"')

    def _number(self, s: Schema, x: float, path: str) -> None:
        mx = s.get("maximum")
        if _is_number(mx):
            if s.get("exclusiveMaximum") is True and x >= mx:
                self.invalid(path, x, f"{path} in body should be less than {_go_num(mx)}")
            elif x > mx:
                self.invalid(
                    path, x, f"{path} in body should be less than or equal to {_go_num(mx)}"
                )
        mn = s.get("minimum")
        if _is_number(mn):
            if s.get("exclusiveMinimum") is True and x <= mn:
                self.invalid(path, x, f"{path} in body should be greater than {_go_num(mn)}")
            elif x < mn:
                self.invalid(
                    path, x, f"{path} in body should be greater than or equal to {_go_num(mn)}"
                )
        mult = s.get("multipleOf")
        if _is_number(mult) and mult > 0:
            q = x / mult
            if not (math.isfinite(q) and abs(q - round(q)) < 1e-9):
                self.invalid(path, x, f"{path} in body should be a multiple of {_go_num(mult)}")

    def _array(self, s: Schema, x: list[Any], path: str) -> None:
        n = len(x)
        mx = s.get("maxItems")
        if isinstance(mx, int) and n > mx:
            unit = "item" if mx == 1 else "items"
            self.causes.append((path, f"Too many: {n}: must have at most {mx} {unit}"))
        mn = s.get("minItems")
        if isinstance(mn, int) and n < mn:
            self.invalid(path, n, f"{path} in body should have at least {mn} items")
        items = s.get("items")
        if isinstance(items, dict):
            for i, v in enumerate(x):
                self.node(items, v, f"{path}[{i}]")
        list_type = s.get("x-kubernetes-list-type")
        if list_type == "set":
            self._unique(x, path, [_compact(v) for v in x], x)
        elif list_type == "map":
            keys = [k for k in s.get("x-kubernetes-list-map-keys") or [] if isinstance(k, str)]
            shown: list[Any] = []
            hashes: list[str] = []
            for i, v in enumerate(x):
                if not isinstance(v, dict):
                    self.list_causes.append(
                        (
                            f"{path}[{i}]",
                            f"Invalid value: {render(v)}: must be an object for an array of "
                            "list-type map",
                        )
                    )
                    shown.append(None)
                    hashes.append(f"\0{i}")  # never a duplicate
                    continue
                key = {k: v.get(k) for k in keys}
                shown.append(key)
                hashes.append(_compact(key))
            self._unique(x, path, hashes, shown)

    def _unique(self, x: list[Any], path: str, hashes: list[str], shown: list[Any]) -> None:
        seen: dict[str, int] = {}
        for i, h in enumerate(hashes):
            seen[h] = seen.get(h, 0) + 1
            if seen[h] == 2:  # each duplicated value is reported once, at its second occurrence
                self.list_causes.append((f"{path}[{i}]", f"Duplicate value: {render(shown[i])}"))

    def _object(self, s: Schema, x: dict[str, Any], path: str, root: bool) -> None:
        for k in s.get("required") or []:
            if isinstance(k, str) and k not in x:
                self.causes.append((_child(path, k), "Required value"))
        n = len(x)
        mx = s.get("maxProperties")
        if isinstance(mx, int) and n > mx:
            self.causes.append((path, f"Too many: {n}: must have at most {mx} items"))
        mn = s.get("minProperties")
        if isinstance(mn, int) and n < mn:
            self.invalid(path, n, f"{path} in body should have at least {mn} properties")
        props: dict[str, Any] = s.get("properties") or {}
        addl = s.get("additionalProperties")
        for k, v in x.items():
            sub = props.get(k) if k in props else addl
            if not isinstance(sub, dict):
                continue
            if root and k == "metadata":
                # the root schema may only restrict metadata.name and metadata.generateName
                md_props: dict[str, Any] = sub.get("properties") or {}
                if isinstance(v, dict):
                    for mk in ("name", "generateName"):
                        if mk in md_props and mk in v:
                            self.node(md_props[mk], v[mk], f"metadata.{mk}")
                continue
            self.node(sub, v, _child(path, k))

    def _combinators(self, s: Schema, x: Any, path: str) -> None:
        for sub in s.get("allOf") or []:
            self.node(sub, x, path)
        any_of = s.get("anyOf")
        if any_of and not any(_passes(sub, x, path) for sub in any_of):
            self.invalid(path, x, f"{path} in body must validate at least one schema (anyOf)")
        one_of = s.get("oneOf")
        if one_of and sum(1 for sub in one_of if _passes(sub, x, path)) != 1:
            self.invalid(path, x, f"{path} in body must validate one and only one schema (oneOf)")
        not_ = s.get("not")
        if isinstance(not_, dict) and _passes(not_, x, path):
            self.invalid(path, x, f"{path} in body must not validate the schema (not)")


def _passes(s: Any, x: Any, path: str) -> bool:
    v = _Validator()
    v.node(s, x, path)
    return not v.causes and not v.list_causes


# --- CRD schema checks -------------------------------------------------------------------------


def _check(s: Any, path: str, out: list[str], needs_type: bool, what: str = "") -> None:
    if not isinstance(s, dict):
        out.append(f"{path}: Invalid value: {render(s)}: must be a schema object")
        return
    t = s.get("type")
    int_or_string = s.get("x-kubernetes-int-or-string") is True
    preserve = s.get("x-kubernetes-preserve-unknown-fields")
    if preserve is not None and preserve is not True:
        out.append(
            f"{path}.x-kubernetes-preserve-unknown-fields: Invalid value: {render(preserve)}: "
            "must be true or undefined"
        )
    if t is not None:
        if t not in _TYPES:
            supported = ", ".join(_quote(x) for x in _TYPES)
            out.append(
                f"{path}.type: Unsupported value: {render(t)}: supported values: {supported}"
            )
        if int_or_string:
            out.append(
                f"{path}.type: Invalid value: {render(t)}: must be empty if "
                "x-kubernetes-int-or-string is true"
            )
    elif needs_type and not int_or_string and preserve is not True:
        out.append(f"{path}.type: Required value: must not be empty for specified {what}")
    if "$ref" in s:
        out.append(f"{path}.$ref: Forbidden: $ref is not supported")
    props = s.get("properties")
    addl = s.get("additionalProperties")
    if props and addl is not None:
        out.append(
            f"{path}.additionalProperties: Forbidden: additionalProperties and properties are "
            "mutual exclusive"
        )
    if addl is False:
        out.append(
            f"{path}.additionalProperties: Forbidden: additionalProperties cannot be set to false"
        )
    if s.get("uniqueItems") is True:
        out.append(
            f"{path}.uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime "
            "complexity becomes quadratic"
        )
    if t == "array" and "items" not in s:
        out.append(f"{path}.items: Required value: must be specified")
    pattern = s.get("pattern")
    if pattern is not None:
        try:
            re.compile(str(pattern))
        except re.error as e:
            out.append(
                f"{path}.pattern: Invalid value: {render(pattern)}: must be a valid regular "
                f"expression, but isn't: {e}"
            )
    _check_list_type(s, path, out)
    if "default" in s:
        _check_default(s, path, out)
    if isinstance(props, dict):
        for k, sub in props.items():
            _check(sub, f"{path}.properties[{k}]", out, True, "object fields")
    if isinstance(addl, dict):
        _check(addl, f"{path}.additionalProperties", out, True, "object fields")
    items = s.get("items")
    if isinstance(items, dict):
        _check(items, f"{path}.items", out, True, "array items")
    for comb in ("allOf", "anyOf", "oneOf"):
        for i, sub in enumerate(s.get(comb) or []):
            _check(sub, f"{path}.{comb}[{i}]", out, False)
    if "not" in s:
        _check(s["not"], f"{path}.not", out, False)


def _check_list_type(s: Schema, path: str, out: list[str]) -> None:
    lt = s.get("x-kubernetes-list-type")
    keys = s.get("x-kubernetes-list-map-keys")
    if lt is None:
        if keys:
            out.append(
                f"{path}.x-kubernetes-list-map-keys: Forbidden: must be empty if "
                "x-kubernetes-list-type is not map"
            )
        return
    if lt not in _LIST_TYPES:
        supported = ", ".join(_quote(x) for x in _LIST_TYPES)
        out.append(
            f"{path}.x-kubernetes-list-type: Unsupported value: {render(lt)}: supported values: "
            f"{supported}"
        )
        return
    if s.get("type") != "array":
        out.append(
            f"{path}.type: Invalid value: {render(s.get('type'))}: must be array if "
            "x-kubernetes-list-type is specified"
        )
    items_schema = s.get("items")
    items: dict[str, Any] = items_schema if isinstance(items_schema, dict) else {}
    if lt == "set" and items.get("type") in ("object", "array"):
        out.append(
            f"{path}.items.type: Invalid value: {render(items.get('type'))}: must be a scalar "
            "type if parent array's x-kubernetes-list-type is set"
        )
    if lt != "map":
        if keys:
            out.append(
                f"{path}.x-kubernetes-list-map-keys: Forbidden: must be empty if "
                "x-kubernetes-list-type is not map"
            )
        return
    if not keys:
        out.append(
            f"{path}.x-kubernetes-list-map-keys: Required value: must not be empty if "
            "x-kubernetes-list-type is map"
        )
        return
    if items.get("type") != "object":
        out.append(
            f"{path}.items.type: Invalid value: {render(items.get('type'))}: must be object if "
            "parent array's x-kubernetes-list-type is map"
        )
        return
    item_props: dict[str, Any] = items.get("properties") or {}
    required = set(items.get("required") or [])
    for k in keys:
        sub = item_props.get(k)
        if not isinstance(sub, dict):
            out.append(
                f"{path}.x-kubernetes-list-map-keys: Invalid value: {render(k)}: entries must "
                "all be names of item properties"
            )
        elif k not in required and "default" not in sub:
            out.append(
                f"{path}.items.properties[{k}]: Required value: this property is in "
                "x-kubernetes-list-map-keys, so it must have a default or be a required property"
            )
        elif sub.get("type") in ("object", "array"):
            out.append(
                f"{path}.items.properties[{k}].type: Invalid value: {render(sub.get('type'))}: "
                "must be a scalar type if parent array's x-kubernetes-list-type is map"
            )


def _check_default(s: Schema, path: str, out: list[str]) -> None:
    value = copy.deepcopy(s["default"])
    wrapper = {"v": value}
    dropped: list[str] = []
    _prune({"properties": {"v": s}}, wrapper, "", dropped)
    for p in dropped:
        field = p[2:] if p.startswith("v.") else p
        out.append(
            f"{path}.default: Invalid value: {render(s['default'])}: must not have "
            f'unknown fields, found "{field}"'
        )
    _default({"properties": {"v": s}}, wrapper)
    v = _Validator()
    v.node(s, wrapper.get("v"), "default")
    for _, msg in v.causes + v.list_causes:
        out.append(f"{path}.default: {msg}")


# --- helpers -----------------------------------------------------------------------------------


def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _is_number(x: Any) -> TypeGuard[int | float]:
    return isinstance(x, int | float) and not isinstance(x, bool)


def _json_type(x: Any) -> str:
    if x is None:
        return "null"
    if isinstance(x, bool):
        return "boolean"
    if isinstance(x, int):
        return "integer"
    if isinstance(x, float):
        return "number"
    if isinstance(x, str):
        return "string"
    if isinstance(x, list):
        return "array"
    if isinstance(x, dict):
        return "object"
    return type(x).__name__


def _has_type(x: Any, t: str) -> bool:
    if t == "integer":
        # go-openapi accepts a float that is a whole number for an integer
        return (isinstance(x, int) and not isinstance(x, bool)) or (
            isinstance(x, float) and x.is_integer()
        )
    if t == "number":
        return _is_number(x)
    if t == "string":
        return isinstance(x, str)
    if t == "boolean":
        return isinstance(x, bool)
    if t == "array":
        return isinstance(x, list)
    if t == "object":
        return isinstance(x, dict)
    return True  # unknown types are validate_crd_schema's business


def _json_equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if _is_number(a) and _is_number(b):
        return bool(a == b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and bool(a == b)


def _format_ok(fmt: str, x: str) -> bool:
    m = (_DATE_TIME if fmt == "date-time" else _DATE).match(x)
    if m is None:
        return False
    try:
        datetime.date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
        if fmt == "date-time":
            datetime.time(int(m.group(4)), int(m.group(5)), int(m.group(6) or 0))
    except ValueError:
        return False
    return True


def _compact(x: Any) -> str:
    """JSON as Go's encoding/json writes it: compact, map keys sorted."""
    return json.dumps(x, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _quote(s: str) -> str:
    """Go's %q / strconv.Quote, closely enough."""
    return json.dumps(s, ensure_ascii=False)


def _go_num(x: float) -> str:
    """A number as Go's %v prints it."""
    if isinstance(x, int):
        return str(x)
    if not math.isfinite(x):
        return "+Inf" if x > 0 else "-Inf" if x < 0 else "NaN"
    if x.is_integer() and abs(x) < 1e21:
        return str(int(x))
    r = repr(x)
    if "e" in r:
        mant, exp_s = r.split("e")
        exp = int(exp_s)
        if -4 <= exp < 21:
            return format(x, "f").rstrip("0").rstrip(".")
        return f"{mant}e{'+' if exp >= 0 else '-'}{abs(exp):02d}"
    return r


def render(value: Any) -> str:
    """A bad value as field.Error prints it."""
    if value is None:
        return '"null"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return _go_num(value)
    if isinstance(value, str):
        return _quote(value)
    return _compact(value)
