"""Pods from a workload's pod template, and the template hashes the controllers label them with."""

from __future__ import annotations

import copy
import json
from typing import Any

from nodeagent_testbed.sim.actors.base import owner_reference
from nodeagent_testbed.sim.store import Obj

_SAFE_ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"


def template_hash(template: Any, collision_count: int | None = None) -> str:
    """A stable hash of a pod template in the controllers' alphabet (controller.ComputeHash:
    FNV-32a, rendered with rand.SafeEncodeString). Not byte-identical to the real hash, which
    hashes Go's printing of the struct."""
    data = json.dumps(template, sort_keys=True, separators=(",", ":")).encode()
    if collision_count:
        data += str(collision_count).encode()
    h = 0x811C9DC5
    for b in data:
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return "".join(_SAFE_ALPHANUMS[ord(c) % len(_SAFE_ALPHANUMS)] for c in str(h))


def pod_from_template(
    owner: Obj,
    template: dict[str, Any],
    *,
    name: str | None = None,
    labels: dict[str, str] | None = None,
) -> Obj:
    """A pod for `owner` (controller reference set); `name` or else generateName `<owner>-`."""
    t = copy.deepcopy(template)
    tm = t.get("metadata") or {}
    m: dict[str, Any] = {
        "namespace": owner["metadata"].get("namespace", "default"),
        "labels": {**(tm.get("labels") or {}), **(labels or {})},
        "ownerReferences": [owner_reference(owner)],
    }
    if name:
        m["name"] = name
    else:
        m["generateName"] = owner["metadata"]["name"] + "-"
    for k in ("annotations", "finalizers"):
        if tm.get(k):
            m[k] = tm[k]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": m, "spec": t.get("spec") or {}}
