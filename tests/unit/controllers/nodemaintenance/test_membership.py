"""The membership index answers as a walk over the whole graph would, after any sequence of
changes, including its shortcut for maintenances that share no node, and tells which nodes no
maintenance has any more. The walk itself (`connected`) and the nodes a maintenance counts as
its own (`maintenance_nodes`) are checked here too."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from nodeagent.controllers.nodemaintenance.membership import Membership
from nodeagent.model.maintenance import maintenance_nodes
from nodeagent.model.names import CORDONED_BY_ANNOTATION
from nodeagent.model.nodemaintenance.selection import connected
from tests.unit.controllers.nodemaintenance.world import World

NAMES = ["a", "b", "c", "d"]
NODES = [f"n{i}" for i in range(6)]

changes = st.lists(
    st.tuples(st.sampled_from(NAMES), st.none() | st.frozensets(st.sampled_from(NODES))),
    max_size=30,
)


def _check(members: Membership, model: dict[str, set[str]]) -> None:
    assert members.by_nm == model
    reverse: dict[str, set[str]] = {}
    for name, nodes in model.items():
        for n in nodes:
            reverse.setdefault(n, set()).add(name)
    assert members.by_node == reverse
    for name, nodes in model.items():
        shared = any(len(reverse[n]) > 1 for n in nodes)
        assert members.shares_nodes(name) == shared, name
    for name in NAMES:
        assert members.component([name]) == connected([name], model), name
    assert members.component(NAMES) == connected(NAMES, model)
    for node in NODES:
        expected = connected(reverse.get(node, ()), model)[0]
        assert members.around_node(node) == expected, node


@settings(max_examples=300)
@given(steps=changes)
def test_index_matches_a_walk_after_any_changes(
    steps: list[tuple[str, frozenset[str] | None]],
) -> None:
    left: list[str] = []
    members = Membership(node_left=left.append)
    model: dict[str, set[str]] = {}
    for name, nodes in steps:
        had = set(members.by_node)
        if nodes is None:
            members.maintenance_deleted(name)
            model.pop(name, None)
        else:
            members.assign(name, set(nodes))
            model[name] = set(nodes)
        _check(members, model)
        # told of exactly the nodes no maintenance has any more, once each
        assert sorted(left) == sorted(had - set(members.by_node))
        left.clear()


def test_a_maintenance_alone_is_its_own_component() -> None:
    members = Membership()
    members.assign("big", {f"n{i}" for i in range(500)})
    members.assign("other", {"m1"})
    assert members.around_node("n7") == {"big"}
    assert members.component(["big"]) == ({"big"}, {f"n{i}" for i in range(500)})
    members.assign("other", {"m1", "n7"})  # now they share n7
    assert members.around_node("n3") == {"big", "other"}
    members.assign("other", {"m1"})
    assert not members.shares_nodes("big") and not members.shares_nodes("other")


def test_connected_components_through_shared_nodes() -> None:
    sets = {
        "a": frozenset({"one", "two"}),
        "b": frozenset({"two", "three"}),
        "c": frozenset({"three"}),
        "d": frozenset({"four"}),
    }
    assert connected(["a"], sets) == ({"a", "b", "c"}, {"one", "two", "three"})
    assert connected(["d"], sets) == ({"d"}, {"four"})
    assert connected(["missing"], sets) == (set(), set())


def test_maintenance_nodes_include_status_and_held_nodes() -> None:
    w = World()
    nm = w.maintenance("m", ["one"])
    nm["status"] = {"nodeStatuses": [{"nodeRef": {"name": "two"}}]}
    w.edit_node("three")["metadata"]["annotations"] = {CORDONED_BY_ANNOTATION: "x,m"}
    assert maintenance_nodes(nm, w.nodes) == {"one", "two", "three"}
