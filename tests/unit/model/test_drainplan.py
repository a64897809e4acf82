"""The drain plan: entries, ordering, the effective plan, pod classification and coverage."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodeagent.model.drainplan import (
    DEFAULT_ENTRIES,
    INT32_MAX,
    INT32_MIN,
    DrainPlanEntry,
    InvalidPlan,
    PodClass,
    PodType,
    classify,
    effective_plan,
    entries_from_dicts,
    entry_covers,
    targets_cover,
)
from nodeagent.model.selectors import label_selector_from_dict

D, DS, S = PodType.DEFAULT, PodType.DAEMONSET, PodType.STATIC
POSTGRES = {"matchLabels": {"app": "postgres"}}


def e(pod_type: PodType, priority: int, selector: dict[str, Any] | None = None) -> DrainPlanEntry:
    sel = label_selector_from_dict(selector) if selector is not None else None
    return DrainPlanEntry(sel, priority, pod_type)


def d(pod_type: str, priority: int, selector: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"podPriority": priority, "podType": pod_type}
    if selector is not None:
        out["podSelector"] = selector
    return out


# --- entries and defaults ----------------------------------------------------------------------


def test_default_entries_are_the_twelve_kep_entries_in_plan_order() -> None:
    priorities = [1000000000, 2000000000, 2000001000, 2147483647]
    assert [(x.pod_type, x.pod_priority, x.pod_selector) for x in DEFAULT_ENTRIES] == [
        (t, p, None) for t in (D, DS, S) for p in priorities
    ]
    assert sorted(DEFAULT_ENTRIES) == list(DEFAULT_ENTRIES)


def test_entry_order_type_then_priority_then_selector_first() -> None:
    entries = [e(S, 1), e(DS, 5), e(D, 10), e(D, 10, POSTGRES), e(D, 3), e(DS, 5, POSTGRES)]
    assert sorted(entries) == [
        e(D, 3),
        e(D, 10, POSTGRES),
        e(D, 10),
        e(DS, 5, POSTGRES),
        e(DS, 5),
        e(S, 1),
    ]


def test_entry_round_trips_through_the_api_form() -> None:
    raw = d("Default", 2000, POSTGRES)
    entry = DrainPlanEntry.from_dict(raw, "x")
    assert entry == e(D, 2000, POSTGRES)
    assert entry.to_dict() == raw
    expr = {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["b", "a"]}]}
    assert DrainPlanEntry.from_dict(d("Static", 7, expr), "x").to_dict() == d(
        "Static", 7, {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]}
    )
    assert entry.describe() == "Default{app=postgres}<=2000"


def test_empty_selector_is_the_plain_entry_and_missing_type_is_default() -> None:
    assert DrainPlanEntry.from_dict({"podPriority": 5, "podSelector": {}}, "x") == e(D, 5)
    assert DrainPlanEntry.from_dict({"podPriority": 5}, "x").to_dict() == d("Default", 5)


# --- effective plan ----------------------------------------------------------------------------


def test_effective_plan_of_nothing_is_the_defaults() -> None:
    assert effective_plan(None) == list(DEFAULT_ENTRIES)
    assert effective_plan([]) == list(DEFAULT_ENTRIES)


def test_effective_plan_of_the_kep_progression_example() -> None:
    plan = effective_plan(
        [
            d("Default", 1000),
            d("Default", 2000, POSTGRES),
            d("Default", 2147483647),
            d("DaemonSet", 1000),
            d("DaemonSet", 2147483647),
            d("Static", 2147483647),
        ]
    )
    assert plan == [
        e(D, 1000),
        e(D, 2000, POSTGRES),
        e(D, 1000000000),
        e(D, 2000000000),
        e(D, 2000001000),
        e(D, INT32_MAX),
        e(DS, 1000),
        e(DS, 1000000000),
        e(DS, 2000000000),
        e(DS, 2000001000),
        e(DS, INT32_MAX),
        e(S, 1000000000),
        e(S, 2000000000),
        e(S, 2000001000),
        e(S, INT32_MAX),
    ]


def test_selector_entries_of_equal_key_keep_user_order_before_the_default() -> None:
    web = {"matchLabels": {"app": "web"}}
    plan = effective_plan([d("Default", 1000000000, web), d("Default", 1000000000, POSTGRES)])
    assert plan[:3] == [e(D, 1000000000, web), e(D, 1000000000, POSTGRES), e(D, 1000000000)]


@pytest.mark.parametrize(
    ("plan", "message"),
    [
        (
            [d("Default", 5), d("Default", 50), d("Default", 2000), d("Default", 100)],
            "spec.drainPlan[3]: podPriority 100 of type Default comes after podPriority 2000 "
            "(entry 2); entries must be ordered Default, DaemonSet, Static by ascending priority",
        ),
        (
            [d("DaemonSet", 5), d("Default", 1)],
            "spec.drainPlan[1]: podType Default comes after podType DaemonSet (entry 0); "
            "entries must be ordered Default, DaemonSet, Static by ascending priority",
        ),
        (
            [d("Default", 5), d("Default", 5, POSTGRES)],
            "spec.drainPlan[1]: an entry with a podSelector comes after the plain entry of the "
            "same podType and podPriority (entry 0); concrete selectors must come first; entries "
            "must be ordered Default, DaemonSet, Static by ascending priority",
        ),
        (
            [d("Default", 5, POSTGRES), d("Default", 7), d("Default", 5, POSTGRES)],
            "spec.drainPlan[2]: duplicate of spec.drainPlan[0]",
        ),
        (
            [d("Default", 5), {"podPriority": 5, "podType": "Default", "podSelector": {}}],
            "spec.drainPlan[1]: duplicate of spec.drainPlan[0]",
        ),
        (
            [d("Default", 5), d("Deployment", 6)],
            "spec.drainPlan[1].podType: unknown pod type 'Deployment'; must be one of "
            "Default, DaemonSet, Static",
        ),
        (
            [d("Default", 2**31)],
            "spec.drainPlan[0].podPriority: 2147483648 is out of the int32 range "
            "[-2147483648, 2147483647]",
        ),
        ([{"podType": "Default"}], "spec.drainPlan[0].podPriority: required"),
        (
            [d("Default", 1), {"podPriority": True}],
            "spec.drainPlan[1].podPriority: must be an integer, not True",
        ),
        (
            [d("Default", 1), d("Static", 2), {"podPriority": 3, "priority": 1}],
            'spec.drainPlan[2]: unknown field "priority"',
        ),
        ([d("Default", 1), "x"], "spec.drainPlan[1]: must be an object"),
    ],
)
def test_invalid_plans_name_the_entry(plan: list[Any], message: str) -> None:
    with pytest.raises(InvalidPlan) as info:
        effective_plan(plan)
    assert str(info.value) == message


def test_bad_pod_selector_carries_the_selector_error() -> None:
    bad = {"matchExpressions": [{"key": "app", "operator": "Near", "values": ["x"]}]}
    with pytest.raises(InvalidPlan, match=r"^spec\.drainPlan\[1\]\.podSelector: invalid label "):
        effective_plan([d("Default", 1), d("Default", 2, bad)])
    with pytest.raises(InvalidPlan, match=r'unknown operator "Near"'):
        effective_plan([d("Default", 1), d("Default", 2, bad)])


def test_plan_must_be_a_list() -> None:
    with pytest.raises(InvalidPlan, match=r"^spec\.drainPlan: must be a list"):
        effective_plan("Default")
    with pytest.raises(InvalidPlan, match=r"^status\.x: must be a list"):
        entries_from_dicts({"a": 1}, "status.x")


# --- classification and coverage ---------------------------------------------------------------


def pod(
    *,
    priority: int | None = None,
    annotations: dict[str, str] | None = None,
    owners: list[dict[str, Any]] | None = None,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    md: dict[str, Any] = {"name": "p", "namespace": "ns"}
    if annotations is not None:
        md["annotations"] = annotations
    if owners is not None:
        md["ownerReferences"] = owners
    if labels is not None:
        md["labels"] = labels
    spec: dict[str, Any] = {} if priority is None else {"priority": priority}
    return {"metadata": md, "spec": spec}


def test_classify() -> None:
    assert classify(pod()) == PodClass(D, 0, False)
    assert classify(pod(priority=-7)) == PodClass(D, -7, False)
    mirror = pod(priority=2000001000, annotations={"kubernetes.io/config.mirror": "abc"})
    assert classify(mirror) == PodClass(S, 2000001000, False)
    ds = [{"kind": "DaemonSet", "name": "x", "controller": True}]
    assert classify(pod(owners=ds)).pod_type == DS
    not_controller: list[dict[str, Any]] = [
        {"kind": "DaemonSet", "name": "x"},
        {"kind": "ReplicaSet", "name": "y", "controller": True},
    ]
    assert classify(pod(owners=not_controller)).pod_type == D
    skip = pod(annotations={"nodeagent.io/drain": "skip"}, owners=ds)
    assert classify(skip) == PodClass(DS, 0, True)
    assert not classify(pod(annotations={"nodeagent.io/drain": "no"})).skip
    assert classify({}) == PodClass(D, 0, False)


def test_entry_covers_type_priority_and_selector() -> None:
    entry = e(D, 5000, POSTGRES)
    pg = {"app": "postgres"}
    assert entry_covers(entry, PodClass(D, 5000), pg)
    assert entry_covers(entry, PodClass(D, -1), pg)
    assert not entry_covers(entry, PodClass(D, 5001), pg)
    assert not entry_covers(entry, PodClass(D, 1), {"app": "web"})
    assert not entry_covers(entry, PodClass(DS, 1), pg)
    assert entry_covers(e(D, 5000), PodClass(D, 1), {})


def test_targets_cover_accumulated_targets_and_skips() -> None:
    targets = [e(D, INT32_MAX), e(D, INT32_MAX, POSTGRES), e(DS, 1000)]
    assert targets_cover(targets, pod(priority=2000001000))
    ds = [{"kind": "DaemonSet", "name": "x", "controller": True}]
    assert targets_cover(targets, pod(priority=1000, owners=ds))
    assert not targets_cover(targets, pod(priority=1001, owners=ds))
    assert not targets_cover(targets, pod(annotations={"kubernetes.io/config.mirror": "x"}))
    assert not targets_cover(targets, pod(annotations={"nodeagent.io/drain": "skip"}))
    assert not targets_cover([], pod())


# --- properties --------------------------------------------------------------------------------

SELECTORS: list[dict[str, Any] | None] = [
    None,
    POSTGRES,
    {"matchLabels": {"app": "web"}},
    {"matchExpressions": [{"key": "tier", "operator": "Exists"}]},
]
PRIORITIES = st.one_of(
    st.sampled_from([INT32_MIN, -1, 0, 1000, 1000000000, 2000000000, 2000001000, INT32_MAX]),
    st.integers(INT32_MIN, INT32_MAX),
)
ENTRY_DICTS = st.builds(
    lambda t, p, s: d(t, p, SELECTORS[s]),
    st.sampled_from(["Default", "DaemonSet", "Static"]),
    PRIORITIES,
    st.integers(0, len(SELECTORS) - 1),
)


def ordered_unique(raw: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Sort a list of entry dicts into a valid plan: plan order, duplicates dropped."""
    parsed = {DrainPlanEntry.from_dict(x, "x"): x for x in raw}
    return [parsed[k] for k in sorted(parsed)]


VALID_PLANS = st.lists(ENTRY_DICTS, max_size=12).map(ordered_unique)


@given(VALID_PLANS)
def test_effective_plan_is_sorted_and_contains_every_default(raw: list[dict[str, Any]]) -> None:
    plan = effective_plan(raw)
    keys = [x.plan_key for x in plan]
    assert keys == sorted(keys)
    assert len(set(plan)) == len(plan)
    assert set(DEFAULT_ENTRIES) <= set(plan)
    user = [DrainPlanEntry.from_dict(x, "x") for x in raw]
    assert [x for x in plan if x in set(user)] == user
    assert len(plan) == len(user) + len(set(DEFAULT_ENTRIES) - set(user))
    assert plan[-1] == DrainPlanEntry.plain(S, INT32_MAX)


def first_problem(raw: list[dict[str, Any]]) -> tuple[int, str]:
    """Reference check: the index of the first bad entry and what is wrong with it."""
    entries = [DrainPlanEntry.from_dict(x, "x") for x in raw]
    for i, entry in enumerate(entries):
        if entry in entries[:i]:
            return i, "duplicate"
        if i and entry.plan_key < entries[i - 1].plan_key:
            return i, "order"
    raise AssertionError("plan is valid")


@given(VALID_PLANS.filter(lambda p: len(p) >= 2), st.data())
def test_misordered_plans_raise_naming_the_first_bad_entry(
    raw: list[dict[str, Any]], data: st.DataObject
) -> None:
    i = data.draw(st.integers(0, len(raw) - 2))
    j = data.draw(st.integers(i + 1, len(raw) - 1))
    keys = [DrainPlanEntry.from_dict(x, "x").plan_key for x in raw]
    if keys[i] == keys[j]:  # selector entries of one key may come in any order
        return
    swapped = list(raw)
    swapped[i], swapped[j] = swapped[j], swapped[i]
    index, kind = first_problem(swapped)
    assert kind == "order"
    with pytest.raises(InvalidPlan) as info:
        effective_plan(swapped)
    assert re.match(rf"spec\.drainPlan\[{index}\]: .* \(entry {index - 1}\)", str(info.value))


@given(VALID_PLANS.filter(bool), st.data())
def test_duplicated_entries_raise_naming_both(
    raw: list[dict[str, Any]], data: st.DataObject
) -> None:
    i = data.draw(st.integers(0, len(raw) - 1))
    at = data.draw(st.integers(i + 1, len(raw)))
    dup = [*raw[:at], dict(raw[i]), *raw[at:]]
    index, _ = first_problem(dup)
    with pytest.raises(InvalidPlan) as info:
        effective_plan(dup)
    message = str(info.value)
    assert message.startswith(f"spec.drainPlan[{index}]: ")
    if index == at:
        assert message == f"spec.drainPlan[{at}]: duplicate of spec.drainPlan[{i}]"


@given(
    VALID_PLANS,
    st.data(),
    st.sampled_from(
        [
            {"podPriority": INT32_MAX + 1, "podType": "Default"},
            {"podPriority": INT32_MIN - 1, "podType": "Static"},
            {"podPriority": 1, "podType": "default"},
            {"podPriority": "1", "podType": "Default"},
            {"podPriority": 1, "podSelector": {"matchLabels": {"app": 5}}},
            {"podPriority": 1, "podSelector": {"matchLabel": {"app": "x"}}},
            {"podPriority": 1, "podSelector": []},
        ]
    ),
)
def test_malformed_entries_raise_naming_their_index(
    raw: list[dict[str, Any]], data: st.DataObject, bad: dict[str, Any]
) -> None:
    at = data.draw(st.integers(0, len(raw)))
    with pytest.raises(InvalidPlan, match=rf"^spec\.drainPlan\[{at}\]\.pod"):
        effective_plan([*raw[:at], bad, *raw[at:]])
