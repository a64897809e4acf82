"""Which of a pod's Evictions counts, and what the next one is called.

Kubernetes' own controller names an Eviction `pod-<N>-<pod name>`, N one more than the highest
of that pod name's in the namespace, and keeps a failed or canceled Eviction beside its
successor: a new Eviction intent after an unsuccessful Eviction makes the next one. The name is
"purely informative and subject to change" (the API's words): this module is that choice's one
place. Everyone who reads a target's outcome (the controller, the NodeMaintenance controller's
requests, the eviction bridge) reads it from :func:`current`."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from nodeagent.model.bodies import condition, deleting, items, mapping, metadata_of

__all__ = [
    "FAILED",
    "FIRST",
    "TARGET_EVICTED",
    "adopt",
    "current",
    "final",
    "new_intent",
    "next_name",
    "pod_name_index",
    "refused",
    "target_index",
]

TARGET_EVICTED = "TargetEvicted"
FAILED = "Failed"
FIRST = 1
"""N of a pod name's first Eviction."""
_MAX_NAME = 253
_NAMED = re.compile(r"pod-(\d+)-(.+)")


def final(status: Mapping[str, Any]) -> bool:
    return any(
        (c := condition(status, t)) is not None and c.get("status") == "True"
        for t in (TARGET_EVICTED, FAILED)
    )


def refused(status: Mapping[str, Any]) -> bool:
    """Refused as a duplicate of another Eviction of the target: never the target's."""
    return _failed_with(status) == "EvictionInvalid"


def _failed_with(status: Mapping[str, Any]) -> str | None:
    c = condition(status, FAILED)
    return str(c.get("reason")) if c is not None and c.get("status") == "True" else None


def adopt(evictions: Sequence[Mapping[str, Any]]) -> tuple[Mapping[str, Any] | None, list[Any]]:
    """The target's Eviction and the duplicates to refuse: the oldest one still under way (the
    others under way are duplicates), else the newest that ended (its outcome stands until a
    new intent makes the next one). Refused and deleted ones are nobody's."""
    live = [e for e in evictions if not deleting(e) and not refused(mapping(e, "status"))]
    open_ = [e for e in live if not final(mapping(e, "status"))]
    if open_:
        # creation times have whole seconds: within one, the one under way (with responders) wins
        open_.sort(
            key=lambda e: (
                str(metadata_of(e).get("creationTimestamp", "")),
                not items(mapping(e, "status"), "targetResponders"),
                _number(e),
                _name(e),
            )
        )
        return open_[0], open_[1:]
    if not live:
        return None, []
    newest = max(live, key=lambda e: (_number(e), str(metadata_of(e).get("creationTimestamp", ""))))
    return newest, []


def current(evictions: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The Eviction a target's requests mirror."""
    return adopt(evictions)[0]


def new_intent(status: Mapping[str, Any], intents: Mapping[str, str]) -> bool:
    """Whether a requester wants the eviction that the ended Eviction's `status` did not see
    wanted: a new requester, or one that withdrew and asked again."""
    seen = {
        str(r.get("name")): r.get("intent")
        for r in items(status, "requesters")
        if isinstance(r, Mapping)
    }
    return any(i == "Eviction" and seen.get(name) != "Eviction" for name, i in intents.items())


def next_name(pod_name: str, siblings: Iterable[Mapping[str, Any]]) -> str:
    """`pod-<N>-<pod name>`, N one more than the highest of `siblings` (the namespace's Evictions
    of the pod name, :func:`pod_name_index`), cut to the server's length."""
    n = max((_number(e, pod_name) for e in siblings), default=FIRST - 1) + 1
    return _named(n, pod_name)


def _named(n: int, pod_name: str) -> str:
    return f"pod-{n}-{pod_name}"[:_MAX_NAME]


def target_index(obj: Mapping[str, Any]) -> list[str]:
    """``namespace/pod-UID`` of a request's or an Eviction's target pod (an informer index:
    every request and Eviction of one pod under one key)."""
    namespace = metadata_of(obj).get("namespace")
    uid = mapping(mapping(mapping(obj, "spec"), "target"), "pod").get("uid")
    return [f"{namespace}/{uid}"] if namespace and isinstance(uid, str) and uid else []


def pod_name_index(obj: Mapping[str, Any]) -> list[str]:
    """``namespace/pod name`` of an Eviction's target, and of the pod its name claims (a
    hand-made one may take a name of the form for another target)."""
    namespace = metadata_of(obj).get("namespace")
    target = mapping(mapping(mapping(obj, "spec"), "target"), "pod").get("name")
    names = {n for n in (target, _claims(obj)) if isinstance(n, str) and n}
    return [f"{namespace}/{n}" for n in sorted(names)] if namespace else []


def _claims(eviction: Mapping[str, Any]) -> str | None:
    """The pod name an Eviction's name is of the form for (None: not of the form)."""
    m = _NAMED.fullmatch(_name(eviction))
    return m.group(2) if m else None


def _number(eviction: Mapping[str, Any], pod_name: str | None = None) -> int:
    """N of an Eviction named in the form (for `pod_name`, if given), else one less than the
    first."""
    name = _name(eviction)
    m = _NAMED.fullmatch(name)
    if m is None or (pod_name is not None and _named(int(m.group(1)), pod_name) != name):
        return FIRST - 1
    return int(m.group(1))


def _name(obj: Mapping[str, Any]) -> str:
    return str(metadata_of(obj).get("name", ""))
