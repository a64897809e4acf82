"""The limit on nodes draining at once and the drain deadline, on both backends.

The limit test plays the evicting side itself (it deletes a pod as soon as its EvictionRequest
appears); the deadline test runs the EvictionRequest controller, whose imperative interceptor
reports the PodDisruptionBudget that refuses an eviction.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from nodeagent.config import FinalPhaseConfig, NodeMaintenanceConfig, ShutdownConfig
from nodeagent.controllers.evictionrequest import EvictionRequestController
from nodeagent.controllers.nodemaintenance.controller import NodeMaintenanceController
from nodeagent.kube.controller import Controller, SharedInformers
from nodeagent.kube.events import EventRecorder
from nodeagent.kube.resources import (
    EVENTS,
    EVICTIONREQUESTS,
    NODEMAINTENANCES,
    NODES,
    PDBS,
    PODS,
    Resource,
)
from nodeagent.model import shutdown as model
from nodeagent.model.backoff import JitteredBackoff
from nodeagent.model.drainslots import DrainLimit
from nodeagent.model.names import NODE_LABEL
from nodeagent.model.nodemaintenance.deadline import DEADLINE_CONDITION
from nodeagent.node.shutdown import ShutdownFlow
from nodeagent_testbed.sim.store import Obj
from tests.clusters import CONTROLLERS_ACCOUNT, ClusterView, TestCluster
from tests.integration.controllers.evictionrequest_harness import fast_settings
from tests.integration.controllers.test_nodemaintenance import Env, cordoned, is_true
from tests.tasks import cancel_and_wait

NODES_3 = ("node-1", "node-2", "node-3")
BOOT = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
NEXT_BOOT = "9a8b7c6d-5e4f-3021-1a2b-3c4d5e6f7a8b"


async def _env(
    backend: TestCluster,
    settings: NodeMaintenanceConfig,
    with_evictions: bool,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> AsyncIterator[Env]:
    await backend.install_crds(heartbeat_spacing=0)
    kube = backend.client(max_workers=8)
    view = ClusterView(kube, [NODEMAINTENANCES, NODES, PODS, EVICTIONREQUESTS, EVENTS])
    await view.start()
    agent = backend.client(await backend.service_account(CONTROLLERS_ACCOUNT), max_workers=8)
    informers = SharedInformers(
        agent, backoff=lambda: JitteredBackoff(base=0.05, cap=0.5, rng=random.Random(0))
    )
    events = EventRecorder(agent, "nodeagent")
    controller = NodeMaintenanceController(agent, informers, events, settings=settings, clock=clock)
    parts: list[Controller] = [controller]
    if with_evictions:
        parts.append(EvictionRequestController(agent, informers, fast_settings(), events=events))
    tasks = [asyncio.create_task(informers.run())]
    tasks += [asyncio.create_task(p.run()) for p in parts]
    try:
        async with asyncio.timeout(10):
            for p in parts:
                await p.wait_synced()
        yield Env(backend, kube, controller, view)
    finally:
        await cancel_and_wait(tasks)
        await view.stop()


@pytest.fixture
async def limited(backend: TestCluster) -> AsyncIterator[Env]:
    settings = NodeMaintenanceConfig(max_draining_nodes=DrainLimit(count=1))
    async for env in _env(backend, settings, with_evictions=False):
        yield env


# a shutdown maintenance counts at most this long from its creation (nodeMaintenance.maxShutdown)
SHORT_SHUTDOWN = 4.0


@pytest.fixture
async def bounded(backend: TestCluster) -> AsyncIterator[Env]:
    settings = NodeMaintenanceConfig(
        max_draining_nodes=DrainLimit(count=1), max_shutdown=SHORT_SHUTDOWN
    )
    async for env in _env(backend, settings, with_evictions=False):
        yield env


@pytest.fixture
async def evicting(backend: TestCluster) -> AsyncIterator[Env]:
    async for env in _env(backend, NodeMaintenanceConfig(), with_evictions=True):
        yield env


def blocked_by(env: Env, nm: str) -> str:
    return str((((env.nm(nm) or {}).get("status") or {}).get("summary") or {}).get("blockedBy"))


async def test_three_nodes_maintained_at_once_drain_one_at_a_time(limited: Env) -> None:
    env = limited
    for node in NODES_3:
        for i in (1, 2):
            await env.bare_pod(f"{node}-app-{i}", node)
    await env.until(lambda: len([p for p in env.pods() if "-app-" in p["metadata"]["name"]]) == 6)

    # every EvictionRequest's creation and every pod's deletion, as the watches report them,
    # by resourceVersion (one global sequence on both backends)
    requested_at: dict[str, list[int]] = {n: [] for n in NODES_3}
    gone_at: dict[str, list[int]] = {n: [] for n in NODES_3}
    evicting = False
    deletions: list[asyncio.Task[None]] = []

    async def delete(namespace: str, name: str) -> None:
        with contextlib.suppress(Exception):  # already gone
            await env.kube.delete(PODS, name, namespace, grace_period_seconds=0)

    def evict(er: Obj) -> None:
        pod = er["spec"]["target"]["pod"]["name"]
        deletions.append(asyncio.create_task(delete(er["metadata"]["namespace"], pod)))

    def seen(kind: str, resource: Resource, obj: Obj) -> None:
        if resource == PODS and kind == "DELETED" and obj["spec"].get("nodeName") in gone_at:
            gone_at[obj["spec"]["nodeName"]].append(int(obj["metadata"]["resourceVersion"]))
        elif resource == EVICTIONREQUESTS and kind == "ADDED":
            node = obj["metadata"]["labels"][NODE_LABEL]
            requested_at[node].append(int(obj["metadata"]["resourceVersion"]))
            if evicting:
                evict(obj)

    env.view.listen(seen)
    # created together (kubectl would take the same second): in order of name then
    for i, node in enumerate(NODES_3):
        await env.maintenance(f"reboot-{i}-{node}", [node])
    await env.until(
        lambda: (
            blocked_by(env, "reboot-2-node-3").startswith("node node-3: Waiting for a drain")
            and "node-2: Waiting" in blocked_by(env, "reboot-1-node-2")
        )
    )
    assert blocked_by(env, "reboot-1-node-2") == (
        "node node-2: Waiting for a drain slot (1 of 1 nodes draining: node-1)"
    )
    assert blocked_by(env, "reboot-2-node-3") == (
        "node node-3: Waiting for a drain slot (1 of 1 nodes draining: node-1), "
        "1 node ahead in line"
    )
    await env.until(lambda: len(env.requested()) == 2)
    assert env.requested() == {"node-1-app-1", "node-1-app-2"}
    assert cordoned(env, "node-1")
    assert not cordoned(env, "node-2") and not cordoned(env, "node-3")  # cordonWhileWaiting off

    # now the evicting side does its part: each pod goes as soon as it is asked for
    evicting = True
    for er in env.requests():
        evict(er)
    await env.until(
        lambda: all(is_true(env, f"reboot-{i}-{n}", "Drained") for i, n in enumerate(NODES_3)),
        timeout=60,
    )
    await asyncio.gather(*deletions)
    # one node at a time: a node's first request comes after the previous node's last pod went
    spans = sorted((min(requested_at[n]), max(gone_at[n]), n) for n in NODES_3)
    assert [n for _, _, n in spans] == list(NODES_3)
    for (_, last_gone, node), (first_asked, _, nxt) in itertools.pairwise(spans):
        assert last_gone < first_asked, f"{nxt} was asked to drain before {node} had drained"
    assert all(len(requested_at[n]) == 2 for n in NODES_3)


def pdb(name: str, app: str, min_available: int) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": app}}},
    }


def warnings(env: Env, nm: str, reason: str) -> list[str]:
    return [
        e["message"] for e in env.events(nm) if e["type"] == "Warning" and e["reason"] == reason
    ]


async def test_a_passed_deadline_names_the_pod_and_the_budget(evicting: Env) -> None:
    env = evicting
    await env.kube.create(PDBS, pdb("web", "web", 1), "default")
    await env.kube.create(PDBS, pdb("db", "db", 1), "default")
    await env.bare_pod("web-1", "node-1", labels={"app": "web"})
    await env.bare_pod("db-1", "node-2", labels={"app": "db"})

    # a deadline far ahead: not passed; then the budget refuses the eviction
    nm = await env.maintenance("kernel", ["node-1"])
    await env.kube.patch(NODEMAINTENANCES, "kernel", {"spec": {"drainDeadlineSeconds": 3600}})
    await env.until(
        lambda: (
            (env.condition("kernel", DEADLINE_CONDITION) or {}).get("reason") == "WithinDeadline"
            and "PodDisruptionBudget web" in blocked_by(env, "kernel")
        ),
        timeout=30,
    )
    assert nm["metadata"]["name"] == "kernel"
    assert not warnings(env, "kernel", DEADLINE_CONDITION)
    # the deadline is shortened to one already passed: the condition and one Event say why
    await env.kube.patch(NODEMAINTENANCES, "kernel", {"spec": {"drainDeadlineSeconds": 1}})
    await env.until(lambda: is_true(env, "kernel", DEADLINE_CONDITION))
    cond = env.condition("kernel", DEADLINE_CONDITION) or {}
    assert cond["reason"] == "DeadlineExceeded"
    blocking = "pod default/web-1 (eviction refused by PodDisruptionBudget web)"
    assert cond["message"].endswith(f"still blocking: {blocking}"), cond["message"]
    await env.until(lambda: bool(warnings(env, "kernel", DEADLINE_CONDITION)))
    assert warnings(env, "kernel", DEADLINE_CONDITION) == [cond["message"]]
    assert env.pod("default", "web-1") is not None  # nothing escalated
    assert not is_true(env, "kernel", "Drained")

    # a deadline that passes while nothing else happens: the controller's own timer
    await env.kube.create(
        NODEMAINTENANCES,
        {
            "metadata": {"name": "timer"},
            "spec": {
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": ["node-2"]}
                            ]
                        }
                    ]
                },
                "stage": "Drain",
                "drainDeadlineSeconds": 3,
            },
        },
    )
    await env.until(lambda: is_true(env, "timer", DEADLINE_CONDITION), timeout=30)
    await env.until(lambda: bool(warnings(env, "timer", DEADLINE_CONDITION)))
    (message,) = warnings(env, "timer", DEADLINE_CONDITION)
    assert "passed" in message and "pod default/db-1" in message
    assert env.pod("default", "db-1") is not None


async def test_the_deletepods_escalation_deletes_what_the_budget_holds(evicting: Env) -> None:
    env = evicting
    await env.kube.create(PDBS, pdb("web", "web", 1), "default")
    await env.bare_pod("web-1", "node-1", labels={"app": "web"})
    await env.maintenance("kernel", ["node-1"])
    await env.until(lambda: "PodDisruptionBudget web" in blocked_by(env, "kernel"), timeout=30)
    assert env.pod("default", "web-1") is not None  # the budget holds it
    await env.kube.patch(
        NODEMAINTENANCES,
        "kernel",
        {"spec": {"drainDeadlineSeconds": 1, "drainDeadlineEscalation": "DeletePods"}},
    )
    await env.until(lambda: is_true(env, "kernel", "Drained"), timeout=30)
    assert env.pod("default", "web-1") is None
    assert is_true(env, "kernel", DEADLINE_CONDITION)
    await env.until(lambda: bool(warnings(env, "kernel", "DrainDeadlineEscalated")))
    (message,) = warnings(env, "kernel", "DrainDeadlineEscalated")
    assert message.endswith(
        "deleted 1 pods past their disruption budgets "
        "(drainDeadlineEscalation DeletePods): default/web-1"
    ), message


async def reports_boot(env: Env, node: str, boot: str) -> None:
    """The node's kubelet reports `boot` (status.nodeInfo.bootID), as the controllers see it."""
    await env.kube.patch_status(NODES, node, {"status": {"nodeInfo": {"bootID": boot}}})
    await env.until(
        lambda: env.node(node).get("status", {}).get("nodeInfo", {}).get("bootID") == boot
    )


async def test_a_shutdown_of_a_past_boot_holds_no_slot_and_an_admins_maintenance_gets_it(
    limited: Env,
) -> None:
    """node-1's agent made its shutdown maintenance (with its own credentials) and node-1 came
    back with a new boot before the agent completed it: the maintenance, still in Drain, gives
    its slot to an admin's maintenance of node-2."""
    env = limited
    await env.bare_pod("one-web", "node-1")
    await env.bare_pod("two-web", "node-2")
    await reports_boot(env, "node-1", BOOT)
    agent = env.backend.client(await env.backend.service_account(node="node-1"), max_workers=4)
    body = model.shutdown_maintenance("node-1", BOOT, "reboot")
    shutdown = body["metadata"]["name"]
    await agent.create(NODEMAINTENANCES, body)
    await env.until(lambda: env.requested() == {"one-web"})
    await env.maintenance("upgrade", ["node-2"])
    await env.until(
        lambda: (
            blocked_by(env, "upgrade")
            == "node node-2: Waiting for a drain slot (1 of 1 nodes draining: node-1)"
        )
    )
    assert "two-web" not in env.requested()
    await reports_boot(env, "node-1", NEXT_BOOT)
    await env.until(lambda: "two-web" in env.requested())
    await env.until(lambda: "another boot" in blocked_by(env, shutdown))
    assert blocked_by(env, shutdown) == (
        f"node node-1: Shutdown maintenance ignored: the kubelet reports another boot "
        f"({NEXT_BOOT}): it drains no more and holds no slot"
    )
    assert (env.nm(shutdown) or {})["spec"]["stage"] == "Drain"
    assert cordoned(env, "node-1")  # until its agent completes it


async def node_agent(env: Env, node: str) -> Any:
    """`node`'s agent, with its own credentials (a token bound to its pod on `node`)."""
    return env.backend.client(await env.backend.service_account(node=node), max_workers=4)


def warned(env: Env, nm: str, reason: str) -> bool:
    return any(e.get("reason") == reason and e.get("type") == "Warning" for e in env.events(nm))


async def test_a_shutdown_that_never_comes_holds_the_slot_only_until_its_bound(
    bounded: Env,
) -> None:
    """The attack: node-1's agent makes a shutdown maintenance for its current boot on a node
    that never goes down, stating no release deadline. It holds the one drain slot only until
    nodeMaintenance.maxShutdown after its creation; then an admin's drain of node-2 gets it."""
    env = bounded
    await env.bare_pod("one-web", "node-1")
    await env.bare_pod("two-web", "node-2")
    await reports_boot(env, "node-1", BOOT)
    agent = await node_agent(env, "node-1")
    body = model.shutdown_maintenance("node-1", BOOT, "reboot")
    shutdown = body["metadata"]["name"]
    await agent.create(NODEMAINTENANCES, body)
    await env.until(lambda: env.requested() == {"one-web"})
    await env.maintenance("upgrade", ["node-2"])
    await env.until(lambda: "Waiting for a drain slot" in blocked_by(env, "upgrade"))
    await env.until(lambda: "two-web" in env.requested(), timeout=SHORT_SHUTDOWN + 15)
    assert "past its shutdown's bound" in blocked_by(env, shutdown)
    await env.until(lambda: warned(env, shutdown, "ShutdownIgnored"))


# long enough that a second shutdown made a few seconds after the first is still within its bound
LONGER_SHUTDOWN = 8.0


@pytest.fixture
async def longer_bounded(backend: TestCluster) -> AsyncIterator[Env]:
    settings = NodeMaintenanceConfig(
        max_draining_nodes=DrainLimit(count=1), max_shutdown=LONGER_SHUTDOWN
    )
    async for env in _env(backend, settings, with_evictions=False):
        yield env


async def test_a_shutdown_made_again_gets_no_new_bound(longer_bounded: Env) -> None:
    """The attack: node-1's agent holds the slot with a shutdown maintenance of its current
    boot and, some seconds later, makes another of the same kernel boot under a made-up
    userspace suffix, before an admin's drain of node-2 comes to wait. Once the first is past
    its bound the second, older than the admin's, would be next in line for the slot; both
    are bounded from the first's creation, so node-2's drain goes at the first's bound."""
    env = longer_bounded
    await env.bare_pod("one-web", "node-1")
    await env.bare_pod("two-web", "node-2")
    await reports_boot(env, "node-1", BOOT)
    agent = await node_agent(env, "node-1")
    first = model.shutdown_maintenance("node-1", model.boot_id(BOOT, "1"), "reboot")
    await agent.create(NODEMAINTENANCES, first)
    await env.until(lambda: env.requested() == {"one-web"})
    # not a synchronisation: the second must be created some seconds after the first (the
    # server's creationTimestamp counts whole seconds), still within the first's bound
    await asyncio.sleep(3)
    body = model.shutdown_maintenance("node-1", model.boot_id(BOOT, "2"), "reboot")
    second = body["metadata"]["name"]
    made = datetime.now(UTC)
    await agent.create(NODEMAINTENANCES, body)
    await env.until(lambda: "one per node" in blocked_by(env, second))
    await env.maintenance("upgrade", ["node-2"])
    await env.until(lambda: "Waiting for a drain slot" in blocked_by(env, "upgrade"))
    await env.until(lambda: "two-web" in env.requested(), timeout=LONGER_SHUTDOWN + 15)
    # the second's own bound (its creation, whole seconds, + 8 s) is 7 s away at the least
    assert (datetime.now(UTC) - made).total_seconds() < LONGER_SHUTDOWN - 1
    await env.until(lambda: "past its shutdown's bound" in blocked_by(env, second))


async def test_one_live_shutdown_maintenance_per_node_counts(limited: Env) -> None:
    """The attack: node-1's agent makes many shutdown maintenances (boots it made up, and more
    of its own boot told apart by made-up userspace parts). Those of a boot its kubelet does
    not report count for nothing; of the rest, the oldest counts and the others are reported
    with a Warning."""
    env = limited
    await env.bare_pod("one-web", "node-1")
    await reports_boot(env, "node-1", BOOT)
    agent = await node_agent(env, "node-1")
    names = []
    for boot in (model.boot_id(BOOT, "1"), NEXT_BOOT, model.boot_id(BOOT, "2")):
        body = model.shutdown_maintenance("node-1", boot, "reboot")
        names.append(body["metadata"]["name"])
        await agent.create(NODEMAINTENANCES, body)
    first, made_up, second = names
    await env.until(lambda: env.requested() == {"one-web"})
    await env.until(lambda: f"one per node: {first} counts" in blocked_by(env, second))
    await env.until(lambda: "another boot" in blocked_by(env, made_up))
    await env.until(lambda: warned(env, second, "ShutdownIgnored"))
    await env.until(lambda: warned(env, made_up, "ShutdownIgnored"))
    assert not warned(env, first, "ShutdownIgnored")


async def test_a_shutdown_held_by_the_limit_still_lets_go_at_its_budget(limited: Env) -> None:
    """The node side is unchanged by the limit: a shutdown whose node waits for a drain slot
    is released when its budget is nearly spent, as any undrained shutdown (the final phase
    off: it would delete the waiting pod itself, tests/integration/node/test_final_phase.py)."""
    env = limited
    await reports_boot(env, "node-1", BOOT)
    await env.bare_pod("busy", "node-2")
    await env.bare_pod("waits", "node-1")
    await env.maintenance("holds-the-slot", ["node-2"])
    await env.until(lambda: env.requested() == {"busy"})
    # node-1's agent, with its own credentials, as the guard runs it on PrepareForShutdown
    agent = env.backend.client(await env.backend.service_account(node="node-1"), max_workers=4)
    flow = ShutdownFlow(
        agent,
        "node-1",
        BOOT,
        ShutdownConfig(
            budget=6,
            safety_margin=1,
            api_unreachable_release_after=5,
            final_phase=FinalPhaseConfig(grace_period=0, critical_pods_grace_period=0),
        ),
    )
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    task = asyncio.create_task(flow.on_shutdown("reboot"))

    def shutdown_waits() -> bool:
        nms = env.view.list(NODEMAINTENANCES)
        return any(
            "Waiting for a drain slot (1 of 1 nodes draining: node-2)" in blocked_by(env, name)
            for name in (
                nm["metadata"]["name"] for nm in nms if nm["metadata"]["name"] != "holds-the-slot"
            )
        )

    await env.until(shutdown_waits)
    assert not task.done() and "waits" not in env.requested()
    async with asyncio.timeout(15):
        reason = await task
    assert reason == "the shutdown budget is nearly spent"
    assert 4.5 <= loop.time() - t0 < 6.5


HOLD = "test.nodeagent.io/hold"  # keeps an evicted pod Terminating until the test lets go


def imperative_message(env: Env) -> str:
    return " ".join(
        str(e.get("message"))
        for r in env.requests()
        for e in (r.get("status") or {}).get("interceptors") or []
    )


async def test_an_evicted_pod_is_not_said_refused_while_it_terminates(evicting: Env) -> None:
    """The budget refused web-1, then allowed it: from its eviction on, for its whole
    termination (a finalizer keeps it), neither its EvictionRequest nor the maintenance's
    Blocked By says the budget refuses or holds it: Blocked By names it terminating."""
    env = evicting
    await env.kube.create(PDBS, pdb("web", "web", 2), "default")
    await env.bare_pod("web-1", "node-1", labels={"app": "web"})
    await env.bare_pod("web-2", "node-2", labels={"app": "web"})
    await env.kube.patch(PODS, "web-1", {"metadata": {"finalizers": [HOLD]}}, "default")
    await env.maintenance("kernel", ["node-1"])
    await env.until(lambda: "PodDisruptionBudget web" in blocked_by(env, "kernel"), timeout=30)
    await env.kube.patch(PDBS, "web", {"spec": {"minAvailable": 1}}, "default")
    try:
        await env.until(
            lambda: bool(((env.pod("default", "web-1") or {}).get("metadata") or {}).get(
                "deletionTimestamp")),
            timeout=30,
        )  # fmt: skip
        await env.until(lambda: "Evicted the pod" in imperative_message(env), timeout=30)
        (request,) = env.requests()
        messages = [e.get("message", "") for e in request["status"]["interceptors"]]
        assert not [m for m in messages if "disruption budget" in m.lower()], messages
        # what holds the maintenance now: the pod's termination, not its budget (where its
        # containers have exited, as the sim's kubelet has them at once, it is gone for the
        # drain, which is done, finalizer or not)
        await env.until(
            lambda: (
                blocked_by(env, "kernel") == "pod default/web-1: terminating"
                or is_true(env, "kernel", "Drained")
            ),
            timeout=30,
        )
        assert "refused" not in blocked_by(env, "kernel")
        assert env.pod("default", "web-1") is not None  # still terminating
    finally:
        await env.kube.patch(PODS, "web-1", {"metadata": {"finalizers": []}}, "default")
    await env.until(lambda: is_true(env, "kernel", "Drained"), timeout=30)
