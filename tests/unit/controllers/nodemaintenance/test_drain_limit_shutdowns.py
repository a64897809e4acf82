"""Under a limit on nodes draining at once, a node agent's shutdown maintenance takes a drain
slot only while it counts (model.shutdown_standing): its boot is the one the node's kubelet
reports, it is within its shutdown's bound, and it is the one live shutdown maintenance of its
node. Otherwise it neither holds nor waits for a slot."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nodeagent.model import final_phase, names
from nodeagent.model import shutdown as model
from nodeagent.model.drainplan import classify
from nodeagent.model.shutdown_standing import ignored
from tests.unit.controllers.nodemaintenance.limited import (
    LimitedWorld,
    agents_maintenance,
    message,
    reports_boot,
)
from tests.unit.controllers.nodemaintenance.world import Obj

# the kernel's form, as the kubelet reports it (status.nodeInfo.bootID)
BOOT = "11420bea-f724-4165-9bde-f219df708610"
NEXT_BOOT = "5d6c7b8a-9999-8888-7777-666655554444"
HOUR = 3600.0


def shutdown(w: LimitedWorld, node: str, boot: str = BOOT) -> str:
    """`node`'s shutdown maintenance of `boot`, as its agent writes it."""
    return agents_maintenance(w, node, boot)


boots = reports_boot


def why(w: LimitedWorld, name: str, max_shutdown: float = HOUR) -> str | None:
    return ignored(w.nms.values(), w.nodes, w.clock, max_shutdown).get(name)


def test_a_shutdown_counts_while_the_kubelet_reports_its_boot() -> None:
    w = LimitedWorld(1)
    name = shutdown(w, "one")
    assert why(w, name) is None  # no boot reported (kwok): taken at its word
    boots(w, "one", BOOT)
    assert why(w, name) is None
    boots(w, "one", NEXT_BOOT)
    assert why(w, name) == f"the kubelet reports another boot ({NEXT_BOOT})"


def test_the_agents_soft_reboot_form_is_compared_by_its_kernel_part() -> None:
    """The agent's boot id under systemd carries PID 1's start time; the kubelet reports the
    kernel's id alone, with its dashes: the same boot."""
    w = LimitedWorld(1)
    name = shutdown(w, "one", model.boot_id(BOOT, "7431d"))
    assert name == f"nodeagent-shutdown-one-{BOOT}-7431d"
    boots(w, "one", BOOT)
    assert why(w, name) is None


def test_a_made_up_boot_never_counts() -> None:
    w = LimitedWorld(1)
    boots(w, "one", BOOT)
    name = shutdown(w, "one", NEXT_BOOT)
    assert why(w, name) == f"the kubelet reports another boot ({BOOT})"


def test_a_shutdown_counts_until_its_bound() -> None:
    w = LimitedWorld(1)
    name = shutdown(w, "one")
    w.clock += timedelta(seconds=HOUR - 2)
    assert why(w, name) is None
    w.clock += timedelta(seconds=2)
    assert "past its shutdown's bound" in (why(w, name) or "")


def test_the_release_deadline_it_states_bounds_it_sooner() -> None:
    w = LimitedWorld(1)
    name = shutdown(w, "one")
    nm = w.nms[name]
    deadline = w.clock + timedelta(seconds=60)
    phase = final_phase.FinalPhase(deadline.timestamp(), 0.0, 0.0)  # the phase off: still says
    nm["metadata"].setdefault("annotations", {})[names.FINAL_PHASE_ANNOTATION] = (
        final_phase.annotation(deadline, phase)
    )
    w.clock += timedelta(seconds=59)
    assert why(w, name) is None
    w.clock += timedelta(seconds=1)
    assert "past its shutdown's bound" in (why(w, name) or "")
    # a deadline past the controllers' bound does not lengthen it
    late = w.clock + timedelta(days=1)
    nm["metadata"]["annotations"][names.FINAL_PHASE_ANNOTATION] = final_phase.annotation(
        late, final_phase.FinalPhase(late.timestamp(), 30.0, 10.0)
    )
    assert why(w, name, max_shutdown=30.0) is not None


def test_one_live_shutdown_maintenance_per_node_counts() -> None:
    w = LimitedWorld(1)
    boots(w, "one", BOOT)
    first = shutdown(w, "one", model.boot_id(BOOT, "1"))
    second = shutdown(w, "one", model.boot_id(BOOT, "2"))
    assert why(w, first) is None
    assert why(w, second) == f"one per node: {first} counts"


def test_a_squatters_name_is_no_shutdown_maintenance() -> None:
    """`node-1`'s agent naming its maintenance after `node-1-a`'s boot: the labels and the
    name disagree, so it is no shutdown maintenance of either node."""
    w = LimitedWorld(1, nodes=("node-1", "node-1-a"))
    body = model.shutdown_maintenance("node-1", BOOT, "reboot")
    body["metadata"]["name"] = model.maintenance_name("node-1-a", BOOT)
    assert model.shutdown_node(body) is None
    body["metadata"]["labels"][names.LABEL_BOOT_ID] = f"a-{BOOT}"
    body["metadata"]["name"] = model.maintenance_name("node-1", f"a-{BOOT}")
    assert model.boot_of(body) is None and model.shutdown_node(body) is None
    # not a shutdown maintenance: an admin's, one selecting more
    nm = w.nms[shutdown(w, "node-1")]
    admin: Obj = w.maintenance("upgrade", ["node-1"], selector=model.node_selector("node-1"))
    assert model.shutdown_node(admin) is None
    wider = {**nm, "spec": {**nm["spec"], "nodeSelector": model.node_selector("node-1-a")}}
    assert model.shutdown_node(wider) is None
    assert model.shutdown_node(nm) == "node-1"


def test_a_shutdown_of_a_past_boot_gives_its_slot_to_an_admins_maintenance() -> None:
    w = LimitedWorld(1)
    w.pod("one-web", "one")
    w.pod("one-ds", "one", kind="DaemonSet")
    w.pod("two-web", "two")
    boots(w, "one", BOOT)
    agent = shutdown(w, "one")
    w.clock += timedelta(seconds=5)
    w.maintenance("upgrade", ["two"])
    w.settle()
    # during the shutdown its maintenance holds the slot
    assert w.open_requests() == {"one": {"one-web"}}
    assert message(w, "upgrade", "two") == "Waiting for a drain slot (1 of 1 nodes draining: one)"
    # the node comes back with a new boot before the agent completes the maintenance (its
    # DaemonSet pod is back too): the slot goes to the admin's maintenance
    boots(w, "one", NEXT_BOOT)
    w.settle()
    assert w.open_requests() == {"two": {"two-web"}}
    assert message(w, agent, "one") == (
        f"Shutdown maintenance ignored: the kubelet reports another boot ({NEXT_BOOT}): "
        "it drains no more and holds no slot"
    )
    assert w.status(agent, "one")["drainTargets"] == []
    assert w.cordoned("one")[0]  # until the agent completes it
    w.evict_requested()
    w.settle()
    assert (w.condition("upgrade", "Drained") or {})["status"] == "True"


def test_an_admins_maintenance_of_the_same_node_still_drains_it() -> None:
    """A past boot's shutdown maintenance takes no slot; the node itself may still get one
    through another maintenance."""
    w = LimitedWorld(1)
    w.pod("one-web", "one")
    boots(w, "one", NEXT_BOOT)
    shutdown(w, "one")
    w.maintenance("upgrade", ["one"])
    w.settle()
    assert w.open_requests() == {"one": {"one-web"}}


@st.composite
def worlds_with_shutdowns(draw: st.DrawFn) -> tuple[LimitedWorld, frozenset[str]]:
    """Admins' maintenances and node agents' shutdown maintenances, some of whose nodes
    booted again; returns the world and the nodes whose shutdowns are under way or that an
    admin's maintenance selects (the only ones that may hold a slot)."""
    nodes = ("one", "two", "three", "four")
    w = LimitedWorld(draw(st.integers(1, 2)), nodes=nodes)
    for i in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(("Default", "DaemonSet")))
        w.pod(f"p{i}", draw(st.sampled_from(nodes)), kind=kind)
    may_drain: set[str] = set()
    for node in draw(st.sets(st.sampled_from(nodes), min_size=1)):
        booted = draw(st.booleans())
        boots(w, node, NEXT_BOOT if booted else BOOT)
        shutdown(w, node)
        if not booted:
            may_drain.add(node)
        w.clock -= timedelta(seconds=draw(st.integers(0, 2)))
    for j in range(draw(st.integers(0, 2))):
        selected = draw(st.sets(st.sampled_from(nodes), min_size=1, max_size=2))
        w.maintenance(f"admin-{j}", selected)
        may_drain |= selected
    return w, frozenset(may_drain)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(world=worlds_with_shutdowns(), data=st.data())
def test_past_boots_never_hold_a_slot_in_any_order_of_events(
    world: tuple[LimitedWorld, frozenset[str]], data: st.DataObject
) -> None:
    w, may_drain = world
    assert w.limit is not None
    for _ in range(150):
        gone = sorted(p["metadata"]["name"] for uid, p in w.pods.items() if uid in w.ers)
        choices = [("decide", n) for n in sorted(w.nms)] + [("evict", p) for p in gone]
        kind, what = data.draw(st.sampled_from(choices))
        if kind == "evict":
            w.remove_pod(what)
        else:
            a = w.decide(what)
            if not a.idle:
                w.apply(what, a)
        draining = set(w.open_requests())
        assert draining <= may_drain, draining
        assert len(draining) <= w.limit
    # every maintenance that may drain does
    for _ in range(60):
        w.settle()
        if not w.open_requests():
            break
        w.evict_requested()
    left = {p["spec"]["nodeName"] for p in w.pods.values() if not classify(p).skip}
    assert not left & may_drain


def test_a_shutdown_made_again_under_another_suffix_starts_no_new_bound() -> None:
    """The agent picks the userspace part of its boot id: a second shutdown maintenance of the
    same kernel boot, made before the first's bound, is bounded from the first's creation."""
    w = LimitedWorld(1)
    boots(w, "one", BOOT)
    first = shutdown(w, "one", model.boot_id(BOOT, "1"))
    w.clock += timedelta(seconds=HOUR - 10)
    second = shutdown(w, "one", model.boot_id(BOOT, "2"))
    w.clock += timedelta(seconds=10)
    assert "past its shutdown's bound" in (why(w, first) or "")
    assert "past its shutdown's bound" in (why(w, second) or "")


def test_a_completed_earlier_shutdown_of_the_boot_still_sets_the_start() -> None:
    """Completing the first (as its agent may) and making another gives no new bound while the
    first is stored; a deleted one no longer counts (the agent deletes its own cancelled one)."""
    w = LimitedWorld(1)
    boots(w, "one", BOOT)
    first = shutdown(w, "one", model.boot_id(BOOT, "1"))
    w.set_stage(first, "Complete")
    w.clock += timedelta(seconds=HOUR - 10)
    second = shutdown(w, "one", model.boot_id(BOOT, "2"))
    w.clock += timedelta(seconds=10)
    assert "past its shutdown's bound" in (why(w, second) or "")
    del w.nms[first]
    assert why(w, second) is None


def test_another_kernel_boots_shutdown_has_its_own_bound() -> None:
    w = LimitedWorld(1)
    shutdown(w, "one", BOOT)  # the kubelet reports none (kwok): each judged on its own
    w.clock += timedelta(seconds=HOUR - 10)
    later = shutdown(w, "one", NEXT_BOOT)
    w.clock += timedelta(seconds=10)
    assert "past its shutdown's bound" not in (why(w, later) or "")


def test_a_reboot_request_made_again_is_bounded_from_the_first_drained() -> None:
    w = LimitedWorld(1)
    boots(w, "one", BOOT)
    first = agents_maintenance(w, "one", model.boot_id(BOOT, "1"), model.TRIGGER_REBOOT)
    w.settle()
    assert (w.condition(first, "Drained") or {}).get("status") == "True"  # no pods: at once
    w.clock += timedelta(seconds=HOUR - 10)
    second = agents_maintenance(w, "one", model.boot_id(BOOT, "2"), model.TRIGGER_REBOOT)
    w.settle()
    w.clock += timedelta(seconds=10)
    assert "drained and not rebooted by" in (why(w, second) or "")
