"""The CRD schema check `nodeagent plan` applies to a file (tests/integration/test_plan.py
holds it to both API servers): what it refuses, worded as kube-apiserver words it, and that the
maintenances the documentation shows pass."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from nodeagent.controllers.nodemaintenance.preview import PlanError, check_against_crd
from nodeagent.model.crdschema import schema_errors

ROOT = Path(__file__).resolve().parents[3]

SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["name"],
    "properties": {
        "name": {"type": "string", "maxLength": 3},
        "size": {"type": "integer", "minimum": 1, "maximum": 9},
        "kind": {"type": "string", "enum": ["A", "B"]},
        "tags": {"type": "array", "maxItems": 2, "items": {"type": "string"}},
        "labels": {
            "type": "object",
            "maxProperties": 1,
            "additionalProperties": {"type": "string"},
        },
        "flag": {"type": "boolean"},
        "open": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    },
}


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ({"name": "abcd"}, "s.name: Too long: may not be more than 3 bytes"),
        ({}, "s.name: Required value"),
        (
            {"name": "a", "size": 0},
            "s.size: Invalid value: 0: should be greater than or equal to 1",
        ),
        ({"name": "a", "size": 10}, "s.size: Invalid value: 10: should be less than or equal to 9"),
        (
            {"name": "a", "size": True},
            's.size: Invalid value: "boolean": s.size in body must be of type integer',
        ),
        ({"name": "a", "kind": "C"}, 's.kind: Unsupported value: "C": supported values: "A", "B"'),
        ({"name": "a", "tags": ["x", "y", "z"]}, "s.tags: Too many: 3: must have at most 2 items"),
        (
            {"name": "a", "tags": [1]},
            's.tags[0]: Invalid value: "integer": s.tags[0] in body must be of type string',
        ),
        (
            {"name": "a", "labels": {"a": "1", "b": "2"}},
            "s.labels: Too many: 2: must have at most 1 items",
        ),
        (
            {"name": "a", "labels": {"a": 1}},
            's.labels.a: Invalid value: "integer": s.labels.a in body must be of type string',
        ),
        ({"name": "a", "colour": "red"}, 'unknown field "s.colour"'),
        ({"name": None}, "s.name: Invalid value: null: must not be null"),
    ],
)
def test_what_the_schema_refuses(value: dict[str, Any], said: str) -> None:
    assert schema_errors(value, SCHEMA, "s") == [said]


def test_what_the_schema_takes() -> None:
    value = {"name": "abc", "size": 9, "kind": "A", "tags": ["x"], "labels": {"a": "1"}}
    assert schema_errors({**value, "flag": False, "open": {"any": {"thing": 1}}}, SCHEMA, "s") == []


def documented_maintenances() -> list[dict[str, Any]]:
    found = []
    for page in [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]:
        for block in re.findall(r"```yaml\n(.*?)```", page.read_text(), flags=re.S):
            for doc in yaml.safe_load_all(block):
                if isinstance(doc, dict) and doc.get("kind") == "NodeMaintenance":
                    found.append(doc)
    return found


def test_the_documented_maintenances_pass() -> None:
    maintenances = documented_maintenances()
    assert maintenances
    for nm in maintenances:
        check_against_crd(nm)


def test_a_maintenance_the_crd_refuses_is_one_line_naming_the_field() -> None:
    nm = {
        "kind": "NodeMaintenance",
        "metadata": {"name": "m"},
        "spec": {"nodeSelector": {"nodeSelectorTerms": []}, "reason": "x" * 1025, "colour": 1},
    }
    with pytest.raises(PlanError) as refused:
        check_against_crd(nm)
    assert str(refused.value) == (
        "NodeMaintenance m: spec.reason: Too long: may not be more than 1024 bytes (and 1 more)"
    )
