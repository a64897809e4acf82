"""Label keys and values, label and field selectors, against apimachinery's semantics."""

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
    field_value,
    label_selector_from_dict,
    validate_label_key,
    validate_label_value,
)

# the string forms, which only the simulated API server parses
from nodeagent_testbed.sim.selectors import (
    FieldRequirement,
    FieldSelector,
    parse_field_selector,
    parse_label_selector,
)

# --- strategies ---------------------------------------------------------------------------------

_ALNUM = "abcxyzABZ0189"
_LOWER = "abcxyz0189"
# Label names: alphanumeric at both ends, '-', '_' and '.' allowed inside.
_names = st.one_of(
    st.sampled_from(_ALNUM),
    st.builds(
        lambda first, middle, last: first + middle + last,
        st.sampled_from(_ALNUM),
        st.text(alphabet=_ALNUM + "-_.", max_size=6),
        st.sampled_from(_ALNUM),
    ),
)
_dns_labels = st.one_of(
    st.sampled_from(_LOWER),
    st.builds(
        lambda first, middle, last: first + middle + last,
        st.sampled_from(_LOWER),
        st.text(alphabet=_LOWER + "-", max_size=4),
        st.sampled_from(_LOWER),
    ),
)
_prefixes = st.lists(_dns_labels, min_size=1, max_size=3).map(".".join)
label_keys = st.one_of(_names, st.builds(lambda p, n: f"{p}/{n}", _prefixes, _names))
label_values = st.one_of(st.just(""), _names)


@st.composite
def requirements(draw: st.DrawFn) -> Requirement:
    key = draw(label_keys)
    op = draw(st.sampled_from(list(Operator)))
    if op in (Operator.IN, Operator.NOT_IN):
        values = tuple(draw(st.lists(label_values, min_size=1, max_size=3)))
    elif op in (Operator.EQUALS, Operator.NOT_EQUALS):
        values = (draw(label_values),)
    else:
        values = ()
    return Requirement(key, op, values)


label_selectors = st.builds(
    lambda rs: LabelSelector(tuple(rs)), st.lists(requirements(), max_size=4)
)
label_sets = st.dictionaries(label_keys, label_values, max_size=4)


# --- label keys and values ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    ["a", "app", "app.kubernetes.io/name", "node-role.kubernetes.io/control-plane", "A_b.c-1"],
)
def test_valid_label_keys(key: str) -> None:
    assert validate_label_key(key) is None


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        ("", "name part must be non-empty"),
        ("/a", "prefix part must be non-empty"),
        ("a/", "name part must be non-empty"),
        ("a/b/c", "at most one '/'"),
        ("Example.com/a", "lowercase DNS subdomain"),
        ("-a", "must start and end with an alphanumeric"),
        ("a" * 64, "no more than 63"),
        ("a b", "name part must consist of"),
    ],
)
def test_invalid_label_keys(key: str, problem: str) -> None:
    why = validate_label_key(key)
    assert why is not None and problem in why


def test_label_values() -> None:
    assert validate_label_value("") is None
    assert validate_label_value("v1.2_3-x") is None
    assert validate_label_value("a" * 64) is not None
    assert validate_label_value("x.") is not None


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


@given(label_selectors, label_sets)
def test_matches_is_the_conjunction_of_requirements(
    selector: LabelSelector, labels: dict[str, str]
) -> None:
    assert selector.matches(labels) == all(r.matches(labels) for r in selector.requirements)


@given(label_keys, st.lists(label_values, min_size=1, max_size=3), label_sets)
def test_in_and_notin_are_complementary(
    key: str, values: list[str], labels: dict[str, str]
) -> None:
    inside = Requirement(key, Operator.IN, tuple(values)).matches(labels)
    outside = Requirement(key, Operator.NOT_IN, tuple(values)).matches(labels)
    assert inside != outside
    exists = Requirement(key, Operator.EXISTS).matches(labels)
    assert exists != Requirement(key, Operator.DOES_NOT_EXIST).matches(labels)


def test_requirement_rejects_inconsistent_values() -> None:
    with pytest.raises(SelectorError):
        Requirement("a", Operator.IN, ())
    with pytest.raises(SelectorError):
        Requirement("a", Operator.EQUALS, ("x", "y"))
    with pytest.raises(SelectorError):
        Requirement("a", Operator.EXISTS, ("x",))
    with pytest.raises(SelectorError, match="invalid label key"):
        Requirement("a.", Operator.EXISTS)
    with pytest.raises(SelectorError, match="invalid label value"):
        Requirement("a", Operator.IN, ("ok", "x y"))


def test_everything_and_nothing() -> None:
    assert LabelSelector.everything().is_everything
    assert LabelSelector.everything().matches({"a": "b"})
    nothing = LabelSelector.nothing()
    assert not nothing.is_everything
    assert not nothing.matches({})
    # "" would mean "everything" to a list call, the opposite of what this selector means
    with pytest.raises(SelectorError):
        nothing.to_string()
    with pytest.raises(SelectorError):
        LabelSelector((Requirement("a", Operator.EXISTS),), match_nothing=True)


# --- metav1.LabelSelector -----------------------------------------------------------------------


def test_null_selector_matches_nothing_and_empty_matches_everything() -> None:
    assert label_selector_from_dict(None) == LabelSelector.nothing()
    assert label_selector_from_dict({}).is_everything
    assert label_selector_from_dict({"matchLabels": None, "matchExpressions": None}).is_everything


def test_label_selector_from_dict() -> None:
    selector = label_selector_from_dict(
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


@given(st.dictionaries(label_keys, label_values, max_size=3), label_sets)
def test_match_labels_means_subset(match: dict[str, str], labels: dict[str, str]) -> None:
    selector = label_selector_from_dict({"matchLabels": match})
    assert selector.matches(labels) == all(labels.get(k) == v for k, v in match.items())
    assert selector.matches({**labels, **match})


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        (
            {
                "matchExpressions": [
                    {"key": "a", "operator": "In", "values": ["x"]},
                    {"key": "b", "operator": "Foo"},
                ]
            },
            'matchExpressions[1].operator: unknown operator "Foo"',
        ),
        ({"matchExpressions": [{"key": "a"}]}, "matchExpressions[0].operator: must be specified"),
        (
            {"matchExpressions": [{"key": "a", "operator": "In"}]},
            "matchExpressions[0].values: must be non-empty when operator is In or NotIn",
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]},
            "matchExpressions[0].values: must be empty when operator is Exists or DoesNotExist",
        ),
        (
            {"matchExpressions": [{"key": "a b", "operator": "Exists"}]},
            "matchExpressions[0].key: invalid label key 'a b'",
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "In", "values": ["ok", 3]}]},
            "matchExpressions[0].values[1]: must be a string",
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "In", "values": ["-x"]}]},
            "matchExpressions[0].values[0]: invalid label value '-x'",
        ),
        ({"matchExpressions": {"key": "a"}}, "matchExpressions: must be a list"),
        ({"matchExpressions": ["a"]}, "matchExpressions[0]: must be an object"),
        ({"matchLabels": ["a"]}, "matchLabels: must be an object"),
        ({"matchLabels": {"a": 1}}, "matchLabels['a']: value must be a string"),
        ({"matchLabels": {"a/b/c": "x"}}, "matchLabels['a/b/c']: invalid label key"),
        # a typo must not silently become the match-everything selector
        ({"matchLabel": {"a": "b"}}, "matchLabel: unknown field"),
    ],
)
def test_label_selector_from_dict_errors_name_the_field(
    selector: dict[str, Any], message: str
) -> None:
    with pytest.raises(SelectorError) as info:
        label_selector_from_dict(selector)
    assert message in str(info.value)


def test_label_selector_from_dict_reports_every_error() -> None:
    with pytest.raises(SelectorError) as info:
        label_selector_from_dict(
            {"matchLabels": {"-a": "b"}, "matchExpressions": [{"key": "c", "operator": "Foo"}]}
        )
    assert "matchLabels['-a']" in str(info.value)
    assert "matchExpressions[0].operator" in str(info.value)


# --- field selectors ----------------------------------------------------------------------------


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


def test_field_value_rendering() -> None:
    assert field_value({"a": {"b": False}}, "a.b") == "false"
    assert field_value({"a": 7}, "a") == "7"
    assert field_value({"a": None}, "a") == ""
    assert field_value({"a": [1]}, "a") is None


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


# --- robustness: the API server feeds these straight from requests -------------------------------


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


selector_json = st.recursive(
    st.none()
    | st.integers(-1, 1)
    | st.sampled_from(["a", "-", "metadata.name", "In", "NotIn", "Exists", "Gt", "Lt", "1"]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                [
                    "matchLabels",
                    "matchExpressions",
                    "matchFields",
                    "nodeSelectorTerms",
                    "key",
                    "operator",
                    "values",
                    "a",
                ]
            ),
            inner,
            max_size=3,
        )
    ),
    max_leaves=12,
)


@given(st.dictionaries(st.sampled_from(["matchLabels", "matchExpressions"]), selector_json))
def test_any_label_selector_object_converts_or_raises_selector_error(raw: dict[str, Any]) -> None:
    try:
        selector = label_selector_from_dict(raw)
    except SelectorError:
        return
    assert parse_label_selector(selector.to_string()) == selector
