"""status.summary: one line per field, as kubectl shows it."""

from __future__ import annotations

from nodeagent.model.maintenance import Stage
from nodeagent.model.nodemaintenance.limits import ignored_message
from nodeagent.model.nodemaintenance.summary import one_line, undrained_summary


def test_one_line_folds_whitespace_and_shortens() -> None:
    assert one_line("a\n  b\tc") == "a b c"
    long = one_line("x" * 500)
    assert len(long) == 160 and long.endswith("...")


def test_the_summary_before_drain_counts_nodes_and_pods() -> None:
    statuses = [
        {"podsPendingEvacuation": 2, "podsEvacuating": 1},
        {"podsPendingEvacuation": 0, "podsEvacuating": 0},
    ]
    assert undrained_summary(statuses, Stage.CORDON) == {"nodes": "2 cordoned", "podsLeft": 3}
    assert undrained_summary(statuses, Stage.IDLE)["nodes"] == "2 selected"


def test_an_ignored_shutdown_says_why() -> None:
    assert "booted again" in ignored_message("booted again")
