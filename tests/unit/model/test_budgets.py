"""When a cached PodDisruptionBudget certainly refuses an eviction (`nodeagent.model.budgets`)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from nodeagent.model.budgets import BudgetLedger, Spent, budget_gate, to_wake


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


def labelled(app: str, namespace: str = "ns") -> dict[str, Any]:
    p = pod({"app": app})
    p["metadata"]["namespace"] = namespace
    return p


def test_an_eviction_in_flight_takes_no_wake_up() -> None:
    """The budget allows one more while `a`'s call is in flight: `b` is woken, not `a` (the
    first by key), or `b` would wait for its fallback."""
    waiting = [("ns/a", 0, labelled("web")), ("ns/b", 0, labelled("web"))]
    assert to_wake(budget(allowed=1), waiting, in_flight={"ns/a"}) == ["ns/b"]
    assert to_wake(budget(allowed=1), waiting, in_flight=()) == ["ns/a"]


def test_only_pods_the_budget_selects_in_its_namespace_are_woken() -> None:
    waiting = [
        ("ns/a", 0, labelled("db")),
        ("other/b", 0, labelled("web", "other")),
        ("ns/c", 0, None),  # its pod not in the cache
        ("ns/d", 0, labelled("web")),
    ]
    assert to_wake(budget(allowed=3), waiting, ()) == ["ns/d"]
    assert to_wake(budget(allowed=0), waiting, ()) == []
    assert to_wake(budget(allowed=None), waiting, ()) == []


@given(
    allowed=st.integers(-1, 6),
    waiting=st.dictionaries(
        st.text("abcdef", min_size=1, max_size=3), st.tuples(st.integers(0, 4), st.booleans())
    ),
    in_flight=st.sets(st.text("abcdef", min_size=1, max_size=3)),
)
def test_the_budget_wakes_as_many_as_it_allows_those_refused_most_first(
    allowed: int, waiting: dict[str, tuple[int, bool]], in_flight: set[str]
) -> None:
    entries = [
        (f"ns/{k}", retries, labelled("web" if selected else "db"))
        for k, (retries, selected) in waiting.items()
    ]
    flying = {f"ns/{k}" for k in in_flight}
    woken = to_wake(budget(allowed=allowed), entries, flying)
    eligible = {
        key: r
        for key, r, p in entries
        if key not in flying and p["metadata"]["labels"]["app"] == "web"
    }
    assert set(woken) <= set(eligible)
    assert len(woken) == min(max(allowed, 0), len(eligible))
    passed_over = set(eligible) - set(woken)
    # none left waiting was refused more often than one woken
    assert all(eligible[w] >= eligible[p] for w in woken for p in passed_over)
