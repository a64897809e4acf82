"""The drain plan preview (`nodeagent plan`): an example read entry by entry, the budgets that
refuse, invalid specs, the text's width, and properties: every pod of a selected node appears
once, in the first entry that covers it or among the pods never evicted; no other pod appears."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nodeagent.model.drainplan import INT32_MAX, PodType, classify, entry_covers, pod_labels
from nodeagent.model.names import DRAIN_ANNOTATION, MIRROR_ANNOTATION
from nodeagent.model.preview.compute import InvalidMaintenance, preview
from nodeagent.model.preview.refusals import (
    MULTIPLE_BUDGETS,
    NO_DISRUPTION_ALLOWED,
    Refusal,
    refusals,
)
from nodeagent.model.preview.results import Preview
from nodeagent.model.preview.text import render_text

NODES = [
    {"metadata": {"name": f"node-{i}", "labels": {"pool": "a" if i < 3 else "b"}}}
    for i in (1, 2, 3)
]
POOL_A = {
    "nodeSelectorTerms": [
        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}]}
    ]
}


def nm(
    drain_plan: list[dict[str, Any]] | None = None, name: str = "kernel", **spec: Any
) -> dict[str, Any]:
    body: dict[str, Any] = {"nodeSelector": POOL_A, **spec}
    if drain_plan is not None:
        body["drainPlan"] = drain_plan
    return {
        "apiVersion": "nodeagent.io/v1alpha1",
        "kind": "NodeMaintenance",
        "metadata": {"name": name},
        "spec": body,
    }


def pod(
    name: str,
    node: str,
    *,
    namespace: str = "default",
    labels: Mapping[str, str] | None = None,
    priority: int | None = None,
    kind: PodType = PodType.DEFAULT,
    skip: bool = False,
    phase: str = "Running",
    terminating: bool = False,
) -> dict[str, Any]:
    md: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}"}
    md["labels"] = dict(labels or {})
    annotations: dict[str, str] = {}
    if kind is PodType.STATIC:
        annotations[MIRROR_ANNOTATION] = "hash"
    if kind is PodType.DAEMONSET:
        md["ownerReferences"] = [{"kind": "DaemonSet", "name": "ds", "controller": True}]
    if skip:
        annotations[DRAIN_ANNOTATION] = "skip"
    md["annotations"] = annotations
    if terminating:
        md["deletionTimestamp"] = "2024-05-01T10:00:00Z"
    spec: dict[str, Any] = {"nodeName": node}
    if priority is not None:
        spec["priority"] = priority
    return {"metadata": md, "spec": spec, "status": {"phase": phase}}


def pdb(
    name: str,
    selector: dict[str, Any] | None,
    allowed: int | None,
    namespace: str = "default",
) -> dict[str, Any]:
    out: dict[str, Any] = {"metadata": {"name": name, "namespace": namespace}, "spec": {}}
    if selector is not None:
        out["spec"]["selector"] = selector
    if allowed is not None:
        out["status"] = {"disruptionsAllowed": allowed}
    return out


def where(p: Preview) -> dict[str, tuple[str, int | str]]:
    """namespace/name -> (node, entry index or the reason it is never evicted)."""
    out: dict[str, tuple[str, int | str]] = {}
    for n in p.nodes:
        for e in n.entries:
            for q in e.pods:
                out[q.key] = (n.name, e.index)
        for x in n.never_evicted:
            out[x.pod.key] = (n.name, x.reason)
    return out


def test_an_example_entry_by_entry() -> None:
    m = nm(
        [
            {"podSelector": {"matchLabels": {"app": "db"}}, "podPriority": 1000},
            {"podPriority": 1000, "podType": "Default"},
        ]
    )
    pods = [
        pod("web-1", "node-1", labels={"app": "web"}),
        pod("db-0", "node-1", labels={"app": "db"}, priority=500),
        pod("db-1", "node-2", labels={"app": "db"}, priority=5000),
        pod("logs-x", "node-1", kind=PodType.DAEMONSET),
        pod(
            "etcd-node-1",
            "node-1",
            namespace="kube-system",
            kind=PodType.STATIC,
            priority=2000001000,
        ),
        pod("agent-1", "node-1", namespace="nodeagent-system", kind=PodType.DAEMONSET, skip=True),
        pod("job-1", "node-2", phase="Succeeded"),
        pod("gone-1", "node-2", terminating=True),
        pod("web-3", "node-3", labels={"app": "web"}),
        pod("pending", "", labels={"app": "web"}),
    ]
    budgets = [
        pdb("web", {"matchLabels": {"app": "web"}}, 0),
        pdb("db", {"matchLabels": {"app": "db"}}, 1),
    ]
    p = preview(m, NODES, pods, budgets)
    assert p.maintenance == "kernel" and p.stage == "Idle" and p.nodes_seen == 3
    assert [n.name for n in p.nodes] == ["node-1", "node-2"]
    plan = [e.describe() for e in p.plan]
    assert plan[:3] == ["Default{app=db}<=1000", "Default<=1000", "Default<=1000000000"]
    assert len(plan) == 14  # the user's 2 and the KEP's 12
    daemonset = plan.index("DaemonSet<=1000000000")
    static = plan.index("Static<=2000001000")
    assert where(p) == {
        "default/db-0": ("node-1", 0),
        "default/web-1": ("node-1", 1),
        "default/logs-x": ("node-1", daemonset),
        "kube-system/etcd-node-1": ("node-1", static),
        "nodeagent-system/agent-1": ("node-1", "nodeagent.io/drain: skip"),
        "default/db-1": ("node-2", 2),  # priority 5000: beyond both entries of its own
        "default/gone-1": ("node-2", 1),  # terminating pods still count, as in the controller
        "default/job-1": ("node-2", "completed (Succeeded)"),
    }
    node1 = p.nodes[0]
    assert node1.entries[1].pods[0].refused_by == (Refusal("web", NO_DISRUPTION_ALLOWED),)
    assert node1.entries[0].pods[0].refused_by == ()  # the db budget allows one
    assert node1.to_evict == 4 and p.nodes[1].to_evict == 2
    assert p.nodes[1].entries[1].pods[0].terminating


def test_the_default_plan_and_a_node_without_pods() -> None:
    p = preview(nm(), NODES, [])
    assert len(p.plan) == 12
    assert all(not e.pods for n in p.nodes for e in n.entries)
    assert "node node-2: no pods" in render_text(p)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"drainPlan": [{"podPriority": 10, "podType": "DaemonSet"}, {"podPriority": 5}]},
            "NodeMaintenance kernel: spec.drainPlan[1]: podType Default comes after podType "
            "DaemonSet (entry 0)",
        ),
        ({"stage": "Later"}, "NodeMaintenance kernel: spec.stage: unknown stage 'Later'"),
        ({"nodeSelector": None}, "NodeMaintenance kernel: spec.nodeSelector: required"),
        (
            {"drainPlan": [{"podPriority": 2**31}]},
            "NodeMaintenance kernel: spec.drainPlan[0].podPriority: 2147483648 is out of",
        ),
        # what the CRD's schema refuses, plan refuses too
        (
            {"drainDeadlineSeconds": -10},
            "NodeMaintenance kernel: spec.drainDeadlineSeconds: must be a whole number of "
            "seconds from 1 to 2147483647, got -10",
        ),
        (
            {"drainDeadlineSeconds": 1.5},
            "NodeMaintenance kernel: spec.drainDeadlineSeconds: must be a whole number",
        ),
        (
            {"drainDeadlineEscalation": "Nuke"},
            "NodeMaintenance kernel: spec.drainDeadlineEscalation: must be one of None, "
            "DeletePods, got 'Nuke'",
        ),
    ],
)
def test_an_invalid_spec_names_the_object_and_the_field(spec: dict[str, Any], message: str) -> None:
    body = nm(**spec)
    if spec.get("nodeSelector", 1) is None:
        del body["spec"]["nodeSelector"]
    with pytest.raises(InvalidMaintenance) as raised:
        preview(body, NODES, [])
    assert str(raised.value).startswith(message)
    assert "\n" not in str(raised.value)


def test_the_budgets_that_refuse() -> None:
    web = pod("web-1", "node-1", labels={"app": "web", "tier": "front"})
    assert refusals(web, [pdb("a", {"matchLabels": {"app": "web"}}, 0)]) == (
        Refusal("a", NO_DISRUPTION_ALLOWED),
    )
    assert refusals(web, [pdb("a", {"matchLabels": {"app": "web"}}, 2)]) == ()
    # not computed yet: the Eviction API refuses until the disruption controller has seen it
    assert refusals(web, [pdb("a", {"matchLabels": {"app": "web"}}, None)]) == (
        Refusal("a", NO_DISRUPTION_ALLOWED),
    )
    assert refusals(web, [pdb("a", {"matchLabels": {"app": "web"}}, 0, namespace="other")]) == ()
    assert refusals(web, [pdb("a", {"matchLabels": {"app": "db"}}, 0)]) == ()
    assert refusals(web, [pdb("a", None, 0)]) == ()  # a null selector selects nothing
    assert refusals(web, [pdb("a", {}, 0)]) == (Refusal("a", NO_DISRUPTION_ALLOWED),)
    assert refusals(web, [pdb("a", {"matchLabels": {"bad key!": "x"}}, 0)]) == ()
    expression = {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["front"]}]}
    two = [pdb("b", expression, 3), pdb("a", {"matchLabels": {"app": "web"}}, 1)]
    assert refusals(web, two) == (Refusal("a", MULTIPLE_BUDGETS), Refusal("b", MULTIPLE_BUDGETS))


def test_the_text_fits_100_columns_and_keeps_long_names_whole() -> None:
    long_ns = "n" * 63
    long_name = "p" * 120
    pods = [
        pod(long_name, "node-1", namespace=long_ns, labels={"app": "web"}),
        pod("short", "node-1", labels={"app": "web"}),
        pod("skipped", "node-1", skip=True),
    ]
    budgets = [
        pdb(f"budget-{i:02d}", {"matchLabels": {"app": "web"}}, 0, ns)
        for i in range(8)
        for ns in (long_ns, "default")
    ]
    text = render_text(preview(nm(name="m" * 253), NODES, pods, budgets))
    lines = text.splitlines()
    assert max(map(len, lines)) <= 100, text
    assert (long_ns + "/" + long_name) in "".join(line.strip() for line in lines)
    words = " ".join(text.split())
    assert "budget-06, budget-07 (more than one budget)" in words
    assert "POD" in text and "REFUSED BY (PDB)" in text and "WHY" in text
    assert text.count("Nothing was changed.") == 1


def test_json_form() -> None:
    p = preview(nm(), NODES, [pod("web-1", "node-1", labels={"app": "web"})], [pdb("web", {}, 0)])
    d = p.to_dict()
    assert d["maintenance"] == "kernel" and d["selectedNodes"] == ["node-1", "node-2"]
    assert d["drainPlan"][0] == {
        "index": 0,
        "entry": "Default<=1000000000",
        "podPriority": 1000000000,
        "podType": "Default",
    }
    first = d["nodes"][0]["entries"][0]
    assert first["pods"] == [
        {
            "namespace": "default",
            "name": "web-1",
            "priority": 0,
            "podType": "Default",
            "terminating": False,
            "refusedBy": [{"name": "web", "reason": NO_DISRUPTION_ALLOWED}],
        }
    ]
    assert d["nodes"][1]["neverEvicted"] == []


# --- properties -----------------------------------------------------------------------------------

PRIORITIES = st.sampled_from([-10, 0, 50, 1000, 1000000000, 2000000000, 2000001000, INT32_MAX])
LABELS = [{}, {"app": "db"}, {"app": "web"}, {"app": "db", "tier": "x"}]
SELECTORS = [
    {"matchLabels": {"app": "db"}},
    {"matchExpressions": [{"key": "tier", "operator": "Exists"}]},
    {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}]},
]


@st.composite
def drain_plans(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Valid spec.drainPlan lists: entries in plan order, no duplicates."""
    raw = draw(
        st.lists(
            st.tuples(
                st.sampled_from(list(PodType)),
                PRIORITIES,
                st.one_of(st.none(), st.sampled_from(range(len(SELECTORS)))),
            ),
            max_size=6,
            unique=True,
        )
    )
    order = sorted(raw, key=lambda t: (t[0].rank, t[1], 1 if t[2] is None else 0, t[2] or 0))
    out = []
    for pod_type, priority, selector in order:
        entry: dict[str, Any] = {"podPriority": priority, "podType": pod_type.value}
        if selector is not None:
            entry["podSelector"] = SELECTORS[selector]
        out.append(entry)
    return out


@st.composite
def pod_lists(draw: st.DrawFn) -> list[dict[str, Any]]:
    specs = draw(
        st.lists(
            st.tuples(
                st.sampled_from(["node-1", "node-2", "node-3", ""]),
                st.sampled_from(list(PodType)),
                PRIORITIES,
                st.sampled_from(range(len(LABELS))),
                st.booleans(),
                st.sampled_from(["Running", "Running", "Pending", "Succeeded", "Failed"]),
                st.sampled_from(["a", "b"]),
            ),
            max_size=25,
        )
    )
    return [
        pod(
            f"p{i}",
            node,
            namespace=ns,
            kind=t,
            priority=prio,
            labels=LABELS[lab],
            skip=skip,
            phase=phase,
        )
        for i, (node, t, prio, lab, skip, phase, ns) in enumerate(specs)
    ]


@settings(max_examples=200, deadline=None)
@given(
    drain_plans(),
    pod_lists(),
    st.sets(st.sampled_from([0, 1])),
    st.sets(st.sampled_from(["a", "b"])),
)
def test_every_pod_of_a_selected_node_appears_once_where_the_plan_first_covers_it(
    plan: list[dict[str, Any]], pods: list[dict[str, Any]], allowed: set[int], budget_ns: set[str]
) -> None:
    budgets = [
        pdb(f"db-{ns}", {"matchLabels": {"app": "db"}}, min(allowed or {0}), ns) for ns in budget_ns
    ]
    p = preview(nm(plan), NODES, pods, budgets)
    selected = {n.name for n in p.nodes}
    assert selected == {"node-1", "node-2"}
    seen: list[str] = []
    for n in p.nodes:
        for e in n.entries:
            assert e.entry == p.plan[e.index]
            seen += [q.key for q in e.pods]
        seen += [x.pod.key for x in n.never_evicted]
    assert len(seen) == len(set(seen))
    placed = where(p)
    for body in pods:
        md = body["metadata"]
        key = f"{md['namespace']}/{md['name']}"
        node = body["spec"]["nodeName"]
        if node not in selected:
            assert key not in placed  # pods of other nodes, or of none, never appear
            continue
        at_node, at = placed[key]
        assert at_node == node
        cls = classify(body)
        first = next(
            (i for i, e in enumerate(p.plan) if entry_covers(e, cls, pod_labels(body))), None
        )
        if cls.skip:
            assert at == "nodeagent.io/drain: skip"
        elif body["status"]["phase"] in ("Succeeded", "Failed"):
            assert at == f"completed ({body['status']['phase']})"
        else:
            assert first is not None and at == first
        ns_budgets = [b for b in budgets if b["metadata"]["namespace"] == md["namespace"]]
        refused = [q for n in p.nodes for e in n.entries for q in e.pods if q.key == key]
        refused += [x.pod for n in p.nodes for x in n.never_evicted if x.pod.key == key]
        expect_refusal = (
            bool(ns_budgets) and md["labels"].get("app") == "db" and min(allowed or {0}) == 0
        )
        assert bool(refused[0].refused_by) == expect_refusal
    assert max(map(len, render_text(p).splitlines())) <= 100
