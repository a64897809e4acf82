"""The cluster-side interceptors' decisions, pure (nodeagent.controllers.interceptors.plans)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from nodeagent.controllers.evictionrequest.settings import AnnotateRule
from nodeagent.controllers.interceptors.common import WAITING
from nodeagent.controllers.interceptors.plans import (
    annotate_rule,
    plan_annotate,
    plan_withdraw,
)
from nodeagent.model.interceptors import CANCELED, EvictionRequestView, SelectorInterceptor
from nodeagent.model.selectors import LabelSelector

RULES = {
    name: AnnotateRule(SelectorInterceptor(name, LabelSelector()), f"{name}/move", "true")
    for name in ("a.example.com", "b.example.com", "c.example.com")
}


def pod(uid: str = "u1", phase: str = "Running", **annotations: str) -> dict[str, Any]:
    return {
        "metadata": {"name": "web-1", "namespace": "ns", "uid": uid, "annotations": annotations},
        "status": {"phase": phase},
    }


def request(
    active: str | None,
    processed: tuple[str, ...] = (),
    completed: tuple[str, ...] = (),
    canceled: bool = False,
) -> EvictionRequestView:
    status: dict[str, Any] = {
        "activeInterceptors": [{"name": active}] if active else [],
        "processedInterceptors": [{"name": n} for n in processed],
        "interceptors": [{"name": n, "completionTime": "2030-01-01T12:00:00Z"} for n in completed],
    }
    if canceled:
        status["conditions"] = [{"type": CANCELED, "status": "True"}]
    return EvictionRequestView.from_obj(
        {
            "metadata": {"name": "u1", "namespace": "ns"},
            "spec": {"target": {"pod": {"name": "web-1", "uid": "u1"}}},
            "status": status,
        }
    )


def test_the_rule_whose_turn_it_is() -> None:
    assert annotate_rule(request("a.example.com"), RULES) is RULES["a.example.com"]
    assert annotate_rule(request("other.example.com"), RULES) is None
    assert annotate_rule(request(None), RULES) is None
    assert annotate_rule(request("a.example.com", completed=("a.example.com",)), RULES) is None
    assert annotate_rule(request("a.example.com", canceled=True), RULES) is None


def test_gone_or_terminal_pod_completes() -> None:
    rule = RULES["a.example.com"]
    assert plan_annotate(rule, None).complete
    assert plan_annotate(rule, pod(phase="Succeeded")).complete
    assert plan_annotate(rule, pod(phase="Failed")).complete


def test_annotates_once_then_waits() -> None:
    rule = RULES["a.example.com"]
    first = plan_annotate(rule, pod())
    assert not first.complete and first.annotate
    assert first.message.endswith(WAITING) and "a.example.com/move=true" in first.message
    again = plan_annotate(rule, pod(**{"a.example.com/move": "true"}))
    assert not again.annotate and again.message == first.message
    other_value = plan_annotate(rule, pod(**{"a.example.com/move": "false"}))
    assert other_value.annotate


names = st.sampled_from(sorted(RULES))


@given(
    active=st.none() | names,
    processed=st.lists(names, unique=True).map(tuple),
    completed=st.lists(names, unique=True).map(tuple),
    annotated=st.sets(names),
    same_pod=st.booleans(),
)
def test_withdraw_takes_off_only_what_an_unfinished_turn_may_have_set(
    active: str | None,
    processed: tuple[str, ...],
    completed: tuple[str, ...],
    annotated: set[str],
    same_pod: bool,
) -> None:
    view = request(active, processed, completed, canceled=True)
    cached = pod("u1" if same_pod else "u2", **{RULES[n].annotation_key: "true" for n in annotated})
    withdrawn = {rule.name for rule in plan_withdraw(view, cached, RULES)}
    expected = {n for n in annotated if (n == active or n in processed) and n not in completed}
    assert withdrawn == (expected if same_pod else set())
    assert plan_withdraw(view, None, RULES) == []
