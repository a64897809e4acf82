"""The cluster side of the shutdown-flow tests, on either backend: nodeagent's CRDs installed,
the admin's client for what the test does (playing the NodeMaintenance controller: marking a
maintenance drained), a ClusterView of NodeMaintenances for what it checks, and the agent's
ServiceAccount for the code under test."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from nodeagent.kube.client import KubeClient
from nodeagent.kube.resources import NODEMAINTENANCES
from tests.clusters import ClusterView, TestCluster
from tests.requestcount import RequestCounter

Obj = dict[str, Any]
SYNC_ANNOTATION = "test.nodeagent.io/sync"


@dataclass
class ShutdownCluster:
    backend: TestCluster
    kube: KubeClient  # the admin
    view: ClusterView
    account: Path  # kubeconfig of the agent's ServiceAccount
    requests: RequestCounter  # what the agent's client asked
    agent: KubeClient  # the agent's client
    _marks: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def maintenances(self) -> list[Obj]:
        return self.view.list(NODEMAINTENANCES)

    def stages(self) -> list[str]:
        return sorted(m["spec"]["stage"] for m in self.maintenances())

    async def until(self, cond: Any, timeout: float = 20) -> None:
        await self.view.until(cond, timeout)

    async def mark_drained(self, name: str) -> None:
        """What the NodeMaintenance controller reports once every pod is gone."""
        condition = {
            "type": "Drained",
            "status": "True",
            "reason": "Drained",
            "message": "test",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }
        status = {"status": {"conditions": [condition]}}
        await self.kube.patch_status(NODEMAINTENANCES, name, status)

    async def caught_up(self, name: str) -> None:
        """Write a mark on maintenance `name` and wait until the view has it: a watch delivers
        in order, so every NodeMaintenance write made before is in the view then."""
        mark = str(next(self._marks))
        await self.kube.patch(
            NODEMAINTENANCES, name, {"metadata": {"annotations": {SYNC_ANNOTATION: mark}}}
        )

        def seen() -> bool:
            nm = self.view.get(NODEMAINTENANCES, name) or {"metadata": {}}
            return (nm["metadata"].get("annotations") or {}).get(SYNC_ANNOTATION) == mark

        await self.view.until(seen)


async def warm_up(kube: KubeClient) -> None:
    """Write one NodeMaintenance (and delete it) before the test starts. A fresh kube-apiserver
    takes about 2 s over the first write to nodeagent.io after the CRDs are installed (later
    writes take milliseconds); a long-running API server has paid that long before a shutdown,
    and the tests' sub-second `apiUnreachableReleaseAfter` must not count it as no answer."""
    body = {
        "apiVersion": "nodeagent.io/v1alpha1",
        "kind": "NodeMaintenance",
        "metadata": {"name": "test-warm-up"},
        "spec": {"nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["no-such-node"]}]}]}},
    }  # fmt: skip
    await kube.create(NODEMAINTENANCES, body)
    await kube.delete(NODEMAINTENANCES, "test-warm-up")


@pytest.fixture
async def shutdown_cluster(backend: TestCluster) -> AsyncIterator[ShutdownCluster]:
    await backend.install_crds()
    kube = backend.client(max_workers=4)
    await warm_up(kube)
    view = ClusterView(kube, [NODEMAINTENANCES])
    await view.start()
    # node-1's agent credentials: a token bound to a pod on node-1 (the policy holds it there)
    account = await backend.service_account(node="node-1")
    requests = RequestCounter()
    agent = backend.client(account, max_workers=4, on_request=requests)
    try:
        yield ShutdownCluster(backend, kube, view, account, requests, agent)
    finally:
        await view.stop()
