"""An Eviction's responders: who they are for a pod, and the order the server holds them to."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nodeagent.model.bodies import items, mapping
from nodeagent.model.names import IMPERATIVE_RESPONDER, IMPERATIVE_RESPONDER_PRIORITY

__all__ = ["MAX_RESPONDERS", "Responder", "order_key", "pod_responders", "sort_responders"]

MAX_RESPONDERS = 11
"""A pod's ten `spec.evictionResponders` and the imperative evictor (the server's limit)."""


@dataclass(frozen=True, order=False)
class Responder:
    name: str
    priority: int


def order_key(name: str, priority: int | None) -> tuple[int, tuple[str, ...], str]:
    """The server's order (`SortTargetResponders`): highest priority first, then by domain read
    from its top label down (`io` before `acme`), the key after the slash last."""
    domain, _, key = name.partition("/")
    return (-(priority if priority is not None else -1), tuple(reversed(domain.split("."))), key)


def sort_responders(entries: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """`status.targetResponders` entries in the server's order."""

    def key(e: Mapping[str, Any]) -> tuple[int, tuple[str, ...], str]:
        p = e.get("priority")
        return order_key(str(e.get("name", "")), p if isinstance(p, int) else None)

    return sorted(entries, key=key)


def pod_responders(
    pod: Mapping[str, Any] | None, ours: Sequence[Responder] = ()
) -> Sequence[Responder]:
    """The pod's own `spec.evictionResponders` (the server validated them), `ours` (nodeagent's
    interceptors of the pod, see `ourresponders`) and the imperative evictor, in the server's
    order; the evictor always, the first ten of the others. A pod already gone has only the
    evictor."""
    own = [
        Responder(str(r["name"]), int(r["priority"]))
        for r in items(mapping(pod, "spec"), "evictionResponders")
        if isinstance(r, Mapping) and isinstance(r.get("name"), str)
        if isinstance(r.get("priority"), int) and r["name"] != IMPERATIVE_RESPONDER
    ]
    named = {r.name for r in own}
    others = [*own, *(r for r in ours if r.name not in named and r.name != IMPERATIVE_RESPONDER)]
    others.sort(key=lambda r: order_key(r.name, r.priority))
    evictor = Responder(IMPERATIVE_RESPONDER, IMPERATIVE_RESPONDER_PRIORITY)
    every = [*others[: MAX_RESPONDERS - 1], evictor]
    return sorted(every, key=lambda r: order_key(r.name, r.priority))
