"""Properties over random clusters: drain targets never go backwards nor run ahead of any
maintenance's plan, evictions are asked only for targeted pods, evicting what is asked drains
every maintenance, and completing them withdraws every request and cordon."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nodeagent.model.drainplan import PodType, classify, effective_plan, entries_from_dicts
from nodeagent.model.draintargets.tracks import plan_targets, targets_within
from nodeagent.model.maintenance import maintenance_nodes
from nodeagent.model.names import REQUESTER
from nodeagent.model.nodemaintenance.selection import connected
from tests.unit.controllers.nodemaintenance.world import World, entry

NODES = ("n1", "n2", "n3", "n4")
PRIORITIES = (0, 1000, 5000, 1000000000, 2000000000, 2000001000)
TYPES = ("Default", "DaemonSet", "Static")


@st.composite
def worlds(draw: st.DrawFn) -> World:
    w = World(NODES)
    for i in range(draw(st.integers(1, 12))):
        w.pod(
            f"p{i}",
            draw(st.sampled_from(NODES)),
            draw(st.sampled_from(PRIORITIES)),
            draw(st.sampled_from(TYPES)),
            labels={"tier": draw(st.sampled_from(["a", "b"]))},
            skip=draw(st.booleans()) and draw(st.integers(0, 5)) == 0,
        )
    for j in range(draw(st.integers(1, 3))):
        nodes = draw(st.sets(st.sampled_from(NODES), min_size=1, max_size=3))
        raw = draw(
            st.lists(
                st.tuples(
                    st.sampled_from(TYPES),
                    st.sampled_from((100, 1000, 3000, 5000, 15000)),
                    st.booleans(),
                ),
                max_size=4,
                unique=True,
            )
        )
        plan = [
            entry(t, p, {"matchLabels": {"tier": "a"}} if sel else None)
            for t, p, sel in sorted(raw, key=lambda x: (TYPES.index(x[0]), x[1], not x[2]))
        ]
        w.maintenance(f"m{j}", nodes, plan=plan)
    return w


def dump(w: World, other: str, node: str) -> str:
    lines = [f"other={other} node={node}"]
    for name, nm in w.nms.items():
        status = nm.get("status", {})
        nodes = sorted(maintenance_nodes(nm, w.nodes))
        lines.append(f"{name} {nodes} index={status.get('drainPlanIndex')}")
        lines.append(f"   plan={nm['spec'].get('drainPlan')}")
        for ns in status.get("nodeStatuses") or []:
            lines.append(f"   {ns['nodeRef']['name']}: {ns['drainTargets']} {ns['drainMessage']}")
    for p in w.pods.values():
        lines.append(f"pod {p['metadata']['name']} {p['spec']['nodeName']} {classify(p)}")
    return "\n".join(lines)


def check_invariants(w: World, previous: dict[tuple[str, str], list[Any]]) -> None:
    for name, nm in w.nms.items():
        status = nm.get("status") or {}
        plan = effective_plan(nm["spec"].get("drainPlan"))
        index = status.get("drainPlanIndex", 0)
        for ns in status.get("nodeStatuses") or []:
            node = ns["nodeRef"]["name"]
            targets = entries_from_dicts(ns["drainTargets"], "t")
            # never backwards
            if (name, node) in previous:
                assert targets_within(previous[(name, node)], targets), (name, node)
            previous[(name, node)] = targets
            # all maintenances were created together: nobody runs ahead of anyone's entry
            for other, onm in w.nms.items():
                if node in maintenance_nodes(onm, w.nodes):
                    oplan = effective_plan(onm["spec"].get("drainPlan"))
                    oindex = (onm.get("status") or {}).get("drainPlanIndex", 0)
                    assert targets_within(targets, plan_targets(oplan, oindex)), dump(
                        w, other, node
                    )
            assert targets_within(targets, plan_targets(plan, index))
            # Static only once no Default or DaemonSet pod is left around the node
            if any(t.pod_type == PodType.STATIC for t in targets):
                around = connected(
                    [name], {n: maintenance_nodes(o, w.nodes) for n, o in w.nms.items()}
                )[1]
                for pod in w.pods.values():
                    c = classify(pod)
                    if pod["spec"]["nodeName"] in around and not c.skip:
                        assert c.pod_type == PodType.STATIC, (name, node, pod["metadata"]["name"])
    # evictions are only ever requested for targeted, unskipped pods
    for er in w.ers.values():
        target = w.pods.get(er["metadata"]["name"])
        if target is not None and {"name": REQUESTER} in er["spec"]["requesters"]:
            assert not classify(target).skip


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(w=worlds(), data=st.data())
def test_random_drains_are_safe_and_finish(w: World, data: st.DataObject) -> None:
    previous: dict[tuple[str, str], list[Any]] = {}
    w.settle()
    check_invariants(w, previous)
    for _ in range(40):
        targeted = sorted(
            {
                er["spec"]["target"]["pod"]["name"]
                for er in w.ers.values()
                if er["metadata"]["name"] in w.pods
            }
        )
        if not targeted:
            break
        for name in data.draw(st.sets(st.sampled_from(targeted), min_size=1)):
            w.remove_pod(name)
        w.settle()
        check_invariants(w, previous)
    # evicting whatever is requested always drains every maintenance
    for name in w.nms:
        assert (w.condition(name, "Drained") or {}).get("status") == "True", name
    left = {p["metadata"]["name"] for p in w.pods.values() if not classify(p).skip}
    covered = set().union(*(maintenance_nodes(nm, w.nodes) for nm in w.nms.values()))
    assert not {
        n
        for n in left
        if w.pods
        and any(
            p["metadata"]["name"] == n and p["spec"]["nodeName"] in covered for p in w.pods.values()
        )
    }
    # completing everything withdraws every request and uncordons every node
    for name in list(w.nms):
        w.set_stage(name, "Complete")
    w.settle()
    assert w.requested() == set()
    assert all(w.cordoned(n) == (False, None) for n in NODES)
