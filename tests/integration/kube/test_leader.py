"""Leader election between real clients over either API server's Leases.

The candidates authenticate as the agent's ServiceAccount and elect on the Lease the packaged
RBAC grants (nodeagent-system/nodeagent-controllers). Each reaches the server through a TCP
proxy of its own (tests/netproxy.py), so the test can cut one off the network."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from nodeagent.kube.client import KubeClient
from nodeagent.kube.errors import AlreadyExists
from nodeagent.kube.leader import LeaderElector
from nodeagent.kube.resources import LEASES, Resource
from tests.clusters import CONTROLLERS_ACCOUNT, NAMESPACE, ClusterView, TestCluster
from tests.narrowing import now
from tests.netproxy import TcpProxy, proxy_to

from .conftest import RequestCounter

Obj = dict[str, Any]
LEASE = "nodeagent-controllers"  # the name packaging/kubernetes/rbac.yaml grants
TIMING: dict[str, float] = {"lease_duration": 2.0, "renew_deadline": 1.2, "retry_period": 0.2}
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)


class Agent:
    def __init__(
        self, client: KubeClient, requests: RequestCounter, proxy: TcpProxy, identity: str
    ) -> None:
        self.client = client
        self.requests = requests  # this candidate's API requests
        self.proxy = proxy  # its network to the API server
        self.elector = LeaderElector(client, NAMESPACE, LEASE, identity, **TIMING)
        self.leading = asyncio.Event()
        self.stopped = asyncio.Event()
        self.terms = 0
        self.task: asyncio.Task[None] | None = None

    async def lead(self) -> None:
        self.terms += 1
        self.leading.set()
        self.stopped.clear()
        try:
            await asyncio.Event().wait()
        finally:
            self.leading.clear()
            self.stopped.set()

    def start(self) -> None:
        self.task = asyncio.create_task(self.elector.run(self.lead))

    async def kill(self) -> None:
        assert self.task is not None
        self.task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await self.task

    def calls(self, verb: str, status: int | None = None) -> int:
        """Lease requests made so far (with that status, or any)."""
        return sum(
            n
            for (v, p, s), n in self.requests.counts.items()
            if v == verb and p == "leases" and status in (None, s)
        )

    async def until_calls(self, verb: str, n: int, status: int | None = None) -> None:
        await self.requests.until(lambda: self.calls(verb, status) >= n)


@pytest.fixture
async def view(backend: TestCluster) -> AsyncIterator[ClusterView]:
    v = ClusterView(backend.client(), [LEASES])
    await v.start()
    yield v
    await v.stop()


@pytest.fixture
async def agents(backend: TestCluster, tmp_path: Path) -> AsyncIterator[tuple[Agent, Agent]]:
    account = await backend.service_account(CONTROLLERS_ACCOUNT)
    with contextlib.suppress(AlreadyExists):  # the real backend has it from the RBAC files
        await backend.client().create(NAMESPACES, {"metadata": {"name": NAMESPACE}})
    async with proxy_to(account) as pa, proxy_to(account) as pb:
        out = []
        for proxy, identity in ((pa, "agent-a"), (pb, "agent-b")):
            requests = RequestCounter()
            kubeconfig = proxy.kubeconfig(account, tmp_path / f"{identity}.kubeconfig")
            client = backend.client(kubeconfig, max_workers=4, on_request=requests)
            out.append(Agent(client, requests, proxy, identity))
        a, b = out
        yield a, b
        for agent in (a, b):
            if agent.task is not None and not agent.task.done():
                await agent.kill()


def holder(view: ClusterView, namespace: str = NAMESPACE) -> str:
    lease = view.get(LEASES, LEASE, namespace)
    return "" if lease is None else str(lease["spec"].get("holderIdentity") or "")


async def test_killing_the_leader_hands_over(
    view: ClusterView, agents: tuple[Agent, Agent]
) -> None:
    a, b = agents
    a.start()
    async with asyncio.timeout(5):
        await a.leading.wait()
    b.start()
    # b has found the Lease held a few times over
    await b.until_calls("get", 5)
    assert a.elector.is_leader and not b.elector.is_leader
    assert b.terms == 0
    await view.until(lambda: holder(view) == "agent-a")

    loop = asyncio.get_running_loop()
    t0 = loop.time()
    await a.kill()
    assert a.stopped.is_set() and not now(a.elector.is_leader)
    async with asyncio.timeout(5):
        await b.leading.wait()
    # Released on the way out, so well under the 2 s lease duration.
    assert loop.time() - t0 < 1.0
    await view.until(lambda: holder(view) == "agent-b")
    lease = await b.client.get(LEASES, LEASE, NAMESPACE)
    assert lease["spec"]["leaseTransitions"] == 1


async def test_cut_off_leader_steps_down_before_successor_takes_over(
    view: ClusterView, agents: tuple[Agent, Agent]
) -> None:
    a, b = agents
    a.start()
    async with asyncio.timeout(5):
        await a.leading.wait()
    b.start()
    await b.until_calls("get", 2)
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    # a can neither renew nor release: a crash, as far as b can tell
    await a.proxy.stop_listening()
    async with asyncio.timeout(5):
        await a.stopped.wait()
    stepped_down = loop.time() - t0
    async with asyncio.timeout(5):
        await b.leading.wait()
    took_over = loop.time() - t0
    assert stepped_down < took_over, "two leaders at once"
    assert took_over >= 2.0 - 0.3  # b waited for the lease to expire
    await view.until(lambda: holder(view) == "agent-b")
    # a is back on the network and finds the Lease held, a few times over
    await a.proxy.start()
    await a.until_calls("get", a.calls("get", 200) + 3, status=200)
    assert b.elector.is_leader and not a.elector.is_leader and not a.leading.is_set()


async def test_leadership_survives_api_errors(
    backend: TestCluster, view: ClusterView, agents: tuple[Agent, Agent]
) -> None:
    """A renewal lost on the network and one refused with 409 (another writer changed the
    Lease) must not cost leadership: both are well inside the renew deadline."""
    a, _ = agents
    a.start()
    async with asyncio.timeout(5):
        await a.leading.wait()
    await view.until(lambda: holder(view) == "agent-a")
    # the network fails under a renewal...
    await a.proxy.stop_listening()
    await a.requests.until(lambda: a.requests.counts[("update", "leases", 0)] >= 1)
    await a.proxy.start()
    # ...and someone else writes the Lease between two renewals
    await backend.client().patch(
        LEASES, LEASE, {"metadata": {"annotations": {"test/touched": "yes"}}}, NAMESPACE
    )
    await a.until_calls("update", 1, status=409)
    # renewed again for longer than the renew deadline
    renewed = a.calls("update", 200)
    await a.requests.until(lambda: a.calls("update", 200) >= renewed + 7)
    assert a.elector.is_leader and a.terms == 1


async def test_a_missing_namespace_is_one_error_then_the_agent_leads_once_it_exists(
    backend: TestCluster,
    kube: KubeClient,
    view: ClusterView,
    requests: RequestCounter,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Only the CRDs applied: the Lease's namespace is missing. The candidate says so once,
    as an error with the ways out, retries quietly with backoff, and leads as soon as an
    admin creates the namespace."""
    caplog.set_level(logging.DEBUG, logger="nodeagent.kube.leader")
    namespace = "nodeagent-elsewhere"
    client = backend.client(max_workers=4, on_request=requests)  # the admin's: RBAC aside
    elector = LeaderElector(client, namespace, LEASE, "agent-a", **TIMING)
    leading = asyncio.Event()

    async def lead() -> None:
        leading.set()
        await asyncio.Event().wait()

    task = asyncio.create_task(elector.run(lead))
    try:
        # refused a few times over, the waits doubling from 0.2 s
        await requests.until(lambda: requests.counts[("create", "leases", 404)] >= 4)
        records = [r for r in caplog.records if r.name == "nodeagent.kube.leader"]
        errors = [r.getMessage() for r in records if r.levelno >= logging.WARNING]
        assert len(errors) == 1, errors
        assert f"{namespace!r} does not exist" in errors[0]
        assert f"kubectl create namespace {namespace}" in errors[0]
        assert f"nodeagent manifests namespace {namespace} | kubectl apply -f -" in errors[0]
        assert "leader.namespace" in errors[0]
        assert any("still missing" in r.getMessage() for r in records if r.levelno == logging.DEBUG)

        await kube.create(NAMESPACES, {"metadata": {"name": namespace}})
        # the next attempt, at most 1.6 s x jitter after the fourth, creates the Lease
        await view.until(lambda: view.get(LEASES, LEASE, namespace) is not None, timeout=10)
        async with asyncio.timeout(5):
            await leading.wait()
        assert holder(view, namespace) == "agent-a"
        records = [r for r in caplog.records if r.name == "nodeagent.kube.leader"]
        assert len([r for r in records if r.levelno >= logging.WARNING]) == 1
        assert any(f"{namespace!r} exists now" in r.getMessage() for r in records)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
