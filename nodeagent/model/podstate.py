"""A pod's phase, and whether it is gone for a drain (terminal) or leaving (terminating)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nodeagent.model.bodies import deleting

__all__ = ["pod_phase", "pod_terminal", "pod_terminating"]


def pod_phase(pod: Mapping[str, Any]) -> str:
    status = pod.get("status")
    phase = status.get("phase") if isinstance(status, Mapping) else None
    return phase if isinstance(phase, str) else ""


def pod_terminal(pod: Mapping[str, Any]) -> bool:
    """Succeeded or Failed: counts as evicted."""
    return pod_phase(pod) in ("Succeeded", "Failed")


def pod_terminating(pod: Mapping[str, Any]) -> bool:
    return deleting(pod)
