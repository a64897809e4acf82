"""nodeMaintenance: the limit on nodes draining at once and the default drain deadline."""

from __future__ import annotations

import pytest

from nodeagent.config import ConfigError, from_mapping
from nodeagent.model.drainslots import DrainLimit


def test_defaults_keep_the_unlimited_behaviour() -> None:
    nm = from_mapping({}).node_maintenance
    assert (nm.max_draining_nodes, nm.cordon_while_waiting, nm.drain_deadline) == (
        None,
        False,
        None,
    )
    assert nm.drain_deadline_escalation == "None"  # nothing forced unless asked for


def test_the_escalation_past_a_deadline() -> None:
    raw = {"nodeMaintenance": {"drainDeadline": 600, "drainDeadlineEscalation": "DeletePods"}}
    assert from_mapping(raw).node_maintenance.drain_deadline_escalation == "DeletePods"


def test_count_percentage_and_deadline() -> None:
    nm = from_mapping(
        {
            "nodeMaintenance": {
                "maxDrainingNodes": "20%",
                "cordonWhileWaiting": True,
                "drainDeadline": 1800,
            }
        }
    ).node_maintenance
    assert nm.max_draining_nodes == DrainLimit(percent=20)
    assert nm.cordon_while_waiting is True
    assert nm.drain_deadline == 1800.0
    assert from_mapping(
        {"nodeMaintenance": {"maxDrainingNodes": 1, "drainDeadline": None}}
    ).node_maintenance == type(nm)(max_draining_nodes=DrainLimit(count=1))


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"maxDrainingNodes": 0}, "nodeMaintenance.maxDrainingNodes: must be at least 1, got 0"),
        ({"maxDrainingNodes": "150%"}, "nodeMaintenance.maxDrainingNodes: must be a percentage"),
        ({"maxDrainingNodes": "two"}, "nodeMaintenance.maxDrainingNodes: must be a number of"),
        ({"maxDrainingNodes": True}, "nodeMaintenance.maxDrainingNodes: must be a number of"),
        ({"drainDeadline": 0}, "nodeMaintenance.drainDeadline: must be positive"),
        ({"drainDeadline": "30m"}, "nodeMaintenance.drainDeadline: must be a number of seconds"),
        ({"cordonWhileWaiting": "yes"}, "nodeMaintenance.cordonWhileWaiting: must be true or"),
        ({"escalation": "delete"}, "nodeMaintenance.escalation: unknown setting"),
        (
            {"drainDeadlineEscalation": "delete"},
            "nodeMaintenance.drainDeadlineEscalation: must be one of None, DeletePods",
        ),
    ],
)
def test_errors_are_one_line_naming_the_key(raw: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        from_mapping({"nodeMaintenance": raw})
    assert message in str(info.value)
    assert "\n" not in str(info.value)
