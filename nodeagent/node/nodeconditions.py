"""The KEP-5683 lifecycle conditions on the agent's own Node, and the Events of a maintenance on
it: a controller on the node agent's shared informers (its Node, the NodeMaintenances) that
follows the shutdown guard too. The decision is `nodeagent.model.nodeconditions`; this applies
it: a strategic merge patch of the Node's status (the conditions merge by type, the kubelet's
stay) only when a condition changes, then the Events. An idle node costs its watches only.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from nodeagent.kube.controller import Controller, SharedInformers
from nodeagent.kube.errors import NotFound
from nodeagent.kube.events import EventClient, EventSink, node_object
from nodeagent.kube.informer import ListWatcher
from nodeagent.kube.protocols import StrategicStatusPatcher
from nodeagent.kube.resources import NODEMAINTENANCES, NODES, Obj
from nodeagent.model.bodies import uid_of
from nodeagent.model.nodeconditions import (
    Shutdown,
    decide,
    node_conditions,
    overlay,
    status_patch,
)
from nodeagent.model.times import Clock, format_time, utcnow

__all__ = ["NodeConditions", "NodeConditionsClient", "ShutdownState"]

log = logging.getLogger(__name__)

_KEY = "node"


class NodeConditionsClient(ListWatcher, EventClient, StrategicStatusPatcher, Protocol):
    """The part of `KubeClient` the node conditions need."""


class ShutdownState(Protocol):
    """What the conditions read of the shutdown guard (`nodeagent.logind.ShutdownGuard`)."""

    @property
    def connected(self) -> bool: ...

    @property
    def preparing_for_shutdown(self) -> bool: ...

    @property
    def shutdown_kind(self) -> str | None: ...

    async def wait_until(self, predicate: Callable[[], bool]) -> None: ...


class NodeConditions(Controller):
    """One key: the agent's Node."""

    def __init__(
        self,
        client: NodeConditionsClient,
        informers: SharedInformers,
        events: EventSink,
        *,
        node_name: str,
        shutdown: ShutdownState | None = None,
        now: Clock = utcnow,
    ) -> None:
        """`shutdown`: the guard, None when the agent runs none (then the
        GracefulNodeShutdownInProgress condition is left alone). `informers` are the node
        agent's, run by the caller."""
        self._client = client
        self._events = events
        self._node_name = node_name
        self._shutdown = shutdown
        self._now = now
        self._nodes = informers.informer(NODES, field_selector=f"metadata.name={node_name}")
        self._maintenances = informers.informer(NODEMAINTENANCES)
        super().__init__("node-conditions", workers=1)
        self.enqueue_on(self._nodes, lambda _: [_KEY])
        self.enqueue_on(self._maintenances, lambda _: [_KEY])
        # our last write as the API server answered it, until the cache shows it: a reconcile
        # in between must not take the older Node for the truth (and write, and record, twice)
        self._written: list[Mapping[str, Any]] = []

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tg:
            tg.create_task(super().run(), name=f"{self.name} workers")
            if self._shutdown is not None:
                tg.create_task(self._follow_shutdown(self._shutdown), name=f"{self.name} guard")

    def _shutdown_view(self) -> Shutdown | None:
        guard = self._shutdown
        if guard is None or not guard.connected:
            return None  # not heard from logind (yet): leave the condition as it is
        return Shutdown(guard.preparing_for_shutdown, guard.shutdown_kind)

    async def _follow_shutdown(self, guard: ShutdownState) -> None:
        seen = [self._shutdown_view()]

        def changed() -> bool:
            return self._shutdown_view() != seen[0]

        while True:
            await guard.wait_until(changed)
            seen[0] = self._shutdown_view()
            self.enqueue(_KEY)

    def _node(self) -> Obj | None:
        node = self._nodes.store.get(self._node_name)
        if node is None or not self._written:
            return node
        if _shows(node, self._written):
            self._written = []
            return node
        return overlay(node, self._written)

    async def reconcile(self, key: str) -> None:
        node = self._node()
        if node is None:
            return
        decision = decide(
            self._maintenances.store.list(), self._node_name, node, self._shutdown_view()
        )
        if decision.changed:
            patch = status_patch(decision.changed, node, format_time(self._now()))
            try:
                await self._client.patch_status(
                    NODES, self._node_name, patch, patch_type="strategic"
                )
            except NotFound:
                return
            self._written = [*_others(self._written, patch), *patch["status"]["conditions"]]
            log.info(
                "node %s: %s",
                self._node_name,
                ", ".join(f"{c.type}={c.status} ({c.reason})" for c in decision.changed),
            )
        involved = node_object(self._node_name, uid_of(node))
        for event in decision.events:
            await self._events.record(involved, event.type, event.reason, event.message)


def _others(written: Sequence[Mapping[str, Any]], patch: Mapping[str, Any]) -> list[Obj]:
    """`written` without the types `patch` writes again."""
    again = {c["type"] for c in patch["status"]["conditions"]}
    return [dict(c) for c in written if c.get("type") not in again]


def _shows(node: Mapping[str, Any], written: Sequence[Mapping[str, Any]]) -> bool:
    have = node_conditions(node)
    fields = ("status", "reason", "message")
    return all(
        (cond := have.get(str(c.get("type")))) is not None
        and all(cond.get(f) == c.get(f) for f in fields)
        for c in written
    )
