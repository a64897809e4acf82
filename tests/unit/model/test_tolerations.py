"""Taint toleration, against core/v1 semantics."""

from __future__ import annotations

from typing import Any

import pytest

from nodeagent.model.tolerations import tolerates

# --- tolerations --------------------------------------------------------------------------------

_TAINT = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}


@pytest.mark.parametrize(
    ("toleration", "taint", "tolerated"),
    [
        (
            {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"},
            _TAINT,
            True,
        ),
        ({"key": "dedicated", "value": "gpu"}, _TAINT, True),  # Equal is the default operator
        ({"key": "dedicated", "value": "cpu"}, _TAINT, False),
        ({"key": "dedicated", "operator": "Exists"}, _TAINT, True),
        ({"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}, _TAINT, False),
        ({"key": "other", "operator": "Exists"}, _TAINT, False),
        ({"operator": "Exists"}, _TAINT, True),  # empty key with Exists tolerates everything
        ({"operator": "Exists", "effect": "NoExecute"}, _TAINT, False),
        ({"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": ""}, _TAINT, True),
        (
            {
                "key": "node.kubernetes.io/unschedulable",
                "operator": "Exists",
                "effect": "NoSchedule",
            },
            {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"},
            True,
        ),
        ({"key": "k", "operator": "Equal"}, {"key": "k", "effect": "NoSchedule"}, True),
        (
            {"key": "k", "operator": "Equal", "value": "v"},
            {"key": "k", "effect": "NoSchedule"},
            False,
        ),
        ({"key": "dedicated", "operator": "Gt", "value": "gpu"}, _TAINT, False),
    ],
)
def test_toleration(toleration: dict[str, Any], taint: dict[str, Any], tolerated: bool) -> None:
    assert tolerates([toleration], taint) is tolerated


def test_tolerates_any_of_the_list() -> None:
    assert not tolerates([], _TAINT)
    assert tolerates(
        [{"key": "x", "operator": "Exists"}, {"key": "dedicated", "value": "gpu"}], _TAINT
    )
