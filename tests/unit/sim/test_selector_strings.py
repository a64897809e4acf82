"""The sim's label and field selectors (`nodeagent_testbed.sim.selectors`): parsing the string
forms and their errors, converting selector objects, label key and value checks worded as the
server words them, matching, the round trip through `to_string`, robustness against whatever a
request carries, and agreement with the agent's `nodeagent.model.selectors` over random input
(two implementations written apart: where they differ, one of them is wrong)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodeagent.model import selectors as agent
from nodeagent_testbed.sim.selectors import (
    EVERYTHING,
    NOTHING,
    FieldRequirement,
    FieldSelector,
    LabelSelector,
    Requirement,
    SelectorError,
    field_value,
    label_key_errors,
    label_selector_as_selector,
    label_value_errors,
    new_requirement,
    parse_field_selector,
    parse_label_selector,
)
from tests.unit.model.test_selectors import label_keys, label_selectors, label_sets, selector_json

_NAME_RULE = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
_VALUE_RULE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?"
    "[A-Za-z0-9])?')"
)
_PREFIX_RULE = (
    "prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
    "characters, '-' or '.', and must start and end with an alphanumeric character (e.g. "
    "'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)

# --- label keys and values ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "errors"),
    [
        ("app.kubernetes.io/name", []),
        ("A_b.c-1", []),
        ("", ["name part must be non-empty", f"name part {_NAME_RULE}"]),
        ("/a", ["prefix part must be non-empty"]),
        ("Example.com/a", [_PREFIX_RULE]),
        ("-a", [f"name part {_NAME_RULE}"]),
        ("a" * 64, ["name part must be no more than 63 characters"]),
        (
            "a/b/c",
            [
                f"a qualified name {_NAME_RULE} with an optional DNS subdomain prefix and '/' "
                "(e.g. 'example.com/MyName')"
            ],
        ),
    ],
)
def test_label_keys_as_the_server_words_them(key: str, errors: list[str]) -> None:
    assert label_key_errors(key) == errors


def test_label_values_as_the_server_words_them() -> None:
    assert label_value_errors("") == []
    assert label_value_errors("v1.2_3-x") == []
    assert label_value_errors("x.") == [_VALUE_RULE]
    assert label_value_errors("a" * 64) == ["must be no more than 63 characters"]


_key_texts = (
    label_keys
    | st.text(alphabet="aZ0-_./ ", max_size=8)
    | st.builds(lambda n, tail: "a" * n + tail, st.integers(60, 66), st.sampled_from(["", "/a"]))
    | st.builds(lambda n: "a." * n + "a/b", st.integers(124, 128))
)


@given(_key_texts)
def test_label_keys_agree_with_the_agents(key: str) -> None:
    assert (label_key_errors(key) == []) == (agent.validate_label_key(key) is None)
    assert (label_value_errors(key) == []) == (agent.validate_label_value(key) is None)


# --- label requirements -------------------------------------------------------------------------


def test_new_requirement_gives_every_reason() -> None:
    assert new_requirement("a", "in", ["y", "x"]) == Requirement("a", "in", ("y", "x"))
    with pytest.raises(SelectorError) as info:
        new_requirement("a b", "exists", ["-x"])
    assert str(info.value) == (
        f'[key: Invalid value: "a b": name part {_NAME_RULE}, values: Invalid value: '
        '[]string{"-x"}: values set must be empty for exists and does not exist, '
        f'values[0][a b]: Invalid value: "-x": {_VALUE_RULE}]'
    )
    with pytest.raises(SelectorError, match="exact-match compatibility requires one single value"):
        new_requirement("a", "=", ["x", "y"])


# --- label selector strings ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", ()),
        ("   ", ()),
        ("a=b", (Requirement("a", "=", ("b",)),)),
        ("a==b", (Requirement("a", "==", ("b",)),)),
        ("a!=b", (Requirement("a", "!=", ("b",)),)),
        ("a=", (Requirement("a", "=", ("",)),)),
        ("a in (x,y)", (Requirement("a", "in", ("x", "y")),)),
        ("a in (y,x,y)", (Requirement("a", "in", ("x", "y")),)),
        ("a notin (x)", (Requirement("a", "notin", ("x",)),)),
        ("a in ()", (Requirement("a", "in", ("",)),)),
        ("a in (x,,y)", (Requirement("a", "in", ("", "x", "y")),)),
        ("a", (Requirement("a", "exists"),)),
        ("!a", (Requirement("a", "!"),)),
        ("! a", (Requirement("a", "!"),)),
        # keywords are only operators in operator position
        ("in in (in,notin)", (Requirement("in", "in", ("in", "notin")),)),
        (
            " tier  in( web , db ) ,app.kubernetes.io/name = nginx,\t!canary ",
            (
                Requirement("app.kubernetes.io/name", "=", ("nginx",)),
                Requirement("canary", "!"),
                Requirement("tier", "in", ("db", "web")),
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
        ("a=b c", "found 'c'"),
        ("a=(", "found '('"),
    ],
)
def test_parse_label_selector_syntax_errors_name_the_bad_part(text: str, names: str) -> None:
    with pytest.raises(SelectorError, match="invalid label selector") as info:
        parse_label_selector(text)
    assert names in str(info.value)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # as kube-apiserver's after its "unable to parse requirement: "
        ("-bad=x", f'<nil>: Invalid value: "-bad": name part {_NAME_RULE}'),
        ("a\x0bb", f'<nil>: Invalid value: "a\\vb": name part {_NAME_RULE}'),
        ("\u00e9", f'<nil>: Invalid value: "\u00e9": name part {_NAME_RULE}'),
        ("a=-b", f'values[0][a]: Invalid value: "-b": {_VALUE_RULE}'),
        ("a in (x,-y)", f'values[0][a]: Invalid value: "-y": {_VALUE_RULE}'),
    ],
)
def test_parse_label_selector_invalid_keys_and_values(text: str, message: str) -> None:
    with pytest.raises(SelectorError) as info:
        parse_label_selector(text)
    assert str(info.value) == message


@pytest.mark.parametrize(
    ("text", "labels", "matches"),
    [
        ("", {}, True),
        ("a=b", {"a": "b"}, True),
        ("a=b", {"a": "c"}, False),
        ("a=b", {}, False),
        ("a==b", {"a": "b"}, True),
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


def test_everything_and_nothing() -> None:
    assert EVERYTHING.is_everything and EVERYTHING.matches({"a": "b"})
    assert not NOTHING.is_everything and not NOTHING.matches({})
    # apimachinery prints Nothing() as "", which a list call reads as everything
    with pytest.raises(SelectorError):
        NOTHING.to_string()
    with pytest.raises(SelectorError):
        LabelSelector((Requirement("a", "exists"),), select_nothing=True)
    assert parse_label_selector("b,a").to_string() == "a,b"


@st.composite
def _selector_and_labels(draw: st.DrawFn) -> tuple[agent.LabelSelector, dict[str, str]]:
    """An agent's selector and labels near it: its keys, with its values or others."""
    selector = draw(label_selectors)
    near = {
        r.key: draw(st.sampled_from([*r.values, "other", ""]))
        for r in selector.requirements
        if draw(st.booleans())
    }
    return selector, {**draw(label_sets), **near}


@given(_selector_and_labels())
def test_label_selector_strings_agree_with_the_agents(
    case: tuple[agent.LabelSelector, dict[str, str]],
) -> None:
    selector, labels = case
    parsed = parse_label_selector(selector.to_string())
    assert parsed.matches(labels) == selector.matches(labels)
    assert parsed.to_string() == selector.to_string()
    assert parse_label_selector(parsed.to_string()) == parsed


# --- metav1.LabelSelector objects ---------------------------------------------------------------


def test_null_selects_nothing_and_empty_everything() -> None:
    assert label_selector_as_selector(None) == NOTHING
    assert label_selector_as_selector({}) == EVERYTHING
    assert label_selector_as_selector({"matchLabels": None, "matchExpressions": []}) == EVERYTHING


def test_label_selector_as_selector() -> None:
    selector = label_selector_as_selector(
        {
            "matchLabels": {"app": "web"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["fe", "be"]},
                {"key": "env", "operator": "NotIn", "values": ["prod"]},
                {"key": "canary", "operator": "DoesNotExist"},
                {"key": "team", "operator": "Exists", "values": []},
            ],
        }
    )
    assert selector.to_string() == "app=web,!canary,env notin (prod),team,tier in (be,fe)"
    assert selector.matches({"app": "web", "tier": "fe", "team": "x"})
    assert not selector.matches({"app": "web", "tier": "fe", "team": "x", "env": "prod"})
    assert not selector.matches({"app": "web", "tier": "fe"})


def test_label_selector_objects_as_the_decoder_reads_them() -> None:
    # the server drops what the type does not have: a misspelt matchLabels selects everything
    assert label_selector_as_selector({"matchLabel": {"app": "web"}}) == EVERYTHING
    # and leaves a string null its zero value
    assert label_selector_as_selector({"matchLabels": {"a": None}}).matches({"a": ""})
    with pytest.raises(SelectorError, match="json: cannot unmarshal number into Go struct field"):
        label_selector_as_selector({"matchLabels": {"a": 1}})
    with pytest.raises(SelectorError, match=r"cannot unmarshal object .* of type \[\]string"):
        label_selector_as_selector({"matchExpressions": [{"key": "a", "values": {}}]})


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        (
            {"matchExpressions": [{"key": "a", "operator": "In"}]},
            "values: Invalid value: []string(nil): for 'in', 'notin' operators, values set "
            "can't be empty",
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]},
            'values: Invalid value: []string{"x"}: values set must be empty for exists and does '
            "not exist",
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "Foo"}, {"key": "-b"}]},
            '"Foo" is not a valid label selector operator',
        ),
        ({"matchExpressions": [{"key": "a"}]}, '"" is not a valid label selector operator'),
        (
            {"matchExpressions": [{"key": "a b", "operator": "Exists"}]},
            f'key: Invalid value: "a b": name part {_NAME_RULE}',
        ),
        (
            {"matchLabels": {"b": "-x", "a/b/c": "x"}},  # matchLabels in key order
            'key: Invalid value: "a/b/c": a qualified name',
        ),
        ({"matchLabels": {"a": "-x"}}, f'values[0][a]: Invalid value: "-x": {_VALUE_RULE}'),
    ],
)
def test_label_selector_object_errors_as_the_server_words_them(
    selector: dict[str, Any], message: str
) -> None:
    with pytest.raises(SelectorError) as info:
        label_selector_as_selector(selector)
    assert str(info.value).startswith(message)


def _served_string(value: object) -> object:
    return "" if value is None else value


def _served_expression(expr: object) -> object:
    if expr is None:
        return {}  # the zero LabelSelectorRequirement
    if not isinstance(expr, dict):
        return expr
    out = {k: _served_string(v) for k, v in expr.items() if k in ("key", "operator")}
    if "values" in expr:
        values = expr["values"]
        out["values"] = [_served_string(v) for v in values] if isinstance(values, list) else values
    return out


def _as_served(raw: dict[str, Any]) -> dict[str, Any]:
    """`raw` as the server's decoder leaves it, hence as the agent reads it: fields the type does
    not have dropped, a null string "" (the agent refuses both, which it never reads)."""
    out: dict[str, Any] = {}
    if isinstance(labels := raw.get("matchLabels"), dict):
        out["matchLabels"] = {k: _served_string(v) for k, v in labels.items()}
    elif labels is not None:
        out["matchLabels"] = labels
    if isinstance(expressions := raw.get("matchExpressions"), list):
        out["matchExpressions"] = [_served_expression(e) for e in expressions]
    elif expressions is not None:
        out["matchExpressions"] = expressions
    return out


_good_values = st.sampled_from(["", "a", "x", "web"])
_any_values = st.sampled_from(["", "a", "x", "web", "-x", "a b", None, 1])
_selector_objects = st.fixed_dictionaries(
    {},
    optional={
        "matchLabels": st.dictionaries(label_keys, _good_values, max_size=3)
        | st.dictionaries(label_keys | st.just("-k"), _any_values, max_size=2),
        "matchExpressions": st.lists(
            st.fixed_dictionaries(
                {
                    "key": label_keys,
                    "operator": st.sampled_from(["In", "NotIn"]),
                    "values": st.lists(_good_values, min_size=1, max_size=3),
                }
            )
            | st.fixed_dictionaries(
                {"key": label_keys, "operator": st.sampled_from(["Exists", "DoesNotExist"])}
            )
            | st.fixed_dictionaries(
                {"key": label_keys | st.sampled_from(["", "a b", None])},
                optional={
                    "operator": st.sampled_from(["In", "Exists", "Gt", "", None]),
                    "values": st.lists(_any_values, max_size=2),
                },
            ),
            max_size=3,
        ),
    },
)


@given(
    _selector_objects
    | st.dictionaries(st.sampled_from(["matchLabels", "matchExpressions", "a"]), selector_json),
    label_sets,
)
def test_label_selector_objects_agree_with_the_agents(
    raw: dict[str, Any], labels: dict[str, str]
) -> None:
    try:
        expected: agent.LabelSelector | None = agent.label_selector_from_dict(_as_served(raw))
    except agent.SelectorError:
        expected = None
    try:
        selector: LabelSelector | None = label_selector_as_selector(raw)
    except SelectorError:
        selector = None
    assert (selector is None) == (expected is None)
    if selector is not None and expected is not None:
        # the same requirements (Go prints a value given twice twice; the agent once)
        strings = (selector.to_string(), expected.to_string())
        assert parse_label_selector(strings[0]) == parse_label_selector(strings[1])
        assert selector.matches(labels) == expected.matches(labels)
        near = {r.key: (r.values or ("",))[0] for r in selector.requirements}
        assert selector.matches(near) == expected.matches(near)


# --- field values -------------------------------------------------------------------------------

_field_parts = st.sampled_from(["spec", "status", "unschedulable", "hostNetwork", "replicas", "a"])
_leaves = st.none() | st.booleans() | st.integers(-2, 2) | st.floats(-2, 2) | st.text(max_size=3)
_objects = st.recursive(
    _leaves,
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(_field_parts, inner, max_size=4),
    max_leaves=10,
)


@given(st.dictionaries(_field_parts, _objects, max_size=4), st.lists(_field_parts, min_size=1))
def test_field_values_agree_with_the_agents(obj: dict[str, Any], parts: list[str]) -> None:
    path = ".".join(parts)
    assert field_value(obj, path) == agent.field_value(obj, path)


def test_field_values_read_go_zero_values() -> None:
    assert field_value({"spec": {}}, "spec.unschedulable") == "false"
    assert field_value({}, "spec.hostNetwork") == "false"
    assert field_value({"status": {"replicas": None}}, "status.replicas") == "0"
    assert field_value({"status": {"replicas": 3}}, "status.replicas") == "3"
    assert field_value({"spec": {"nodeName": None}}, "spec.nodeName") == ""
    assert field_value({"a": {"b": False}}, "a.b") == "false"
    assert field_value({"a": [1]}, "a") is None


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
        selector = label_selector_as_selector(raw)
    except SelectorError:
        return
    assert parse_label_selector(selector.to_string()).matches({}) == selector.matches({})
