"""Whole agents (nodeagent.app) against either cluster backend: the controllers Deployment's
agents (`runNodeAgent: false`, no node) elect a leader, leader election hands the cluster
controllers over, and a drain in progress still completes.

The agents authenticate as the controllers' ServiceAccount (packaging/kubernetes RBAC enforced
on the real server: the controllers role and the leader Role, nothing of the node agents') and
elect on the Lease of their default configuration, which that RBAC grants. The test acts as
admin and reads through a ClusterView."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from nodeagent.app import Agent
from nodeagent.config import LeaderConfig, from_mapping
from nodeagent.kube.client import KubeClient
from nodeagent.kube.errors import AlreadyExists
from nodeagent.kube.resources import (
    DEPLOYMENTS,
    LEASES,
    NODEMAINTENANCES,
    NODES,
    PDBS,
    PODS,
    Resource,
)
from tests.clusters import CONTROLLERS_ACCOUNT, NAMESPACE, ClusterView, TestCluster

Obj = dict[str, Any]
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
# where the agents' default configuration puts the Lease: packaging/kubernetes grants it there
LEASE = LeaderConfig()

WORKLOAD = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 4
  selector: {matchLabels: {app: web}}
  template:
    metadata:
      labels: {app: web}
      annotations: {sim.nodeagent.io/exit-seconds: "1"}
    spec:
      containers: [{name: web, image: nginx}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: default}
spec:
  maxUnavailable: 1
  selector: {matchLabels: {app: web}}
"""

MAINTENANCE = {
    "apiVersion": "nodeagent.io/v1alpha1",
    "kind": "NodeMaintenance",
    "metadata": {"name": "drain-node-3"},
    "spec": {
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["node-3"]}]}]},
        "stage": "Drain",
        "reason": "test",
    },
}  # fmt: skip


@dataclass
class Running:
    agent: Agent
    task: asyncio.Task[None]


@dataclass
class Cluster:
    kube: KubeClient  # the admin
    view: ClusterView
    account: Path  # kubeconfig of the agents' ServiceAccount

    def pods(self, **labels: str) -> list[Obj]:
        return self.view.list(PODS, "default", **labels)

    def lease_holder(self) -> str:
        lease = self.view.get(LEASES, LEASE.lease_name, LEASE.namespace)
        return "" if lease is None else str(lease["spec"].get("holderIdentity") or "")

    def drained(self) -> bool:
        nm = self.view.get(NODEMAINTENANCES, "drain-node-3")
        conds = ((nm or {}).get("status") or {}).get("conditions") or []
        return any(c["type"] == "Drained" and c["status"] == "True" for c in conds)

    def cordoned(self, node: str) -> bool:
        obj = self.view.get(NODES, node)
        return obj is not None and bool(obj["spec"].get("unschedulable"))


def running(p: Obj) -> bool:
    return (p.get("status") or {}).get("phase") == "Running" and not p["metadata"].get(
        "deletionTimestamp"
    )


def on_node(pods: list[Obj], node: str) -> list[Obj]:
    return [p for p in pods if p["spec"].get("nodeName") == node]


@pytest.fixture
async def cluster(backend: TestCluster) -> AsyncIterator[Cluster]:
    await backend.install_crds()
    kube = backend.client(max_workers=4)
    with contextlib.suppress(AlreadyExists):  # the real backend has it from the RBAC files
        await kube.create(NAMESPACES, {"metadata": {"name": NAMESPACE}})
    account = await backend.service_account(CONTROLLERS_ACCOUNT)
    for doc in yaml.safe_load_all(WORKLOAD):
        await kube.create(DEPLOYMENTS if doc["kind"] == "Deployment" else PDBS, doc)
    view = ClusterView(kube, [PODS, NODES, LEASES, NODEMAINTENANCES])
    await view.start()
    c = Cluster(kube, view, account)
    try:
        await view.until(lambda: sum(running(p) for p in c.pods(app="web")) == 4)
        yield c
    finally:
        await view.stop()


def agent_config(kubeconfig: Path) -> dict[str, object]:
    """The controllers Deployment's configuration (packaging/kubernetes/configmap.yaml), with
    short timings."""
    return {
        "runNodeAgent": False,
        "runControllers": True,
        "kube": {"kubeconfig": str(kubeconfig)},
        "leader": {"leaseDuration": 2.0, "renewDeadline": 1.5, "retryPeriod": 0.25},
        "eviction": {"backoffBase": 0.2, "backoffCap": 1.0},
        "observability": {"listen": "127.0.0.1:0"},
    }


def start(cluster: Cluster, pod: str) -> Running:
    """One replica of the Deployment: its leader identity is its pod's name (POD_NAME)."""
    agent = Agent(from_mapping(agent_config(cluster.account)), env={"POD_NAME": pod})
    return Running(agent, asyncio.create_task(agent.run()))


async def stop(r: Running) -> None:
    r.task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await r.task


async def test_one_leader_hands_over_and_the_drain_completes(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="nodeagent.app")
    a, b = start(cluster, "controllers-a"), start(cluster, "controllers-b")
    try:
        await cluster.view.until(lambda: cluster.lease_holder() != "", timeout=10)
        # each says, once it runs, what it runs and where
        started = [r.getMessage() for r in caplog.records if " started: " in r.getMessage()]
        assert len(started) == 2, started
        assert all(
            m.startswith("nodeagent ")
            and " started: controllers, configuration defaults and environment, API server " in m
            and "metrics on 127.0.0.1:0" in m
            for m in started
        ), started
        leader, follower = (a, b) if cluster.lease_holder().startswith("controllers-a") else (b, a)
        follower_pod = "controllers-b" if leader is a else "controllers-a"
        # no node: nothing of a node's part runs
        assert a.agent.node_name is None and a.agent.guard is None
        assert leader.agent.elector is not None and follower.agent.elector is not None
        await cluster.view.until(
            lambda: bool(leader.agent.elector and leader.agent.elector.is_leader)
        )
        assert not follower.agent.elector.is_leader

        # the scheduler spreads the 4 pods over the 3 nodes: node-3 has some for the drain
        assert on_node(cluster.pods(app="web"), "node-3")
        await cluster.kube.create(NODEMAINTENANCES, MAINTENANCE)
        # the drain has begun: node-3 is cordoned by the leader's NodeMaintenance controller
        await cluster.view.until(lambda: cluster.cordoned("node-3"))
        # the operators' metrics: only the leader leads and counts maintenances (from its cache,
        # which the maintenance that cordoned node-3 came through)
        lead, follow = leader.agent.registry, follower.agent.registry
        assert (
            lead.get_sample_value("nodeagent_leader"),
            follow.get_sample_value("nodeagent_leader"),
        ) == (1, 0)
        drain = {"stage": "Drain"}
        assert lead.get_sample_value("nodeagent_maintenances", drain) == 1
        assert lead.get_sample_value("nodeagent_maintenances", {"stage": "Idle"}) == 0
        assert follow.get_sample_value("nodeagent_maintenances", drain) is None

        loop = asyncio.get_running_loop()
        t0 = loop.time()
        await stop(leader)
        assert lead.get_sample_value("nodeagent_leader") == 0
        await cluster.view.until(
            lambda: cluster.lease_holder().startswith(follower_pod + "-"),
            timeout=10,
        )
        assert loop.time() - t0 < 2.0 + 0.5  # within the Lease duration

        await cluster.view.until(cluster.drained, timeout=60)
        # (the pods' watch may lag the maintenance's)
        await cluster.view.until(lambda: not on_node(cluster.pods(app="web"), "node-3"))
    finally:
        for r in (a, b):
            await stop(r)
