"""What the shared informers keep of an object: of a pod, only what the controllers read.

A real pod is 5-20 KB of JSON, most of it containers (images, commands, env, probes, mounts),
volumes, container statuses, conditions and managedFields; decoded, 50 KB of Python objects. The
controllers and interceptors read its metadata, and of its spec and status only the fields in
POD_SPEC_READ and POD_STATUS_READ. Keeping the rest would cost the leader tens of times the
memory on a large cluster (client-go's informers drop managedFields for the same reason; this
goes further), and the parts many pods have alike are kept once (see ``_share``). A
controller that comes to read another pod field adds it here.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping
from typing import Any

from nodeagent.kube.resources import PODS, Obj
from nodeagent.model.bodies import items
from nodeagent.model.names import LAST_APPLIED

__all__ = [
    "LAST_APPLIED",
    "POD_CONDITIONS_READ",
    "POD_SPEC_READ",
    "POD_STATUS_READ",
    "lean_pod",
    "transform_for",
]

POD_SPEC_READ = frozenset(
    {
        "nodeName",
        "priority",
        "priorityClassName",
        "tolerations",
        "terminationGracePeriodSeconds",
        "evictionResponders",  # the upstream Eviction's responders (model.lifecycle)
    }
)
POD_STATUS_READ = frozenset({"phase"})
# of status.conditions, only whether the pod is Ready (an eviction of an unready pod may pass a
# budget that allows no disruption: `nodeagent.model.budgets`)
POD_CONDITIONS_READ = frozenset({"Ready"})
_INTERN_MAX = 64  # names, label values, enums; not long free text


def lean_pod(pod: Obj) -> Obj:
    """`pod` with its metadata (without managedFields and kubectl's last-applied annotation)
    and only the spec and status fields the controllers read; keys and short strings interned
    (each pod decoded from JSON has its own copy of every one; shared, they cost nothing per
    pod). A new object; the input is not changed."""
    out: Obj = {k: v for k, v in pod.items() if k not in ("metadata", "spec", "status")}
    md = pod.get("metadata")
    if isinstance(md, Mapping):
        kept = {k: v for k, v in md.items() if k != "managedFields"}
        annotations = kept.get("annotations")
        if isinstance(annotations, Mapping) and LAST_APPLIED in annotations:
            kept["annotations"] = {k: v for k, v in annotations.items() if k != LAST_APPLIED}
        out["metadata"] = kept
    for section, read in (("spec", POD_SPEC_READ), ("status", POD_STATUS_READ)):
        part = pod.get(section)
        if isinstance(part, Mapping):
            out[section] = {k: v for k, v in part.items() if k in read}
    conditions = _read_conditions(pod.get("status"))
    if conditions:
        out.setdefault("status", {})["conditions"] = conditions
    interned: Obj = _interned(out)
    _share(interned.get("metadata"), _SHARED_METADATA)
    _share(interned.get("spec"), _SHARED_SPEC)
    _share(interned.get("status"), _SHARED_STATUS)
    return interned


# Parts that many pods have alike (a workload's labels, owner, tolerations; the Ready
# condition) are kept once and shared: on a real cluster a pod is one of its ReplicaSet's many.
# Informers' objects are read, never changed, so sharing is safe; a part seen once costs a
# cache entry, evicted oldest first.
_SHARED_METADATA = ("labels", "annotations", "ownerReferences")
_SHARED_SPEC = ("tolerations",)
_SHARED_STATUS = ("conditions",)
_SHARED_MAX = 8192
_shared: dict[str, Any] = {}


def _share(part: object, keys: tuple[str, ...]) -> None:
    if not isinstance(part, dict):
        return
    for key in keys:
        value = part.get(key)
        if not value:
            continue
        canonical = json.dumps(value, sort_keys=True, separators=(",", ":"))
        known = _shared.get(canonical)
        if known is None:
            if len(_shared) >= _SHARED_MAX:
                _shared.pop(next(iter(_shared)))
            _shared[canonical] = known = value
        part[key] = known


def _read_conditions(status: object) -> list[dict[str, Any]]:
    return [
        {"type": c["type"], "status": c.get("status")}
        for c in items(status, "conditions")
        if isinstance(c, Mapping) and c.get("type") in POD_CONDITIONS_READ
    ]


def _interned(value: Any) -> Any:
    if isinstance(value, str):
        return sys.intern(value) if len(value) <= _INTERN_MAX else value
    if isinstance(value, Mapping):
        return {sys.intern(str(k)): _interned(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_interned(v) for v in value]
    return value


_TRANSFORMS: dict[str, Callable[[Obj], Obj]] = {PODS.plural: lean_pod}


def transform_for(plural: str) -> Callable[[Obj], Obj] | None:
    """The transform the shared informers apply to objects of a resource, if any."""
    return _TRANSFORMS.get(plural)
