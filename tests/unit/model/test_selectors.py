"""Label keys and values, label selectors (metav1.LabelSelector) and field values, against
apimachinery's semantics. The selectors' string forms, which only the simulated API server parses,
are tested in tests/unit/sim/test_selector_strings.py."""

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


# --- label selectors ----------------------------------------------------------------------------


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


# --- field values -------------------------------------------------------------------------------


def test_field_value_rendering() -> None:
    assert field_value({"a": {"b": False}}, "a.b") == "false"
    assert field_value({"a": 7}, "a") == "7"
    assert field_value({"a": None}, "a") == ""
    assert field_value({"a": [1]}, "a") is None


# --- selector objects of any shape, for the robustness tests ------------------------------------


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
