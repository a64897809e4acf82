"""Which nodes a maintenance has to do with, and which maintenances intersect."""

from __future__ import annotations

from nodeagent.model.maintenance import cordoned_by, involves, maintenance_nodes
from nodeagent.model.nodemaintenance.selection import (
    admission_warning,
    connected,
    selects_every_node,
)
from tests.unit.model.nodemaintenance.helpers import maintenance, node


def test_cordoned_by_reads_the_holders_and_none_without_the_annotation() -> None:
    assert cordoned_by(node("a", cordoned_by=" m1, ,m2")) == ["m1", "m2"]
    assert cordoned_by(node("a", unschedulable=True)) is None


def test_a_maintenance_involves_the_nodes_it_selects_or_holds() -> None:
    nm = maintenance("m1", ["a"])
    assert involves(nm, node("a"))
    assert involves(nm, node("b", cordoned_by="m1"))
    assert not involves(nm, node("b", cordoned_by="m2"))


def test_maintenance_nodes_are_selected_cordoned_or_reported() -> None:
    nm = maintenance("m1", ["a"])
    nm["status"] = {"nodeStatuses": [{"nodeRef": {"name": "c"}}]}
    nodes = {n: node(n) for n in "abc"} | {"b": node("b", cordoned_by="m1")}
    assert maintenance_nodes(nm, nodes) == {"a", "b", "c"}
    assert maintenance_nodes(nm, nodes, selected=frozenset()) == {"b", "c"}


def test_connected_follows_shared_nodes_transitively() -> None:
    sets = {"m1": {"a"}, "m2": {"a", "b"}, "m3": {"b"}, "m4": {"d"}}
    assert connected(["m1"], sets) == ({"m1", "m2", "m3"}, {"a", "b"})
    assert connected(["m4", "gone"], sets) == ({"m4"}, {"d"})


def test_selecting_every_node_is_worth_a_warning_only_with_more_than_one() -> None:
    nodes = {n: node(n) for n in "ab"}
    assert selects_every_node(frozenset("ab"), nodes) is not None
    assert selects_every_node(frozenset("a"), nodes) is None
    assert selects_every_node(frozenset("a"), {"a": node("a")}) is None


def test_the_admission_warning_names_a_maintenance_that_selects_every_node() -> None:
    nodes = {n: node(n) for n in "ab"}
    warning = admission_warning(maintenance("m1", ["a", "b"]), nodes)
    assert warning is not None and warning.startswith("NodeMaintenance m1: ")
    assert "every node of the cluster (2)" in warning
    assert admission_warning(maintenance("m1", ["a"]), nodes) is None
    named = {
        "metadata": {"generateName": "reboot-"},
        "spec": dict(maintenance("x", ["a", "b"])["spec"]),
    }
    assert (admission_warning(named, nodes) or "").startswith("NodeMaintenance reboot-: ")
    # a selector the API would refuse selects nothing: no warning, not an error
    bad = {"metadata": {"name": "m2"}, "spec": {"nodeSelector": {"nodeSelectorTerms": "x"}}}
    assert admission_warning(bad, nodes) is None
    assert admission_warning({"metadata": {"name": "m3"}}, nodes) is None
