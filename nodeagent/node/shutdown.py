"""The node side of a shutdown: turn it into a NodeMaintenance and wait until the node is drained.

The logind guard calls `on_shutdown(kind)` when logind announces a shutdown and releases its
delay lock when that returns; `on_cancel()` when the shutdown is called off. The decision of when
to let go is `nodeagent.model.shutdown.release_reason`: drained, budget nearly spent, or the API
server unreachable for too long. Nothing here can hold a shutdown past the budget.

Every bound is measured from the shutdown's start (recorded on /run, so an agent restarted
during the shutdown keeps it) and holds whatever the API server does: the decision loop never
waits on a request. "Unreachable" means no answer since `apiUnreachableReleaseAfter` seconds: a
request that hangs counts like one refused. While the maintenance drains, a watch may be quiet
for minutes, so a cheap GET of the maintenance checks every few seconds that the API server
still answers; it runs only during a shutdown.

A shutdown of a node whose coordinated reboot request of this boot is drained (the agent's own
Reboot through logind, `nodeagent.node.coordinated_reboot`) lets go at once: the node is drained
already, and no shutdown maintenance is made. Otherwise the shutdown drains as always, and the
request stays (it is completed after the boot).

Each `on_shutdown` gets its own `_Shutdown`, which holds what that shutdown tracks (release
state, last answer). Finding and completing the agent's shutdown maintenances
(`shutdown_maintenances`, `complete_maintenance`) is shared with `node.reboot`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

from nodeagent.config import ShutdownConfig
from nodeagent.kube.client import KubeClient
from nodeagent.kube.errors import AlreadyExists, KubeError, NotFound
from nodeagent.kube.informer import watch_until
from nodeagent.kube.protocols import Lister, Patcher
from nodeagent.kube.resources import NODEMAINTENANCES, Obj, Resource
from nodeagent.model import final_phase as final
from nodeagent.model import notifications, reboot_request
from nodeagent.model import shutdown as model
from nodeagent.model.backoff import JitteredBackoff
from nodeagent.model.bodies import name_of, spec_stage
from nodeagent.model.names import FINAL_PHASE_ANNOTATION
from nodeagent.model.times import utcnow
from nodeagent.node.shutdown_record import clear, shutdown_started

T = TypeVar("T")

log = logging.getLogger(__name__)


class ShutdownFlow:
    def __init__(
        self,
        client: KubeClient,
        node_name: str | None,
        boot_id: str,
        config: ShutdownConfig,
        delay_max: Callable[[], float] | None = None,
        clock: Callable[[], float] = time.monotonic,
        record_file: Path | None = None,
        notify: notifications.Notify = notifications.no_notifications,
        wall_clock: Callable[[], datetime] = utcnow,
    ) -> None:
        """`node_name`: None until `set_node_name` (the agent may have to ask the API server,
        and a shutdown must not wait for that); `delay_max`: what logind actually grants
        (InhibitDelayMaxUSec, in seconds), the configured budget when not known;
        `record_file`: where the shutdown's start is kept for a restarted agent; `notify`:
        told when the drain starts and when the lock may go (it must not wait); `clock` times
        the shutdown, `wall_clock` dates what the controllers read (the final phase's
        deadline)."""
        self.client = client
        self.node = node_name or ""
        self._node_known = asyncio.Event()
        if node_name:
            self._node_known.set()
        self.boot_id = boot_id
        self.config = config
        self.delay_max = delay_max or (lambda: config.budget)
        self.clock = clock
        self.wall_clock = wall_clock
        self.record_file = record_file
        self.backoff = JitteredBackoff(base=0.2, cap=5.0)
        self.maintenance: str | None = None  # the name of this boot's shutdown maintenance
        self.notify = notify
        # maintenances this agent asked to create, and the one it announced: a create whose
        # answer was lost is adopted on the retry and still announced, while an agent
        # restarted during a shutdown does not announce its predecessor's drain again
        self._created: set[str] = set()
        self._announced: str | None = None

    def set_node_name(self, name: str) -> None:
        self.node = name
        self._node_known.set()

    async def node_known(self) -> None:
        """Until the node's name is known."""
        await self._node_known.wait()

    def creating(self, name: str) -> None:
        """This agent asks for maintenance `name` to be created."""
        self._created.add(name)

    def first_announcement(self, name: str) -> bool:
        """Whether the drain of maintenance `name` is to be announced now: this agent asked
        for it, and it was not announced yet."""
        if name not in self._created or self._announced == name:
            return False
        self._announced = name
        return True

    # --- shutdown ----------------------------------------------------------------------------

    async def on_shutdown(self, kind: str) -> str:
        """Create or adopt this boot's maintenance and wait until the lock may go; returns why."""
        now = self.clock()
        started = shutdown_started(self.record_file, self.boot_id, now)
        budget = min(self.config.budget, self.delay_max())
        usable = model.usable_budget(budget, self.config.safety_margin)
        if budget < self.config.budget:
            log.warning(
                "logind grants %.0fs for a shutdown (shutdown.budget %.0fs, safetyMargin %.0fs):"
                " nodeagent drains for %.1fs and then lets go; if that is too short, raise "
                "InhibitDelayMaxSec (nodeagent's drop-in %s may be overridden by one that sorts "
                "later in /etc/systemd/logind.conf.d or /usr/lib/systemd/logind.conf.d)",
                budget,
                self.config.budget,
                self.config.safety_margin,
                usable,
                self.config.logind_dropin,
            )
        shutdown = _Shutdown(self, kind, started + usable, usable, now)
        log.info(
            "shutdown (%s) of %s: draining through a NodeMaintenance, at most %.0fs",
            kind,
            self.node,
            budget,
        )
        worker = asyncio.create_task(shutdown.drive())
        try:
            reason = await shutdown.released()
            log.info("releasing the shutdown lock of %s: %s", self.node, reason)
            self.notify(notifications.LOCK_RELEASED, self.node, self.maintenance or "", reason)
            return reason
        finally:
            # the lock goes now, whatever the controllers' final phase still does
            worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await worker

    # --- cancel ------------------------------------------------------------------------------

    async def on_cancel(self) -> None:
        """The shutdown was called off: complete this boot's live shutdown maintenance."""
        clear(self.record_file)
        deadline = self.clock() + max(self.config.api_unreachable_release_after, 30.0)
        attempt = 0
        while True:
            try:
                await self._complete_live()
                return
            except KubeError as e:
                if self.clock() >= deadline:
                    log.error(
                        "could not complete the shutdown maintenance of %s after a "
                        "cancelled shutdown: %s; complete it by hand",
                        self.node,
                        e,
                    )
                    return
                log.warning("completing the shutdown maintenance failed, retrying: %s", e)
            attempt += 1
            await asyncio.sleep(self.backoff.delay(attempt))

    async def _complete_live(self) -> None:
        for nm in await shutdown_maintenances(self.client, self.node, self.boot_id):
            with contextlib.suppress(NotFound):
                if await complete_maintenance(self.client, nm):
                    log.info("shutdown cancelled: completed maintenance %s", name_of(nm))


async def shutdown_maintenances(client: Lister, node: str, boot_id: str | None = None) -> list[Obj]:
    """The agent's shutdown maintenances of `node` (of one boot when given): no other is ever
    touched."""
    listed = await client.list(
        NODEMAINTENANCES, label_selector=model.shutdown_selector(node, boot_id)
    )
    return [nm for nm in listed["items"] if model.is_ours(nm, node)]


async def complete_maintenance(client: Patcher, nm: Obj) -> bool:
    """Move a shutdown maintenance to stage Complete (the NodeMaintenance controller then lets
    the node and the requesters go); False when it already was. NotFound when it is gone."""
    if spec_stage(nm) == "Complete":
        return False
    await client.patch(NODEMAINTENANCES, name_of(nm), {"spec": {"stage": "Complete"}})
    return True


class _Shutdown:
    """One shutdown, from `PrepareForShutdown` until the lock goes: its release state, the
    event that wakes the decision when that state changes, and when the API server last
    answered. `drive` creates or adopts the maintenance and waits for the drain."""

    def __init__(
        self, flow: ShutdownFlow, kind: str, deadline: float, usable: float, now: float
    ) -> None:
        self.flow = flow
        self.kind = kind
        self.usable = usable
        self.bound = flow.config.api_unreachable_release_after
        self.state = model.ReleaseState(deadline=deadline, unreachable_bound=self.bound)
        self.changed = asyncio.Event()
        self.last_answer = now

    async def released(self) -> str:
        """Until the lock may go (`model.release_reason`); returns why."""
        clock = self.flow.clock
        while True:
            reason = model.release_reason(self.state, clock())
            if reason is not None:
                return reason
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(model.next_decision(self.state, clock())):
                    await self.changed.wait()

    async def drive(self) -> None:
        final_phase = self._final_phase()

        async def drain() -> None:
            name = await self._ensure_maintenance(final_phase)
            if name is None:  # drained for its reboot request: nothing to wait for
                self.state.drained = True
                self.changed.set()
                return
            async with asyncio.TaskGroup() as tg:
                probe = tg.create_task(self._probe(name))
                await self._wait_drained(name)
                probe.cancel()

        await self._retrying("shutdown", drain)

    async def _retrying(self, what: str, fn: Callable[[], Awaitable[None]]) -> None:
        """Run `fn` until it returns, once the node is known; a failed API request counts
        towards "unreachable" and is tried again after a pause."""
        await self.flow.node_known()
        attempt = 0
        while True:
            try:
                await fn()
                return
            except* (KubeError, TimeoutError) as group:
                e = group.exceptions[0]
                log.warning("%s of %s: API request failed: %s", what, self.flow.node, e)
                self._unreachable()
            # pacing between retries against a failing API server
            attempt += 1
            await asyncio.sleep(self.flow.backoff.delay(attempt))

    def _final_phase(self) -> str:
        """The annotation that asks the controllers for the final phase (they delete the pods
        left, the kubelet's way, when the budget is nearly spent: only they may read pods).
        Written with no length when the phase is off: it still says when the lock goes, which
        bounds how long the controllers count the maintenance."""
        fp = self.flow.config.final_phase
        phase = final.FinalPhase.fitted(
            self.state.deadline, self.usable, fp.grace_period, fp.critical_pods_grace_period
        )
        if phase.grace_period <= 0:
            phase = final.FinalPhase(phase.deadline, 0.0, 0.0)
        left = self.state.deadline - self.flow.clock()
        return final.annotation(self.flow.wall_clock() + timedelta(seconds=left), phase)

    async def request(self, what: str, call: Awaitable[T]) -> T:
        """One API call with a deadline: `apiUnreachableReleaseAfter` after the last answer, so
        a request that hangs ends exactly when the API server counts as unreachable."""
        wait = max(0.05, self.last_answer + self.bound - self.flow.clock())
        try:
            async with asyncio.timeout(wait):
                result = await call
        except TimeoutError:
            raise TimeoutError(f"{what}: no answer within {wait:.1f}s") from None
        self.last_answer = self.flow.clock()
        if self.state.unreachable_since is not None:
            self.state.unreachable_since = None
            self.changed.set()
        return result

    def _unreachable(self) -> None:
        if self.state.unreachable_since is None:
            # measured from the last answer: a hung request costs no extra time
            self.state.unreachable_since = self.last_answer
            self.changed.set()

    async def _probe(self, name: str) -> None:
        """While waiting on a possibly quiet watch, check the API server still answers."""
        interval = max(0.5, min(5.0, self.bound / 4))
        client = self.flow.client
        while True:
            await asyncio.sleep(interval)
            try:
                await self.request("get the maintenance", client.get(NODEMAINTENANCES, name))
            except (KubeError, TimeoutError) as e:
                log.warning("shutdown of %s: the API server did not answer: %s", self.flow.node, e)
                self._unreachable()

    async def _ensure_maintenance(self, final_phase: str) -> str | None:
        """`final_phase`: the annotation that asks the controllers for the final phase. None
        when this boot's reboot request (a coordinated reboot) is drained: the node is ready
        to go, and no shutdown maintenance is made."""
        flow, client = self.flow, self.flow.client
        # both triggers: this boot's shutdown maintenance and its reboot request
        selector = model.shutdown_selector(flow.node, flow.boot_id)
        conflicts = 0
        first = True
        while True:
            existing = await self.request(
                "list this boot's maintenances",
                client.list(NODEMAINTENANCES, label_selector=selector),
            )
            if first and (drained := _drained_request(existing["items"], flow)) is not None:
                log.info(
                    "shutdown (%s) of %s: its reboot request %s is drained: letting the "
                    "shutdown go at once, no shutdown maintenance",
                    self.kind,
                    flow.node,
                    drained,
                )
                flow.maintenance = drained
                return None
            first = False
            step, name = model.next_step(existing["items"], flow.node, flow.boot_id)
            if step == "adopt":
                if name != flow.maintenance:
                    log.info("adopting shutdown maintenance %s", name)
                break
            if step == "create":
                body = model.shutdown_maintenance(
                    flow.node, flow.boot_id, self.kind, flow.config.drain_plan
                )
                body["metadata"]["annotations"][FINAL_PHASE_ANNOTATION] = final_phase
                flow.creating(name)
                try:
                    await self.request(
                        "create the maintenance", client.create(NODEMAINTENANCES, body)
                    )
                    log.info("created shutdown maintenance %s", name)
                    break
                except AlreadyExists:
                    # ours, its answer lost (the list adopts it), else not ours: never touched
                    conflicts += 1
                    if conflicts > 1:
                        raise
                    continue
            if step == "delete":
                log.info(
                    "shutdown maintenance %s of this boot is Complete (a shutdown was "
                    "cancelled): deleting it to drain again under its name",
                    name,
                )
                with contextlib.suppress(NotFound):
                    await self.request(
                        "delete the completed maintenance", client.delete(NODEMAINTENANCES, name)
                    )
            # until it is deleted (the controllers' finalizer goes first)
            await watch_until(_Answering(self), NODEMAINTENANCES, name, lambda nm: nm is None)
        flow.maintenance = name
        if flow.first_announcement(name):
            reason = model.shutdown_reason(flow.node, self.kind)
            flow.notify(notifications.DRAIN_STARTED, flow.node, name, reason)
        return name

    async def _wait_drained(self, name: str) -> None:
        nm = await watch_until(
            _Answering(self), NODEMAINTENANCES, name, lambda nm: nm is None or model.is_drained(nm)
        )
        if nm is None:
            raise NotFound(f"NodeMaintenance {name} is gone", status=404)
        self.state.drained = True
        self.changed.set()


def _drained_request(maintenances: list[Obj], flow: ShutdownFlow) -> str | None:
    """The name of this boot's reboot request when it is live and drained, else None."""
    request = reboot_request.request_of_boot(maintenances, flow.node, flow.boot_id)
    if request is None or reboot_request.next_action(True, request) != "reboot":
        return None
    return name_of(request)


class _Answering:
    """The client as the shutdown's waits use it: a list is one bounded `request`, and every
    watch event (a bookmark too) is an answer of the API server."""

    def __init__(self, shutdown: _Shutdown) -> None:
        self._shutdown = shutdown
        self._client = shutdown.flow.client

    async def list(self, resource: Resource, namespace: str | None = None, **kw: Any) -> Obj:
        call = self._client.list(resource, namespace, **kw)
        return await self._shutdown.request("read the maintenance", call)

    async def watch(
        self, resource: Resource, namespace: str | None = None, **kw: Any
    ) -> AsyncGenerator[Obj, None]:
        events = self._client.watch(resource, namespace, **kw)
        async with contextlib.aclosing(events):
            async for event in events:
                self._shutdown.last_answer = self._shutdown.flow.clock()
                yield event
