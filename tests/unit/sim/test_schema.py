"""Structural schemas of custom resources: pruning, defaulting, validation, CRD schema checks."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nodeagent_testbed.sim.cel import compile_rules
from nodeagent_testbed.sim.errors import invalid
from nodeagent_testbed.sim.schema import (
    admit_custom,
    apply_defaults,
    prune,
    validate,
    validate_crd_schema,
    validate_name,
)

# A NodeMaintenance-like schema: nested objects, arrays, enums, defaults, required, list types.
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"type": "object"},
        "spec": {
            "type": "object",
            "required": ["nodeSelector"],
            "x-kubernetes-validations": [
                {"rule": "self.stage != 'Complete'", "message": "no Complete"}
            ],
            "properties": {
                "nodeSelector": {
                    "type": "object",
                    "required": ["nodeSelectorTerms"],
                    "properties": {
                        "nodeSelectorTerms": {
                            "type": "array",
                            "minItems": 1,
                            "items": {
                                "type": "object",
                                "properties": {
                                    "matchFields": {
                                        "type": "array",
                                        "items": {
                                            "type": "object",
                                            "required": ["key", "operator"],
                                            "properties": {
                                                "key": {"type": "string"},
                                                "operator": {
                                                    "type": "string",
                                                    "enum": ["In", "NotIn"],
                                                },
                                                "values": {
                                                    "type": "array",
                                                    "items": {"type": "string"},
                                                    "x-kubernetes-list-type": "set",
                                                },
                                            },
                                        },
                                    }
                                },
                            },
                        }
                    },
                },
                "stage": {
                    "type": "string",
                    "enum": ["Idle", "Cordon", "Drain", "Complete"],
                    "default": "Idle",
                },
                "reason": {"type": "string", "maxLength": 10, "minLength": 2},
                "drainPlan": {
                    "type": "array",
                    "maxItems": 4,
                    "items": {
                        "type": "object",
                        "required": ["podPriority"],
                        "properties": {
                            "podSelector": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": True,
                            },
                            "podPriority": {
                                "type": "integer",
                                "format": "int32",
                                "minimum": -2147483648,
                                "maximum": 2000001000,
                            },
                            "podType": {
                                "type": "string",
                                "enum": ["Default", "DaemonSet", "Static"],
                                "default": "Default",
                            },
                        },
                    },
                },
                "options": {
                    "type": "object",
                    "default": {},
                    "properties": {
                        "timeoutSeconds": {"type": "integer", "default": 30, "minimum": 1},
                        "mode": {"type": "string", "default": "Fast", "nullable": True},
                        "budget": {"x-kubernetes-int-or-string": True, "pattern": "^[0-9]+%?$"},
                    },
                },
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "note": {"type": "string", "nullable": True},
                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            },
        },
        "status": {
            "type": "object",
            "properties": {
                "conditions": {
                    "type": "array",
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["type"],
                    "items": {
                        "type": "object",
                        "required": ["type", "status"],
                        "properties": {
                            "type": {"type": "string"},
                            "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
                            "lastTransitionTime": {"type": "string", "format": "date-time"},
                        },
                    },
                },
                "drainTargets": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {"podPriority": {"type": "integer"}},
                    },
                },
                "ratio": {"type": "number", "exclusiveMaximum": True, "maximum": 1},
            },
        },
    },
}


def nm(spec: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "nodeagent.io/v1alpha1",
        "kind": "NodeMaintenance",
        "metadata": {"name": "m1", "labels": {"a": "b"}, "resourceVersion": "7"},
        "spec": {
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
                ]
            },
            **(spec or {}),
        },
    }
    obj.update(extra)
    return obj


def causes_of(obj: dict[str, Any], schema: dict[str, Any] | None = None) -> list[tuple[str, str]]:
    return admit_custom(SCHEMA if schema is None else schema, obj)


# --- pruning -----------------------------------------------------------------------------------


def test_valid_object_is_admitted_and_defaulted() -> None:
    obj = nm()
    assert causes_of(obj) == []
    assert obj["spec"]["stage"] == "Idle"
    assert obj["spec"]["options"] == {"timeoutSeconds": 30, "mode": "Fast"}
    assert obj["metadata"] == {"name": "m1", "labels": {"a": "b"}, "resourceVersion": "7"}


def test_prunes_unknown_fields_at_every_level_but_keeps_root_meta() -> None:
    obj = nm(
        {
            "junk": 1,
            "drainPlan": [{"podPriority": 1, "bogus": {"x": 1}, "podSelector": {"any": {"x": 1}}}],
            "extra": {"free": ["form"]},
        },
        unknownTop=True,
    )
    obj["metadata"]["managedFields"] = [{"manager": "kubectl"}]
    dropped = prune(SCHEMA, obj)
    assert dropped == ["spec.junk", "spec.drainPlan[0].bogus", "unknownTop"]
    assert "unknownTop" not in obj
    assert obj["spec"]["drainPlan"] == [{"podPriority": 1, "podSelector": {"any": {"x": 1}}}]
    assert obj["spec"]["extra"] == {"free": ["form"]}  # x-kubernetes-preserve-unknown-fields
    assert obj["metadata"]["managedFields"] == [{"manager": "kubectl"}]  # metadata untouched


def test_root_meta_is_kept_even_when_the_schema_does_not_declare_it() -> None:
    schema = {"type": "object", "properties": {"spec": {"type": "object"}}}
    obj = {"apiVersion": "g/v1", "kind": "K", "metadata": {"name": "x"}, "spec": {"a": 1}, "b": 2}
    assert prune(schema, obj) == ["spec.a", "b"]
    assert obj == {"apiVersion": "g/v1", "kind": "K", "metadata": {"name": "x"}, "spec": {}}


def test_additional_properties_keeps_and_validates_values() -> None:
    obj = nm({"labels": {"team": "a", "tier": 3}})
    assert causes_of(obj) == [
        (
            "spec.labels.tier",
            'Invalid value: "integer": spec.labels.tier in body must be of type string: "integer"',
        )
    ]
    assert obj["spec"]["labels"] == {"team": "a", "tier": 3}


def test_embedded_resource_keeps_its_meta() -> None:
    schema = {
        "type": "object",
        "properties": {
            "template": {
                "type": "object",
                "x-kubernetes-embedded-resource": True,
                "properties": {"spec": {"type": "object", "properties": {"a": {"type": "string"}}}},
            }
        },
    }
    obj = {
        "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"x": 1}, "spec": {"b": 1}},
    }
    assert prune(schema, obj) == ["template.spec.b"]
    assert obj["template"] == {"apiVersion": "v1", "kind": "Pod", "metadata": {"x": 1}, "spec": {}}


def test_no_schema_keeps_everything_and_checks_only_the_name() -> None:
    obj = {"metadata": {"name": "UPPER"}, "anything": {"goes": True}}
    causes = admit_custom(None, obj)
    assert [c[0] for c in causes] == ["metadata.name"]
    assert obj == {"metadata": {"name": "UPPER"}, "anything": {"goes": True}}


# --- defaulting --------------------------------------------------------------------------------


def test_defaults_apply_inside_existing_objects_and_array_items() -> None:
    obj = nm({"options": {"mode": "Slow"}, "drainPlan": [{"podPriority": 5}, {"podPriority": 6}]})
    apply_defaults(SCHEMA, obj)
    assert obj["spec"]["options"] == {"mode": "Slow", "timeoutSeconds": 30}
    assert [p["podType"] for p in obj["spec"]["drainPlan"]] == ["Default", "Default"]
    assert obj["spec"]["stage"] == "Idle"


def test_defaults_recurse_into_applied_defaults() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "a": {
                "type": "object",
                "default": {"b": {}},
                "properties": {
                    "b": {"type": "object", "properties": {"c": {"type": "string", "default": "x"}}}
                },
            }
        },
    }
    obj: dict[str, Any] = {}
    apply_defaults(schema, obj)
    assert obj == {"a": {"b": {"c": "x"}}}
    # the schema's default itself is never modified
    assert schema["properties"]["a"]["default"] == {"b": {}}


def test_nulls_are_defaulted_dropped_or_kept_by_nullable() -> None:
    obj = nm({"stage": None, "reason": None, "note": None, "options": {"mode": None}})
    assert causes_of(obj) == []
    spec = obj["spec"]
    assert spec["stage"] == "Idle"  # non-nullable null with a default: defaulted
    assert "reason" not in spec  # non-nullable null without a default: dropped
    assert spec["note"] is None  # nullable: kept
    assert spec["options"]["mode"] is None  # nullable with a default: the null stays


def test_null_array_item_is_a_type_error() -> None:
    obj = nm({"labels": {}, "drainPlan": [None]})
    assert causes_of(obj) == [
        (
            "spec.drainPlan[0]",
            'Invalid value: "null": spec.drainPlan[0] in body must be of type object: "null"',
        )
    ]


# --- validation --------------------------------------------------------------------------------


def test_messages_match_the_api_server() -> None:
    obj = nm(
        {
            "stage": "Sideways",
            "reason": "far too long a reason",
            "drainPlan": [
                {"podPriority": 1},
                {"podPriority": "high"},
                {"podPriority": 3, "podType": "Foo"},
                {},
                {"podPriority": 2000001001},
            ],
        }
    )
    del obj["spec"]["nodeSelector"]
    assert causes_of(obj) == [
        ("spec.nodeSelector", "Required value"),
        (
            "spec.stage",
            'Unsupported value: "Sideways": supported values: '
            '"Idle", "Cordon", "Drain", "Complete"',
        ),
        ("spec.reason", "Too long: may not be more than 10 bytes"),
        ("spec.drainPlan", "Too many: 5: must have at most 4 items"),
        (
            "spec.drainPlan[1].podPriority",
            'Invalid value: "string": spec.drainPlan[1].podPriority in body must be of type '
            'integer: "string"',
        ),
        (
            "spec.drainPlan[2].podType",
            'Unsupported value: "Foo": supported values: "Default", "DaemonSet", "Static"',
        ),
        ("spec.drainPlan[3].podPriority", "Required value"),
        (
            "spec.drainPlan[4].podPriority",
            "Invalid value: 2000001001: spec.drainPlan[4].podPriority in body should be less "
            "than or equal to 2000001000",
        ),
    ]


def test_causes_make_an_api_server_style_status_message() -> None:
    obj = nm({"stage": "Foo"})
    err = invalid("NodeMaintenance", "m1", causes_of(obj), "nodeagent.io")
    assert err.code == 422
    assert err.message == (
        'NodeMaintenance.nodeagent.io "m1" is invalid: spec.stage: Unsupported value: "Foo": '
        'supported values: "Idle", "Cordon", "Drain", "Complete"'
    )


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (
            {"reason": "x"},
            (
                "spec.reason",
                'Invalid value: "x": spec.reason in body should be at least 2 chars long',
            ),
        ),
        (
            {"options": {"timeoutSeconds": 0}},
            (
                "spec.options.timeoutSeconds",
                "Invalid value: 0: spec.options.timeoutSeconds in body should be greater than or "
                "equal to 1",
            ),
        ),
        (
            {"options": {"budget": "ten"}},
            (
                "spec.options.budget",
                "Invalid value: \"ten\": spec.options.budget in body should match '^[0-9]+%?$'",
            ),
        ),
        (
            {"options": {"timeoutSeconds": 2.5}},
            (
                "spec.options.timeoutSeconds",
                'Invalid value: "number": spec.options.timeoutSeconds in body must be of type '
                'integer: "number"',
            ),
        ),
        (
            {"options": {"timeoutSeconds": True}},
            (
                "spec.options.timeoutSeconds",
                'Invalid value: "boolean": spec.options.timeoutSeconds in body must be of type '
                'integer: "boolean"',
            ),
        ),
        (
            {"nodeSelector": {"nodeSelectorTerms": []}},
            (
                "spec.nodeSelector.nodeSelectorTerms",
                "Invalid value: 0: spec.nodeSelector.nodeSelectorTerms in body should have at "
                "least 1 items",
            ),
        ),
        (
            {"labels": "a=b"},
            (
                "spec.labels",
                'Invalid value: "string": spec.labels in body must be of type object: "string"',
            ),
        ),
    ],
)
def test_single_violations(spec: dict[str, Any], expected: tuple[str, str]) -> None:
    assert causes_of(nm(spec)) == [expected]


def test_int_or_string() -> None:
    for ok in (10, "10", "25%", 3.0):
        assert causes_of(nm({"options": {"budget": ok}})) == [], ok
    assert causes_of(nm({"options": {"budget": False}})) == [
        (
            "spec.options.budget",
            'Invalid value: "boolean": spec.options.budget in body must be of type integer: '
            '"boolean"',
        ),
        (
            "spec.options.budget",
            'Invalid value: "boolean": spec.options.budget in body must be of type string: '
            '"boolean"',
        ),
    ]


def test_number_bounds_and_exclusive_maximum() -> None:
    assert causes_of(nm(status={"ratio": 0.5})) == []
    assert causes_of(nm(status={"ratio": 1})) == [
        ("status.ratio", "Invalid value: 1: status.ratio in body should be less than 1")
    ]


def test_date_time_format_is_checked_loosely() -> None:
    def cond(ts: str) -> dict[str, Any]:
        return {"conditions": [{"type": "Drained", "status": "True", "lastTransitionTime": ts}]}

    for ok in ("2024-05-01T12:00:00Z", "2024-05-01T12:00:00.123456+02:00", "2024-05-01 12:00"):
        assert causes_of(nm(status=cond(ok))) == [], ok
    for bad in ("yesterday", "2024-13-01T00:00:00Z", "2024-05-01T25:00:00Z"):
        path = "status.conditions[0].lastTransitionTime"
        assert causes_of(nm(status=cond(bad))) == [
            (path, f'Invalid value: "{bad}": {path} in body must be of type date-time: "{bad}"')
        ]


def test_list_type_set_and_map_duplicates_come_after_schema_errors() -> None:
    obj = nm(
        {"reason": "?"},
        status={
            "conditions": [
                {"type": "Drained", "status": "True"},
                {"type": "Cordoned", "status": "True"},
                {"type": "Drained", "status": "False"},
                {"type": "Drained", "status": "Unknown"},
            ]
        },
    )
    terms = obj["spec"]["nodeSelector"]["nodeSelectorTerms"]
    terms[0]["matchFields"][0]["values"] = ["n1", "n2", "n1"]
    assert causes_of(obj) == [
        ("spec.reason", 'Invalid value: "?": spec.reason in body should be at least 2 chars long'),
        (
            "spec.nodeSelector.nodeSelectorTerms[0].matchFields[0].values[2]",
            'Duplicate value: "n1"',
        ),
        ("status.conditions[2]", 'Duplicate value: {"type":"Drained"}'),
    ]


def test_enum_of_numbers_and_combinators() -> None:
    schema = {
        "type": "object",
        "properties": {
            "n": {"type": "integer", "enum": [1, 2]},
            "any": {"anyOf": [{"minimum": 10}, {"maximum": 0}], "type": "integer"},
            "one": {"type": "object", "oneOf": [{"required": ["a"]}, {"required": ["b"]}]},
            "not": {"type": "string", "not": {"enum": ["forbidden"]}},
        },
    }
    assert validate(schema, {"n": 2, "any": 11, "one": {"a": 1}, "not": "fine"}) == []
    assert validate(schema, {"n": 3, "any": 5, "one": {"a": 1, "b": 2}, "not": "forbidden"}) == [
        ("n", 'Unsupported value: 3: supported values: "1", "2"'),
        ("any", "Invalid value: 5: any in body must validate at least one schema (anyOf)"),
        (
            "one",
            'Invalid value: {"a":1,"b":2}: one in body must validate one and only one schema '
            "(oneOf)",
        ),
        ("not", 'Invalid value: "forbidden": not in body must not validate the schema (not)'),
    ]


def test_cel_rules_run_only_with_the_compiled_rules_and_a_valid_schema() -> None:
    # spec.x-kubernetes-validations forbids stage Complete (sim/cel.py evaluates it)
    assert causes_of(nm({"stage": "Complete"})) == []  # the schema alone
    rules, problems = compile_rules(SCHEMA)
    assert problems == []
    assert admit_custom(SCHEMA, nm({"stage": "Complete"}), None, rules) == [
        ("spec", "Invalid value: no Complete")
    ]
    # a schema error of a blocking kind (here: unsupported value) keeps the rules from running
    assert admit_custom(SCHEMA, nm({"stage": "Later"}), None, rules)[-1] == (
        "<nil>",
        "Invalid value: null: some validation rules were not checked because the object was "
        "invalid; correct the existing errors to complete validation",
    )


def test_unknown_fields_are_ignored_by_validate_alone() -> None:
    assert validate(SCHEMA, nm({"junk": {"deep": 1}})) == []


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        ("m1", True),
        ("node-1.example.com", True),
        ("a" * 253, True),
        ("Foo", False),
        ("-lead", False),
        ("trail.", False),
        ("under_score", False),
        ("a" * 254, False),
    ],
)
def test_metadata_name_is_a_dns_subdomain(name: str, ok: bool) -> None:
    causes = validate_name({"metadata": {"name": name}})
    assert (causes == []) is ok
    if not ok:
        assert all(field == "metadata.name" for field, _ in causes)
        assert causes[-1][1].startswith("Invalid value: ")


def test_metadata_name_messages() -> None:
    assert validate_name({"metadata": {"name": "Foo"}}) == [
        (
            "metadata.name",
            'Invalid value: "Foo": a lowercase RFC 1123 subdomain must consist of lower case '
            "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric "
            "character (e.g. 'example.com', regex used for validation is "
            "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
        )
    ]
    assert validate_name({"metadata": {"name": "a" * 254}})[0] == (
        "metadata.name",
        f'Invalid value: "{"a" * 254}": must be no more than 253 characters',
    )
    assert validate_name({"metadata": {"generateName": "x-"}}) == []


def test_root_schema_may_restrict_metadata_name() -> None:
    schema = {
        "type": "object",
        "properties": {
            "metadata": {
                "type": "object",
                "properties": {"name": {"type": "string", "maxLength": 5}},
            }
        },
    }
    assert admit_custom(schema, {"metadata": {"name": "toolong"}}) == [
        ("metadata.name", "Too long: may not be more than 5 bytes")
    ]


# --- CRD schema checks -------------------------------------------------------------------------


def test_the_crd_like_schema_is_structural() -> None:
    assert validate_crd_schema(SCHEMA) == []


def test_crd_schema_problems() -> None:
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {
                    "untyped": {"description": "no type"},
                    "ios": {"x-kubernetes-int-or-string": True},
                    "free": {"x-kubernetes-preserve-unknown-fields": True},
                    "arr": {"type": "array"},
                    "closed": {"type": "object", "additionalProperties": False},
                    "bad": {"type": "strin"},
                    "re": {"type": "string", "pattern": "("},
                    "stage": {"type": "string", "enum": ["A"], "default": "B"},
                    "m": {
                        "type": "array",
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["name"],
                        "items": {"type": "object", "properties": {"name": {"type": "string"}}},
                    },
                },
            }
        },
    }
    problems = validate_crd_schema(schema, "spec.versions[0].schema.openAPIV3Schema")
    p = "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties"
    assert problems == [
        f"{p}[untyped].type: Required value: must not be empty for specified object fields",
        f"{p}[arr].items: Required value: must be specified",
        f"{p}[closed].additionalProperties: Forbidden: additionalProperties cannot be set to false",
        f'{p}[bad].type: Unsupported value: "strin": supported values: "array", "boolean", '
        '"integer", "number", "object", "string"',
        f'{p}[re].pattern: Invalid value: "(": must be a valid regular expression, but isn\'t: '
        "missing ), unterminated subpattern at position 0",
        f'{p}[stage].default: Unsupported value: "B": supported values: "A"',
        f"{p}[m].items.properties[name]: Required value: this property is in "
        "x-kubernetes-list-map-keys, so it must have a default or be a required property",
    ]


def test_crd_schema_root_must_be_an_object() -> None:
    assert validate_crd_schema({"type": "array", "items": {"type": "string"}}) == [
        'openAPIV3Schema.type: Invalid value: "array": must be object at the root'
    ]
    assert validate_crd_schema({"properties": {}}) == [
        "openAPIV3Schema.type: Required value: must not be empty at the root"
    ]
    assert validate_crd_schema(
        {
            "type": "object",
            "properties": {
                "metadata": {"type": "object", "properties": {"labels": {"type": "object"}}}
            },
        }
    ) == [
        "openAPIV3Schema.properties[metadata]: Forbidden: must not specify anything other than "
        "name and generateName, but metadata is implicitly specified"
    ]


def test_crd_schema_default_with_unknown_fields() -> None:
    schema = {
        "type": "object",
        "properties": {
            "o": {"type": "object", "default": {"x": 1}, "properties": {"y": {"type": "integer"}}}
        },
    }
    assert validate_crd_schema(schema) == [
        'openAPIV3Schema.properties[o].default: Invalid value: {"x":1}: must not have unknown '
        'fields, found "x"'
    ]


# --- properties --------------------------------------------------------------------------------

_KEYS = st.sampled_from(
    [
        "apiVersion",
        "kind",
        "metadata",
        "spec",
        "status",
        "stage",
        "drainPlan",
        "podPriority",
        "podType",
        "podSelector",
        "options",
        "labels",
        "extra",
        "conditions",
        "type",
        "junk",
        "x",
    ]
)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.sampled_from(["Idle", "Drain", "a", ""]),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(_KEYS, children, max_size=4),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_KEYS, _JSON, max_size=6))
def test_pruning_is_idempotent(obj: dict[str, Any]) -> None:
    once = copy.deepcopy(obj)
    prune(SCHEMA, once)
    twice = copy.deepcopy(once)
    assert prune(SCHEMA, twice) == []
    assert twice == once


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_KEYS, _JSON, max_size=6))
def test_admission_is_idempotent(obj: dict[str, Any]) -> None:
    first = copy.deepcopy(obj)
    causes = admit_custom(SCHEMA, first)
    second = copy.deepcopy(first)
    assert admit_custom(SCHEMA, second) == causes
    assert second == first
