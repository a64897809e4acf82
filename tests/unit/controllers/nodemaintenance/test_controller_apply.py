"""Applying a decision: what the NodeMaintenance controller writes for a decision taken on a cache
that has moved on since."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nodeagent.controllers.nodemaintenance.controller import NodeMaintenanceController
from nodeagent.controllers.nodemaintenance.reconcile import (
    Actions,
    EvictionRequestCreate,
    Validity,
)
from nodeagent.kube.controller import SharedInformers
from nodeagent.kube.errors import NotFound
from nodeagent.kube.resources import EVICTIONREQUESTS, NODEMAINTENANCES, PODS, Obj, Resource
from nodeagent.model.maintenance import FINALIZER


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

    await controller._apply({"metadata": {"name": "m"}}, stale)

    assert client.created == [("evictionrequests", "default", "pod-b")]


async def test_a_deleted_maintenance_keeps_its_finalizer_until_its_creates_are_seen() -> None:
    # Deleted right after its requests were created: the decision on deletion withdraws only
    # the requests in the cache, so removing the finalizer before the informer brings in the
    # new ones would leave them behind (seen once in CI).
    client = RecordingClient()
    controller, _ = controller_of(client)
    await controller._apply({"metadata": {"name": "m"}}, creating("pod-a"))

    await controller._apply(FINALIZED, DELETING)

    assert client.patched == []

    controller._request_seen(request("pod-a"))  # its informer event
    await controller._apply(FINALIZED, DELETING)

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
    await controller._apply({"metadata": {"name": "m"}}, creating("pod-a"))
    assert client.created == []
    controller._pod_gone(pod)  # its delete event: nothing is kept about it any more
    assert not controller._gone


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
    await controller._apply({"metadata": {"name": "m"}}, creating("pod-a"))
    assert controller._creates_unseen("m") is None

    await controller._apply(FINALIZED, DELETING)

    assert client.patched == [("nodemaintenances", "m", {"finalizers": []})]


async def test_a_maintenance_we_wrote_is_decided_on_once_the_informer_brings_the_write() -> None:
    client = RecordingClient()
    controller, informers = controller_of(client)
    nm = {"metadata": {"name": "m", "resourceVersion": "4"}, "spec": {}}
    informers.informer(NODEMAINTENANCES).store.upsert(nm)
    written = {**nm, "metadata": {"name": "m", "resourceVersion": "5"}}

    controller._wrote(written)
    assert controller._writes_unseen({"m"}) is not None  # the cache still has version 4
    controller._on_maintenance({**nm, "metadata": {"name": "m", "resourceVersion": "6"}})
    assert controller._writes_unseen({"m"}) is not None  # someone else's later write first
    controller._on_maintenance(written)
    assert controller._writes_unseen({"m"}) is None

    controller._wrote({**nm, "metadata": {"name": "m", "resourceVersion": "4"}})
    assert controller._writes_unseen({"m"}) is None  # the cache had it already
