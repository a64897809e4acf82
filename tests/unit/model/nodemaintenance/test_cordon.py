"""Cordon and uncordon: who holds a node's cordon, and when it goes."""

from __future__ import annotations

from nodeagent.model.maintenance import validate
from nodeagent.model.nodemaintenance.context import read_context
from nodeagent.model.nodemaintenance.cordon import cordon_actions
from tests.unit.model.nodemaintenance.helpers import inputs, maintenance, node


def test_cordons_the_selected_nodes_and_names_the_holder() -> None:
    nm = maintenance("m1", ["a"])
    ctx = read_context(inputs(nm, [node("a"), node("b")]), validate(nm))
    cordon, uncordon, events = cordon_actions(ctx, None)
    assert [(p.node, p.unschedulable, p.cordoned_by) for p in cordon] == [("a", True, "m1")]
    assert uncordon == []
    assert [e.reason for e in events] == ["Cordoned"]


def test_a_node_someone_else_cordoned_is_left_alone() -> None:
    nm = maintenance("m1", ["a"])
    ctx = read_context(inputs(nm, [node("a", unschedulable=True)]), validate(nm))
    assert cordon_actions(ctx, None) == ([], [], [])


def test_complete_hands_the_cordon_to_another_holder_or_uncordons() -> None:
    done = maintenance("m1", ["a", "b"], stage="Complete")
    other = maintenance("m2", ["a"])
    nodes = [node("a", unschedulable=True, cordoned_by="m1,m2")]
    nodes.append(node("b", unschedulable=True, cordoned_by="m1"))
    ctx = read_context(inputs(done, nodes, other), validate(done))
    cordon, uncordon, events = cordon_actions(ctx, None)
    assert cordon == []
    assert [(p.node, p.unschedulable, p.cordoned_by) for p in uncordon] == [
        ("a", None, "m2"),
        ("b", False, None),
    ]
    assert [e.message for e in events] == ["Uncordoned node b"]
