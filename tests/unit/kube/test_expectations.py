"""Expectations: raised by a controller's writes, ended by informer events, expired after a TTL;
on a fake monotonic clock, so nothing sleeps."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from nodeagent.kube.expectations import Expectations
from tests.faketime import FakeClock

TTL = 5.0


def expectations() -> tuple[Expectations, FakeClock]:
    clock = FakeClock()
    return Expectations(TTL, clock), clock


def test_an_expectation_counts_down_until_it_expires() -> None:
    e, clock = expectations()
    assert e.left("a") is None
    e.expect("a")
    assert e.left("a") == TTL
    clock.advance(2.0)
    assert e.left("a") == TTL - 2.0
    clock.advance(3.0)
    assert e.left("a") is None
    assert e.pending() == frozenset()


def test_the_informer_event_ends_an_expectation() -> None:
    e, _ = expectations()
    e.expect("a")
    e.expect("b")
    e.observed("a")
    assert e.pending() == {"b"}
    e.forget("b")
    assert e.pending() == frozenset()


def test_expecting_again_restarts_the_ttl() -> None:
    e, clock = expectations()
    e.expect("a")
    clock.advance(4.0)
    e.expect("a")
    assert e.left("a") == TTL


def test_longest_waits_for_the_last_of_several_keys() -> None:
    e, clock = expectations()
    e.expect("a", by="m")
    clock.advance(1.0)
    e.expect("b", by="m")
    e.expect("c", by="other")
    assert e.longest(["a", "b", "x"]) == TTL
    assert e.longest(["a"]) == TTL - 1.0
    assert e.longest(["x"]) is None
    e.observed("b")
    assert e.longest_by("m") == TTL - 1.0
    assert e.longest_by("nobody") is None


def test_a_write_is_seen_at_any_version_it_did_not_replace() -> None:
    e, _ = expectations()
    e.expect_write("a", ["4"], shown="4", answer="5")
    e.observed("a", "4")  # the version our write replaced, again (a resync)
    assert e.left("a") is not None
    e.observed("a", "6")  # a later write than ours shows ours too
    assert e.left("a") is None


def test_writes_not_yet_seen_add_up() -> None:
    e, _ = expectations()
    e.expect_write("a", ["4"], shown="4", answer="5")  # 4 -> 5
    e.expect_write("a", ["5"], shown="4", answer="6")  # 5 -> 6, before the informer brought 5
    e.observed("a", "5")
    assert e.left("a") is not None
    e.observed("a", "6")
    assert e.left("a") is None


def test_a_write_the_cache_shows_already_leaves_nothing_to_wait_for() -> None:
    e, _ = expectations()
    e.expect_write("a", ["4"], shown="5", answer="5")  # its event came before the call returned
    assert e.left("a") is None
    e.expect_write("b", ["4"], shown=None, answer="5")  # not in the cache: its event is expected
    assert e.left("b") is not None


def test_a_write_that_changed_nothing_leaves_nothing_to_wait_for() -> None:
    e, _ = expectations()
    e.expect_write("a", ["4"], shown="4", answer="4")  # the server stored nothing: no event
    assert e.left("a") is None
    e.expect_write("a", ["4"], shown="4", answer="5")
    e.expect_write("a", ["5"], shown="4", answer="5")  # a no-op on top of an unseen write
    assert e.left("a") is not None  # the first one's event is still to come


def test_an_expired_write_does_not_hold_its_versions() -> None:
    e, clock = expectations()
    e.expect_write("a", ["4"], shown="4", answer="5")
    clock.advance(TTL)
    e.expect_write("a", ["5"], shown="4", answer="6")
    assert e.left("a") is None  # the cache shows 4, which only the expired write replaced


# -- the mechanism against a plain model of it --------------------------------------------------


@dataclass
class Model:
    """Key -> (deadline, replaced versions), kept naively."""

    now: float = 1000.0
    pending: dict[str, tuple[float, frozenset[str]]] = field(default_factory=dict)

    def live(self, key: str) -> tuple[float, frozenset[str]] | None:
        found = self.pending.get(key)
        return found if found is not None and found[0] > self.now else None


KEYS = st.sampled_from(["a", "b", "c"])
VERSIONS = st.sampled_from(["1", "2", "3"])
STEPS = st.one_of(
    st.tuples(st.just("expect"), KEYS),
    st.tuples(
        st.just("write"), KEYS, st.frozensets(VERSIONS, min_size=1), st.none() | VERSIONS, VERSIONS
    ),
    st.tuples(st.just("observed"), KEYS, st.none() | VERSIONS),
    st.tuples(st.just("forget"), KEYS),
    st.tuples(st.just("advance"), st.floats(0.0, 2 * TTL)),
)


@given(st.lists(STEPS, max_size=40))
def test_expectations_end_on_the_event_that_meets_them_or_at_their_ttl(
    steps: list[tuple[Any, ...]],
) -> None:
    e, clock = expectations()
    model = Model(now=clock.now)
    for step in steps:
        match step:
            case ("expect", key):
                e.expect(key)
                model.pending[key] = (model.now + TTL, frozenset())
            case ("write", key, replaced, shown, answer):
                e.expect_write(key, replaced, shown, answer=answer)
                earlier = model.live(key)
                versions = replaced | (earlier[1] if earlier else frozenset())
                if answer in replaced:
                    pass  # it changed nothing: nothing more to expect
                elif shown is not None and shown not in versions:
                    model.pending.pop(key, None)
                else:
                    model.pending[key] = (model.now + TTL, versions)
            case ("observed", key, version):
                e.observed(key, version)
                live = model.live(key)
                if live is not None and version not in live[1]:
                    del model.pending[key]
            case ("forget", key):
                e.forget(key)
                model.pending.pop(key, None)
            case ("advance", seconds):
                clock.advance(seconds)
                model.now = clock.now
        for key in ("a", "b", "c"):
            live = model.live(key)
            left = e.left(key)
            assert (left is None) == (live is None)
            if left is not None and live is not None:
                # (now + TTL) - now may exceed TTL by a float's rounding (hypothesis found it)
                assert 0 < left <= TTL + 1e-9
                assert left == live[0] - model.now
