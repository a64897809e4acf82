"""The string forms of label and field selectors, which only the simulated API server parses
(`nodeagent_testbed.sim.selectors`): parsing and its errors, matching, the round trip through
`to_string`, and robustness against whatever a request carries."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodeagent.model.selectors import (
    LabelSelector,
    Operator,
    Requirement,
    SelectorError,
    label_selector_from_dict,
)
from nodeagent_testbed.sim.selectors import (
    FieldRequirement,
    FieldSelector,
    parse_field_selector,
    parse_label_selector,
)
from tests.unit.model.test_selectors import label_selectors, selector_json

# --- label selector strings ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", ()),
        ("   ", ()),
        ("a=b", (Requirement("a", Operator.EQUALS, ("b",)),)),
        ("a==b", (Requirement("a", Operator.EQUALS, ("b",)),)),
        ("a!=b", (Requirement("a", Operator.NOT_EQUALS, ("b",)),)),
        ("a=", (Requirement("a", Operator.EQUALS, ("",)),)),
        ("a in (x,y)", (Requirement("a", Operator.IN, ("x", "y")),)),
        ("a in (y,x,y)", (Requirement("a", Operator.IN, ("x", "y")),)),
        ("a notin (x)", (Requirement("a", Operator.NOT_IN, ("x",)),)),
        ("a in ()", (Requirement("a", Operator.IN, ("",)),)),
        ("a in (x,,y)", (Requirement("a", Operator.IN, ("", "x", "y")),)),
        ("a", (Requirement("a", Operator.EXISTS),)),
        ("!a", (Requirement("a", Operator.DOES_NOT_EXIST),)),
        ("! a", (Requirement("a", Operator.DOES_NOT_EXIST),)),
        # keywords are only operators in operator position
        ("in in (in,notin)", (Requirement("in", Operator.IN, ("in", "notin")),)),
        (
            " tier  in( web , db ) ,app.kubernetes.io/name = nginx,!canary ",
            (
                Requirement("app.kubernetes.io/name", Operator.EQUALS, ("nginx",)),
                Requirement("canary", Operator.DOES_NOT_EXIST),
                Requirement("tier", Operator.IN, ("db", "web")),
            ),
        ),
    ],
)
def test_parse_label_selector(text: str, expected: tuple[Requirement, ...]) -> None:
    assert parse_label_selector(text).requirements == expected


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("a b", "found 'b' at position 2"),
        ("a in (x y)", "found 'y'"),
        ("a in x", "expected '(' after a in"),
        ("a in (x", "unexpected end of selector"),
        ("a,", "unexpected end of selector, expected a label key"),
        (",a", "found ','"),
        ("!a=b", "found '='"),
        ("!!a", "found '!'"),
        ("a=b=c", "found '='"),
        ("a>1", "Gt/Lt are not supported"),
        ("-bad=x", "invalid label key '-bad'"),
        ("a=b c", "found 'c'"),
        ("a=-b", "invalid label value '-b'"),
        ("a in (x,-y)", "invalid label value '-y'"),
        ("a=(", "found '('"),
    ],
)
def test_parse_label_selector_errors_name_the_bad_part(text: str, names: str) -> None:
    with pytest.raises(SelectorError, match="invalid label selector") as info:
        parse_label_selector(text)
    assert names in str(info.value)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    ("text", "labels", "matches"),
    [
        ("", {}, True),
        ("a=b", {"a": "b"}, True),
        ("a=b", {"a": "c"}, False),
        ("a=b", {}, False),
        ("a=", {"a": ""}, True),
        ("a=", {}, False),
        ("a!=b", {"a": "c"}, True),
        ("a!=b", {}, True),  # absent labels satisfy negative requirements
        ("a!=b", {"a": "b"}, False),
        ("a in (x,y)", {"a": "y"}, True),
        ("a in (x,y)", {}, False),
        ("a notin (x,y)", {}, True),
        ("a notin (x,y)", {"a": "x"}, False),
        ("a", {"a": ""}, True),
        ("a", {"b": "a"}, False),
        ("!a", {}, True),
        ("!a", {"a": "x"}, False),
        ("a=b,c", {"a": "b", "c": "d"}, True),
        ("a=b,c", {"a": "b"}, False),
    ],
)
def test_label_selector_matches(text: str, labels: dict[str, str], matches: bool) -> None:
    assert parse_label_selector(text).matches(labels) is matches


@given(label_selectors)
def test_label_selector_string_round_trip(selector: LabelSelector) -> None:
    assert parse_label_selector(selector.to_string()) == selector


# --- field selector strings ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", ()),
        ("metadata.name=foo", (FieldRequirement("metadata.name", "=", "foo"),)),
        ("metadata.name==foo", (FieldRequirement("metadata.name", "=", "foo"),)),
        ("spec.nodeName!=", (FieldRequirement("spec.nodeName", "!=", ""),)),
        (
            "status.phase = Running , spec.nodeName=n1",
            (
                FieldRequirement("status.phase", "=", "Running"),
                FieldRequirement("spec.nodeName", "=", "n1"),
            ),
        ),
        ("a=x\\,y\\=z\\\\", (FieldRequirement("a", "=", "x,y=z\\"),)),
        ("a=b,,c=d", (FieldRequirement("a", "=", "b"), FieldRequirement("c", "=", "d"))),
    ],
)
def test_parse_field_selector(text: str, expected: tuple[FieldRequirement, ...]) -> None:
    assert parse_field_selector(text).requirements == expected


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("metadata.name", "'metadata.name' has no operator"),
        ("=foo", "'=foo' has no field"),
        ("a=b=c", "unescaped '='"),
        ("a=b\\x", "invalid escape sequence '\\\\x'"),
        ("a=b\\", "invalid escape sequence"),
        ("a in (x)", "has no operator"),
        ("a!!=b", "invalid field path 'a!'"),
        ("a b=c", "invalid field path 'a b'"),
        ("a..b=c", "invalid field path 'a..b'"),
    ],
)
def test_parse_field_selector_errors(text: str, names: str) -> None:
    with pytest.raises(SelectorError, match="invalid field selector") as info:
        parse_field_selector(text)
    assert names in str(info.value)


_POD: dict[str, Any] = {
    "metadata": {"name": "web-0", "namespace": "default"},
    "spec": {"nodeName": "n1", "hostNetwork": True, "containers": [{"name": "c"}]},
    "status": {"phase": "Running"},
}


@pytest.mark.parametrize(
    ("text", "obj", "matches"),
    [
        ("metadata.name=web-0", _POD, True),
        ("metadata.name=web-1", _POD, False),
        ("metadata.namespace=default,status.phase=Running", _POD, True),
        ("metadata.namespace=default,status.phase!=Running", _POD, False),
        ("spec.nodeName=n1", _POD, True),
        ("spec.nodeName=", _POD, False),
        ("spec.nodeName=", {"spec": {}}, True),  # a missing field compares as ""
        ("spec.nodeName!=", {"metadata": {}}, False),
        ("spec.hostNetwork=true", _POD, True),
        ("spec.hostNetwork=false", {"spec": {}}, True),  # Go zero value of a bool field
        ("spec.unschedulable=true", {"spec": {"unschedulable": True}}, True),
        ("spec.unschedulable=false", {"spec": {}}, True),
        ("spec.unschedulable!=true", {"spec": {"unschedulable": False}}, True),
        ("status.replicas=3", {"status": {"replicas": 3}}, True),
        ("status.replicas=0", {"status": {}}, True),
        ("involvedObject.name=web-0", {"involvedObject": {"name": "web-0"}}, True),
        ("spec.containers=", _POD, False),  # objects and lists equal no value
        ("spec.containers!=x", _POD, True),
        ("metadata.name.x=", _POD, True),  # walking through a scalar finds nothing
    ],
)
def test_field_selector_matches(text: str, obj: dict[str, Any], matches: bool) -> None:
    assert parse_field_selector(text).matches(obj) is matches


def test_field_requirement_validates() -> None:
    with pytest.raises(SelectorError, match="invalid field path"):
        FieldRequirement("a=", "=", "x")
    with pytest.raises(SelectorError, match="unknown operator"):
        FieldRequirement("a", "==", "x")  # type: ignore[arg-type]


def test_requires_exact_match() -> None:
    fs = parse_field_selector("spec.nodeName=n1,status.phase!=Failed")
    assert fs.requires_exact_match("spec.nodeName") == "n1"
    assert fs.requires_exact_match("status.phase") is None
    assert fs.requires_exact_match("metadata.name") is None
    assert FieldSelector().is_everything and FieldSelector().matches({})


_field_names = st.lists(
    st.text(alphabet="abcXYZ", min_size=1, max_size=5), min_size=1, max_size=3
).map(".".join)


_field_values = st.text(max_size=8).filter(lambda v: v == v.strip())


@given(
    st.lists(
        st.builds(FieldRequirement, _field_names, st.sampled_from(["=", "!="]), _field_values),
        max_size=4,
    )
)
def test_field_selector_string_round_trip(reqs: list[FieldRequirement]) -> None:
    selector = FieldSelector(tuple(reqs))
    assert parse_field_selector(selector.to_string()) == selector


@given(_field_names, _field_values)
def test_field_selector_compares_the_value_at_the_path(path: str, value: str) -> None:
    obj: dict[str, Any] = {}
    node = obj
    *parents, leaf = path.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    node[leaf] = value
    assert FieldSelector((FieldRequirement(path, "=", value),)).matches(obj)
    assert not FieldSelector((FieldRequirement(path, "!=", value),)).matches(obj)


# --- robustness: the API server feeds these straight from requests ------------------------------


@given(st.text(alphabet="ab.-_/=!(),<> \t\\", max_size=16) | st.sampled_from(["in", "notin"]))
def test_any_label_selector_string_parses_or_raises_selector_error(text: str) -> None:
    try:
        selector = parse_label_selector(text)
    except SelectorError:
        return
    assert parse_label_selector(selector.to_string()) == selector


@given(st.text(alphabet="ab.=!,\\ ", max_size=16))
def test_any_field_selector_string_parses_or_raises_selector_error(text: str) -> None:
    try:
        selector = parse_field_selector(text)
    except SelectorError:
        return
    assert parse_field_selector(selector.to_string()) == selector


@given(st.dictionaries(st.sampled_from(["matchLabels", "matchExpressions"]), selector_json))
def test_any_label_selector_object_converts_or_raises_selector_error(raw: dict[str, Any]) -> None:
    try:
        selector = label_selector_from_dict(raw)
    except SelectorError:
        return
    assert parse_label_selector(selector.to_string()) == selector
