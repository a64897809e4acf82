"""One meaning of "this maintenance covers this node" for the controllers and the node side:
the DaemonSet taint and the stashed static pods follow the one rule, ``holds_pods_off``."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodeagent.model.drainplan import InvalidPlan
from nodeagent.model.maintenance import (
    Stage,
    covers,
    effective_stage,
    holds_pods_off,
    holds_pods_off_this_boot,
    involves,
    node_drain_targets,
    selects,
)
from nodeagent.model.names import CORDONED_BY_ANNOTATION

NODE = "node-1"
NODE_OBJ = {"metadata": {"name": NODE, "labels": {"pool": "cp"}}}


def _selector(pool: str) -> dict[str, Any]:
    return {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "pool", "operator": "In", "values": [pool]}]}
        ]
    }


@st.composite
def maintenances(draw: st.DrawFn) -> dict[str, Any]:
    md: dict[str, Any] = {"name": "m"}
    if draw(st.booleans()):
        md["deletionTimestamp"] = "2030-01-01T00:00:00Z"
    spec: dict[str, Any] = {
        "stage": draw(st.sampled_from([*(s.value for s in Stage), "Bogus"])),
    }
    selector = draw(st.sampled_from(["cp", "other", None, "invalid"]))
    if selector == "invalid":
        spec["nodeSelector"] = {"nodeSelectorTerms": []}
    elif selector is not None:
        spec["nodeSelector"] = _selector(selector)
    obj: dict[str, Any] = {"metadata": md, "spec": spec}
    if draw(st.booleans()):
        obj["status"] = {"nodeStatuses": [{"nodeRef": {"name": NODE}}]}
    return obj


@given(maintenances(), st.booleans())
def test_the_daemonset_taint_and_static_pods_follow_one_rule(
    nm: dict[str, Any], node_known: bool
) -> None:
    node = NODE_OBJ if node_known else None
    holds = holds_pods_off(nm, NODE, node)
    # the static pods (not a shutdown maintenance: no boot to compare) follow it exactly
    assert holds_pods_off_this_boot(nm, NODE, node, "boot") is holds
    # the rule: Drain, not being deleted, selecting the node or reporting on it
    listed = bool(nm.get("status"))
    selected = node is not None and nm["spec"].get("nodeSelector") == _selector("cp")
    expected = (
        nm["spec"]["stage"] == "Drain"
        and "deletionTimestamp" not in nm["metadata"]
        and (listed or selected)
    )
    assert holds is expected
    assert holds is (effective_stage(nm) == Stage.DRAIN and covers(nm, NODE, node))


@given(maintenances())
def test_idle_and_cordon_keep_no_pods_off(nm: dict[str, Any]) -> None:
    if nm["spec"]["stage"] in ("Idle", "Cordon", "Complete"):
        assert not holds_pods_off(nm, NODE, NODE_OBJ)


@given(maintenances(), st.booleans())
def test_the_controller_involves_what_it_selects_or_cordoned(
    nm: dict[str, Any], cordoned: bool
) -> None:
    node: dict[str, Any] = {"metadata": {"name": NODE, "labels": {"pool": "cp"}}}
    if cordoned:
        node["metadata"]["annotations"] = {CORDONED_BY_ANNOTATION: "x, m"}
    assert involves(nm, node) is (selects(nm, node) or cordoned)


def test_a_maintenances_drain_targets_for_a_node() -> None:
    nm = {
        "metadata": {"name": "kernel"},
        "status": {
            "nodeStatuses": [
                {"nodeRef": {"name": "node-1"}, "drainTargets": [{"podPriority": 1}]},
                {"nodeRef": {"name": "node-2"}, "drainTargets": [{"podPriority": "high"}]},
            ]
        },
    }
    [entry] = node_drain_targets(nm, "node-1")
    assert entry.pod_priority == 1
    assert node_drain_targets(nm, "node-3") == ()  # no entry for it
    with pytest.raises(InvalidPlan, match=r"kernel status.nodeStatuses\[node-2\].drainTargets"):
        node_drain_targets(nm, "node-2")
