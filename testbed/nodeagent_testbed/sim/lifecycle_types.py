"""The Go shapes of `lifecycle.k8s.io/v1alpha1` (k8s.io/api/lifecycle/v1alpha1/types.go), for
decoding a body as kube-apiserver does: a value of the wrong JSON type is the decoder's error
(`json: cannot unmarshal number into Go struct field EvictionPodReference.spec.target.pod.name
of type string`): a 400 for a create or update (`Eviction in version "v1alpha1" cannot be
handled as a Eviction: ...`, `decode`), a 422 on the field `patch` for a patch whose result has
one (`patch_error`). A field the types do not have is dropped (fieldValidation Warn, the
server's default); times are stored as a metav1.Time encodes them (UTC, whole seconds).

Only `spec` and `status` are checked here; metadata is the store's. Here too, the sim's own: the
API's metav1.Time as the server reads and writes it (`parse_time`, `format_time`) and the
imperative responder's name and priority."""

from __future__ import annotations

import calendar
import json
import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from nodeagent_testbed.sim.errors import ApiError, invalid, json_kind

__all__ = [
    "IMPERATIVE_RESPONDER",
    "IMPERATIVE_RESPONDER_PRIORITY",
    "decode",
    "decode_pod_responders",
    "format_time",
    "parse_time",
    "patch_error",
]

# Constants of the API (k8s.io/api/lifecycle/v1alpha1), which the server defines: the sim's own
# copies, not the agent's.
IMPERATIVE_RESPONDER = "imperative-eviction.k8s.io/evictor"
"""The responder the server adds to every pod's Eviction: the policy/v1 Eviction API."""
IMPERATIVE_RESPONDER_PRIORITY = 100
"""The one priority the server allows the imperative responder."""


# --- metav1.Time ---------------------------------------------------------------------------------

# time.RFC3339 as Go's time.Parse reads it: `2006-01-02T15:04:05Z07:00`, a fraction of any length
# after the seconds, `Z` or a numeric offset. (Go's slower fallback also takes a one-digit hour
# and a comma before the fraction, which no client writes; the sim refuses them.)
_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:Z|([+-])(\d{2}):(\d{2}))",
    re.ASCII,
)


def parse_time(value: object) -> datetime | None:
    """A metav1.Time (or MicroTime) as the server decodes it, aware; None for a value that is
    not an RFC 3339 time (year 0, which Go takes, Python cannot hold)."""
    if not isinstance(value, str) or (m := _RFC3339.fullmatch(value)) is None:
        return None
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    fraction, sign, offset_hours, offset_minutes = m.groups()[6:]
    if not (year >= 1 and 1 <= month <= 12 and 1 <= day <= calendar.monthrange(year, month)[1]):
        return None
    if hour > 23 or minute > 59 or second > 59:
        return None
    zone = UTC
    if sign is not None:
        hours, minutes = int(offset_hours), int(offset_minutes)
        if hours > 23 or minutes > 59:
            return None
        offset = timedelta(hours=hours, minutes=minutes)
        zone = timezone(-offset if sign == "-" else offset)
    micro = int((fraction or "0")[:6].ljust(6, "0"))  # Go keeps nanoseconds; Python micro
    return datetime(year, month, day, hour, minute, second, micro, tzinfo=zone)


def format_time(when: datetime) -> str:
    """A metav1.Time as the server encodes it: UTC, whole seconds (the fraction dropped); the
    year in four digits (strftime's %Y writes 999 as "999" on glibc)."""
    utc = when.astimezone(UTC)
    return f"{utc.year:04d}-{utc:%m-%dT%H:%M:%S}Z"


# scalar Go types: their JSON kind ("string", "int32", "int64", "time")
_SCALARS = {
    "string": "string",
    "types.UID": "string",
    "v1alpha1.EvictionRequestIntent": "string",
    "v1alpha1.RequesterIntent": "string",
    "v1alpha1.ResponderStateType": "string",
    "v1.ConditionStatus": "string",
    "int32": "int32",
    "int64": "int64",
    "v1.Time": "time",
}
# struct -> {json field: Go type}; "[]T" a list of T
_STRUCTS: dict[str, dict[str, str]] = {
    "EvictionRequest": {
        "spec": "v1alpha1.EvictionRequestSpec",
        "status": "v1alpha1.EvictionRequestStatus",
    },
    "EvictionRequestSpec": {
        "target": "v1alpha1.EvictionRequestTarget",
        "requester": "string",
        "intent": "v1alpha1.EvictionRequestIntent",
    },
    "EvictionRequestTarget": {"pod": "v1alpha1.EvictionRequestPodReference"},
    "EvictionRequestPodReference": {"name": "string", "uid": "types.UID"},
    "EvictionRequestStatus": {"conditions": "[]v1.Condition", "observedGeneration": "int64"},
    "Eviction": {"spec": "v1alpha1.EvictionSpec", "status": "v1alpha1.EvictionStatus"},
    "EvictionSpec": {"target": "v1alpha1.EvictionTarget"},
    "EvictionTarget": {"pod": "v1alpha1.EvictionPodReference"},
    "EvictionPodReference": {"name": "string", "uid": "types.UID"},
    "EvictionStatus": {
        "conditions": "[]v1.Condition",
        "observedGeneration": "int64",
        "requesters": "[]v1alpha1.Requester",
        "targetResponders": "[]v1alpha1.TargetResponder",
        "responders": "[]v1alpha1.ResponderStatus",
    },
    "Requester": {"name": "string", "intent": "v1alpha1.RequesterIntent"},
    "TargetResponder": {
        "name": "string",
        "priority": "int32",
        "state": "v1alpha1.ResponderStateType",
    },
    "ResponderStatus": {
        "name": "string",
        "startTime": "v1.Time",
        "heartbeatTime": "v1.Time",
        "expectedCompletionTime": "v1.Time",
        "completionTime": "v1.Time",
        "message": "string",
    },
    "EvictionResponder": {"name": "string", "priority": "int32"},  # core/v1, a pod's
    "Condition": {
        "type": "string",
        "status": "v1.ConditionStatus",
        "observedGeneration": "int64",
        "lastTransitionTime": "v1.Time",
        "reason": "string",
        "message": "string",
    },
}
_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}


class _TypeError(Exception):
    pass


def decode(kind: str, obj: dict[str, Any]) -> None:
    """Drop the fields of `obj`'s spec and status that `kind` does not have, in place; a value
    of the wrong type is the 400 of a create or update."""
    problem = _problem(kind, obj)
    if problem is not None:
        raise ApiError(
            400, f'{kind} in version "v1alpha1" cannot be handled as a {kind}: {problem}'
        )


def decode_pod_responders(spec: dict[str, Any]) -> None:
    """A pod's `spec.evictionResponders` as `decode` checks a lifecycle object."""
    try:
        where = ("spec", "evictionResponders")
        _value("PodSpec", "[]v1.EvictionResponder", spec.get("evictionResponders"), where)
    except _TypeError as e:
        raise ApiError(400, f'Pod in version "v1" cannot be handled as a Pod: {e}') from None


def patch_error(kind: str, patched: Any) -> ApiError | None:
    """The 422 of a patch whose result does not decode as `kind`, or None (then the result is
    pruned in place)."""
    if not isinstance(patched, dict):
        return None
    problem = _problem(kind, patched)
    if problem is None:
        return None
    text = json.dumps(json.dumps(patched, separators=(",", ":")))
    return invalid("", "", [("patch", f"Invalid value: {text}: {problem}")])


def _problem(kind: str, obj: dict[str, Any]) -> str | None:
    try:
        _struct(kind, {k: v for k, v in obj.items() if k in ("spec", "status")}, obj, ())
    except _TypeError as e:
        return str(e)
    return None


def _struct(name: str, value: dict[str, Any], into: dict[str, Any], path: tuple[str, ...]) -> None:
    """Check `value`'s fields against struct `name`, pruning `into` (the same dict, or the
    whole object at the top)."""
    fields = _STRUCTS[name]
    for key in list(value):
        if key not in fields:
            into.pop(key, None)
            continue
        _value(name, fields[key], value[key], (*path, key))
        if fields[key] == "v1.Time" and value[key] is not None:
            # stored as the server encodes a metav1.Time: UTC, whole seconds
            value[key] = format_time(_parsed(value[key]))


def _value(struct: str, go_type: str, value: Any, path: tuple[str, ...]) -> None:
    if value is None:
        return  # null: the zero value
    if go_type.startswith("[]"):
        if not isinstance(value, list):
            raise _mismatch(struct, path, value, go_type)
        for item in value:
            _value(struct, go_type[2:], item, path)
        return
    kind = _SCALARS.get(go_type)
    if kind is None:
        if not isinstance(value, dict):
            raise _mismatch(struct, path, value, go_type)
        _struct(go_type.split(".", 1)[1], value, value, path)
    elif kind in ("string", "time"):
        if not isinstance(value, str):
            raise _mismatch(struct, path, value, go_type)
        if kind == "time" and parse_time(value) is None:
            raise _TypeError(
                f'parsing time "{value}" of Go struct field {struct}.{".".join(path)}: '
                'not in the format "2006-01-02T15:04:05Z07:00"'
            )
    elif isinstance(value, bool) or not isinstance(value, int | float):
        raise _mismatch(struct, path, value, go_type)
    else:
        low, high = _RANGES[kind]
        if isinstance(value, float) or not low <= value <= high:
            raise _mismatch(struct, path, value, go_type, f"number {value}")


def _mismatch(
    struct: str, path: tuple[str, ...], value: Any, go_type: str, what: str | None = None
) -> _TypeError:
    where = f"{struct}.{'.'.join(path)}"
    return _TypeError(
        f"json: cannot unmarshal {what or json_kind(value)} into Go struct field {where} "
        f"of type {go_type}"
    )


def _parsed(value: str) -> datetime:
    when = parse_time(value)
    assert when is not None  # checked by _value
    return when
