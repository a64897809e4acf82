"""The NodeMaintenance controller on the simulated cluster, through the real client.

There is no EvictionRequest controller here: the tests play the evicting side themselves
(deleting targeted pods, tainting nodes and deleting DaemonSet pods as the DaemonSet interceptor
would, removing a static pod's manifest as the kubelet interceptor would).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml

from nodeagent.controllers.nodemaintenance.controller import NodeMaintenanceController
from nodeagent.kube.client import KubeClient
from nodeagent.kube.controller import SharedInformers
from nodeagent.kube.errors import Invalid
from nodeagent.kube.events import EventRecorder
from nodeagent.kube.resources import (
    DAEMONSETS,
    EVENTS,
    EVICTIONREQUESTS,
    NODEMAINTENANCES,
    NODES,
    PODS,
)
from nodeagent.model.backoff import JitteredBackoff
from nodeagent.model.names import CORDONED_BY_ANNOTATION, FINALIZER, NODE_LABEL, REQUESTER
from nodeagent_testbed.sim.store import Obj
from tests.clusters import (
    CONTROLLERS_ACCOUNT,
    ClusterView,
    TestCluster,
    create_pod,
    priority_class,
)
from tests.conftest import Kubectl
from tests.tasks import cancel_and_wait

MAX = 2147483647


# --- fixtures ----------------------------------------------------------------------------------


@dataclass
class Env:
    backend: TestCluster
    kube: KubeClient
    controller: NodeMaintenanceController
    view: ClusterView

    # what the API server holds, as its watches tell

    def nm(self, name: str) -> Obj | None:
        return self.view.get(NODEMAINTENANCES, name)

    def node(self, name: str) -> Obj:
        node = self.view.get(NODES, name)
        assert node is not None
        return node

    def pods(self, node: str | None = None) -> list[Obj]:
        return [
            p for p in self.view.list(PODS) if node is None or p["spec"].get("nodeName") == node
        ]

    def pod(self, namespace: str, name: str) -> Obj | None:
        return self.view.get(PODS, name, namespace)

    def requests(self) -> list[Obj]:
        return self.view.list(EVICTIONREQUESTS)

    def requested(self) -> set[str]:
        """Names of the pods with an EvictionRequest that names our requester."""
        return {
            er["spec"]["target"]["pod"]["name"]
            for er in self.requests()
            if {"name": REQUESTER} in (er["spec"].get("requesters") or [])
        }

    def targets(self, nm: str, node: str) -> list[dict[str, Any]]:
        obj = self.nm(nm) or {}  # not seen yet: the watch may lag the create
        for ns in (obj.get("status") or {}).get("nodeStatuses") or []:
            if ns["nodeRef"]["name"] == node:
                return list(ns.get("drainTargets") or [])
        return []

    def node_status(self, nm: str, node: str) -> dict[str, Any]:
        obj = self.nm(nm) or {}  # not seen yet: the watch may lag the create
        for ns in (obj.get("status") or {}).get("nodeStatuses") or []:
            if ns["nodeRef"]["name"] == node:
                return dict(ns)
        return {}

    def condition(self, nm: str, type_: str) -> dict[str, Any] | None:
        obj = self.nm(nm)
        if obj is None:
            return None
        for c in (obj.get("status") or {}).get("conditions") or []:
            if c["type"] == type_:
                return dict(c)
        return None

    def events(self, nm: str) -> list[Obj]:
        return [
            e
            for e in self.view.list(EVENTS)
            if e["involvedObject"].get("kind") == "NodeMaintenance"
            and e["involvedObject"].get("name") == nm
        ]

    async def until(self, cond: Callable[[], bool], timeout: float = 20) -> None:
        await self.view.until(cond, timeout)

    # acting through the API

    async def maintenance(
        self,
        name: str,
        nodes: Iterable[str],
        stage: str = "Drain",
        plan: list[dict[str, Any]] | None = None,
        selector: dict[str, Any] | None = None,
    ) -> Obj:
        spec: dict[str, Any] = {
            "nodeSelector": selector
            or {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {
                                "key": "kubernetes.io/hostname",
                                "operator": "In",
                                "values": sorted(nodes),
                            }
                        ]
                    }
                ]
            },
            "stage": stage,
            "reason": f"test {name}",
        }
        if plan is not None:
            spec["drainPlan"] = plan
        return await self.kube.create(NODEMAINTENANCES, {"metadata": {"name": name}, "spec": spec})

    async def stage(self, name: str, stage: str) -> None:
        await self.kube.patch(NODEMAINTENANCES, name, {"spec": {"stage": stage}})

    async def bare_pod(
        self,
        name: str,
        node: str,
        priority: int = 0,
        namespace: str = "default",
        labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None,
    ) -> Obj:
        body = {
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": labels or {"app": name},
                "annotations": annotations or {},
            },
            "spec": {
                "nodeName": node,
                "priorityClassName": await priority_class(self.kube, priority),
                "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}],
            },
        }
        return await create_pod(self.kube, body)

    async def evict(self, *names: str, namespace: str = "default") -> None:
        """Play the evicting side: delete the pods at once."""
        for name in names:
            await self.kube.delete(PODS, name, namespace, grace_period_seconds=0)
        await self.until(lambda: all(self.pod(namespace, n) is None for n in names))


@pytest.fixture
async def env(backend: TestCluster) -> AsyncIterator[Env]:
    await backend.install_crds()
    kube = backend.client(max_workers=8)
    view = ClusterView(kube, [NODEMAINTENANCES, NODES, PODS, EVICTIONREQUESTS, EVENTS])
    await view.start()
    # the controller as the agent's ServiceAccount: RBAC holds it on the real server
    agent = backend.client(await backend.service_account(CONTROLLERS_ACCOUNT), max_workers=8)
    informers = SharedInformers(
        agent, backoff=lambda: JitteredBackoff(base=0.05, cap=0.5, rng=random.Random(0))
    )
    controller = NodeMaintenanceController(agent, informers, EventRecorder(agent, "nodeagent"))
    tasks = [
        asyncio.create_task(informers.run()),
        asyncio.create_task(controller.run()),
    ]
    try:
        async with asyncio.timeout(10):
            await controller.wait_synced()
        yield Env(backend, kube, controller, view)
    finally:
        await cancel_and_wait(tasks)
        await view.stop()


def entry(pod_type: str, priority: int) -> dict[str, Any]:
    return {"podPriority": priority, "podType": pod_type}


def is_true(env: Env, nm: str, condition: str) -> bool:
    return (env.condition(nm, condition) or {}).get("status") == "True"


def warned(env: Env, nm: str) -> bool:
    return "Warning" in {e["type"] for e in env.events(nm)}


def bound(pod: Obj, prefix: str) -> bool:
    return pod["metadata"]["name"].startswith(prefix) and bool(pod["spec"].get("nodeName"))


def cordoned(env: Env, node: str) -> bool:
    return env.node(node)["spec"].get("unschedulable") is True


def cordoned_by(env: Env, node: str) -> str | None:
    return (env.node(node)["metadata"].get("annotations") or {}).get(CORDONED_BY_ANNOTATION)


# --- tests -------------------------------------------------------------------------------------


STATIC_POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "etcd", "namespace": "kube-system", "labels": {"component": "etcd"}},
    "spec": {
        "priorityClassName": "system-node-critical",
        "containers": [{"name": "etcd", "image": "registry.k8s.io/etcd:3.5"}],
    },
}


def daemonset(name: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "metadata": {"name": name, "namespace": "kube-system"},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels, "annotations": annotations or {}},
                "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}]},
            },
        },
    }


async def test_a_drain_requests_evictions_in_plan_order_until_drained(
    env: Env, manifests: Path, kubectl: Kubectl
) -> None:
    (manifests / "etcd.yaml").write_text(yaml.safe_dump(STATIC_POD))
    await env.kube.create(DAEMONSETS, daemonset("logs"))
    await env.kube.create(DAEMONSETS, daemonset("nodeagent", {"nodeagent.io/drain": "skip"}))
    for node in ("node-1", "node-2", "node-3"):
        await env.bare_pod(f"web-{node}", node, priority=0)
    await env.bare_pod("db", "node-2", priority=5000)
    await env.bare_pod("dns", "node-1", priority=2000000000, namespace="kube-system")
    await env.until(
        lambda: (
            env.pod("kube-system", "etcd-node-1") is not None
            # bound to their nodes: a real DaemonSet controller leaves that to the scheduler
            and sum(1 for p in env.pods() if bound(p, "logs-")) == 3
            and sum(1 for p in env.pods() if bound(p, "nodeagent-")) == 3
        )
    )
    node3_before = {p["metadata"]["uid"] for p in env.pods("node-3")}

    await env.maintenance("upgrade", ["node-1", "node-2"], plan=[entry("Default", 1000)])

    # Cordoned with ownership recorded; the first entry targets only the priority 0 pods.
    await env.until(lambda: env.requested() == {"web-node-1", "web-node-2"})
    assert cordoned(env, "node-1") and cordoned(env, "node-2") and not cordoned(env, "node-3")
    assert cordoned_by(env, "node-1") == "upgrade"
    nm = env.nm("upgrade")
    assert nm is not None and FINALIZER in nm["metadata"]["finalizers"]
    assert env.targets("upgrade", "node-1") == [entry("Default", 1000)]
    assert nm["status"]["drainPlanIndex"] == 0
    assert [s["name"] for s in nm["status"]["stageStatuses"]] == ["Drain"]
    assert (env.condition("upgrade", "Valid") or {}).get("status") == "True"
    assert (env.condition("upgrade", "Drained") or {}).get("status") == "False"
    assert nm["status"]["observedGeneration"] == nm["metadata"]["generation"]
    er = next(r for r in env.requests() if r["spec"]["target"]["pod"]["name"] == "web-node-1")
    pod = env.pod("default", "web-node-1")
    assert pod is not None
    assert er["metadata"]["name"] == pod["metadata"]["uid"] == er["spec"]["target"]["pod"]["uid"]
    assert er["metadata"]["namespace"] == "default"
    assert er["metadata"]["labels"] == {"app": "web-node-1", NODE_LABEL: "node-1"}
    assert er["spec"]["requesters"] == [{"name": REQUESTER}]
    # web is evacuating; dns, the etcd mirror pod and logs are not targeted yet; the nodeagent
    # pod is skipped
    await env.until(
        lambda: (
            {
                k: v
                for k, v in env.node_status("upgrade", "node-1").items()
                if k in ("drainMessage", "podsEvacuating", "podsPendingEvacuation")
            }
            == {"drainMessage": "Evacuating", "podsEvacuating": 1, "podsPendingEvacuation": 3}
        )
    )

    out = await kubectl.ok("get", "evr", "-A")
    assert out.splitlines()[0].split() == [
        "NAMESPACE",
        "NAME",
        "POD",
        "ACTIVE",
        "EVICTED",
        "CANCELED",
        "AGE",
    ]
    assert "web-node-1" in out

    # The test evicts; the controller moves on entry by entry.
    await env.evict("web-node-1", "web-node-2")
    await env.until(lambda: env.requested() >= {"db"})
    assert env.requested() - {"web-node-1", "web-node-2"} == {"db"}
    assert env.targets("upgrade", "node-2") == [entry("Default", 1000000000)]
    await env.evict("db")
    await env.until(lambda: "dns" in env.requested())
    assert env.targets("upgrade", "node-1") == [entry("Default", 2000000000)]
    assert not {p["metadata"]["name"] for p in env.pods() if "logs" in p["metadata"]["name"]} & (
        env.requested()
    )
    await env.evict("dns", namespace="kube-system")

    # DaemonSet pods next: play the DaemonSet interceptor (taint, then delete).
    logs = {
        p["metadata"]["name"]
        for p in env.pods()
        if p["metadata"]["name"].startswith("logs-") and p["spec"]["nodeName"] != "node-3"
    }
    await env.until(lambda: env.requested() >= logs)
    assert env.targets("upgrade", "node-1") == [
        entry("Default", MAX),
        entry("DaemonSet", 1000000000),
    ]
    assert "etcd-node-1" not in env.requested()
    for node in ("node-1", "node-2"):
        await env.kube.patch(
            NODES,
            node,
            {"spec": {"taints": [{"key": "nodeagent.io/maintenance", "effect": "NoSchedule"}]}},
        )
    await env.evict(*logs, namespace="kube-system")

    # Static pods last: play the kubelet interceptor (move the manifest away).
    await env.until(lambda: "etcd-node-1" in env.requested())
    assert (
        env.targets("upgrade", "node-1")[-1] == entry("Static", 1000000000)
        or env.targets("upgrade", "node-1")[-1]["podType"] == "Static"
    )
    (manifests / "etcd.yaml").unlink()
    await env.until(lambda: (env.condition("upgrade", "Drained") or {}).get("status") == "True")
    assert env.node_status("upgrade", "node-1")["drainMessage"] == "Drained"
    # node-3 was never touched
    after = {(p["metadata"]["name"], p["metadata"]["uid"]) for p in env.pods("node-3")}
    assert {uid for _, uid in after} == node3_before, (after, node3_before)
    assert not cordoned(env, "node-3")
    # the requests of evicted pods went with them: their pods own them (garbage collection)
    await env.until(lambda: not env.requested() & {"web-node-1", "db", "dns", "etcd-node-1"})
    await env.until(
        lambda: (
            {"StageStarted", "Cordoned", "DrainPlanEntry", "Drained"}
            <= {e["reason"] for e in env.events("upgrade")}
        )
    )

    out = await kubectl.ok("get", "nm")
    header, row = out.splitlines()[:2]
    assert header.split() == [
        *["NAME", "STAGE", "NODES", "PODS", "LEFT", "ENTRY", "BLOCKED", "BY", "DRAINED", "AGE"]
    ]
    # nothing blocks a drained maintenance: no BLOCKED BY, DRAINED True
    assert row.split()[:5] == ["upgrade", "Drain", row.split()[2], "drained", "0"]
    assert row.split()[-2] == "True"

    # Complete: the requester goes from every request, the nodes are uncordoned.
    await env.stage("upgrade", "Complete")
    await env.until(lambda: not env.requested() and not cordoned(env, "node-1"))
    await env.until(lambda: not cordoned(env, "node-2"))
    assert cordoned_by(env, "node-1") is None
    assert all(r["spec"].get("requesters") in (None, []) for r in env.requests())
    nm = env.nm("upgrade")
    assert nm is not None
    assert [s["name"] for s in nm["status"]["stageStatuses"]] == ["Drain", "Complete"]
    assert "Uncordoned" in {e["reason"] for e in env.events("upgrade")}

    await env.kube.delete(NODEMAINTENANCES, "upgrade")
    await env.until(lambda: env.nm("upgrade") is None)


def message(env: Env, nm: str, node: str) -> str:
    return str(env.node_status(nm, node).get("drainMessage"))


async def expect(
    env: Env,
    messages: dict[tuple[str, str], str],
    targets: dict[tuple[str, str], list[dict[str, Any]]] | None = None,
) -> None:
    """Wait until the node statuses show these drain messages and targets."""

    def actual() -> tuple[dict[tuple[str, str], str], dict[tuple[str, str], Any]]:
        return (
            {k: message(env, *k) for k in messages},
            {k: env.targets(*k) for k in targets or {}},
        )

    try:
        await env.until(lambda: actual() == (messages, targets or {}), timeout=10)
    except TimeoutError:
        raise AssertionError(f"want {(messages, targets)}, have {actual()}") from None


async def test_intersecting_maintenances_progress_as_in_the_kep(env: Env) -> None:
    """KEP-4212 "Pod Selection and DrainTargets Example" with one=node-1, two=node-2,
    three=node-3 (a few pods per node instead of hundreds)."""
    pods = {
        "node-1": [("one-4000", 4000), ("one-8000", 8000), ("one-14000", 14000)],
        "node-2": [("two-4000", 4000), ("two-12000", 12000)],
        "node-3": [("three-9000", 9000), ("three-14000", 14000)],
    }
    for node, specs in pods.items():
        for name, prio in specs:
            await env.bare_pod(name, node, priority=prio)
    plan_a = [entry("Default", 5000), entry("Default", 15000), entry("DaemonSet", 3000)]
    plan_b = [entry("Default", 10000), entry("Default", 15000), entry("DaemonSet", 4000)]
    await env.maintenance("maintenance-a", ["node-1", "node-2"], plan=plan_a)
    await env.until(lambda: env.requested() == {"one-4000", "two-4000"})
    await env.maintenance("maintenance-b", ["node-1", "node-3"], plan=plan_b)

    # b is limited by a on the shared node one, but drains node three at its own pace.
    A, B, C = "maintenance-a", "maintenance-b", "maintenance-c"
    await expect(
        env,
        {
            (A, "node-1"): "Evacuating",
            (A, "node-2"): "Evacuating",
            (B, "node-1"): "Evacuating (limited by maintenance-a)",
            (B, "node-3"): "Evacuating",
        },
        {(B, "node-1"): [entry("Default", 5000)], (B, "node-3"): [entry("Default", 10000)]},
    )
    await env.until(lambda: env.requested() == {"one-4000", "two-4000", "three-9000"})

    # Node three drained: it waits for node one.
    await env.evict("three-9000")
    await expect(env, {(B, "node-3"): "Waiting for node node-1."})
    assert "three-14000" not in env.requested()

    # Node one drained: a waits for node two, and so does b, through a.
    await env.evict("one-4000")
    await expect(
        env,
        {
            (A, "node-1"): "Waiting for node node-2.",
            (A, "node-2"): "Evacuating",
            (B, "node-1"): "Waiting for node node-2 (maintenance-a).",
            (B, "node-3"): "Waiting for node node-2 (maintenance-a).",
        },
        {(B, "node-1"): [entry("Default", 5000)], (B, "node-3"): [entry("Default", 10000)]},
    )

    # Node two drained: the targets increase, node one limited by b now.
    await env.evict("two-4000")
    await expect(
        env,
        {
            (A, "node-1"): "Evacuating (limited by maintenance-b)",
            (A, "node-2"): "Evacuating",
            (B, "node-1"): "Evacuating",
            (B, "node-3"): "Waiting for node node-1.",
        },
        {
            (A, "node-1"): [entry("Default", 10000)],
            (A, "node-2"): [entry("Default", 15000)],
            (B, "node-1"): [entry("Default", 10000)],
            (B, "node-3"): [entry("Default", 10000)],
        },
    )
    await env.until(lambda: {"one-8000", "two-12000"} <= env.requested())
    assert "one-14000" not in env.requested() and "three-14000" not in env.requested()

    # A younger maintenance-c is fast-forwarded on node one, regardless of its plan.
    await env.maintenance(C, ["node-1"], plan=[entry("Default", 2000)])
    await expect(
        env,
        {(C, "node-1"): "Evacuating (fast-forwarded by older maintenance-b)"},
        {(C, "node-1"): [entry("Default", 10000)]},
    )
    await env.until(lambda: "FastForwarded" in {e["reason"] for e in env.events(C)})

    # To the end: every pod goes, every maintenance reports Drained.
    await env.evict("one-8000", "two-12000")
    await env.until(lambda: {"one-14000", "three-14000"} <= env.requested())
    await env.evict("one-14000", "three-14000")
    for name in ("maintenance-a", "maintenance-b", "maintenance-c"):
        await env.until(partial(is_true, env, name, "Drained"))
    assert cordoned_by(env, "node-1") == "maintenance-a,maintenance-b,maintenance-c"


async def test_complete_uncordons_only_what_nodeagent_cordoned(env: Env, kubectl: Kubectl) -> None:
    await kubectl.ok("cordon", "node-3")
    await env.maintenance("m-a", ["node-1", "node-2"], stage="Cordon")
    await env.maintenance("m-b", ["node-2", "node-3"], stage="Cordon")
    await env.until(
        lambda: cordoned_by(env, "node-1") == "m-a" and cordoned_by(env, "node-2") == "m-a,m-b"
    )
    assert cordoned(env, "node-3") and cordoned_by(env, "node-3") is None
    await env.until(
        lambda: (env.condition("m-b", "Drained") or {}).get("reason") == "DrainNotRequested"
    )

    # m-a completes: node-1 is free again, node-2 stays cordoned for m-b.
    await env.stage("m-a", "Complete")
    await env.until(lambda: not cordoned(env, "node-1") and cordoned_by(env, "node-2") == "m-b")
    assert cordoned(env, "node-2") and cordoned_by(env, "node-1") is None

    # m-b completes: node-2 is uncordoned; node-3 was cordoned by hand and stays so.
    await env.stage("m-b", "Complete")
    await env.until(lambda: not cordoned(env, "node-2"))
    assert cordoned_by(env, "node-2") is None
    assert cordoned(env, "node-3")

    # A node uncordoned by hand while a maintenance holds it is cordoned again.
    await env.maintenance("m-c", ["node-1"], stage="Cordon")
    await env.until(lambda: cordoned(env, "node-1"))
    await kubectl.ok("uncordon", "node-1")
    await env.until(lambda: cordoned(env, "node-1") and cordoned_by(env, "node-1") == "m-c")


async def test_the_log_says_cordoned_drained_and_uncordoned(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    """One line each, as the Events say it: an operator follows a maintenance in the log."""
    caplog.set_level(logging.INFO, logger="nodeagent.controllers.nodemaintenance")
    await env.bare_pod("web", "node-1")
    await env.maintenance("m", ["node-1"])
    await env.until(lambda: env.requested() == {"web"})
    await env.kube.delete(PODS, "web", "default")
    await env.until(lambda: (env.condition("m", "Drained") or {}).get("status") == "True")
    await env.stage("m", "Complete")
    await env.until(lambda: not cordoned(env, "node-1"))

    def said() -> list[str]:
        return [
            r.getMessage()
            for r in caplog.records
            if r.getMessage().startswith("NodeMaintenance m:")
        ]

    await env.until(lambda: any("Uncordoned node node-1" in line for line in said()))
    lines = said()
    assert "NodeMaintenance m: Cordoned: Cordoned node node-1" in lines
    assert any(line.startswith("NodeMaintenance m: Drained: ") for line in lines), lines


async def test_deleting_a_draining_maintenance_completes_it_first(env: Env) -> None:
    await env.bare_pod("web", "node-1")
    await env.maintenance("m", ["node-1"])
    await env.until(lambda: env.requested() == {"web"} and cordoned(env, "node-1"))
    await env.kube.delete(NODEMAINTENANCES, "m")
    await env.until(lambda: env.nm("m") is None)
    # Written before the finalizer went, but each kind comes on its own watch.
    await env.until(lambda: not cordoned(env, "node-1") and env.requested() == set())
    assert cordoned_by(env, "node-1") is None
    assert env.pod("default", "web") is not None
    # an Idle maintenance has no finalizer and goes at once
    await env.maintenance("idle", ["node-1"], stage="Idle")
    await env.until(lambda: (env.condition("idle", "Valid") or {}).get("status") == "True")
    nm = env.nm("idle")
    assert nm is not None and not nm["metadata"].get("finalizers")
    await env.kube.delete(NODEMAINTENANCES, "idle")
    await env.until(lambda: env.nm("idle") is None)


async def test_an_existing_request_gets_the_requester_added(env: Env) -> None:
    pod = await env.bare_pod("web", "node-2")
    uid = pod["metadata"]["uid"]
    await env.kube.create(
        EVICTIONREQUESTS,
        {
            "metadata": {"name": uid, "namespace": "default"},
            "spec": {
                "target": {"pod": {"name": "web", "uid": uid}},
                "requesters": [{"name": "descheduler.example.com"}],
            },
        },
    )
    await env.maintenance("m", ["node-2"])
    await env.until(lambda: "web" in env.requested())
    (er,) = env.requests()
    assert er["spec"]["requesters"] == [
        {"name": "descheduler.example.com"},
        {"name": REQUESTER},
    ]
    await env.stage("m", "Complete")
    await env.until(lambda: "web" not in env.requested())
    (er,) = env.requests()
    assert er["spec"]["requesters"] == [{"name": "descheduler.example.com"}]


async def test_invalid_specs_touch_nothing(env: Env) -> None:
    await env.bare_pod("web", "node-1")
    await env.maintenance(
        "bad-plan",
        ["node-1"],
        plan=[entry("DaemonSet", 100), entry("Default", 100)],
    )
    await env.maintenance(
        "bad-selector",
        [],
        selector={
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "rack", "operator": "Gt", "values": ["a"]}]}
            ]
        },
    )
    await env.until(
        lambda: (
            (env.condition("bad-plan", "Valid") or {}).get("status") == "False"
            and (env.condition("bad-selector", "Valid") or {}).get("status") == "False"
        )
    )
    plan_valid = env.condition("bad-plan", "Valid")
    assert plan_valid is not None and plan_valid["reason"] == "InvalidDrainPlan"
    assert plan_valid["message"].startswith(
        "spec.drainPlan[1]: podType Default comes after podType DaemonSet (entry 0)"
    )
    selector_valid = env.condition("bad-selector", "Valid")
    assert selector_valid is not None and selector_valid["reason"] == "InvalidNodeSelector"
    assert selector_valid["message"] == (
        "spec.nodeSelector.nodeSelectorTerms[0].matchExpressions[0].values[0]: "
        "must be an integer when operator is Gt"
    )
    for name in ("bad-plan", "bad-selector"):
        nm = env.nm(name)
        assert nm is not None and not nm["metadata"].get("finalizers")
        assert "stageStatuses" not in nm["status"] and "nodeStatuses" not in nm["status"]
        await env.until(partial(warned, env, name))
    assert not cordoned(env, "node-1") and env.requests() == []


async def test_a_backward_stage_or_changed_plan_is_refused(env: Env) -> None:
    """The API server refuses both with the CRD's CEL rules (the sim evaluates CEL too); the
    controller's own report for servers that do not is unit-tested."""
    await env.bare_pod("web", "node-2")
    await env.maintenance("m", ["node-2"])
    await env.until(lambda: cordoned(env, "node-2") and "web" in env.requested())
    await env.evict("web")
    await env.until(lambda: (env.condition("m", "Drained") or {}).get("status") == "True")
    await env.maintenance("p", ["node-3"], stage="Cordon", plan=[entry("Default", 10)])
    await env.until(lambda: (env.condition("p", "Valid") or {}).get("status") == "True")
    with pytest.raises(Invalid, match="stage may only move forward"):
        await env.stage("m", "Cordon")
    with pytest.raises(Invalid, match="drainPlan is immutable"):
        await env.kube.patch(NODEMAINTENANCES, "p", {"spec": {"drainPlan": [entry("Default", 20)]}})
