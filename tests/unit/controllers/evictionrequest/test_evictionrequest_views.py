"""The EvictionRequest controller and the DaemonSet interceptor read a request once per object
their informer's cache holds, and forget it when the informer reports the request deleted."""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections.abc import AsyncIterator
from typing import Any

import pytest

from nodeagent.controllers.evictionrequest.controller import EvictionRequestController
from nodeagent.controllers.interceptors import DaemonSetInterceptor
from nodeagent.kube.controller import SharedInformers
from nodeagent.kube.resources import EVICTIONREQUESTS, Obj, Resource
from nodeagent.model.interceptors.requests import CANCELED, EvictionRequestView
from tests.unit.controllers.evictionrequest.test_evictionrequest_reconcile import (
    SETTINGS,
    make_request,
)
from tests.until import until


class RequestSource:
    """Lists the requests given, then watches what `send` sends; any other call fails."""

    def __init__(self, *requests: Obj) -> None:
        self.requests = requests
        self.events: asyncio.Queue[Obj] = asyncio.Queue()

    async def list(self, resource: Resource, namespace: str | None = None, **_: Any) -> Obj:
        assert resource == EVICTIONREQUESTS
        return {"metadata": {"resourceVersion": "20"}, "items": copy.deepcopy(self.requests)}

    async def watch(
        self, resource: Resource, namespace: str | None = None, **_: Any
    ) -> AsyncIterator[Obj]:
        while True:
            yield await self.events.get()

    def send(self, kind: str, obj: Obj) -> None:
        self.events.put_nowait({"type": kind, "object": copy.deepcopy(obj)})

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"unexpected call: {name}")


async def test_a_request_is_read_once_per_cached_object_and_forgotten_with_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reads: list[Obj] = []
    read = EvictionRequestView.from_obj

    def counted(obj: Obj) -> EvictionRequestView:
        reads.append(obj)
        return read(obj)

    monkeypatch.setattr(EvictionRequestView, "from_obj", counted)
    # canceled: both look at it and leave it alone, without a call to the API server
    canceled = {"conditions": [{"type": CANCELED, "status": "True"}], "observedGeneration": 1}
    request = make_request(status=canceled)
    source = RequestSource(request)
    client: Any = source
    informers = SharedInformers(client)
    controller = EvictionRequestController(client, informers, SETTINGS)
    interceptor = DaemonSetInterceptor(client, informers, SETTINGS)
    informer = controller.requests
    watching = asyncio.create_task(informer.run())
    try:
        await informer.wait_synced()
        cached = informer.store.get("ns/u1")

        async def reconcile() -> None:
            await controller.reconcile("ns/u1")
            await interceptor.reconcile("request/ns/u1")

        await reconcile()
        assert len(reads) == 3  # each once, and once in plan_request (no memo of its own)
        reads.clear()
        await reconcile()
        assert reads == [cached]  # plan_request's only

        changed = copy.deepcopy(request)
        changed["metadata"]["resourceVersion"] = "21"
        source.send("MODIFIED", changed)
        await until(lambda: informer.store.get("ns/u1") is not cached)
        reads.clear()
        await reconcile()
        assert len(reads) == 3 and cached not in reads  # the new object, read anew

        assert len(controller._view) == len(interceptor.sources[0].view) == 1
        source.send("DELETED", changed)
        await until(lambda: informer.store.get("ns/u1") is None)
        assert len(controller._view) == len(interceptor.sources[0].view) == 0
    finally:
        watching.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watching
