"""Under a limit on nodes draining at once, a node agent's shutdown maintenance takes a drain
slot only while its shutdown may be under way: once the node's kubelet reports another boot
than the maintenance's, it neither holds nor waits for one (model.shutdown.shutdown_over)."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nodeagent.model import names
from nodeagent.model import shutdown as model
from nodeagent.model.drainplan import classify
from tests.unit.controllers.nodemaintenance.limited import LimitedWorld, message
from tests.unit.controllers.nodemaintenance.world import Obj

BOOT = "boot-a"
NEXT_BOOT = "boot-b"


def shutdown(w: LimitedWorld, node: str, boot: str = BOOT) -> str:
    """`node`'s shutdown maintenance of `boot`, as its agent writes it."""
    body = model.shutdown_maintenance(node, boot, "reboot")
    name = str(body["metadata"]["name"])
    nm = w.maintenance(name, [node], selector=model.node_selector(node))
    nm["metadata"]["labels"] = body["metadata"]["labels"]
    return name


def boots(w: LimitedWorld, node: str, boot: str) -> None:
    """The node's kubelet reports `boot`."""
    w.edit_node(node).setdefault("status", {})["nodeInfo"] = {"bootID": boot}


def test_a_shutdown_is_over_once_the_node_reports_another_boot() -> None:
    w = LimitedWorld(1)
    nm = w.nms[shutdown(w, "one")]
    assert not model.shutdown_over(nm, w.nodes)  # no boot reported: not known
    boots(w, "one", BOOT)
    assert not model.shutdown_over(nm, w.nodes)
    boots(w, "one", NEXT_BOOT)
    assert model.shutdown_over(nm, w.nodes)
    assert not model.shutdown_over(nm, {})  # no such Node
    # not a shutdown maintenance: an admin's, one selecting more, one without its boot
    admin: Obj = w.maintenance("upgrade", ["one"], selector=model.node_selector("one"))
    assert not model.shutdown_over(admin, w.nodes)
    wider = {**nm, "spec": {**nm["spec"], "nodeSelector": model.node_selector("two")}}
    assert not model.shutdown_over(wider, w.nodes)
    labels = {k: v for k, v in nm["metadata"]["labels"].items() if k != names.LABEL_BOOT_ID}
    bootless = {**nm, "metadata": {**nm["metadata"], "labels": labels}}
    assert not model.shutdown_over(bootless, w.nodes)


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
        "Node one booted again since this shutdown: it drains no more and holds no slot"
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
