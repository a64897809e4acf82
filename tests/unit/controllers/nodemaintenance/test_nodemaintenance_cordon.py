"""Cordon ownership: shared between maintenances, handed over, never taken from a human, and
kept against hand edits."""

from __future__ import annotations

from nodeagent.model.names import CORDONED_BY_ANNOTATION
from tests.unit.controllers.nodemaintenance.world import World, by_names


def test_cordon_ownership_is_shared_handed_over_and_never_taken_from_a_human() -> None:
    w = World()
    w.cordon_by_hand("three")
    w.maintenance("a", ["one", "two"], stage="Cordon")
    w.maintenance("b", ["two", "three"], stage="Cordon")
    w.settle()
    assert w.cordoned("one") == (True, "a")
    assert w.cordoned("two") == (True, "a,b")
    assert w.cordoned("three") == (True, None)
    assert w.reasons("a").count("Cordoned") == 2 and w.reasons("b").count("Cordoned") == 0

    w.set_stage("a", "Complete")
    w.settle()
    assert w.cordoned("one") == (False, None)
    assert w.cordoned("two") == (True, "b")
    assert "Uncordoned" in w.reasons("a")

    w.set_stage("b", "Complete")
    w.settle()
    assert w.cordoned("two") == (False, None)
    assert w.cordoned("three") == (True, None)


def test_a_node_left_by_the_selector_is_released_and_a_later_holder_takes_over() -> None:
    w = World()
    w.maintenance("a", ["one", "two"], stage="Cordon")
    w.settle()
    # b selects node two but has not run yet when a lets go of it
    w.maintenance("b", ["two"], stage="Cordon")
    w.nms["a"]["spec"]["nodeSelector"] = by_names(["one"])
    w.nms["a"]["metadata"]["generation"] += 1
    a = w.decide("a")
    assert [(p.node, p.unschedulable, p.cordoned_by) for p in a.uncordon] == [("two", None, "b")]
    w.apply("a", a)
    assert w.cordoned("two") == (True, "b")


def test_a_hand_uncordoned_node_is_cordoned_again() -> None:
    w = World()
    w.maintenance("a", ["one"], stage="Cordon")
    w.settle()
    w.edit_node("one")["spec"]["unschedulable"] = False
    w.settle()
    assert w.cordoned("one") == (True, "a")


def test_stale_names_in_the_annotation_are_dropped() -> None:
    w = World()
    w.maintenance("a", ["one"], stage="Cordon")
    w.settle()
    w.edit_node("one")["metadata"]["annotations"][CORDONED_BY_ANNOTATION] = "a,gone"
    w.settle()
    assert w.cordoned("one") == (True, "a")
