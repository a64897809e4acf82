"""When a cached PodDisruptionBudget certainly refuses an eviction (`nodeagent.model.budgets`)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from nodeagent.model.budgets import BudgetLedger, Spent, budget_gate


def pod(labels: dict[str, str] | None = None, ready: bool = True) -> dict[str, Any]:
    return {
        "metadata": {"name": "web-1", "namespace": "ns", "labels": labels or {"app": "web"}},
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def budget(
    name: str = "web",
    allowed: int | None = 0,
    selector: dict[str, Any] | None = None,
    rv: str = "7",
    observed: int = 2,
) -> dict[str, Any]:
    status: dict[str, Any] = {"observedGeneration": observed}
    if allowed is not None:
        status["disruptionsAllowed"] = allowed
    return {
        "metadata": {"name": name, "namespace": "ns", "resourceVersion": rv, "generation": 2},
        "spec": {"selector": selector if selector is not None else {"matchLabels": {"app": "web"}}},
        "status": status,
    }


def test_a_budget_that_allows_nothing_holds_a_ready_pod_back() -> None:
    gate = budget_gate(pod(), [budget(allowed=0)], {})
    assert gate is not None and gate.room == 0 and gate.key == "ns/web" and gate.version == "7"
    assert "disruption budget web" in gate.waiting_message()


def test_the_server_is_asked_when_the_cache_cannot_be_sure() -> None:
    assert budget_gate(pod(ready=False), [budget()], {}) is None  # unhealthy-pod policy
    assert budget_gate(pod(), [budget(), budget("other")], {}) is None  # two budgets
    assert budget_gate(pod(), [budget(allowed=None)], {}) is None  # status not computed yet
    assert budget_gate(pod(), [budget(observed=1)], {}) is None  # status of an older spec
    assert budget_gate(pod(), [budget(selector={"matchLabels": {"app": "db"}})], {}) is None
    bad = budget(selector={"matchExpressions": [{"key": "a", "operator": "Bogus"}]})
    assert budget_gate(pod(), [bad], {}) is None
    assert budget_gate(pod(), [], {}) is None


def test_an_empty_selector_selects_every_pod_and_none_selects_none() -> None:
    gate = budget_gate(pod(), [budget(selector={})], {})
    assert gate is not None and gate.room == 0
    no_selector = budget()
    del no_selector["spec"]["selector"]
    assert budget_gate(pod(), [no_selector], {}) is None


def test_evictions_let_through_count_until_the_budget_writes_its_status() -> None:
    spent = {"ns/web": Spent("7", 2)}
    gate = budget_gate(pod(), [budget(allowed=3)], spent)
    assert gate is not None and gate.room == 1
    fresh = budget_gate(pod(), [budget(allowed=3, rv="8")], spent)  # a newer status counts them
    assert fresh is not None and fresh.room == 3


@given(allowed=st.integers(0, 5), let_through=st.integers(0, 8))
def test_room_never_exceeds_what_the_budget_allows(allowed: int, let_through: int) -> None:
    gate = budget_gate(pod(), [budget(allowed=allowed)], {"ns/web": Spent("7", let_through)})
    assert gate is not None
    assert gate.room == max(0, allowed - let_through)


def test_the_ledger_counts_what_it_let_through_until_the_budget_is_seen_again() -> None:
    ledger = BudgetLedger()
    two = budget(allowed=2)
    first = ledger.gate(pod(), [two])
    assert first is not None and first.room == 2
    ledger.let_through(first)
    ledger.let_through(first)
    held = ledger.gate(pod(), [two])
    assert held is not None and held.room == 0  # the third waits, uncalled
    ledger.let_through(first, -1)  # the server refused one: its room is back
    back = ledger.gate(pod(), [two])
    assert back is not None and back.room == 1
    ledger.seen(two)  # the same version: still counted
    assert _room(ledger, two) == 1
    newer = budget(allowed=1, rv="8")
    ledger.seen(newer)  # its status counts them now
    after = ledger.gate(pod(), [newer])
    assert after is not None and after.room == 1
    ledger.let_through(after)
    assert _room(ledger, newer) == 0
    ledger.forget(newer)
    assert _room(ledger, newer) == 1


def _room(ledger: BudgetLedger, pdb: dict[str, Any]) -> int:
    gate = ledger.gate(pod(), [pdb])
    assert gate is not None
    return gate.room
