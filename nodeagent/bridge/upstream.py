"""The eviction bridge's requests on the upstream EvictionRequest API, where the server serves
it: informers of the requests and Evictions, the pod's Eviction read for the decision
(:func:`nodeagent.model.bridge.upstream.bridge_view`), and the bridge's own request made or
wanting the eviction again."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Protocol

from nodeagent.kube.controller import SharedInformers
from nodeagent.kube.errors import AlreadyExists
from nodeagent.kube.protocols import Creator, Patcher
from nodeagent.kube.resources import EVICTIONS, UPSTREAM_EVICTIONREQUESTS, Obj
from nodeagent.model.bodies import mapping, metadata_of
from nodeagent.model.bridge.upstream import bridge_view, request_name
from nodeagent.model.bridge.writes import EnsureUpstreamRequest
from nodeagent.model.interceptors.requests import EvictionRequestView
from nodeagent.model.lifecycle.eviction import target_index
from nodeagent.model.lifecycle.ourresponders import ResponderNames

__all__ = ["UpstreamRequests"]


class UpstreamClient(Creator, Patcher, Protocol):
    """The writes of the bridge's upstream requests."""


class UpstreamRequests:
    def __init__(self, informers: SharedInformers, names: ResponderNames) -> None:
        self.names = names
        self.requests = informers.informer(
            UPSTREAM_EVICTIONREQUESTS, indexers={"target": target_index}
        )
        self.evictions = informers.informer(EVICTIONS, indexers={"target": target_index})

    async def wait_synced(self) -> None:
        await self.requests.wait_synced()
        await self.evictions.wait_synced()

    def view(self, namespace: str, pod_uid: str) -> EvictionRequestView | None:
        ours = self.requests.store.get(f"{namespace}/{request_name(pod_uid)}")
        evictions = self.evictions.store.by_index("target", f"{namespace}/{pod_uid}")
        return bridge_view(ours, evictions, self.names)

    def on_ours_deleted(self, then: Callable[[EvictionRequestView], None]) -> None:
        """Call `then` with the view of a request of the bridge's as it goes."""

        def deleted(request: Obj) -> None:
            if metadata_of(request).get("name") == request_name(_target_uid(request)):
                view = bridge_view(request, (), self.names)
                if view is not None:
                    then(view)

        self.requests.add_handler(on_delete=deleted)

    @staticmethod
    async def ensure(client: UpstreamClient, write: EnsureUpstreamRequest) -> None:
        try:
            await client.create(UPSTREAM_EVICTIONREQUESTS, write.body, write.namespace)
        except AlreadyExists:
            # made already (another replica, an earlier attempt): wanting the eviction again
            # after a withdrawal, or as it is
            with contextlib.suppress(AlreadyExists):
                await client.patch(
                    UPSTREAM_EVICTIONREQUESTS,
                    write.name,
                    {"spec": {"intent": "Eviction"}},
                    write.namespace,
                )


def _target_uid(request: Obj) -> str:
    return str(mapping(mapping(mapping(request, "spec"), "target"), "pod").get("uid") or "")
