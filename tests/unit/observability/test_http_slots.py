"""Slots: how many connections a listener serves at once, in all and per client."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from nodeagent.observability.http import Slots


def test_a_client_has_its_share_and_no_more() -> None:
    slots = Slots(total=5, per_client=2)
    assert [slots.take("a") for _ in range(3)] == [True, True, False]
    assert slots.take("b")
    assert slots.held("a") == 2 and len(slots) == 3
    slots.give("a")
    assert slots.take("a")


def test_the_total_bounds_all_clients_together() -> None:
    slots = Slots(total=3, per_client=2)
    assert [slots.take(c) for c in "abcd"] == [True, True, True, False]
    slots.give("b")
    assert slots.held("b") == 0
    assert slots.take("d")


@given(st.lists(st.tuples(st.booleans(), st.sampled_from("abcd")), max_size=60))
def test_taken_slots_stay_within_both_bounds(steps: list[tuple[bool, str]]) -> None:
    slots = Slots(total=5, per_client=2)
    mine: dict[str, int] = {}
    for take, client in steps:
        if take:
            before = len(slots), mine.get(client, 0)
            granted = slots.take(client)
            # refused only at a bound
            assert granted == (before[0] < 5 and before[1] < 2)
            mine[client] = mine.get(client, 0) + granted
        elif mine.get(client):
            slots.give(client)
            mine[client] -= 1
        assert len(slots) == sum(mine.values()) <= 5
        assert all(slots.held(c) == n <= 2 for c, n in mine.items())
