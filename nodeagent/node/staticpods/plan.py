"""The static-pod interceptor's first decision about an EvictionRequest, pure: whether it acts
at all, finishes at once (the pod is gone, or is not a static pod), or goes on to the manifest
directory (which `interceptor.py` reads and moves, I/O this module never does).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal

from nodeagent.model.drainplan import MIRROR_ANNOTATION
from nodeagent.node.staticpods.policy import INTERCEPTOR, EvictionView, interceptor_entry

__all__ = ["EvictionPlan", "is_mirror", "plan_eviction"]


def is_mirror(pod: Mapping[str, Any]) -> bool:
    return MIRROR_ANNOTATION in ((pod.get("metadata") or {}).get("annotations") or {})


@dataclass(frozen=True)
class EvictionPlan:
    """``skip``: nothing to do; ``finish``: write ``entry`` (with completionTime) and stop;
    ``stop_pod``: the request's static pod is there, find and move its manifest."""

    action: Literal["skip", "finish", "stop_pod"]
    entry: Mapping[str, Any] | None = None


def plan_eviction(
    view: EvictionView, pod: Mapping[str, Any] | None, *, now: str, heartbeat_every: timedelta
) -> EvictionPlan:
    """``pod``: the cached pod of the request's name (any UID), ``now`` a meta/v1 Time."""
    if view.completed or (view.entry is None and (view.finished or not view.active)):
        return EvictionPlan("skip")  # done, or not our turn (and we never started)
    message = None
    if pod is None or (pod.get("metadata") or {}).get("uid") != view.pod_uid:
        message = (
            f"static pod {view.namespace}/{view.pod_name} is gone"
            if view.entry
            else f"pod {view.namespace}/{view.pod_name} is gone already"
        )
    elif not is_mirror(pod):
        message = (
            f"declined: {view.namespace}/{view.pod_name} is not a static (mirror) pod; "
            f"{INTERCEPTOR} only stops static pods"
        )
    if message is None:
        return EvictionPlan("stop_pod")
    entry = interceptor_entry(
        view.entry,
        now=now,
        message=message,
        completion_time=now,
        heartbeat_every=heartbeat_every,
    )
    return EvictionPlan("finish", entry)
