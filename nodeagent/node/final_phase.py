"""The shutdown's final phase, applied: list the node's pods, delete what
`nodeagent.model.final_phase.plan` says, and decide again when a pod of the node changes (a
watch) or the next group's time comes. Runs inside the shutdown flow, which cancels it when the
lock goes: it never extends the deadline, and every request has the flow's deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from nodeagent.kube.errors import Conflict, Gone, KubeError, NotFound
from nodeagent.kube.informer import ListWatcher
from nodeagent.kube.protocols import Deleter
from nodeagent.kube.resources import PODS
from nodeagent.model import final_phase as model

__all__ = ["FinalPhaseClient", "run_final_phase"]

Request = Callable[[str, Awaitable[Any]], Awaitable[Any]]

log = logging.getLogger(__name__)


class FinalPhaseClient(ListWatcher, Deleter, Protocol):
    """The part of `KubeClient` the final phase needs."""


async def run_final_phase(
    client: FinalPhaseClient,
    node: str,
    phase: model.FinalPhase,
    clock: Callable[[], float],
    request: Request,
) -> None:
    """Until the phase is done; `request(what, call)` bounds each call (the flow's deadline)."""
    step = model.plan((), node, phase, clock())
    if step.next_at is None:
        return
    await asyncio.sleep(max(0.0, step.next_at - clock()))
    log.warning(
        "shutdown of %s: %.0fs left and the node is not drained: deleting the pods left, the "
        "kubelet's way (shutdown.finalPhase)",
        node,
        phase.deadline - clock(),
    )
    asked: set[str] = set()
    field = f"spec.nodeName={node}"
    while True:
        listed = await request("list the node's pods", client.list(PODS, field_selector=field))
        pods: dict[str, Any] = {
            f"{p['metadata'].get('namespace')}/{p['metadata']['name']}": p for p in listed["items"]
        }
        rv = [listed["metadata"]["resourceVersion"]]
        while True:
            step = model.plan(pods.values(), node, phase, clock(), frozenset(asked))
            await _delete(client, step, asked, request)
            if step.next_at is None:
                log.info("shutdown of %s: the final phase is done", node)
                return
            try:
                async with asyncio.timeout(max(0.0, step.next_at - clock())):
                    await _next_change(client, field, rv, pods)
            except TimeoutError:
                continue  # the next group's time
            except Gone:
                break  # relist


async def _next_change(
    client: FinalPhaseClient, field: str, rv: list[str], pods: dict[str, Any]
) -> None:
    """Apply watch events to `pods` from `rv[0]` (kept current) until a pod changes."""
    async with contextlib.aclosing(
        client.watch(PODS, resource_version=rv[0], field_selector=field, timeout_seconds=300)
    ) as events:
        async for ev in events:
            obj = ev["object"]
            rv[0] = obj["metadata"].get("resourceVersion") or rv[0]
            if ev["type"] == "BOOKMARK":
                continue
            key = f"{obj['metadata'].get('namespace')}/{obj['metadata']['name']}"
            if ev["type"] == "DELETED":
                pods.pop(key, None)
            else:
                pods[key] = obj
            return


async def _delete(
    client: FinalPhaseClient, step: model.Step, asked: set[str], request: Request
) -> None:
    async def one(d: model.Deletion) -> None:
        what = "critical pod" if d.critical else "pod"
        try:
            await request(
                f"delete {what} {d.namespace}/{d.name}",
                client.delete(
                    PODS, d.name, d.namespace, grace_period_seconds=d.grace, uid=d.uid or None
                ),
            )
            log.info(
                "final phase: deleted %s %s/%s (grace %ds)", what, d.namespace, d.name, d.grace
            )
        except (NotFound, Conflict):
            pass  # gone already, or replaced by a pod of the same name
        except KubeError as e:
            log.warning("final phase: cannot delete %s %s/%s: %s", what, d.namespace, d.name, e)
        asked.add(d.uid)

    if step.deletions:
        async with asyncio.TaskGroup() as tg:
            for d in step.deletions:
                tg.create_task(one(d))
