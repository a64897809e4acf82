"""The sim's evaluation of CRDs' CEL rules (sim/cel.py): where rules run, what `self` and
`oldSelf` are there, and how a failure reads. The shipped CRDs against kube-apiserver are
tests/integration/test_contract_cel.py."""

from __future__ import annotations

from typing import Any

import pytest

from nodeagent.manifests import crd_documents
from nodeagent_testbed.sim.cel import Rules, compile_rules
from nodeagent_testbed.sim.schema import Cause


def rules_of(schema: dict[str, Any]) -> Rules:
    rules, problems = compile_rules(schema)
    assert problems == [] and rules is not None
    return rules


def obj_schema(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props}


def with_rules(schema: dict[str, Any], *rules: dict[str, Any]) -> dict[str, Any]:
    return {**schema, "x-kubernetes-validations": list(rules)}


STR: dict[str, Any] = {"type": "string"}
TIME: dict[str, Any] = {"type": "string", "format": "date-time"}


def check(schema: dict[str, Any], new: Any, old: Any = None) -> list[Cause]:
    return rules_of(schema).validate(new, old)


def test_transition_rules_run_only_where_an_old_value_correlates() -> None:
    """Object fields by name; items of a map list by their keys; other lists' items never."""
    item = with_rules(obj_schema(k=STR, v=STR), {"rule": "self.v == oldSelf.v", "message": "v"})
    schema = obj_schema(
        m={
            "type": "array",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["k"],
            "items": item,
        },
        a={"type": "array", "items": item},
    )
    old = {"m": [{"k": "x", "v": "1"}], "a": [{"k": "x", "v": "1"}]}
    # the map list's item "x" moved to index 1 and changed: compared with the old "x"
    new = {"m": [{"k": "y", "v": "2"}, {"k": "x", "v": "2"}], "a": [{"k": "x", "v": "2"}]}
    assert check(schema, new, old) == [("m[1]", "Invalid value: v")]
    assert check(schema, new) == []  # create: no old value anywhere


def test_self_is_typed_by_the_schema() -> None:
    """date-time strings are timestamps; map and set lists are equal in any order; at the root
    metadata has only name and generateName."""
    schema = with_rules(
        obj_schema(
            t=TIME,
            s={"type": "array", "x-kubernetes-list-type": "set", "items": STR},
            metadata={"type": "object"},
        ),
        {"rule": "self.t == timestamp('2030-01-01T00:00:00Z')", "message": "t"},
        {"rule": "self.s == ['b', 'a']", "message": "s"},
        {"rule": "!has(self.metadata.labels) && self.metadata.name == 'n'", "message": "md"},
    )
    ok = {"t": "2030-01-01T00:00:00.000Z", "s": ["a", "b"], "metadata": {"name": "n", "labels": {}}}
    assert check(schema, ok) == []
    bad = {**ok, "t": "2030-01-01T00:00:01Z", "s": ["a", "c"]}
    assert check(schema, bad) == [("<nil>", "Invalid value: t"), ("<nil>", "Invalid value: s")]


def test_optional_old_self_runs_on_create_with_an_optional() -> None:
    schema = obj_schema(
        spec=with_rules(
            obj_schema(n={"type": "integer"}),
            {
                "rule": "oldSelf.hasValue() ? self.n >= oldSelf.value().n : self.n == 0",
                "optionalOldSelf": True,
                "message": "grows from 0",
            },
        )
    )
    assert check(schema, {"spec": {"n": 1}}) == [("spec", "Invalid value: grows from 0")]
    assert check(schema, {"spec": {"n": 0}}) == []
    assert check(schema, {"spec": {"n": 1}}, {"spec": {"n": 2}}) == [
        ("spec", "Invalid value: grows from 0")
    ]
    assert check(schema, {"spec": {"n": 3}}, {"spec": {"n": 2}}) == []


def test_failure_forms() -> None:
    """Scalar values are shown, objects' are not; reason, fieldPath, messageExpression and the
    default message; a runtime error names the rule."""
    schema = obj_schema(
        n=with_rules({"type": "integer"}, {"rule": "self < 5"}),
        o=with_rules(
            obj_schema(x=STR),
            {"rule": "self.x != 'a'", "reason": "FieldValueForbidden", "fieldPath": ".x"},
            {"rule": "self.x != 'b'", "messageExpression": "'x is ' + self.x"},
            {"rule": "self.x != 'c'", "reason": "FieldValueRequired", "message": "need"},
            {"rule": "self.y == 1", "message": "no y"},
        ),
    )
    assert check(schema, {"n": 7}) == [("n", "Invalid value: 7: failed rule: self < 5")]
    assert check(schema, {"o": {"x": "a"}})[0] == ("o.x", "Forbidden: failed rule: self.x != 'a'")
    assert check(schema, {"o": {"x": "b"}})[0] == ("o", "Invalid value: x is b")
    assert check(schema, {"o": {"x": "c"}})[0] == ("o", "Required value: need")
    assert check(schema, {"o": {"x": "d"}}) == [
        ("o", 'Invalid value: "object": no such key: y evaluating rule: no y')
    ]


def test_rules_without_old_self_ratchet_on_unchanged_values() -> None:
    """A failing rule that uses no oldSelf is not an error where the value did not change (a
    warning on kube-apiserver), or where it does not correlate and its parent did not change."""
    item = with_rules(STR, {"rule": "self != 'bad'", "message": "bad"})
    schema = obj_schema(
        a=with_rules(STR, {"rule": "self != 'bad'", "message": "bad"}),
        b={"type": "array", "items": item},
        c=STR,
    )
    old = {"a": "bad", "b": ["bad"], "c": "1"}
    assert check(schema, {**old, "c": "2"}, old) == []
    changed = {"a": "bad", "b": ["bad", "ok"], "c": "1"}
    assert check(schema, changed, old) == [("b[0]", 'Invalid value: "bad": bad')]
    assert check(schema, old) == [
        ("a", 'Invalid value: "bad": bad'),
        ("b[0]", 'Invalid value: "bad": bad'),
    ]


def test_rules_in_all_of_and_additional_properties() -> None:
    schema = obj_schema(
        m={
            "type": "object",
            "additionalProperties": with_rules(STR, {"rule": "self == oldSelf", "message": "fix"}),
        },
        n={"type": "integer", "allOf": [{"x-kubernetes-validations": [{"rule": "self > 0"}]}]},
    )
    assert check(schema, {"m": {"k": "2", "new": "1"}, "n": 0}, {"m": {"k": "1"}}) == [
        ("m.k", 'Invalid value: "2": fix'),
        ("n", "Invalid value: 0: failed rule: self > 0"),
    ]


@pytest.mark.parametrize(
    ("decl", "field", "message"),
    [
        ({"rule": "self.("}, "x-kubernetes-validations[0].rule", "compilation failed"),
        ({"rule": "true", "fieldPath": ".nope"}, "x-kubernetes-validations[0].fieldPath", "valid"),
        (
            {"rule": "true", "optionalOldSelf": True},
            "x-kubernetes-validations[0].optionalOldSelf",
            "Forbidden: may not be set if oldSelf is not used in rule",
        ),
    ],
)
def test_rules_that_make_a_crd_invalid(decl: dict[str, Any], field: str, message: str) -> None:
    _, problems = compile_rules(with_rules(obj_schema(x=STR), decl), "s")
    assert [(f, message in m) for f, m in problems] == [(f"s.{field}", True)]


def test_shipped_crds_compile() -> None:
    for crd in crd_documents():
        schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        rules, problems = compile_rules(schema)
        assert problems == [] and rules is not None, crd["metadata"]["name"]


def test_property_names_are_escaped_as_kubernetes_does() -> None:
    schema = with_rules(
        obj_schema(**{"x-y": STR, "in": STR}),
        {"rule": "self.x__dash__y == self.__in__", "message": "differ"},
    )
    assert check(schema, {"x-y": "a", "in": "a"}) == []
    assert check(schema, {"x-y": "a", "in": "b"}) == [("<nil>", "Invalid value: differ")]
