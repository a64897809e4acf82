"""`lifecycle.k8s.io/v1alpha1` as kube-apiserver v1.37 serves it with the gate EvictionRequestAPI
on (KEP-4563): EvictionRequests and Evictions, namespaced, each with a `status` subresource and
no short names, with the admission of `pkg/registry/lifecycle` and `pkg/apis/lifecycle`
(declarative and hand-written validation), learnt from there:

- create: the status is reset to `{}`; an update of the main resource keeps the stored status,
  a write of the status subresource the stored spec (the store does both);
- spec: `target.pod` (the union's one member) with `name` (an RFC 1123 subdomain) and `uid` (a
  lowercase UUID) required, immutable; a request's `requester` a domain-prefixed key outside
  *.k8s.io and *.kubernetes.io, required, immutable; its `intent` Eviction or Withdrawn;
- status: conditions as metav1 validates them, `observedGeneration` at least 1 and never
  decreased nor unset; an Eviction's lists by their keys and sizes, each entry's fields (formats,
  enums, priorities 0..100000 never changed, `startTime` and `completionTime` never changed once
  set, messages up to 4000 characters), its responders' times, and the state machine of
  `lifecycle_rules.refusals`;
- pods' `spec.evictionResponders` (`pod_responder_causes`, called by the pod admission).

Only fields that a write changes are validated, as the declarative validation ratchets. A body
of the wrong shape is the decoder's error (`lifecycle_types`). Messages have the server's form
(`<field>: Invalid value: ...`) except those of the state machine, which are the port's."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from nodeagent_testbed.sim import lifecycle_types
from nodeagent_testbed.sim.errors import invalid
from nodeagent_testbed.sim.lifecycle_rules import TIME_SKEW, refusals
from nodeagent_testbed.sim.lifecycle_types import parse_time
from nodeagent_testbed.sim.resources import BUILTIN, ResourceType
from nodeagent_testbed.sim.store import Obj, Store

__all__ = ["TYPES", "check_patch", "install", "pod_responder_causes"]

GROUP = "lifecycle.k8s.io"
TYPES = tuple(rt for rt in BUILTIN if rt.group == GROUP)

Cause = tuple[str, str]
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    r"for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
_KEY_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_KEY_NAME_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_REASON = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
_RESERVED = (".k8s.io", ".kubernetes.io")
_INTENTS = ("Eviction", "Withdrawn")
_STATES = ("Active", "Canceled", "Completed", "Inactive", "Interrupted")
MAX_POD_RESPONDERS = 10


def install(store: Store) -> None:
    """The server's admission of the group on `store` (which serves its types)."""
    store.add_admission(GROUP, "evictionrequests", _admit_request)
    store.add_admission(GROUP, "evictions", _admit_eviction)


def check_patch(rt: ResourceType, patched: Any) -> None:
    """A patch's result that does not decode as `rt`'s type: the server's 422 on `patch`."""
    if rt in TYPES:
        error = lifecycle_types.patch_error(rt.kind, patched)
        if error is not None:
            raise error


# --- admission ----------------------------------------------------------------------------------


def _admit_request(store: Store, rt: ResourceType, obj: Obj, old: Obj | None) -> None:
    _admit(rt, obj, old, _request_spec, _status_common)


def _admit_eviction(store: Store, rt: ResourceType, obj: Obj, old: Obj | None) -> None:
    _admit(rt, obj, old, _eviction_spec, _eviction_status)


def _admit(
    rt: ResourceType,
    obj: Obj,
    old: Obj | None,
    spec_causes: Callable[[dict[str, Any], dict[str, Any] | None], list[Cause]],
    status_causes: Callable[[dict[str, Any], dict[str, Any]], list[Cause]],
) -> None:
    """Decode `obj`, validate the spec it writes (`old` None: created) or the status."""
    lifecycle_types.decode(rt.kind, obj)
    if old is None:
        obj["status"] = {}
    spec, old_spec = _part(obj, "spec"), None if old is None else _part(old, "spec")
    causes = spec_causes(spec, old_spec) if spec != old_spec else []
    if old is not None and _part(obj, "status") != _part(old, "status"):
        causes += status_causes(_part(obj, "status"), _part(old, "status"))
    if causes:
        raise invalid(rt.kind, obj["metadata"].get("name", ""), causes, GROUP)


def _request_spec(spec: dict[str, Any], old_spec: dict[str, Any] | None) -> list[Cause]:
    causes = _eviction_spec(spec, old_spec) + _requester(spec, old_spec)
    if old_spec is None or spec.get("intent") != old_spec.get("intent"):
        causes += _enum("spec.intent", spec.get("intent"), _INTENTS)
    return causes


def _eviction_spec(spec: dict[str, Any], old_spec: dict[str, Any] | None) -> list[Cause]:
    old_target = None if old_spec is None else old_spec.get("target")
    return _target("spec.target", spec.get("target"), old_target)


def _part(obj: Mapping[str, Any], key: str) -> dict[str, Any]:
    value = obj.get(key)
    return value if isinstance(value, dict) else {}


# --- spec -----------------------------------------------------------------------------------------


def _target(where: str, target: Any, old: Any) -> list[Cause]:
    """`old` is None on create; once created the target is immutable."""
    target = target if isinstance(target, dict) else {}
    if old is not None:
        return [] if target == old else [(where, "Invalid value: null: field is immutable")]
    pod = target.get("pod")
    if not isinstance(pod, dict):
        return [(where, 'Invalid value: "": must specify one of: `pod`')]
    causes: list[Cause] = []
    name, uid = pod.get("name"), pod.get("uid")
    if not name:
        causes.append((f"{where}.pod.name", "Required value"))
    else:
        causes += _subdomain(f"{where}.pod.name", name)
    if not uid:
        causes.append((f"{where}.pod.uid", "Required value"))
    elif not _UUID.match(uid):
        causes.append(
            (f"{where}.pod.uid", f"{_invalid(uid)}: must be a lowercase UUID in 8-4-4-4-12 format")
        )
    return causes


def _requester(spec: Mapping[str, Any], old_spec: Mapping[str, Any] | None) -> list[Cause]:
    where, value = "spec.requester", spec.get("requester")
    if old_spec is not None and value == old_spec.get("requester"):
        return []
    causes: list[Cause] = []
    if old_spec is not None:
        causes.append((where, "Invalid value: null: field is immutable"))
    if not value:
        return [*causes, (where, "Required value")]
    if causes:
        return causes
    return _reserved(where, value) + _prefixed_key(where, value)


def _reserved(where: str, value: str) -> list[Cause]:
    domain = value.split("/", 1)[0].strip().lower().rstrip(".")
    if any(domain.endswith(s) or domain == s.strip(".") for s in _RESERVED):
        return [(where, f"{_invalid(value)}: domain names *.k8s.io, *.kubernetes.io are reserved")]
    return []


def _prefixed_key(where: str, value: str) -> list[Cause]:
    """validate.PrefixedLabelKey: a label key, with a prefix."""
    parts = value.split("/")
    problems: list[str] = []
    if len(parts) > 2:
        problems.append(
            "a valid label key "
            + _KEY_NAME_MSG
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        )
    else:
        name = parts[-1]
        if len(parts) == 2:
            prefix = parts[0]
            if not prefix:
                problems.append("prefix part must be non-empty")
            else:
                problems += [f"prefix part {m}" for m in _subdomain_problems(prefix)]
        if not name:
            problems.append("name part must be non-empty")
        elif len(name) > 63:
            problems.append("name part must be no more than 63 bytes")
        if not _KEY_NAME.match(name):
            problems.append(f"name part {_KEY_NAME_MSG}")
        if not problems and len(parts) != 2:
            problems.append("must include a prefix (e.g. 'example.com/key')")
    return [(where, f"{_invalid(value)}: {p}") for p in problems]


def _subdomain_problems(value: str) -> list[str]:
    out = ["must be no more than 253 bytes"] if len(value) > 253 else []
    return out + ([] if _SUBDOMAIN.match(value) else [_SUBDOMAIN_MSG])


def _subdomain(where: str, value: str) -> list[Cause]:
    return [(where, f"{_invalid(value)}: {p}") for p in _subdomain_problems(value)]


def _enum(where: str, value: Any, allowed: tuple[str, ...]) -> list[Cause]:
    if not value:
        return [(where, "Required value")]
    if value not in allowed:
        supported = ", ".join(f'"{a}"' for a in allowed)
        return [(where, f"Unsupported value: {json.dumps(value)}: supported values: {supported}")]
    return []


def _invalid(value: Any) -> str:
    """field.Error's rendering of a bad value."""
    return f"Invalid value: {json.dumps(value, separators=(',', ':'))}"


# --- pods ---------------------------------------------------------------------------------------


def pod_responder_causes(spec: dict[str, Any]) -> list[Cause]:
    """A new pod's `spec.evictionResponders`, as core/v1's declarative validation has them."""
    where = "spec.evictionResponders"
    lifecycle_types.decode_pod_responders(spec)
    entries = spec.get("evictionResponders")
    if not isinstance(entries, list) or not entries:
        return []
    if len(entries) > MAX_POD_RESPONDERS:
        return [(where, f"Too many: {len(entries)}: must have at most 10 items")]
    causes = _duplicates(where, entries)
    for i, r in enumerate(entries):
        r = r if isinstance(r, dict) else {}
        name, priority = r.get("name"), r.get("priority")
        if not name:
            causes.append((f"{where}[{i}].name", "Required value"))
        else:
            causes += _reserved(f"{where}[{i}].name", name)
            causes += _prefixed_key(f"{where}[{i}].name", name)
        if priority is None:
            causes.append((f"{where}[{i}].priority", "Required value"))
            continue
        if 0 <= priority < 1000:
            causes.append(
                (
                    f"{where}[{i}].priority",
                    f"{_invalid(priority)}: priorities 0-999 are reserved for responders with "
                    "*.k8s.io suffix",
                )
            )
        causes += _range(f"{where}[{i}].priority", priority)
    return causes


def _range(where: str, value: int) -> list[Cause]:
    if value > 100000:
        return [(where, f"{_invalid(value)}: must be less than or equal to 100000")]
    if value < 0:
        return [(where, f"{_invalid(value)}: must be greater than or equal to 0")]
    return []


def _duplicates(where: str, entries: list[Any]) -> list[Cause]:
    seen: set[Any] = set()
    out: list[Cause] = []
    for i, e in enumerate(entries):
        key = e.get("name") if isinstance(e, dict) else None
        if key in seen:
            out.append(
                (f"{where}[{i}]", f"Duplicate value: {json.dumps(e, separators=(',', ':'))}")
            )
        seen.add(key)
    return out


# --- status ---------------------------------------------------------------------------------------


def _status_common(status: Mapping[str, Any], old: Mapping[str, Any]) -> list[Cause]:
    """What both kinds' status share: conditions and observedGeneration."""
    causes: list[Cause] = []
    conditions = status.get("conditions") or []
    if len(conditions) > 100:
        causes.append(
            ("status.conditions", f"Too many: {len(conditions)}: must have at most 100 items")
        )
    else:
        types: set[Any] = set()
        for i, c in enumerate(conditions):
            where = f"status.conditions[{i}]"
            c = c if isinstance(c, dict) else {}
            if c.get("type") in types:
                causes.append((where, f"Duplicate value: {json.dumps(c.get('type'))}"))
            types.add(c.get("type"))
            causes += _condition(where, c)
    generation, was = status.get("observedGeneration"), old.get("observedGeneration")
    where = "status.observedGeneration"
    if generation is None and was is not None:
        causes.append((where, "Invalid value: null: field cannot be cleared once set"))
    elif generation is not None and generation != was:
        if generation < 1:
            causes.append((where, f"{_invalid(generation)}: must be greater than or equal to 1"))
        if was is not None and generation < was:
            causes.append((where, f"{_invalid(generation)}: may not be decreased from {was}"))
    return causes


def _condition(where: str, c: Mapping[str, Any]) -> list[Cause]:
    causes: list[Cause] = []
    if not c.get("type"):
        causes.append((f"{where}.type", "Required value: is required"))
    status = c.get("status")
    if not status:
        causes.append((f"{where}.status", "Required value"))
    elif status not in ("False", "True", "Unknown"):
        causes.append(
            (
                f"{where}.status",
                f'Unsupported value: {json.dumps(status)}: supported values: "False", "True", '
                '"Unknown"',
            )
        )
    if (c.get("observedGeneration") or 0) < 0:
        causes.append(
            (
                f"{where}.observedGeneration",
                f"{_invalid(c['observedGeneration'])}: must be greater than or equal to zero",
            )
        )
    if not c.get("lastTransitionTime"):
        causes.append((f"{where}.lastTransitionTime", "Required value"))
    reason = c.get("reason")
    if not reason:
        causes.append((f"{where}.reason", "Required value"))
    elif not _REASON.match(reason):
        causes.append(
            (
                f"{where}.reason",
                f"{_invalid(reason)}: a condition reason must start with alphabetic character, "
                "optionally followed by a string of alphanumeric characters or '_,:', and must "
                "end with an alphanumeric character or '_' (e.g. 'my_name',  or 'MY_NAME',  or "
                "'MyName',  or 'ReasonA,ReasonB',  or 'ReasonA:ReasonB', regex used for "
                "validation is '[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?')",
            )
        )
    if len(c.get("message") or "") > 32 * 1024:
        causes.append((f"{where}.message", "Too long: may not be more than 32768 bytes"))
    return causes


def _eviction_status(status: Mapping[str, Any], old: Mapping[str, Any]) -> list[Cause]:
    causes = _status_common(status, old)
    structural: list[Cause] = []
    for key, limit in (("requesters", 100), ("targetResponders", 11), ("responders", 11)):
        entries = status.get(key) or []
        if len(entries) > limit:
            structural.append(
                (f"status.{key}", f"Too many: {len(entries)}: must have at most {limit} items")
            )
        else:
            structural += _duplicates(f"status.{key}", entries)
    causes += structural
    causes += _changed_entries(status, old)
    if structural or any(f.startswith("status.targetResponders") for f, _ in causes):
        return causes  # the state machine needs its keys and priorities
    now = datetime.now(UTC)
    for refusal in refusals(old, status, now):
        field, _, message = refusal.partition(": ")
        causes.append((field, message))
    return causes + _responder_times(status, old, now)


def _changed_entries(status: Mapping[str, Any], old: Mapping[str, Any]) -> list[Cause]:
    """The declarative checks of each entry of the three lists that the write changed."""
    causes: list[Cause] = []
    for key in ("requesters", "targetResponders", "responders"):
        before = {e.get("name"): e for e in old.get(key) or [] if isinstance(e, dict)}
        for i, e in enumerate(status.get(key) or []):
            e = e if isinstance(e, dict) else {}
            was = before.get(e.get("name"))
            if e == was:
                continue
            where = f"status.{key}[{i}]"
            if not e.get("name"):
                causes.append((f"{where}.name", "Required value"))
            else:
                causes += _prefixed_key(f"{where}.name", e["name"])
            if key == "requesters":
                causes += _enum(f"{where}.intent", e.get("intent"), _INTENTS)
            elif key == "targetResponders":
                causes += _target_responder(where, e, was or {})
            else:
                causes += _responder_entry(where, e, was or {})
    return causes


def _target_responder(where: str, e: Mapping[str, Any], was: Mapping[str, Any]) -> list[Cause]:
    causes: list[Cause] = []
    priority = e.get("priority")
    if priority is None:
        causes.append((f"{where}.priority", "Required value"))
    elif was.get("priority") is not None and priority != was["priority"]:
        causes.append(
            (f"{where}.priority", "Invalid value: null: field cannot be modified once set")
        )
    else:
        causes += _range(f"{where}.priority", priority)
    return causes + _enum(f"{where}.state", e.get("state"), _STATES)


def _responder_entry(where: str, e: Mapping[str, Any], was: Mapping[str, Any]) -> list[Cause]:
    causes: list[Cause] = []
    for key in ("startTime", "completionTime"):
        if was.get(key) is not None and e.get(key) is None:
            causes.append(
                (f"{where}.{key}", "Invalid value: null: field cannot be cleared once set")
            )
        elif was.get(key) is not None and e.get(key) != was[key]:
            causes.append(
                (f"{where}.{key}", "Invalid value: null: field cannot be modified once set")
            )
    if len(e.get("message") or "") > 4000:
        causes.append((f"{where}.message", "Too long: may not be more than 4000 characters"))
    return causes


def _responder_times(
    status: Mapping[str, Any], old: Mapping[str, Any], now: datetime
) -> list[Cause]:
    """ValidateEvictionStatusResponder's rules for heartbeatTime, expectedCompletionTime and
    completionTime (startTime's are the port's)."""
    targets = [t for t in status.get("targetResponders") or [] if isinstance(t, dict)]
    states = {t.get("name"): t.get("state") for t in targets}
    before = {e.get("name"): e for e in old.get("responders") or [] if isinstance(e, dict)}
    causes: list[Cause] = []
    for i, e in enumerate(status.get("responders") or []):
        e = e if isinstance(e, dict) else {}
        was = before.get(e.get("name"))
        if was is not None and was != e and states.get(e.get("name")) != "Active":
            continue  # immutable: the port said so
        was = was or {}
        where = f"status.responders[{i}]"
        start = parse_time(e.get("startTime"))
        for key in ("heartbeatTime", "expectedCompletionTime", "completionTime"):
            value = e.get(key)
            if key == "heartbeatTime" and was.get(key) and not value:
                causes.append((f"{where}.{key}", "Required value: is required once set"))
            if not value or (value == was.get(key) and key != "completionTime"):
                continue
            if was.get(key) and key == "completionTime" and value != was[key]:
                continue  # cannot be modified: said above
            problem = _time_problem(key, parse_time(value), parse_time(was.get(key)), start, now)
            if problem:
                what = problem.replace("START", f"{where}.startTime")
                causes.append((f"{where}.{key}", f"{_invalid(value)}: {what}"))
    return causes


def _time_problem(
    key: str, when: datetime | None, was: datetime | None, start: datetime | None, now: datetime
) -> str | None:
    if when is None:
        return None
    if start is None:
        return "cannot be set before START is set"
    if key == "heartbeatTime" and was is not None and when < was:
        return "cannot be decreased"
    if when < start:
        return "must occur after START"
    if key == "expectedCompletionTime":
        if when < now - TIME_SKEW:
            return "cannot be set to the past time"
        if when > now + timedelta(days=3650):
            return "must complete within 10 years"
        return None
    if key == "completionTime" and was == when:
        return None
    if not now - TIME_SKEW < when < now + TIME_SKEW:
        return "must be set to the present time"
    return None
