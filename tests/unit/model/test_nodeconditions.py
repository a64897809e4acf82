"""The KEP-5683 Node conditions a node's agent keeps, and the Events on the Node: converge in one
write, leave the kubelet's conditions alone, cost nothing on a node no maintenance touches, and
the Events of a maintenance's life come once each, in order."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from nodeagent.model.names import CORDONED_BY_ANNOTATION
from nodeagent.model.nodeconditions import (
    CONDITION_TYPES,
    DRAIN_IN_PROGRESS,
    DRAINED,
    GRACEFUL_SHUTDOWN,
    MAINTENANCE_IN_PROGRESS,
    MAINTENANCE_PLANNED,
    Phase,
    Shutdown,
    decide,
    node_conditions,
    overlay,
    status_patch,
)

NODE = "node-1"
T0, T1 = "2030-01-01T00:00:00Z", "2030-01-01T00:01:00Z"
READY = {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ready"}
Obj = dict[str, Any]


def node(
    unschedulable: bool = False, held: bool = False, conditions: list[Obj] | None = None
) -> Obj:
    md: Obj = {"name": NODE, "labels": {"pool": "a"}}
    if held:
        md["annotations"] = {CORDONED_BY_ANNOTATION: "m"}
    return {
        "metadata": md,
        "spec": {"unschedulable": True} if unschedulable else {},
        "status": {"conditions": [dict(READY)] if conditions is None else conditions},
    }


def maintenance(
    name: str = "m",
    stage: str = "Drain",
    *,
    selects: bool = True,
    deleting: bool = False,
    pods_left: int | None = None,
    drained: bool = False,
    reason: str = "kernel upgrade",
) -> Obj:
    pool = "a" if selects else "b"
    md: Obj = {"name": name}
    if deleting:
        md["deletionTimestamp"] = T0
    status: Obj = {}
    if pods_left is not None:
        status["nodeStatuses"] = [
            {
                "nodeRef": {"name": NODE},
                "podsPendingEvacuation": pods_left,
                "podsEvacuating": 0,
                "drainMessage": "Drained" if not pods_left else "Evacuating",
            }
        ]
    if drained:
        status["conditions"] = [{"type": "Drained", "status": "True", "reason": "Drained"}]
    return {
        "metadata": md,
        "spec": {
            "nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "pool", "operator": "In", "values": [pool]}]}]},
            "stage": stage,
            "reason": reason,
        },
        "status": status,
    }  # fmt: skip


def applied(n: Obj, maintenances: list[Obj], shutdown: Shutdown | None, now: str = T1) -> Obj:
    """The Node once the decision's write has reached it (as the API server merges it)."""
    d = decide(maintenances, NODE, n, shutdown)
    patch = status_patch(d.changed, n, now)
    return overlay(n, patch["status"]["conditions"])


def statuses(n: Obj) -> dict[str, str]:
    return {t: str(c.get("status")) for t, c in node_conditions(n).items()}


# --- strategies --------------------------------------------------------------------------------

STAGES = ["Idle", "Cordon", "Drain", "Complete", "Bogus"]


@st.composite
def maintenances(draw: st.DrawFn) -> list[Obj]:
    out = []
    for i in range(draw(st.integers(0, 3))):
        out.append(
            maintenance(
                f"m{i}",
                draw(st.sampled_from(STAGES)),
                selects=draw(st.booleans()),
                deleting=draw(st.booleans()),
                pods_left=draw(st.none() | st.integers(0, 3)),
                drained=draw(st.booleans()),
                reason=draw(st.text(max_size=200)),
            )
        )
    return out


@st.composite
def written_conditions(draw: st.DrawFn) -> list[Obj]:
    """What the Node may already say: the kubelet's Ready, and any of ours, even odd ones."""
    out = [dict(READY)]
    for kind in CONDITION_TYPES:
        if draw(st.booleans()):
            out.append(
                {
                    "type": kind,
                    "status": draw(st.sampled_from(["True", "False", "Unknown", "bogus"])),
                    "reason": draw(st.sampled_from(["", "Drained", "NodeMaintenance"])),
                    "message": "earlier",
                    "lastTransitionTime": T0,
                }
            )
    return out


nodes = st.builds(node, st.booleans(), st.booleans(), written_conditions())
shutdowns = st.none() | st.builds(Shutdown, st.booleans(), st.sampled_from([None, "reboot"]))


# --- properties --------------------------------------------------------------------------------


@given(nodes, maintenances(), shutdowns)
def test_one_write_converges_and_touches_only_our_conditions(
    n: Obj, nms: list[Obj], shutdown: Shutdown | None
) -> None:
    d = decide(nms, NODE, n, shutdown)
    patch = status_patch(d.changed, n, T1)
    assert set(patch) == {"status"} and set(patch["status"]) == {"conditions"}
    assert {c["type"] for c in patch["status"]["conditions"]} <= set(CONDITION_TYPES)
    after = overlay(n, patch["status"]["conditions"])
    assert [c for c in after["status"]["conditions"] if c["type"] == "Ready"] == [READY]
    again = decide(nms, NODE, after, shutdown)
    assert again.changed == () and again.events == ()
    assert again.phase == d.phase
    # events come only with a write
    assert not d.events or d.changed


@given(nodes, maintenances(), shutdowns)
def test_the_conditions_agree_with_each_other(
    n: Obj, nms: list[Obj], shutdown: Shutdown | None
) -> None:
    after = statuses(applied(n, nms, shutdown))
    if after.get(DRAIN_IN_PROGRESS) == "True" or after.get(DRAINED) == "True":
        assert after[MAINTENANCE_IN_PROGRESS] == "True"
    assert not (after.get(DRAIN_IN_PROGRESS) == "True" and after.get(DRAINED) == "True")
    # covers: selects the node (pool a), or reports on it in status.nodeStatuses
    planned = any(
        m["spec"]["stage"] == "Idle"
        and "deletionTimestamp" not in m["metadata"]
        and (
            m["spec"]["nodeSelector"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"]
            == ["a"]
            or "nodeStatuses" in m["status"]
        )
        for m in nms
    )
    assert (after.get(MAINTENANCE_PLANNED) == "True") is planned


@given(nodes, maintenances())
def test_the_shutdown_condition_follows_logind_and_only_when_known(n: Obj, nms: list[Obj]) -> None:
    before = node_conditions(n).get(GRACEFUL_SHUTDOWN)
    unknown = applied(n, nms, None)
    assert node_conditions(unknown).get(GRACEFUL_SHUTDOWN) == before
    assert statuses(applied(n, nms, Shutdown(True, "reboot")))[GRACEFUL_SHUTDOWN] == "True"
    off = statuses(applied(n, nms, Shutdown(False)))
    assert off.get(GRACEFUL_SHUTDOWN, "False") == "False"


@given(st.lists(st.sampled_from(["Idle", "Complete", "Bogus"]), max_size=3), st.booleans())
def test_a_node_no_maintenance_acts_on_costs_no_write(stages: list[str], shutdown: bool) -> None:
    """Idle writes MaintenancePlanned (a change); a node with none, or with only completed ones,
    and no shutdown, is left alone: absent conditions count as False."""
    nms = [maintenance(f"m{i}", s) for i, s in enumerate(stages) if s != "Idle"]
    d = decide(nms, NODE, node(), Shutdown(False) if not shutdown else None)
    assert d.changed == () and d.events == ()


@given(nodes, maintenances(), shutdowns)
def test_last_transition_time_moves_only_with_the_status(
    n: Obj, nms: list[Obj], shutdown: Shutdown | None
) -> None:
    have = node_conditions(n)
    d = decide(nms, NODE, n, shutdown)
    for c in status_patch(d.changed, n, T1)["status"]["conditions"]:
        old = have.get(c["type"])
        old_status = old["status"] if old is not None else "False"
        assert c["lastHeartbeatTime"] == T1
        assert c["lastTransitionTime"] == (T0 if old_status == c["status"] else T1)


# a maintenance's life as the node agent sees it: what the NodeMaintenance controller and the
# drain do to the maintenance and the Node, one step at a time
STEPS = ["create-idle", "cordon", "drain", "pods-gone", "new-pod", "complete", "uncordon"]


@given(st.lists(st.sampled_from(STEPS), max_size=12), st.booleans())
def test_the_events_of_a_maintenance_come_once_each_in_order(
    steps: list[str], direct_drain: bool
) -> None:
    stage = None
    pods_left = 2
    n = node()
    seen: list[str] = []
    for step in steps:
        if step == "create-idle" and stage is None:
            stage = "Drain" if direct_drain else "Idle"
        elif step == "cordon" and stage in ("Idle", "Cordon", "Drain"):
            stage = "Cordon" if stage == "Idle" else stage
            n = {**n, "spec": {"unschedulable": True}, "metadata": node(held=True)["metadata"]}
        elif step == "drain" and stage in ("Idle", "Cordon"):
            stage = "Drain"
        elif step == "pods-gone":
            pods_left = 0
        elif step == "new-pod":
            pods_left = 1
        elif step == "complete" and stage is not None:
            stage = "Complete"
        elif step == "uncordon" and stage == "Complete":
            n = {**n, "spec": {}, "metadata": node()["metadata"]}
        nms = [] if stage is None else [maintenance(stage=stage, pods_left=pods_left)]
        d = decide(nms, NODE, n, None)
        seen += [e.reason for e in d.events]
        n = overlay(n, status_patch(d.changed, n, T1)["status"]["conditions"])
    # Cordoned opens a maintenance, Restored closes it; nothing between them repeats itself
    # and no Draining/Drained comes outside
    open_ = False
    last = None
    for reason in seen:
        if reason == "Cordoned":
            assert not open_
            open_ = True
        elif reason == "Restored":
            assert open_
            open_ = False
        else:
            assert open_ and reason in ("Draining", "Drained") and reason != last
        last = reason
    # and the Node says what the last Event said
    in_progress = statuses(n).get(MAINTENANCE_IN_PROGRESS) == "True"
    assert in_progress is open_
    if last in ("Draining", "Drained"):
        assert statuses(n)[DRAIN_IN_PROGRESS if last == "Draining" else DRAINED] == "True"


def test_a_shutdown_drain_from_start_to_end() -> None:
    """The shutdown maintenance (stage Drain at once) on node-1: not cordoned yet -> nothing;
    cordoned and draining -> in progress; drained; completed -> held until the controller
    lifts the cordon -> all False, with the Events on the way."""
    reboot = Shutdown(True, "reboot")
    n = node()
    nm = maintenance("nodeagent-shutdown-node-1-abc", "Drain", reason="shutdown of node-1")
    d = decide([nm], NODE, n, reboot)
    assert d.phase == Phase.NONE and [c.type for c in d.changed] == [GRACEFUL_SHUTDOWN]
    n = applied(n, [nm], reboot)
    n = {**n, "spec": {"unschedulable": True}, "metadata": node(held=True)["metadata"]}
    d = decide([nm], NODE, n, reboot)
    assert d.phase == Phase.DRAINING
    assert [(e.reason, e.message) for e in d.events] == [
        (
            "Cordoned",
            "Cordoned for NodeMaintenance nodeagent-shutdown-node-1-abc "
            "(Drain: shutdown of node-1)",
        ),
        ("Draining", "Draining for NodeMaintenance nodeagent-shutdown-node-1-abc"),
    ]
    n = applied(n, [nm], reboot)
    assert statuses(n) == {
        MAINTENANCE_IN_PROGRESS: "True",
        DRAIN_IN_PROGRESS: "True",
        GRACEFUL_SHUTDOWN: "True",
    }
    drained = maintenance(nm["metadata"]["name"], "Drain", pods_left=0, drained=True)
    d = decide([drained], NODE, n, reboot)
    assert [e.reason for e in d.events] == ["Drained"]
    n = applied(n, [drained], reboot)
    assert statuses(n)[DRAINED] == "True" and statuses(n)[DRAIN_IN_PROGRESS] == "False"
    # the shutdown is cancelled and the maintenance completed; the cordon is still there
    done = maintenance(nm["metadata"]["name"], "Complete", pods_left=0, drained=True)
    d = decide([done], NODE, n, Shutdown(False))
    assert [c.type for c in d.changed] == [GRACEFUL_SHUTDOWN] and not d.events
    n = applied(n, [done], Shutdown(False))
    n = {**n, "spec": {}, "metadata": node()["metadata"]}
    d = decide([done], NODE, n, Shutdown(False))
    assert [(e.reason, e.message) for e in d.events] == [
        (
            "Restored",
            "NodeMaintenance nodeagent-shutdown-node-1-abc completed; "
            "the node is schedulable again",
        )
    ]
    n = applied(n, [done], Shutdown(False))
    assert set(statuses(n).values()) == {"False"}
    assert set(statuses(n)) == {
        MAINTENANCE_IN_PROGRESS,
        DRAIN_IN_PROGRESS,
        DRAINED,
        GRACEFUL_SHUTDOWN,
    }


def test_an_agent_restarted_mid_drain_records_nothing_again() -> None:
    n = node(True, True)
    nm = maintenance(stage="Drain", pods_left=3)
    n = applied(n, [nm], None)
    # a new agent process: all it has is the Node
    assert decide([nm], NODE, n, None).events == ()


def test_cordon_stage_then_a_maintenance_cordoned_outside_nodeagent() -> None:
    n = node(unschedulable=True)  # cordoned by an admin before: no cordoned-by annotation
    nm = maintenance(stage="Cordon")
    d = decide([nm], NODE, n, None)
    assert d.phase == Phase.CORDONED and [e.reason for e in d.events] == ["Cordoned"]
    n = applied(n, [nm], None)
    d = decide([maintenance(stage="Complete")], NODE, n, None)
    assert [(e.reason, e.message) for e in d.events] == [
        (
            "Restored",
            "NodeMaintenance m completed; the node stays unschedulable (cordoned outside "
            "nodeagent)",
        )
    ]


def test_planned_names_the_idle_maintenances() -> None:
    nms = [maintenance(f"m{i}", "Idle") for i in range(5)]
    (planned,) = [c for c in decide(nms, NODE, node(), None).changed]
    assert planned.type == MAINTENANCE_PLANNED and planned.status == "True"
    assert planned.message.startswith(
        "NodeMaintenances m0 (Idle: kernel upgrade), m1 (Idle: kernel upgrade), "
        "m2 (Idle: kernel upgrade) and 2 more will cordon"
    )
