"""Invalid NodeMaintenances: reported once and touching nothing, stopped where they are after a
backwards stage or a changed plan, yet still holding their cordon and undoing it on Complete."""

from __future__ import annotations

import pytest

from nodeagent.model.maintenance import validate
from tests.unit.controllers.nodemaintenance.world import Obj, World, entry


@pytest.mark.parametrize(
    ("spec", "reason", "message"),
    [
        (
            {"drainPlan": [entry("Default", 10), entry("Default", 10)]},
            "InvalidDrainPlan",
            "spec.drainPlan[1]: duplicate of spec.drainPlan[0]",
        ),
        (
            {"drainPlan": [entry("Static", 10), entry("DaemonSet", 10)]},
            "InvalidDrainPlan",
            "spec.drainPlan[1]: podType DaemonSet comes after podType Static (entry 0); entries "
            "must be ordered Default, DaemonSet, Static by ascending priority",
        ),
        (
            {"nodeSelector": {"nodeSelectorTerms": []}},
            "InvalidNodeSelector",
            "spec.nodeSelector.nodeSelectorTerms: must have at least one node selector term",
        ),
        (
            {
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "spec.x", "operator": "In", "values": ["a"]}]}
                    ]
                }
            },
            "InvalidNodeSelector",
            "spec.nodeSelector.nodeSelectorTerms[0].matchFields[0].key: only metadata.name is "
            "supported",
        ),
        (
            {"stage": "Later"},
            "InvalidStage",
            "spec.stage: unknown stage 'Later'; must be one of Idle, Cordon, Drain, Complete",
        ),
    ],
)
def test_invalid_specs_are_reported_and_touch_nothing(spec: Obj, reason: str, message: str) -> None:
    w = World()
    w.pod("web", "one")
    nm = w.maintenance("m", ["one"])
    nm["spec"].update(spec)
    a = w.decide("m")
    assert not (a.add_finalizer or a.cordon or a.uncordon or a.create_evictions)
    assert not (a.requester_patches or a.delete_evictions or a.remove_finalizer)
    assert [(e.type, e.reason, e.message) for e in a.events] == [("Warning", reason, message)]
    assert a.status is not None
    assert set(a.status) == {"observedGeneration", "conditions", "summary"}
    blocked = f"{reason}: {message}"  # one line of at most 160 characters
    blocked = blocked if len(blocked) <= 160 else blocked[:157] + "..."
    assert a.status["summary"] == {"blockedBy": blocked}
    (valid,) = a.status["conditions"]
    assert (valid["type"], valid["status"], valid["reason"], valid["message"]) == (
        "Valid",
        "False",
        reason,
        message,
    )
    w.apply("m", a)
    assert w.decide("m").idle  # reported once


def test_a_backwards_stage_or_changed_plan_stops_the_maintenance_where_it_is() -> None:
    w = World()
    w.pod("web", "one")
    w.maintenance("m", ["one"], plan=[entry("Default", 10)])
    w.settle()
    w.set_stage("m", "Cordon")
    a = w.decide("m")
    assert a.validity.reason == "InvalidStageTransition"
    assert a.validity.message == (
        "spec.stage: cannot go back from Drain to Cordon; allowed transitions are Idle -> Cordon "
        "| Drain | Complete, Cordon -> Drain | Complete, Drain -> Complete"
    )
    assert not (a.cordon or a.uncordon or a.requester_patches)
    w.settle()
    assert w.cordoned("one") == (True, "m") and w.requested() == {"web"}
    w.set_stage("m", "Drain")
    w.nms["m"]["spec"]["drainPlan"] = [entry("Default", 20)]
    assert validate(w.nms["m"]).message == (
        "spec.drainPlan: changed after the maintenance was created; drainPlan is immutable"
    )
    # deletion still completes an invalid maintenance, so the finalizer can go
    w.delete("m")
    w.settle()
    assert "m" not in w.nms and w.cordoned("one") == (False, None) and w.requested() == set()


def test_an_invalid_maintenance_keeps_its_cordon_against_others() -> None:
    w = World()
    w.maintenance("a", ["one"], stage="Cordon")
    w.maintenance("b", ["one"], stage="Cordon")
    w.settle()
    w.set_stage("a", "Idle")  # backwards: a is invalid and still holds node one
    w.set_stage("b", "Complete")
    w.settle()
    assert w.cordoned("one") == (True, "a")


def test_complete_undoes_the_cordon_even_after_an_invalid_plan_edit() -> None:
    """Where CEL is not enforced, drainPlan can be changed; the maintenance is then invalid and
    acts no more, but Complete must still uncordon what it cordoned."""
    w = World(nodes=("one", "two"))
    w.maintenance("m", ["one"], stage="Cordon", plan=[entry("Default", 10)])
    w.settle()
    assert w.cordoned("one") == (True, "m")
    nm = w.nms["m"]
    nm["spec"]["drainPlan"] = [entry("Default", 20)]
    nm["metadata"]["generation"] += 1
    w.settle()
    assert (w.condition("m", "Valid") or {}).get("status") == "False"
    w.set_stage("m", "Complete")
    w.settle()
    assert w.cordoned("one") == (False, None)
