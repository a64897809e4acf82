"""`nodeagent plan NAME --kubeconfig ...` against both cluster backends, as a user runs it: pods
of every type on the selected nodes (a static pod's mirror pod among them), a
PodDisruptionBudget at its limit and a NodeMaintenance no controller acts on. The plan names the
pods per entry, the skipped pod and the budget that refuses; and nothing was written: the
maintenance's resourceVersion, the nodes' cordon, taints and annotations, the pods, no
EvictionRequest."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from nodeagent.kube.client import KubeClient
from nodeagent.kube.resources import EVICTIONREQUESTS, NODEMAINTENANCES, NODES, PDBS, PODS, Obj
from tests.clusters import ClusterView, TestCluster, create_pod, priority_class
from tests.conftest import Kubectl

NM = "kernel"
ETCD = (
    "apiVersion: v1\nkind: Pod\nmetadata:\n  name: etcd\n  namespace: kube-system\n"
    "spec:\n  priorityClassName: system-node-critical\n"
    "  containers:\n  - name: etcd\n    image: registry.k8s.io/etcd:3.7.3\n"
)


@pytest.fixture
def manifests(tmp_path: Path) -> Path:
    """node-1's static pod directory with one static pod, there before the kubelet starts."""
    d = tmp_path / "manifests"
    d.mkdir()
    (d / "etcd.yaml").write_text(ETCD)
    return d


def maintenance() -> Obj:
    return {
        "apiVersion": "nodeagent.io/v1alpha1",
        "kind": "NodeMaintenance",
        "metadata": {"name": NM},
        "spec": {
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [n]}]}
                    for n in ("node-1", "node-2")
                ]
            },
            "drainPlan": [{"podSelector": {"matchLabels": {"app": "db"}}, "podPriority": 1000}],
            "reason": "kernel update",
        },
    }


async def pod(
    kube: KubeClient,
    name: str,
    node: str,
    *,
    app: str,
    priority: int = 0,
    annotations: dict[str, str] | None = None,
) -> None:
    spec: dict[str, Any] = {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]}
    if (cls := await priority_class(kube, priority)) is not None:
        spec["priorityClassName"] = cls
    md = {"name": name, "namespace": "default", "labels": {"app": app}}
    await create_pod(kube, {"metadata": {**md, "annotations": annotations or {}}, "spec": spec})


def running(view: ClusterView, names: list[tuple[str, str]]) -> bool:
    return all(
        ((view.get(PODS, n, ns) or {}).get("status") or {}).get("phase") == "Running"
        for ns, n in names
    )


def node_state(nodes: list[Obj]) -> dict[str, Any]:
    """What a drain changes on a node: the cordon, the taints, nodeagent's annotations (the
    control plane itself adds labels and annotations of its own meanwhile on kube-apiserver)."""
    return {
        n["metadata"]["name"]: (
            (n.get("spec") or {}).get("unschedulable"),
            (n.get("spec") or {}).get("taints"),
            {k: v for k, v in (n["metadata"].get("annotations") or {}).items() if "nodeagent" in k},
        )
        for n in nodes
    }


def pod_state(pods: list[Obj]) -> dict[tuple[str, str], Any]:
    """What a drain changes on a pod: its annotations (annotate-and-wait), its deletion."""
    return {
        (p["metadata"]["namespace"], p["metadata"]["name"]): (
            p["metadata"].get("annotations"),
            p["metadata"].get("deletionTimestamp"),
        )
        for p in pods
    }


async def plan(backend: TestCluster, *args: str, target: str = NM) -> tuple[int, str, str]:
    """`nodeagent plan` of `target` (a maintenance's name or a file) as a process."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "nodeagent",
        "plan",
        target,
        "--kubeconfig",
        str(backend.kubeconfig),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_plan_shows_entries_skips_and_refusing_budgets_and_writes_nothing(
    backend: TestCluster,
) -> None:
    await backend.install_crds()
    kube = backend.client()
    view = ClusterView(kube, [PODS, PDBS])
    await view.start()
    try:
        await pod(kube, "web-0", "node-1", app="web")
        await pod(kube, "web-1", "node-2", app="web")
        await pod(kube, "web-2", "node-3", app="web")  # a node the maintenance does not select
        await pod(kube, "db-0", "node-1", app="db", priority=500)
        await pod(kube, "tool", "node-2", app="tool", annotations={"nodeagent.io/drain": "skip"})
        pods = [("default", n) for n in ("web-0", "web-1", "web-2", "db-0", "tool")]
        await view.until(lambda: running(view, [*pods, ("kube-system", "etcd-node-1")]), 60)
        # at its limit: three healthy web pods, three required
        await kube.create(
            PDBS,
            {
                "metadata": {"name": "web", "namespace": "default"},
                "spec": {"minAvailable": 3, "selector": {"matchLabels": {"app": "web"}}},
            },
        )

        def at_limit() -> bool:
            pdb = view.get(PDBS, "web", "default") or {"metadata": {}}
            st = pdb.get("status") or {}
            return (
                st.get("observedGeneration") == pdb["metadata"].get("generation")
                and st.get("currentHealthy") == 3
                and st.get("disruptionsAllowed") == 0
            )

        await view.until(at_limit, timeout=60)
    finally:
        await view.stop()
    created = await kube.create(NODEMAINTENANCES, maintenance())
    nodes_before = node_state((await kube.list(NODES))["items"])
    pods_before = pod_state((await kube.list(PODS))["items"])

    code, out, err = await plan(backend, "-o", "json")
    assert (code, err) == (0, ""), err
    result = json.loads(out)
    assert result["maintenance"] == NM and result["stage"] == "Idle"
    assert result["selectedNodes"] == ["node-1", "node-2"]
    placed = {
        (node["name"], f"{p['namespace']}/{p['name']}"): (entry["entry"], p)
        for node in result["nodes"]
        for entry in node["entries"]
        for p in entry["pods"]
    }
    assert {k: v[0] for k, v in placed.items()} == {
        ("node-1", "default/db-0"): "Default{app=db}<=1000",
        ("node-1", "default/web-0"): "Default<=1000000000",
        ("node-1", "kube-system/etcd-node-1"): "Static<=2000001000",
        ("node-2", "default/web-1"): "Default<=1000000000",
    }
    web0 = placed[("node-1", "default/web-0")][1]
    assert web0["refusedBy"] == [{"name": "web", "reason": "NoDisruptionAllowed"}]
    assert placed[("node-1", "default/db-0")][1]["priority"] == 500
    assert placed[("node-1", "default/db-0")][1]["refusedBy"] == []
    etcd = placed[("node-1", "kube-system/etcd-node-1")][1]
    assert (etcd["podType"], etcd["priority"]) == ("Static", 2000001000)
    never = {n["name"]: n["neverEvicted"] for n in result["nodes"]}
    assert [(p["name"], p["reason"]) for p in never["node-2"]] == [
        ("tool", "nodeagent.io/drain: skip")
    ]
    assert never["node-1"] == []

    code, text, err = await plan(backend)
    assert (code, err) == (0, ""), err
    lines = text.splitlines()
    assert max(map(len, lines)) <= 100, text
    assert lines[0] == "NodeMaintenance kernel (stage Idle): 2 of 3 nodes selected: node-1, node-2"
    assert "web-2" not in text
    row = next(line for line in lines if "default/web-0" in line)
    assert row.split() == ["default/web-0", "0", "Default", "web"]

    # nothing was written
    after = await kube.get(NODEMAINTENANCES, NM)
    assert after["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert "status" not in after or not after["status"].get("nodeStatuses")
    assert node_state((await kube.list(NODES))["items"]) == nodes_before
    assert pod_state((await kube.list(PODS))["items"]) == pods_before
    assert (await kube.list(EVICTIONREQUESTS))["items"] == []


async def test_plan_of_a_missing_maintenance_or_an_invalid_file(
    backend: TestCluster, tmp_path: Path
) -> None:
    await backend.install_crds()
    code, out, err = await plan(backend)
    assert (code, out, err) == (2, "", f"nodeagent plan: NodeMaintenance {NM} not found\n")
    bad = maintenance()
    bad["spec"]["drainPlan"] = [{"podPriority": 10, "podType": "Static"}, {"podPriority": 5}]
    f = tmp_path / "nm.json"
    f.write_text(json.dumps(bad))
    code, _, err = await plan(backend, target=str(f))
    assert code == 2
    assert err == (
        "nodeagent plan: NodeMaintenance kernel: spec.drainPlan[1]: podType Default comes after "
        "podType Static (entry 0); entries must be ordered Default, DaemonSet, Static by "
        "ascending priority\n"
    )


def crd_refuses() -> dict[str, tuple[str, Obj]]:
    """What the CRD's schema refuses and the model's own checks do not look at: name ->
    (the field the error names, what is changed in a valid maintenance's spec)."""
    labels = {f"k{i}": "v" for i in range(33)}
    term = {"matchExpressions": [{"key": f"k{i}", "operator": "Exists"} for i in range(33)]}
    return {
        "reason too long": ("spec.reason", {"reason": "x" * 1025}),
        "reason not a string": ("spec.reason", {"reason": 5}),
        "stage not a string": ("spec.stage", {"stage": 5}),
        "unknown field": ('"spec.colour"', {"colour": "red"}),
        "33 plan entries": (
            "spec.drainPlan",
            {"drainPlan": [{"podPriority": i} for i in range(33)]},
        ),
        "33 match labels": (
            "spec.drainPlan[0].podSelector.matchLabels",
            {"drainPlan": [{"podPriority": 1, "podSelector": {"matchLabels": labels}}]},
        ),
        "33 node expressions": (
            "spec.nodeSelector.nodeSelectorTerms[0].matchExpressions",
            {"nodeSelector": {"nodeSelectorTerms": [term]}},
        ),
        # the model's own checks, here to hold both to the server
        "deadline below 1": ("spec.drainDeadlineSeconds", {"drainDeadlineSeconds": -10}),
        "unknown escalation": ("spec.drainDeadlineEscalation", {"drainDeadlineEscalation": "Nuke"}),
    }


async def test_plan_refuses_what_the_api_server_refuses(
    backend: TestCluster, kubectl: Kubectl, tmp_path: Path
) -> None:
    """`nodeagent plan FILE` applies the CRD's checks: each spec the API server refuses on
    `kubectl create` (strict field validation, kubectl's default) plan refuses too, in one line
    naming the same field, and exits 2."""
    await backend.install_crds()
    for i, (case, (field, change)) in enumerate(sorted(crd_refuses().items())):
        nm = maintenance()
        nm["metadata"]["name"] = f"bad-{i}"
        nm["spec"].update(change)
        text = json.dumps(nm)
        server = await kubectl.run("create", "-f", "-", stdin=text)
        assert server.code != 0, f"{case}: the API server took it"
        assert field in server.err, (case, server.err)
        f = tmp_path / f"bad-{i}.json"
        f.write_text(text)
        code, out, err = await plan(backend, target=str(f))
        assert code == 2 and not out, (case, err)
        assert err.count("\n") == 1 and field in err, (case, err)
