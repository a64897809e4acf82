"""The EvictionRequest controller decides on a request again only once its cache shows the
controller's own last write: a plan made from the version that write replaced is refused (409)."""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable, Mapping
from typing import Any

from nodeagent.controllers.evictionrequest.controller import EvictionRequestController
from nodeagent.kube.controller import SharedInformers
from nodeagent.kube.errors import Conflict
from nodeagent.kube.resources import Obj, Resource
from tests.unit.controllers.evictionrequest.test_evictionrequest_reconcile import (
    SETTINGS,
    make_pod,
    make_request,
)


class PreconditionServer:
    """Applies the controller's writes to its own copy of the request, refusing (409) one made
    onto another version than the server's, as kube-apiserver does; the informer's cache is
    left alone: the test says when its watch event comes."""

    def __init__(self, request: Obj) -> None:
        self.request = copy.deepcopy(request)
        self.versions = itertools.count(100)
        self.writes: list[tuple[str, int]] = []  # (the version written onto, HTTP status)

    async def patch(
        self, resource: Resource, name: str, body: Mapping[str, Any], namespace: str | None = None
    ) -> Obj:
        return self._write(body, lambda: self.request["metadata"].update(body["metadata"]))

    async def patch_status(
        self, resource: Resource, name: str, body: Mapping[str, Any], namespace: str | None = None
    ) -> Obj:
        return self._write(body, lambda: self.request.update(status=copy.deepcopy(body["status"])))

    def _write(self, body: Mapping[str, Any], change: Callable[[], None]) -> Obj:
        onto = body["metadata"]["resourceVersion"]
        if onto != self.request["metadata"]["resourceVersion"]:
            self.writes.append((onto, 409))
            raise Conflict("the object has been modified", status=409, reason="Conflict")
        self.writes.append((onto, 200))
        change()
        self.request["metadata"]["resourceVersion"] = str(next(self.versions))
        return copy.deepcopy(self.request)

    async def evict(self, namespace: str, name: str, *, uid: str | None = None) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"unexpected call: {name}")


async def test_a_request_is_decided_again_only_once_the_cache_has_our_write() -> None:
    request = make_request()
    server = PreconditionServer(request)
    client: Any = server
    controller = EvictionRequestController(client, SharedInformers(client), SETTINGS)
    controller.pods.store.upsert(make_pod())
    controller.requests.store.upsert(request)
    key = "ns/u1"

    await controller.reconcile(key)  # its labels and first turn written, the pod evicted
    written = list(server.writes)
    assert written and all(status == 200 for _, status in written)

    # The pod's events come before the request's: decided on the version our write replaced,
    # the next write would be refused. It waits for the watch event instead.
    await controller.reconcile(key)
    assert server.writes == written

    controller.requests.store.upsert(copy.deepcopy(server.request))  # the watch event
    await controller.reconcile(key)
    assert all(status == 200 for _, status in server.writes)
