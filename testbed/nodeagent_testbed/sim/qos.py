"""A pod's resource defaults and QoS class, as kube-apiserver sets them on create
(SetDefaults_Pod and pkg/apis/core/helper/qos.ComputePodQOS)."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Any

_QUANTITY = re.compile(r"^([+-]?[0-9.]+)([eE][+-]?[0-9]+|[numkMGTPE]i?|Ki)?$")
_SUFFIXES = {
    "": Decimal(1),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
}
_QOS_RESOURCES = ("cpu", "memory")


def quantity(value: Any) -> Decimal:
    """A resource.Quantity's value; 0 for one that does not parse (validation's business)."""
    m = _QUANTITY.match(str(value).strip())
    if m is None:
        return Decimal(0)
    number, suffix = m.group(1), m.group(2) or ""
    try:
        if suffix[:1] in ("e", "E"):
            return Decimal(number + suffix)
        return Decimal(number) * _SUFFIXES[suffix]
    except (InvalidOperation, KeyError):
        return Decimal(0)


def default_requests(spec: dict[str, Any]) -> None:
    """A container's limit is its request where it states none."""
    for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        resources = c.get("resources") or {}
        limits = resources.get("limits") or {}
        if limits:
            requests = resources.setdefault("requests", {})
            for name, value in limits.items():
                requests.setdefault(name, value)
            c["resources"] = resources


def qos_class(spec: dict[str, Any]) -> str:
    requests: dict[str, Decimal] = {}
    limits: dict[str, Decimal] = {}
    guaranteed = True

    def add(into: dict[str, Decimal], values: dict[str, Any]) -> set[str]:
        found = set()
        for name, value in values.items():
            q = quantity(value)
            if name in _QOS_RESOURCES and q > 0:
                into[name] = into.get(name, Decimal(0)) + q
                found.add(name)
        return found

    pod_level = spec.get("resources")
    if pod_level is not None:
        add(requests, pod_level.get("requests") or {})
        found = add(limits, pod_level.get("limits") or {})
        guaranteed = set(_QOS_RESOURCES) <= found
    else:
        for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
            resources = c.get("resources") or {}
            add(requests, resources.get("requests") or {})
            if not set(_QOS_RESOURCES) <= add(limits, resources.get("limits") or {}):
                guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    matching = all(limits.get(n) == q for n, q in requests.items())
    if guaranteed and matching and len(requests) == len(limits):
        return "Guaranteed"
    return "Burstable"
