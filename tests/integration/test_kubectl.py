"""Real kubectl against both cluster backends: what nodeagent's users and tests rely on. The
same commands and assertions hold on the simulated cluster and on kube-apiserver."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import AsyncIterator

import pytest

from nodeagent.controllers.evictionrequest import EvictionRequestController
from nodeagent.controllers.nodemaintenance.controller import NodeMaintenanceController
from nodeagent.kube.controller import SharedInformers
from nodeagent.kube.events import EventRecorder
from nodeagent.kube.resources import NODEMAINTENANCES, NODES, PODS, Obj
from nodeagent.model.backoff import JitteredBackoff
from nodeagent.model.bodies import condition
from tests.clusters import CONTROLLERS_ACCOUNT, ClusterView, TestCluster
from tests.conftest import Kubectl
from tests.integration.controllers.evictionrequest_harness import fast_settings
from tests.simutil import running
from tests.tasks import cancel_and_wait

CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd]}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer, default: 1}
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
"""

WIDGET = """
apiVersion: example.com/v1
kind: Widget
metadata: {name: gadget}
spec: {size: 3}
"""

DAEMONSET = """
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: logs, namespace: default}
spec:
  selector: {matchLabels: {app: logs}}
  template:
    metadata: {labels: {app: logs}}
    spec:
      containers: [{name: logs, image: busybox}]
"""

PDB = """
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: default}
spec:
  maxUnavailable: 1
  selector: {matchLabels: {app: web}}
"""


@pytest.fixture
async def view(backend: TestCluster) -> AsyncIterator[ClusterView]:
    """Nodes and pods as the admin's watches see them."""
    v = ClusterView(backend.client(), [NODES, PODS])
    await v.start()
    try:
        yield v
    finally:
        await v.stop()


def pods(view: ClusterView, **labels: str) -> list[Obj]:
    return view.list(PODS, "default", **labels)


async def test_get_nodes(backend: TestCluster, kubectl: Kubectl) -> None:
    out = await kubectl.ok("get", "nodes")
    assert out.splitlines()[0].split()[:2] == ["NAME", "STATUS"]
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["node-1", "node-2", "node-3"]
    assert all(" Ready " in line for line in out.splitlines()[1:])
    doc = json.loads(await kubectl.ok("get", "node", "node-2", "-o", "json"))
    assert doc["metadata"]["name"] == "node-2"


async def test_crd_then_custom_object_by_short_name(backend: TestCluster, kubectl: Kubectl) -> None:
    await kubectl.ok("apply", "-f", "-", stdin=CRD)
    await kubectl.ok("wait", "--for=condition=Established", "crd/widgets.example.com")
    await kubectl.ok("apply", "-f", "-", stdin=WIDGET)
    out = await kubectl.ok("get", "wd")
    header, row = out.splitlines()
    assert header.split() == ["NAME", "SIZE"]
    assert row.split() == ["gadget", "3"]
    # applying again with a change goes through kubectl's three-way merge
    await kubectl.ok("apply", "-f", "-", stdin=WIDGET.replace("size: 3", "size: 5"))
    doc = json.loads(await kubectl.ok("get", "widget", "gadget", "-o", "json"))
    assert doc["spec"]["size"] == 5


async def test_unknown_fields_are_refused_under_strict_validation_and_warned_of_otherwise(
    backend: TestCluster, kubectl: Kubectl
) -> None:
    """As kube-apiserver does for custom resources: kubectl's default (--validate=strict)
    refuses a field the schema does not know, naming it; --validate=warn stores the object
    without it and prints a warning."""
    await kubectl.ok("apply", "-f", "-", stdin=CRD)
    await kubectl.ok("wait", "--for=condition=Established", "crd/widgets.example.com")
    typo = WIDGET.replace("{size: 3}", "{size: 3, colour: red}")
    refused = await kubectl.run("apply", "-f", "-", stdin=typo)
    assert refused.code != 0
    assert 'strict decoding error: unknown field "spec.colour"' in refused.err, refused.err
    assert (await kubectl.run("get", "widget", "gadget")).code != 0  # nothing stored
    warned = await kubectl.run("apply", "--validate=warn", "-f", "-", stdin=typo)
    assert warned.code == 0, warned.err
    assert 'unknown field "spec.colour"' in warned.err, warned.err
    doc = json.loads(await kubectl.ok("get", "widget", "gadget", "-o", "json"))
    assert "colour" not in doc["spec"] and doc["spec"]["size"] == 3


async def test_explain_reads_nodeagents_crds(backend: TestCluster, kubectl: Kubectl) -> None:
    """`kubectl explain` from the server's OpenAPI v3: the CRDs' field docs."""
    await backend.install_crds()
    # kube-apiserver publishes an established CRD's OpenAPI a moment later, and nothing
    # announces it: ask again until it answers (bounded)
    async with asyncio.timeout(60):
        while (r := await kubectl.run("explain", "nm.spec.stage")).code != 0:
            assert "couldn't find resource" in r.err, r.err
            await asyncio.sleep(0.5)
    out = r.out
    assert "KIND:       NodeMaintenance" in out and "FIELD: stage <string>" in out, out
    assert "Idle" in out and "Complete" in out
    out = await kubectl.ok("explain", "evr.spec")
    assert "KIND:       EvictionRequest" in out and "requesters" in out, out


async def test_create_deployment_scales_onto_schedulable_nodes(
    view: ClusterView, kubectl: Kubectl
) -> None:
    await kubectl.ok("cordon", "node-3")
    await view.until(lambda: cordoned(view, "node-3"))  # as the scheduler will see it
    await kubectl.ok("create", "deployment", "web", "--image=nginx", "--replicas=4")
    await view.until(lambda: sum(running(p) for p in pods(view, app="web")) == 4)
    assert {p["spec"]["nodeName"] for p in pods(view, app="web")} == {"node-1", "node-2"}
    out = await kubectl.ok("get", "pods", "-o", "wide")
    assert out.count("Running") == 4
    await kubectl.ok("rollout", "status", "deployment/web", "--timeout=20s")


def cordoned(view: ClusterView, node: str) -> bool:
    return ((view.get(NODES, node) or {}).get("spec") or {}).get("unschedulable") is True


async def test_cordon_uncordon(view: ClusterView, kubectl: Kubectl) -> None:
    await kubectl.ok("cordon", "node-2")
    await view.until(lambda: cordoned(view, "node-2"))
    assert "SchedulingDisabled" in await kubectl.ok("get", "node", "node-2")
    await kubectl.ok("uncordon", "node-2")
    await view.until(lambda: not cordoned(view, "node-2"))


async def test_drain_retries_evictions_refused_by_a_pdb(
    view: ClusterView, kubectl: Kubectl
) -> None:
    # all three replicas on node-1 and nowhere else to go until the budget has refused: the first
    # eviction's replacement stays Pending, so the budget (maxUnavailable 1) refuses the next one
    await kubectl.ok("cordon", "node-2")
    await kubectl.ok("cordon", "node-3")
    await view.until(lambda: cordoned(view, "node-2") and cordoned(view, "node-3"))
    await kubectl.ok("apply", "-f", "-", stdin=DAEMONSET)
    await kubectl.ok("create", "deployment", "web", "--image=nginx", "--replicas=3")
    await kubectl.ok("apply", "-f", "-", stdin=PDB)
    await view.until(lambda: sum(running(p) for p in pods(view, app="web")) == 3)
    assert {p["spec"]["nodeName"] for p in pods(view, app="web")} == {"node-1"}

    drain = await kubectl.start(
        "drain",
        "node-1",
        "--ignore-daemonsets",
        "--delete-emptydir-data",
        "--force",
        "--timeout=90s",
    )
    try:
        assert drain.stderr is not None
        err = b""
        async with asyncio.timeout(60):
            while b"would violate the pod's disruption budget" not in err:
                line = await drain.stderr.readline()
                assert line, f"kubectl drain ended before a refusal: {err.decode()}"
                err += line
        assert b"will retry after 5s" in err
        await kubectl.ok("uncordon", "node-2")
        await kubectl.ok("uncordon", "node-3")
        async with asyncio.timeout(120):
            out, rest = await drain.communicate()
    finally:
        if drain.returncode is None:
            drain.kill()
            await drain.wait()
    assert drain.returncode == 0, (err + rest + out).decode()
    assert b"node/node-1 drained" in out
    # drain returned once the evicted pods were gone; the watch may not have seen that yet
    await view.until(lambda: not any(on_node_1(p) for p in pods(view, app="web")))
    left = [p for p in view.list(PODS) if on_node_1(p)]
    assert left, "the DaemonSet pod stays"
    assert all(o["kind"] == "DaemonSet" for p in left for o in p["metadata"]["ownerReferences"])
    await view.until(lambda: sum(running(p) for p in pods(view, app="web")) == 3)
    assert "node-1" not in {p["spec"]["nodeName"] for p in pods(view, app="web")}


def on_node_1(pod: Obj) -> bool:
    node: str | None = pod["spec"].get("nodeName")
    return node == "node-1"


async def test_unknown_resource_is_reported(backend: TestCluster, kubectl: Kubectl) -> None:
    r = await kubectl.run("get", "flurbs")
    assert r.code != 0
    assert 'the server doesn\'t have a resource type "flurbs"' in r.err


BLOCKING_PDB = """
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: default}
spec:
  minAvailable: 2
  selector: {matchLabels: {app: web}}
"""

MAINTENANCE = """
apiVersion: nodeagent.io/v1alpha1
kind: NodeMaintenance
metadata: {name: kernel}
spec:
  nodeSelector:
    nodeSelectorTerms:
    - matchFields: [{key: metadata.name, operator: In, values: [node-1]}]
  stage: Drain
  reason: kernel update
"""


@pytest.fixture
async def controllers(backend: TestCluster) -> AsyncIterator[None]:
    """The NodeMaintenance and EvictionRequest controllers, as the leader runs them."""
    await backend.install_crds(heartbeat_spacing=0)
    agent = backend.client(await backend.service_account(CONTROLLERS_ACCOUNT), max_workers=8)
    informers = SharedInformers(
        agent, backoff=lambda: JitteredBackoff(base=0.05, cap=0.5, rng=random.Random(0))
    )
    events = EventRecorder(agent, "nodeagent")
    parts = [
        NodeMaintenanceController(agent, informers, events),
        EvictionRequestController(agent, informers, fast_settings(), events=events),
    ]
    tasks = [asyncio.create_task(informers.run())]
    tasks += [asyncio.create_task(p.run()) for p in parts]
    try:
        async with asyncio.timeout(10):
            for p in parts:
                await p.wait_synced()
        yield
    finally:
        await cancel_and_wait(tasks)


def columns(out: str) -> list[dict[str, str]]:
    """kubectl's table as one dict per row, cut at the headers' offsets (a value may hold
    spaces, a header may be two words)."""
    header, *rows = out.splitlines()
    names = [n.strip() for n in header.split("   ") if n.strip()]
    starts: list[int] = []
    for n in names:  # "AGE" is in "STAGE" too: each header after the one before
        starts.append(header.index(n, starts[-1] + 1 if starts else 0))
    ends = [*starts[1:], None]
    return [
        {n: row[a:b].strip() for n, a, b in zip(names, starts, ends, strict=True)} for row in rows
    ]


@pytest.fixture
async def maintenances(backend: TestCluster, controllers: None) -> AsyncIterator[ClusterView]:
    """NodeMaintenances as the admin's watch sees them (their CRD is the controllers')."""
    v = ClusterView(backend.client(), [NODEMAINTENANCES])
    await v.start()
    try:
        yield v
    finally:
        await v.stop()


async def test_get_nm_shows_the_drain_and_the_budget_that_blocks_it(
    view: ClusterView, maintenances: ClusterView, kubectl: Kubectl
) -> None:
    # both replicas on node-1, behind a budget that allows no disruption
    await kubectl.ok("cordon", "node-2")
    await kubectl.ok("cordon", "node-3")
    await view.until(lambda: cordoned(view, "node-2") and cordoned(view, "node-3"))
    await kubectl.ok("create", "deployment", "web", "--image=nginx", "--replicas=2")
    await kubectl.ok("apply", "-f", "-", stdin=BLOCKING_PDB)
    await view.until(lambda: sum(running(p) for p in pods(view, app="web")) == 2)
    await kubectl.ok("uncordon", "node-2")
    await kubectl.ok("uncordon", "node-3")
    first = min(p["metadata"]["name"] for p in pods(view, app="web"))

    await kubectl.ok("apply", "-f", "-", stdin=MAINTENANCE)

    def blocked_by_the_budget() -> bool:
        nm = maintenances.get(NODEMAINTENANCES, "kernel") or {}
        summary = (nm.get("status") or {}).get("summary") or {}
        return "PodDisruptionBudget" in str(summary.get("blockedBy"))

    await maintenances.until(blocked_by_the_budget, timeout=60)
    out = await kubectl.ok("get", "nm")
    assert out.splitlines()[0].split() == [
        *["NAME", "STAGE", "NODES", "PODS", "LEFT", "ENTRY", "BLOCKED", "BY", "DRAINED", "AGE"]
    ]
    (row,) = columns(out)
    assert row["NAME"] == "kernel" and row["STAGE"] == "Drain"
    assert row["NODES"] == "0/1 drained"
    assert int(row["PODS LEFT"]) >= 2
    assert row["ENTRY"] == "Default<=1000000000 (1 of 12)"
    assert row["BLOCKED BY"] == f"pod default/{first}: eviction refused by PodDisruptionBudget web"
    assert row["DRAINED"] == "False"
    (wide,) = columns(await kubectl.ok("get", "nm", "-o", "wide"))
    assert wide["REASON"] == "kernel update"

    # the budget gives way: the drain ends, and what blocked it is no longer shown
    await kubectl.ok("patch", "pdb", "web", "--type=merge", "-p", '{"spec":{"minAvailable":0}}')

    def drained() -> bool:
        status = (maintenances.get(NODEMAINTENANCES, "kernel") or {}).get("status") or {}
        return (condition(status, "Drained") or {}).get("status") == "True"

    await maintenances.until(drained, timeout=60)
    (row,) = columns(await kubectl.ok("get", "nm"))
    assert row["NODES"] == "1/1 drained" and row["DRAINED"] == "True"
    assert row["BLOCKED BY"] == ""
