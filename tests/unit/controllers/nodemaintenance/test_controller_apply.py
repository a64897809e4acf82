"""Applying a decision: what the NodeMaintenance controller writes for a decision taken on a cache
that has moved on since."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import itertools
from collections.abc import Callable, Mapping
from typing import Any

from nodeagent.controllers.nodemaintenance.controller import NodeMaintenanceController
from nodeagent.kube.controller import SharedInformers
from nodeagent.kube.errors import NotFound
from nodeagent.kube.resources import (
    EVICTIONREQUESTS,
    NODEMAINTENANCES,
    NODES,
    PODS,
    Obj,
    Resource,
)
from nodeagent.model.maintenance import Validity
from nodeagent.model.names import FINALIZER
from nodeagent.model.nodemaintenance.actions import Actions, EvictionRequestCreate
from nodeagent.model.nodemaintenance.decide import decide
from tests.unit.controllers.nodemaintenance.world import World


class RecordingClient:
    """Records writes; the informers are never run, so nothing is listed or watched."""

    def __init__(self) -> None:
        self.created: list[tuple[str, str | None, str]] = []
        self.patched: list[tuple[str, str, Any]] = []

    async def create(
        self, resource: Resource, body: Mapping[str, Any], namespace: str | None = None
    ) -> Obj:
        self.created.append((resource.plural, namespace, body["metadata"]["name"]))
        return dict(body)

    async def patch(
        self, resource: Resource, name: str, body: Mapping[str, Any], namespace: str | None = None
    ) -> Obj:
        metadata = {k: v for k, v in body["metadata"].items() if k != "resourceVersion"}
        self.patched.append((resource.plural, name, metadata))
        return {"metadata": {"name": name}}

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"unexpected call: {name}")


class Silent:
    async def record(self, obj: Mapping[str, Any], type: str, reason: str, message: str) -> None:
        pass


def request(name: str) -> Obj:
    return {
        "apiVersion": EVICTIONREQUESTS.api_version,
        "kind": EVICTIONREQUESTS.kind,
        "metadata": {"name": name, "namespace": "default", "uid": f"er-{name}"},
        "spec": {"target": {"pod": {"name": "web", "uid": name}}, "requesters": []},
    }


VALID = Validity(True, "Valid", "")
DELETING = Actions(stage=None, validity=VALID, remove_finalizer=True)
FINALIZED = {"metadata": {"name": "m", "finalizers": [FINALIZER]}}


def creating(*uids: str) -> Actions:
    """A decision that creates the requests of these pods."""
    return Actions(
        stage=None,
        validity=VALID,
        create_evictions=tuple(EvictionRequestCreate("default", request(u)) for u in uids),
    )


def controller_of(client: RecordingClient) -> tuple[NodeMaintenanceController, SharedInformers]:
    informers = SharedInformers(client)
    return NodeMaintenanceController(client, informers, Silent()), informers


async def test_a_create_decided_before_the_informer_saw_the_request_is_not_sent() -> None:
    # The race seen in ordered drains: decision 1 creates the request, the next decision is
    # taken before the watch brings it in, and the watch event arrives while that decision is
    # being applied. Sending its create anyway only gets AlreadyExists.
    client = RecordingClient()
    controller, informers = controller_of(client)
    stale = creating("pod-a", "pod-b")
    informers.informer(EVICTIONREQUESTS).store.upsert(request("pod-a"))  # the late event

    await controller._writes.apply({"metadata": {"name": "m"}}, stale)

    assert client.created == [("evictionrequests", "default", "pod-b")]


async def test_a_deleted_maintenance_keeps_its_finalizer_until_its_creates_are_seen() -> None:
    # Deleted right after its requests were created: the decision on deletion withdraws only
    # the requests in the cache, so removing the finalizer before the informer brings in the
    # new ones would leave them behind (seen once in CI).
    client = RecordingClient()
    controller, _ = controller_of(client)
    await controller._writes.apply({"metadata": {"name": "m"}}, creating("pod-a"))

    await controller._writes.apply(FINALIZED, DELETING)

    assert client.patched == []

    controller._request_seen(request("pod-a"))  # its informer event
    await controller._writes.apply(FINALIZED, DELETING)

    assert client.patched == [("nodemaintenances", "m", {"finalizers": []})]


async def test_a_request_gone_with_its_pod_is_not_made_again_for_it() -> None:
    # The garbage collector deleted the pod's request with the pod; the pod informer has not
    # shown the pod gone yet, so a decision still targets it. Asked, the server says it is gone.
    class GoneClient(RecordingClient):
        async def get(self, resource: Resource, name: str, namespace: str | None = None) -> Obj:
            raise NotFound(f"pods {name!r} not found", status=404, reason="NotFound")

    client = GoneClient()
    controller, informers = controller_of(client)
    owned = request("pod-a")
    owned["metadata"]["ownerReferences"] = [{"kind": "Pod", "uid": "pod-a"}]
    pod = {"metadata": {"name": "web", "namespace": "default", "uid": "pod-a"}}
    informers.informer(PODS).store.upsert(pod)  # the pod informer lags: still there
    controller._request_gone(owned)  # its delete event
    await controller._writes.apply({"metadata": {"name": "m"}}, creating("pod-a"))
    assert client.created == []
    controller._pod_gone(pod)  # its delete event: nothing is kept about it any more
    assert not controller._writes.collected.pending()


async def test_events_of_a_request_that_come_before_its_create_returns_end_the_expectation() -> (
    None
):
    # The pod went at once: the request's add and (garbage-collected) delete events came while
    # the create call was still returning. An expectation raised only after the call would
    # wait for an event that has come already, and hold a deleted maintenance's finalizer.
    class RacingClient(RecordingClient):
        async def create(
            self, resource: Resource, body: Mapping[str, Any], namespace: str | None = None
        ) -> Obj:
            controller._request_seen(dict(body))
            controller._request_gone(dict(body))
            return await super().create(resource, body, namespace)

    client = RacingClient()
    controller, _ = controller_of(client)
    await controller._writes.apply({"metadata": {"name": "m"}}, creating("pod-a"))
    assert controller._writes.created.longest_by("m") is None

    await controller._writes.apply(FINALIZED, DELETING)

    assert client.patched == [("nodemaintenances", "m", {"finalizers": []})]


async def test_a_maintenance_we_wrote_is_decided_on_once_the_informer_brings_the_write() -> None:
    class AnsweringClient(RecordingClient):
        async def patch_status(
            self, resource: Resource, name: str, body: Mapping[str, Any], namespace: None = None
        ) -> Obj:
            return at("5")

    controller, informers = controller_of(AnsweringClient())
    store = informers.informer(NODEMAINTENANCES).store
    written = controller._writes.written

    def at(rv: str) -> Obj:
        return {"metadata": {"name": "m", "resourceVersion": rv}, "spec": {}}

    def brought(rv: str) -> None:  # the informer's event
        store.upsert(at(rv))
        controller._on_maintenance(at(rv))

    brought("4")
    await written.patch("m", {"status": {}}, "4", status=True)
    assert written.longest({"m"}) is not None  # the cache still has version 4
    controller._on_maintenance(at("4"))  # a resync of it
    assert written.longest({"m"}) is not None
    brought("5")
    assert written.longest({"m"}) is None


class HangingCreates:
    """An API server whose maintenance writes answer (and come back through the informer, as
    their watch events would) and whose EvictionRequest creates hang, as behind an admission
    webhook that does not answer."""

    def __init__(self, controller: Callable[[], NodeMaintenanceController]) -> None:
        self.controller = controller
        self.creating: asyncio.Queue[str] = asyncio.Queue()  # requests whose create hangs
        self.statuses: list[str] = []
        self.rv = itertools.count(1000)

    async def create(
        self, resource: Resource, body: Mapping[str, Any], namespace: str | None = None
    ) -> Obj:
        if resource is EVICTIONREQUESTS:
            self.creating.put_nowait(body["metadata"]["name"])
            await asyncio.Event().wait()  # never answers
        return dict(body)

    async def patch(
        self, resource: Resource, name: str, body: Mapping[str, Any], namespace: str | None = None
    ) -> Obj:
        return await self._write(resource, name, body)

    async def patch_status(
        self, resource: Resource, name: str, body: Mapping[str, Any], namespace: str | None = None
    ) -> Obj:
        self.statuses.append(name)
        return await self._write(resource, name, body)

    async def _write(self, resource: Resource, name: str, body: Mapping[str, Any]) -> Obj:
        controller = self.controller()
        informer = {NODEMAINTENANCES: controller._maintenances, NODES: controller._nodes}[resource]
        obj = copy.deepcopy(informer.store.get(name))
        assert obj is not None
        for key, value in body.items():
            if key == "metadata":
                obj["metadata"].update({k: v for k, v in value.items() if v is not None})
            else:
                obj[key] = copy.deepcopy(value)
        obj["metadata"]["resourceVersion"] = str(next(self.rv))
        informer.store.upsert(obj)
        if resource is NODEMAINTENANCES:
            controller._on_maintenance(obj)  # its watch event
        return obj


async def test_a_joint_decision_whose_requests_hang_does_not_hold_back_the_other() -> None:
    # Two maintenances share node "two": one resolution, decided one at a time. The first
    # decision stores it and then creates its EvictionRequests, which hang; the other
    # maintenance is decided and asks for its own pod's eviction all the same (before, it
    # waited for the first one's creates, up to the request timeout each).
    w = World(nodes=("one", "two", "three"))
    for name in ("one", "two", "three"):
        w.pod(f"web-{name}", name)
    w.maintenance("a", ["one", "two"])
    w.maintenance("b", ["two", "three"])
    made: list[NodeMaintenanceController] = []
    client: Any = HangingCreates(lambda: made[0])
    controller = NodeMaintenanceController(client, SharedInformers(client), Silent())
    made.append(controller)
    for node in w.nodes.values():
        controller._nodes.store.upsert(node)
    for pod in w.pods.values():
        controller._pods.store.upsert(pod)
    for nm in w.nms.values():
        controller._maintenances.store.upsert(nm)
        controller._on_maintenance(nm)
    assert controller._scope("a")[0] == {"a", "b"}

    uid = {p["metadata"]["name"]: p["metadata"]["uid"] for p in w.pods.values()}
    tasks = [asyncio.create_task(controller.reconcile("a"))]
    try:
        async with asyncio.timeout(5):  # "a" stored the resolution and is creating requests
            creates = {await client.creating.get(), await client.creating.get()}
        assert creates == {uid["web-one"], uid["web-two"]}
        assert client.statuses == ["b", "a"]  # the neighbour's share first, then its own
        tasks.append(asyncio.create_task(controller.reconcile("b")))
        async with asyncio.timeout(5):  # a bound on failure: "b" waited on the hung creates
            assert await client.creating.get() == uid["web-three"]
        assert not any(t.done() for t in tasks)  # every create still hangs
    finally:
        for t in tasks:
            t.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await t


def synced(w: World, informers: SharedInformers) -> None:
    """The informers' stores hold the world's nodes and pods."""
    for node in w.nodes.values():
        informers.informer(NODES).store.upsert(node)
    for pod in w.pods.values():
        informers.informer(PODS).store.upsert(pod)


def stored(
    controller: NodeMaintenanceController, informers: SharedInformers, nm: Obj, rv: str
) -> Obj:
    """Decide on `nm` and bring its new status back through the informer, as a watch would."""
    inputs = controller.inputs(str(nm["metadata"]["name"]))
    assert inputs is not None
    written = {**copy.deepcopy(nm), "status": decide(inputs).status}
    written["metadata"]["resourceVersion"] = rv
    informers.informer(NODEMAINTENANCES).store.upsert(written)
    controller._on_maintenance(written)
    return written


async def test_a_deleted_maintenance_lets_go_of_what_decisions_derived_for_its_nodes() -> None:
    # The Recall keeps each node's pods as the last decision read them: once no maintenance
    # has the node, nothing would replace them, and the objects of pods long gone would stay.
    client = RecordingClient()
    controller, informers = controller_of(client)
    w = World(nodes=("one", "two"))
    nm = w.maintenance("m", ["one"])
    w.pod("web", "one")
    w.pod("db", "two")
    synced(w, informers)
    informers.informer(NODEMAINTENANCES).store.upsert(nm)
    controller._on_maintenance(nm)
    inputs = controller.inputs("m")
    assert inputs is not None and [p["metadata"]["name"] for p in inputs.pods["one"]] == ["web"]
    decide(inputs)
    assert len(controller._recall) == 2  # node one and maintenance m

    controller._on_maintenance_delete(nm)

    assert len(controller._recall) == 0


async def test_a_deleted_node_is_let_go_of_once_the_maintenance_no_longer_reports_it() -> None:
    # Deleted while its maintenance's status still names it: the decision its deletion brings
    # reads it once more (its pods are not collected yet), and writes a status without it.
    client = RecordingClient()
    controller, informers = controller_of(client)
    w = World(nodes=("one", "two"))
    nm = w.maintenance("m", ["one", "two"])
    w.pod("web", "one")
    w.pod("db", "two")
    synced(w, informers)
    informers.informer(NODEMAINTENANCES).store.upsert(nm)
    controller._on_maintenance(nm)
    nm = stored(controller, informers, nm, "900")
    two = informers.informer(NODES).store.delete("two")
    assert two is not None
    controller._on_node_delete(two)
    nm = stored(controller, informers, nm, "901")

    assert "two" not in controller._members.by_node
    assert len(controller._recall) == 2  # node one and maintenance m
