"""Taint toleration (core/v1 Toleration.ToleratesTaint)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["tolerates"]


def _toleration_tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    # core/v1 Toleration.ToleratesTaint; an empty effect or key is a wildcard for that part.
    effect = toleration.get("effect") or ""
    if effect and effect != (taint.get("effect") or ""):
        return False
    key = toleration.get("key") or ""
    if key and key != (taint.get("key") or ""):
        return False
    match toleration.get("operator") or "Equal":
        case "Equal":
            return bool((toleration.get("value") or "") == (taint.get("value") or ""))
        case "Exists":
            return True
        case _:
            return False


def tolerates(tolerations: Sequence[Mapping[str, Any]], taint: Mapping[str, Any]) -> bool:
    """Whether any of ``tolerations`` tolerates ``taint`` (core/v1 semantics: operator Equal by
    default, Exists ignores the value, an empty key with Exists matches every taint, an empty
    effect matches every effect)."""
    return any(_toleration_tolerates(t, taint) for t in tolerations)
