"""core/v1 NodeSelector validation and matching, against component-helpers' semantics."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodeagent.model.nodeselectors import node_selector_matches, validate_node_selector
from tests.unit.model.test_selectors import label_keys, label_values, selector_json

# --- node selectors -----------------------------------------------------------------------------


def _node(name: str = "n1", **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": dict(labels)}}


def _expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    req: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        req["values"] = list(values)
    return req


def _selector(*terms: Any) -> dict[str, Any]:
    return {"nodeSelectorTerms": list(terms)}


@pytest.mark.parametrize(
    ("term", "node", "matches"),
    [
        ({"matchExpressions": [_expr("zone", "In", "a", "b")]}, _node(zone="b"), True),
        ({"matchExpressions": [_expr("zone", "In", "a")]}, _node(zone="b"), False),
        ({"matchExpressions": [_expr("zone", "In", "a")]}, _node(), False),
        ({"matchExpressions": [_expr("zone", "NotIn", "a")]}, _node(), True),
        ({"matchExpressions": [_expr("zone", "NotIn", "a")]}, _node(zone="a"), False),
        ({"matchExpressions": [_expr("gpu", "Exists")]}, _node(gpu=""), True),
        ({"matchExpressions": [_expr("gpu", "DoesNotExist")]}, _node(gpu=""), False),
        ({"matchExpressions": [_expr("cpus", "Gt", "4")]}, _node(cpus="8"), True),
        ({"matchExpressions": [_expr("cpus", "Gt", "8")]}, _node(cpus="8"), False),
        ({"matchExpressions": [_expr("cpus", "Lt", "8")]}, _node(cpus="-3"), True),
        ({"matchExpressions": [_expr("cpus", "Lt", "8")]}, _node(cpus="many"), False),
        ({"matchExpressions": [_expr("cpus", "Lt", "8")]}, _node(cpus=" 3"), False),
        ({"matchExpressions": [_expr("cpus", "Lt", "8")]}, _node(), False),
        ({"matchFields": [_expr("metadata.name", "In", "n1")]}, _node("n1"), True),
        ({"matchFields": [_expr("metadata.name", "In", "n1")]}, _node("n2"), False),
        ({"matchFields": [_expr("metadata.name", "NotIn", "n1")]}, _node("n2"), True),
        (
            {
                "matchExpressions": [_expr("zone", "In", "a")],
                "matchFields": [_expr("metadata.name", "In", "n1")],
            },
            _node("n1", zone="a"),
            True,
        ),
        (
            {
                "matchExpressions": [_expr("zone", "In", "a"), _expr("gpu", "Exists")],
            },
            _node("n1", zone="a"),
            False,
        ),
        ({}, _node(), False),  # an empty term matches no objects
        ({"matchExpressions": []}, _node(), False),
        ({"matchExpressions": [_expr("zone", "Foo", "a")]}, _node(zone="a"), False),
        ({"matchFields": [_expr("metadata.uid", "In", "x")]}, _node(), False),
    ],
)
def test_node_selector_term(term: dict[str, Any], node: dict[str, Any], matches: bool) -> None:
    assert node_selector_matches(_selector(term), node) is matches


def test_node_selector_terms_are_ored_and_invalid_terms_skipped() -> None:
    selector = _selector(
        {"matchExpressions": [_expr("zone", "Bogus")]},
        {"matchExpressions": [_expr("zone", "In", "a")]},
        {"matchFields": [_expr("metadata.name", "In", "n9")]},
    )
    assert node_selector_matches(selector, _node("n1", zone="a"))
    assert node_selector_matches(selector, _node("n9"))
    assert not node_selector_matches(selector, _node("n1", zone="b"))
    assert not node_selector_matches(_selector(), _node())
    assert not node_selector_matches({}, _node())
    assert not node_selector_matches(
        _selector({"matchExpressions": [_expr("a", "Exists")]}), {"metadata": {"name": "x"}}
    ) and node_selector_matches(
        _selector({"matchExpressions": [_expr("a", "DoesNotExist")]}), {"metadata": None}
    )


def test_validate_node_selector_accepts_valid() -> None:
    assert (
        validate_node_selector(
            _selector(
                {
                    "matchExpressions": [
                        _expr("kubernetes.io/os", "In", "linux"),
                        _expr("cpus", "Gt", "-2"),
                        _expr("gpu", "DoesNotExist"),
                    ],
                    "matchFields": [_expr("metadata.name", "NotIn", "n1")],
                },
                {},
            )
        )
        == []
    )


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        ({}, "nodeSelectorTerms: must have at least one node selector term"),
        (_selector(), "nodeSelectorTerms: must have at least one node selector term"),
        ({"nodeSelectorTerms": {}}, "nodeSelectorTerms: must be a list"),
        (_selector("x"), "nodeSelectorTerms[0]: must be an object"),
        (
            _selector({"matchFields": [_expr("metadata.uid", "In", "x")]}),
            "nodeSelectorTerms[0].matchFields[0].key: only metadata.name is supported",
        ),
        (
            _selector({}, {"matchFields": [_expr("metadata.name", "Exists")]}),
            'nodeSelectorTerms[1].matchFields[0].operator: "Exists" is not supported',
        ),
        (
            _selector({"matchFields": [_expr("metadata.name", "In", "a", "b")]}),
            "nodeSelectorTerms[0].matchFields[0].values: must have exactly one element",
        ),
        (
            _selector({"matchExpressions": [_expr("a", "Foo")]}),
            'nodeSelectorTerms[0].matchExpressions[0].operator: unknown operator "Foo"',
        ),
        (
            _selector({"matchExpressions": [{"key": "a"}]}),
            "nodeSelectorTerms[0].matchExpressions[0].operator: must be specified",
        ),
        (
            _selector({"matchExpressions": [_expr("a", "In")]}),
            "nodeSelectorTerms[0].matchExpressions[0].values: must be non-empty",
        ),
        (
            _selector({"matchExpressions": [_expr("a", "Exists", "x")]}),
            "nodeSelectorTerms[0].matchExpressions[0].values: must be empty",
        ),
        (
            _selector({"matchExpressions": [_expr("a", "Gt", "1", "2")]}),
            "nodeSelectorTerms[0].matchExpressions[0].values: must have exactly one element",
        ),
        (
            _selector({"matchExpressions": [_expr("a", "Lt", "1.5")]}),
            "nodeSelectorTerms[0].matchExpressions[0].values[0]: must be an integer",
        ),
        (
            _selector({"matchExpressions": [_expr("a b", "Exists")]}),
            "nodeSelectorTerms[0].matchExpressions[0].key: invalid label key",
        ),
        (
            _selector({"matchExpressions": {"key": "a"}}),
            "nodeSelectorTerms[0].matchExpressions: must be a list",
        ),
        (
            _selector({"matchExpressions": [{"key": "a", "operator": "In", "values": "x"}]}),
            "nodeSelectorTerms[0].matchExpressions[0].values: must be a list of strings",
        ),
    ],
)
def test_validate_node_selector_errors(selector: dict[str, Any], message: str) -> None:
    errors = validate_node_selector(selector)
    assert any(message in e for e in errors), errors


@given(selector_json, st.dictionaries(label_keys, label_values, max_size=3))
def test_any_node_selector_validates_and_matches_without_raising(
    raw: Any, labels: dict[str, str]
) -> None:
    selector = raw if isinstance(raw, dict) else {"nodeSelectorTerms": raw}
    errors = validate_node_selector(selector)
    assert all(isinstance(e, str) for e in errors)
    matched = node_selector_matches(selector, {"metadata": {"name": "a", "labels": labels}})
    assert matched in (True, False)
    if matched:
        assert not errors or any(e.startswith("nodeSelectorTerms[") for e in errors)
