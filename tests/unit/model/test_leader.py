"""model.leader: what a candidate says and how long it waits while its Lease's namespace is
missing."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodeagent.model.leader import (
    MISSING_NAMESPACE_REMINDER,
    MISSING_NAMESPACE_RETRY_CAP,
    MissingNamespace,
    Say,
    is_missing_namespace,
    missing_namespace_message,
    missing_namespace_step,
)


@pytest.mark.parametrize(
    ("status", "details", "missing"),
    [
        (404, {"name": "nodeagent-system", "kind": "namespaces"}, True),
        # the Lease itself not found (a get): the namespace may well exist
        (
            404,
            {"name": "nodeagent-controllers", "kind": "leases", "group": "coordination.k8s.io"},
            False,
        ),
        (404, {"name": "other", "kind": "namespaces"}, False),
        (404, {}, False),
        (403, {"name": "nodeagent-system", "kind": "namespaces"}, False),
    ],
)
def test_only_a_404_about_the_namespace_is_a_missing_namespace(
    status: int, details: dict[str, str], missing: bool
) -> None:
    assert is_missing_namespace(status, details, "nodeagent-system") is missing


def test_the_message_names_the_namespace_and_both_ways_out() -> None:
    text = missing_namespace_message("team-a")
    assert "'team-a' does not exist" in text
    assert "kubectl create namespace team-a" in text
    assert "nodeagent manifests namespace team-a | kubectl apply -f -" in text
    assert "set leader.namespace to an existing namespace" in text
    assert "\n" not in text


def test_one_error_then_quiet_doubling_waits_then_found() -> None:
    state, says, delays = MissingNamespace(), [], []
    for t in range(8):
        state, say, delay = missing_namespace_step(state, True, float(t), 2.0)
        says.append(say)
        delays.append(delay)
    assert says == [Say.ERROR] + [Say.QUIET] * 7
    assert delays == [2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0, 30.0]
    state, say, delay = missing_namespace_step(state, False, 9.0, 2.0)
    assert (state, say, delay) == (MissingNamespace(), Say.FOUND, 2.0)
    assert missing_namespace_step(state, False, 10.0, 2.0)[1] is Say.NOTHING


@given(
    st.lists(
        st.tuples(st.booleans(), st.floats(min_value=0, max_value=2 * MISSING_NAMESPACE_REMINDER)),
        max_size=60,
    ),
    st.floats(min_value=0.01, max_value=60),
)
def test_each_outage_is_said_once_reminded_at_long_intervals_and_retried_within_bounds(
    steps: list[tuple[bool, float]], retry: float
) -> None:
    state = MissingNamespace()
    now = 0.0
    missing_before = False
    said_at: float | None = None
    last_delay = 0.0
    for missing, elapsed in steps:
        now += elapsed
        state, say, delay = missing_namespace_step(state, missing, now, retry)
        if not missing:
            assert say is (Say.FOUND if missing_before else Say.NOTHING)
            assert delay == retry
            said_at = None
        elif not missing_before:
            assert say is Say.ERROR and delay == retry
            said_at = now
        else:
            assert said_at is not None
            if now - said_at >= MISSING_NAMESPACE_REMINDER:
                assert say is Say.REMINDER
                said_at = now
            else:
                assert say is Say.QUIET
            # backoff: never shorter than the last wait, never past the cap (or the period)
            assert last_delay <= delay <= max(retry, MISSING_NAMESPACE_RETRY_CAP)
        missing_before, last_delay = missing, delay
