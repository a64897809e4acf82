"""The drain deadline: its length, and when it passes."""

from __future__ import annotations

from nodeagent.model.nodemaintenance.deadline import deadline_seconds
from tests.unit.model.nodemaintenance.helpers import maintenance


def test_the_spec_deadline_wins_over_the_default() -> None:
    assert deadline_seconds(maintenance("m", ["a"], drainDeadlineSeconds=60), 10.0) == 60.0
    assert deadline_seconds(maintenance("m", ["a"]), 10.0) == 10.0
    assert deadline_seconds(maintenance("m", ["a"]), None) is None


def test_a_deadline_that_is_no_positive_integer_is_ignored() -> None:
    for raw in (0, -5, True, "60"):
        assert deadline_seconds(maintenance("m", ["a"], drainDeadlineSeconds=raw), None) is None
