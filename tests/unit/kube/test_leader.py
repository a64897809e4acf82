from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime
from typing import Any

import pytest

from nodeagent.kube.errors import ServerError
from nodeagent.kube.leader import LeaderElector
from nodeagent.kube.resources import LEASES, format_micro_time
from tests.narrowing import now
from tests.until import until

from .fakeapi import Backend, FakeClient

# no test here waits for time to pass: the loop jumps to its next timer (tests/faketime.py)
pytestmark = pytest.mark.fake_time

MICRO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
FAST: dict[str, float] = {"lease_duration": 1.0, "renew_deadline": 0.6, "retry_period": 0.1}


def lease(backend: Backend) -> dict[str, Any]:
    return backend.objects[("leases", "kube-system", "nodeagent")]


def elector(client: FakeClient, identity: str, **timing: float) -> LeaderElector:
    return LeaderElector(client, "kube-system", "nodeagent", identity, **{**FAST, **timing})


class Leading:
    """A `lead` coroutine that records when it runs and when it is cancelled."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.cancelled = asyncio.Event()

    async def __call__(self) -> None:
        self.started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise


async def cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_acquires_an_absent_lease() -> None:
    backend = Backend()
    el = elector(FakeClient(backend), "agent-a")
    lead = Leading()
    task = asyncio.create_task(el.run(lead))
    async with asyncio.timeout(2):
        await lead.started.wait()
    assert el.is_leader and el.holder == "agent-a"
    spec = lease(backend)["spec"]
    assert spec["holderIdentity"] == "agent-a"
    assert spec["leaseDurationSeconds"] == 1
    assert spec["leaseTransitions"] == 0
    assert MICRO.match(spec["acquireTime"]) and MICRO.match(spec["renewTime"])
    first_renew = spec["renewTime"]
    await until(lambda: lease(backend)["spec"]["renewTime"] != first_renew)
    await cancel(task)
    assert lead.cancelled.is_set()
    assert not now(el.is_leader)
    # Released so a successor need not wait out the lease.
    assert lease(backend)["spec"]["holderIdentity"] == ""
    assert lease(backend)["spec"]["leaseDurationSeconds"] == 1


async def test_graceful_stop_hands_over_at_once() -> None:
    backend = Backend()
    a = elector(FakeClient(backend, "a"), "agent-a", lease_duration=30, renew_deadline=20)
    b = elector(FakeClient(backend, "b"), "agent-b", lease_duration=30, renew_deadline=20)
    lead_a, lead_b = Leading(), Leading()
    task_a = asyncio.create_task(a.run(lead_a))
    async with asyncio.timeout(2):
        await lead_a.started.wait()
    task_b = asyncio.create_task(b.run(lead_b))
    await asyncio.sleep(0.3)  # fake time: b campaigns while a holds the lease
    assert not lead_b.started.is_set() and not b.is_leader
    await cancel(task_a)
    # Well within the 30 s lease: the release let b in at its next retry.
    async with asyncio.timeout(1):
        await lead_b.started.wait()
    assert lease(backend)["spec"]["holderIdentity"] == "agent-b"
    assert lease(backend)["spec"]["leaseTransitions"] == 1
    await cancel(task_b)


async def test_partitioned_leader_steps_down_and_successor_waits_for_expiry() -> None:
    backend = Backend()
    client_a = FakeClient(backend, "a")
    a = elector(client_a, "agent-a")
    b = elector(FakeClient(backend, "b"), "agent-b")
    lead_a, lead_b = Leading(), Leading()
    task_a = asyncio.create_task(a.run(lead_a))
    async with asyncio.timeout(2):
        await lead_a.started.wait()
    task_b = asyncio.create_task(b.run(lead_b))
    await asyncio.sleep(0.2)  # fake time: b campaigns (and fails) a few times
    loop = asyncio.get_running_loop()
    cut = loop.time()
    client_a.down = True
    async with asyncio.timeout(2):
        await lead_a.cancelled.wait()
    stepped_down = loop.time() - cut
    await until(lambda: not a.is_leader)  # the elector stops leading once `lead` has ended
    assert stepped_down <= 0.6 + 0.3  # renew deadline plus one retry of slack
    async with asyncio.timeout(3):
        await lead_b.started.wait()
    took_over = loop.time() - cut
    # b only takes over once the lease has gone unrenewed for its full duration, which is
    # after a stopped leading: never two leaders at once.
    assert took_over >= 1.0 - 0.15
    assert took_over > stepped_down
    client_a.down = False
    await asyncio.sleep(0.5)  # fake time: a campaigns again
    assert b.is_leader and not a.is_leader  # a campaigns again but b holds the lease
    assert lease(backend)["spec"]["holderIdentity"] == "agent-b"
    await cancel(task_a)
    assert lease(backend)["spec"]["holderIdentity"] == "agent-b"  # a did not release b's lease
    await cancel(task_b)


async def test_respects_a_live_foreign_lease() -> None:
    backend = Backend()
    holder = FakeClient(backend, "other")
    now = format_micro_time(datetime.now(UTC))
    await holder.create(
        LEASES,
        {
            "metadata": {"name": "nodeagent", "namespace": "kube-system"},
            "spec": {"holderIdentity": "ghost", "leaseDurationSeconds": 1, "renewTime": now,
                     "acquireTime": now, "leaseTransitions": 4},
        },
    )  # fmt: skip
    el = elector(FakeClient(backend), "agent-a")
    lead = Leading()
    loop = asyncio.get_running_loop()
    start = loop.time()
    task = asyncio.create_task(el.run(lead))
    async with asyncio.timeout(3):
        await lead.started.wait()
    # The ghost never renews: taken over after one lease duration as observed by us.
    assert loop.time() - start >= 1.0
    assert lease(backend)["spec"]["leaseTransitions"] == 5
    await cancel(task)


async def test_a_renewing_holder_keeps_the_lease() -> None:
    backend = Backend()
    a = elector(FakeClient(backend, "a"), "agent-a")
    b = elector(FakeClient(backend, "b"), "agent-b")
    lead_a, lead_b = Leading(), Leading()
    task_a = asyncio.create_task(a.run(lead_a))
    async with asyncio.timeout(2):
        await lead_a.started.wait()
    task_b = asyncio.create_task(b.run(lead_b))
    await asyncio.sleep(2.5)  # several lease durations
    assert a.is_leader and not lead_b.started.is_set()
    assert not lead_a.cancelled.is_set()
    await cancel(task_b)
    await cancel(task_a)


async def test_transient_errors_within_the_deadline_keep_leadership() -> None:
    backend = Backend()
    client = FakeClient(backend)
    el = elector(client, "agent-a")
    lead = Leading()
    task = asyncio.create_task(el.run(lead))
    async with asyncio.timeout(2):
        await lead.started.wait()
    client.fail_next = [ServerError("boom", status=500), ServerError("boom", status=500)]
    await asyncio.sleep(0.6)  # fake time: within the renew deadline
    assert el.is_leader and not lead.cancelled.is_set()
    await cancel(task)


async def test_lead_returning_or_raising_releases() -> None:
    backend = Backend()
    el = elector(FakeClient(backend), "agent-a")

    async def done() -> None:
        await asyncio.sleep(0.05)  # fake time: the work `lead` does

    async with asyncio.timeout(2):
        await el.run(done)
    assert lease(backend)["spec"]["holderIdentity"] == ""

    async def broken() -> None:
        raise RuntimeError("lead failed")

    with pytest.raises(RuntimeError, match="lead failed"):
        async with asyncio.timeout(2):
            await el.run(broken)
    assert lease(backend)["spec"]["holderIdentity"] == ""
    assert lease(backend)["spec"]["leaseTransitions"] == 1


@pytest.mark.parametrize(
    "timing",
    [
        {"lease_duration": 10, "renew_deadline": 10, "retry_period": 2},
        {"lease_duration": 15, "renew_deadline": 10, "retry_period": 9},
        {"lease_duration": 15, "renew_deadline": 10, "retry_period": 0},
    ],
)
def test_rejects_unsafe_timing(timing: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        LeaderElector(FakeClient(Backend()), "ns", "n", "id", **timing)


def test_rejects_empty_identity() -> None:
    with pytest.raises(ValueError):
        LeaderElector(FakeClient(Backend()), "ns", "n", "")


async def test_loss_is_judged_by_renewal_even_if_lead_swallows_cancellation() -> None:
    backend = Backend()
    client = FakeClient(backend)
    el = elector(client, "agent-a")
    terms = 0

    async def stubborn() -> None:
        nonlocal terms
        terms += 1
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            return  # swallowed: must not look like "lead finished"

    task = asyncio.create_task(el.run(stubborn))
    await until(lambda: el.is_leader)
    client.down = True
    await until(lambda: not el.is_leader)
    assert not task.done()  # still campaigning
    client.down = False
    await until(lambda: el.is_leader and terms == 2)
    await cancel(task)


class GatedClient(FakeClient):
    """Holds each Lease renewal until the test opens the gate, to time a cancel against it."""

    def __init__(self, backend: Backend) -> None:
        super().__init__(backend)
        self.hold = False
        self.in_flight = asyncio.Event()
        self.gate: asyncio.Future[None] | None = None

    async def replace(self, resource: Any, body: Any, namespace: str | None = None) -> Any:
        if self.hold:
            self.gate = asyncio.get_running_loop().create_future()
            self.in_flight.set()
            await self.gate
        return await super().replace(resource, body, namespace)


@pytest.mark.parametrize("ticks", range(6))
async def test_a_cancel_that_meets_a_finishing_renewal_is_not_lost(ticks: int) -> None:
    """Python 3.11's wait_for returns the inner result when the inner call finishes as the cancel
    arrives: the elector then renewed on and never stepped down (SIGTERM ignored). The cancel is
    sent 0..5 loop iterations after the renewal's answer, so one lands in that window."""
    backend = Backend()
    client = GatedClient(backend)
    el = elector(client, "agent-a", lease_duration=3.0, renew_deadline=2.0, retry_period=0.05)
    lead = Leading()
    task = asyncio.create_task(el.run(lead))
    async with asyncio.timeout(2):
        await lead.started.wait()
    client.hold = True
    async with asyncio.timeout(2):
        await client.in_flight.wait()
    assert client.gate is not None
    client.hold = False
    client.gate.set_result(None)
    for _ in range(ticks):
        await asyncio.sleep(0)
    task.cancel()
    await asyncio.wait({task}, timeout=1)  # a lost cancel leaves the elector renewing
    assert task.done(), "the cancel was lost: the elector kept renewing its Lease"
    assert task.cancelled()
    assert lead.cancelled.is_set()
    assert lease(backend)["spec"]["holderIdentity"] == ""
