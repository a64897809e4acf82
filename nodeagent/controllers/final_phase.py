"""The shutdown's final phase, carried out by the leader (`nodeagent.model.final_phase`).

A node's agent asks for it in its shutdown maintenance (annotation `nodeagent.io/final-phase`)
and lets its node go at the deadline whatever happens here; node agents may read no pods, the
controllers can. From `deadline - gracePeriod` on, while the maintenance is in Drain and counts
(`nodeagent.model.shutdown_standing`: the boot the node's kubelet reports, within its bound,
the one of its node), the pods still on that node (and only that node's: the maintenance must
be a shutdown maintenance that selects its node alone) are deleted in the kubelet's order with
its grace caps; the next step comes when a pod of the node changes, its Node does, or the next
group's time comes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Protocol

from nodeagent.kube.controller import Controller, Result, SharedInformers
from nodeagent.kube.errors import Conflict, KubeError, NotFound
from nodeagent.kube.events import EventRecorder
from nodeagent.kube.informer import ListWatcher
from nodeagent.kube.protocols import Deleter
from nodeagent.kube.resources import NODEMAINTENANCES, NODES, PODS, Obj
from nodeagent.kube.store import key_of, pod_node_index
from nodeagent.kube.workqueue import WorkQueueMetrics
from nodeagent.model import final_phase as model
from nodeagent.model.bodies import metadata_of
from nodeagent.model.maintenance import Stage, effective_stage
from nodeagent.model.names import FINAL_PHASE_ANNOTATION
from nodeagent.model.shutdown import shutdown_node
from nodeagent.model.shutdown_standing import DEFAULT_MAX_SHUTDOWN, ignored

__all__ = ["FinalPhaseController"]

log = logging.getLogger(__name__)

_NODE_INDEX = "final-phase-node"


class FinalPhaseClient(ListWatcher, Deleter, Protocol):
    """The part of `KubeClient` the final phase needs."""


def _asks(nm: Obj) -> bool:
    return FINAL_PHASE_ANNOTATION in (metadata_of(nm).get("annotations") or {})


def _shutdown_node(nm: Obj) -> list[str]:
    """Index: the node of a shutdown maintenance (asking for a final phase or not: which one
    of a node counts is decided among them all)."""
    node = shutdown_node(nm)
    return [node] if node else []


class FinalPhaseController(Controller):
    """Keys: names of NodeMaintenances."""

    def __init__(
        self,
        client: FinalPhaseClient,
        informers: SharedInformers,
        events: EventRecorder,
        *,
        max_shutdown: float = DEFAULT_MAX_SHUTDOWN,
        queue_metrics: WorkQueueMetrics | None = None,
        clock: Callable[[], float] = time.time,
        workers: int = 2,
    ) -> None:
        self._maintenances = informers.informer(
            NODEMAINTENANCES, indexers={_NODE_INDEX: _shutdown_node}
        )
        self._pods = informers.informer(PODS, indexers={"node": pod_node_index})
        self._nodes = informers.informer(NODES)
        self._max_shutdown = max_shutdown
        super().__init__(
            "final-phase",
            informers=[self._maintenances, self._pods, self._nodes],
            workers=workers,
            metrics=queue_metrics,
        )
        self._client = client
        self._events = events
        self._clock = clock
        self._asked: dict[str, set[str]] = {}  # maintenance -> UIDs deleted by its phase
        self._said: dict[str, str] = {}  # maintenance -> the last group or problem reported
        self.enqueue_on(self._maintenances, lambda nm: [key_of(nm)] if _asks(nm) else [])
        self.enqueue_on(self._pods, self._maintenances_of_pod)
        self.enqueue_on(self._nodes, lambda node: self._of_node(metadata_of(node).get("name")))

    def _maintenances_of_pod(self, pod: Obj) -> Iterable[str]:
        return self._of_node((pod.get("spec") or {}).get("nodeName"))

    def _of_node(self, node: object) -> Iterable[str]:
        if not node:
            return []
        return self._maintenances.store.index_keys(_NODE_INDEX, str(node))

    def _ignored(self, node: str, key: str) -> str | None:
        """Why the shutdown maintenance `key` of `node` does not count, or None."""
        claims = [
            nm
            for k in self._maintenances.store.index_keys(_NODE_INDEX, node)
            if (nm := self._maintenances.store.get(k)) is not None
        ]
        node_obj = self._nodes.store.get(node)
        nodes = {node: node_obj} if node_obj is not None else {}
        now = datetime.fromtimestamp(self._clock(), UTC)
        return ignored(claims, nodes, now, self._max_shutdown).get(key)

    async def reconcile(self, key: str) -> Result | None:
        nm = self._maintenances.store.get(key)
        if nm is None or effective_stage(nm) is not Stage.DRAIN:
            self._asked.pop(key, None)
            self._said.pop(key, None)
            return None
        try:
            phase = model.requested(nm)
        except model.InvalidFinalPhase as e:
            await self._report(nm, "FinalPhaseInvalid", str(e))
            return None
        node = shutdown_node(nm)
        if phase is None:
            return None
        if node is None:
            message = (
                f"NodeMaintenance {key}: annotation {FINAL_PHASE_ANNOTATION} is honoured only on a "
                "node's shutdown maintenance (labelled for its node, selecting it alone)"
            )
            await self._report(nm, "FinalPhaseInvalid", message)
            return None
        why = self._ignored(node, key)
        if why is not None:
            await self._report(
                nm, "ShutdownIgnored", f"NodeMaintenance {key}: no final phase: {why}"
            )
            return None
        asked = self._asked.setdefault(key, set())
        now = self._clock()
        step = model.plan(
            self._pods.store.by_index("node", node), node, phase, now, frozenset(asked)
        )
        if step.deletions:
            message = (
                f"shutdown of node {node}: {phase.deadline - now:.0f}s left and the node is not "
                f"drained: deleting the {step.group} left, the kubelet's way "
                f"({len(step.deletions)} now)"
            )
            await self._report(nm, "FinalPhase", message, subject=step.group)
            # a hung delete must not hold the next group's turn: bounded by its time (or the
            # deadline), unanswered ones are asked again on the next step
            until = step.next_at if step.next_at is not None else phase.deadline
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(1.0, until - now)):
                    await self._delete(step, asked)
        if step.next_at is None:
            return None
        return Result(requeue_after=max(0.0, step.next_at - now))

    async def _delete(self, step: model.Step, asked: set[str]) -> None:
        async def one(d: model.Deletion) -> None:
            what = "critical pod" if d.critical else "pod"
            try:
                await self._client.delete(
                    PODS, d.name, d.namespace, grace_period_seconds=d.grace, uid=d.uid or None
                )
                log.info(
                    "final phase: deleted %s %s/%s (grace %ds)", what, d.namespace, d.name, d.grace
                )
            except (NotFound, Conflict):
                pass  # gone already, or replaced by a pod of the same name
            except KubeError as e:
                log.warning("final phase: cannot delete %s %s/%s: %s", what, d.namespace, d.name, e)
                return  # asked again on the next step
            asked.add(d.uid)

        async with asyncio.TaskGroup() as tg:
            for d in step.deletions:
                tg.create_task(one(d))

    async def _report(self, nm: Obj, reason: str, message: str, subject: str | None = None) -> None:
        """A warning, once per maintenance and group (or problem)."""
        key = key_of(nm)
        said = subject or message
        if self._said.get(key) == said:
            return
        self._said[key] = said
        log.warning("%s", message)
        await self._events.warning(nm, reason, message)
