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
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

from nodeagent.config import ShutdownConfig
from nodeagent.kube.client import KubeClient
from nodeagent.kube.errors import AlreadyExists, Gone, KubeError, NotFound
from nodeagent.kube.ratelimit import JitteredBackoff
from nodeagent.kube.resources import NODEMAINTENANCES
from nodeagent.model import final_phase as final
from nodeagent.model import notifications
from nodeagent.model import shutdown as model
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
    ) -> None:
        """`node_name`: None until `set_node_name` (the agent may have to ask the API server,
        and a shutdown must not wait for that); `delay_max`: what logind actually grants
        (InhibitDelayMaxUSec, in seconds), the configured budget when not known;
        `record_file`: where the shutdown's start is kept for a restarted agent; `notify`:
        told when the drain starts and when the lock may go (it must not wait)."""
        self.client = client
        self.node = node_name or ""
        self._node_known = asyncio.Event()
        if node_name:
            self._node_known.set()
        self.boot_id = boot_id
        self.config = config
        self.delay_max = delay_max or (lambda: config.budget)
        self.clock = clock
        self.record_file = record_file
        self.backoff = JitteredBackoff(base=0.2, cap=5.0)
        self.maintenance: str | None = None  # the name of this boot's shutdown maintenance
        self.notify = notify
        # maintenances this agent asked to create, and the one it announced: a create whose
        # answer was lost is adopted on the retry and still announced, while an agent
        # restarted during a shutdown does not announce its predecessor's drain again
        self._created: set[str] = set()
        self._announced: str | None = None
        self._last_answer = 0.0  # when the API server last answered during this shutdown

    def set_node_name(self, name: str) -> None:
        self.node = name
        self._node_known.set()

    @property
    def _bound(self) -> float:
        return self.config.api_unreachable_release_after

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
        state = model.ReleaseState(
            deadline=started + usable,
            unreachable_bound=self._bound,
        )
        self._last_answer = now
        changed = asyncio.Event()
        log.info(
            "shutdown (%s) of %s: draining through a NodeMaintenance, at most %.0fs",
            kind,
            self.node,
            budget,
        )
        worker = asyncio.create_task(self._drive(kind, state, changed, usable))
        try:
            while True:
                reason = model.release_reason(state, self.clock())
                if reason is not None:
                    log.info("releasing the shutdown lock of %s: %s", self.node, reason)
                    self.notify(
                        notifications.LOCK_RELEASED, self.node, self.maintenance or "", reason
                    )
                    return reason
                changed.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(model.next_decision(state, self.clock())):
                        await changed.wait()
        finally:
            # the lock goes now, whatever the controllers' final phase still does
            worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await worker

    async def _drive(
        self, kind: str, state: model.ReleaseState, changed: asyncio.Event, usable: float
    ) -> None:
        final_phase = self._final_phase(state, usable)

        async def drain() -> None:
            name = await self._ensure_maintenance(kind, state, changed, final_phase)
            async with asyncio.TaskGroup() as tg:
                probe = tg.create_task(self._probe(name, state, changed))
                await self._wait_drained(name, state, changed)
                probe.cancel()

        await self._retrying("shutdown", drain, state, changed)

    async def _retrying(
        self,
        what: str,
        fn: Callable[[], Awaitable[None]],
        state: model.ReleaseState,
        changed: asyncio.Event,
    ) -> None:
        """Run `fn` until it returns, once the node is known; a failed API request counts
        towards "unreachable" and is tried again after a pause."""
        await self._node_known.wait()
        attempt = 0
        while True:
            try:
                await fn()
                return
            except* (KubeError, TimeoutError) as group:
                e = group.exceptions[0]
                log.warning("%s of %s: API request failed: %s", what, self.node, e)
                self._unreachable(state, changed)
            # pacing between retries against a failing API server
            attempt += 1
            await asyncio.sleep(self.backoff.delay(attempt))

    def _final_phase(self, state: model.ReleaseState, usable: float) -> str | None:
        """The annotation that asks the controllers for the final phase (they delete the pods
        left, the kubelet's way, when the budget is nearly spent: only they may read pods);
        None when it is off."""
        fp = self.config.final_phase
        phase = final.FinalPhase.fitted(
            state.deadline, usable, fp.grace_period, fp.critical_pods_grace_period
        )
        if phase.grace_period <= 0:
            return None
        deadline = datetime.now(UTC) + timedelta(seconds=state.deadline - self.clock())
        return final.annotation(deadline, phase)

    async def _request(
        self, what: str, call: Awaitable[T], state: model.ReleaseState, changed: asyncio.Event
    ) -> T:
        """One API call with a deadline: `apiUnreachableReleaseAfter` after the last answer, so
        a request that hangs ends exactly when the API server counts as unreachable."""
        wait = max(0.05, self._last_answer + self._bound - self.clock())
        try:
            async with asyncio.timeout(wait):
                result = await call
        except TimeoutError:
            raise TimeoutError(f"{what}: no answer within {wait:.1f}s") from None
        self._last_answer = self.clock()
        if state.unreachable_since is not None:
            state.unreachable_since = None
            changed.set()
        return result

    def _unreachable(self, state: model.ReleaseState, changed: asyncio.Event) -> None:
        if state.unreachable_since is None:
            # measured from the last answer: a hung request costs no extra time
            state.unreachable_since = self._last_answer
            changed.set()

    async def _probe(self, name: str, state: model.ReleaseState, changed: asyncio.Event) -> None:
        """While waiting on a possibly quiet watch, check the API server still answers."""
        interval = max(0.5, min(5.0, self._bound / 4))
        while True:
            await asyncio.sleep(interval)
            try:
                await self._request(
                    "get the maintenance", self.client.get(NODEMAINTENANCES, name), state, changed
                )
            except (KubeError, TimeoutError) as e:
                log.warning("shutdown of %s: the API server did not answer: %s", self.node, e)
                self._unreachable(state, changed)

    async def _ensure_maintenance(
        self,
        kind: str,
        state: model.ReleaseState,
        changed: asyncio.Event,
        final_phase: str | None = None,
    ) -> str:
        """`final_phase`: the annotation that asks the controllers for the final phase."""
        selector = model.shutdown_selector(self.node, self.boot_id)
        conflicts = 0
        while True:
            existing = await self._request(
                "list this boot's maintenances",
                self.client.list(NODEMAINTENANCES, label_selector=selector),
                state,
                changed,
            )
            step, name = model.next_step(existing["items"], self.node, self.boot_id)
            if step == "adopt":
                if name != self.maintenance:
                    log.info("adopting shutdown maintenance %s", name)
                break
            if step == "create":
                body = model.shutdown_maintenance(
                    self.node, self.boot_id, kind, self.config.drain_plan
                )
                if final_phase is not None:
                    body["metadata"]["annotations"][final.ANNOTATION] = final_phase
                self._created.add(name)
                try:
                    await self._request(
                        "create the maintenance",
                        self.client.create(NODEMAINTENANCES, body),
                        state,
                        changed,
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
                    await self._request(
                        "delete the completed maintenance",
                        self.client.delete(NODEMAINTENANCES, name),
                        state,
                        changed,
                    )
            await self._wait_gone(name, state, changed)
        self.maintenance = name
        if name in self._created and self._announced != name:
            self._announced = name
            reason = model.shutdown_reason(self.node, kind)
            self.notify(notifications.DRAIN_STARTED, self.node, name, reason)
        return name

    async def _wait_gone(
        self, name: str, state: model.ReleaseState, changed: asyncio.Event
    ) -> None:
        """Until the maintenance `name` is deleted (the controllers' finalizer goes first)."""
        field = f"metadata.name={name}"
        while True:
            listed = await self._request(
                "read the maintenance",
                self.client.list(NODEMAINTENANCES, field_selector=field),
                state,
                changed,
            )
            if not listed["items"]:
                return
            try:
                async with contextlib.aclosing(
                    self.client.watch(
                        NODEMAINTENANCES,
                        resource_version=listed["metadata"]["resourceVersion"],
                        field_selector=field,
                        timeout_seconds=300,
                    )
                ) as events:
                    async for ev in events:
                        self._last_answer = self.clock()
                        if ev["type"] == "DELETED":
                            return
            except Gone:
                continue  # relist

    async def _wait_drained(
        self, name: str, state: model.ReleaseState, changed: asyncio.Event
    ) -> None:
        field = f"metadata.name={name}"
        while True:
            listed = await self._request(
                "read the maintenance",
                self.client.list(NODEMAINTENANCES, field_selector=field),
                state,
                changed,
            )
            if not listed["items"]:
                raise NotFound(f"NodeMaintenance {name} disappeared", status=404)
            if model.is_drained(listed["items"][0]):
                state.drained = True
                changed.set()
                return
            rv = listed["metadata"]["resourceVersion"]
            try:
                async with contextlib.aclosing(
                    self.client.watch(
                        NODEMAINTENANCES,
                        resource_version=rv,
                        field_selector=field,
                        timeout_seconds=300,
                    )
                ) as events:
                    async for ev in events:
                        self._last_answer = self.clock()
                        obj: dict[str, Any] = ev["object"]
                        if ev["type"] == "DELETED":
                            raise NotFound(f"NodeMaintenance {name} was deleted", status=404)
                        if ev["type"] != "BOOKMARK" and model.is_drained(obj):
                            state.drained = True
                            changed.set()
                            return
            except Gone:
                continue  # relist

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
        existing = await self.client.list(
            NODEMAINTENANCES, label_selector=model.shutdown_selector(self.node, self.boot_id)
        )
        for nm in existing["items"]:
            if model.is_ours(nm, self.node) and model.stage(nm) != "Complete":
                name = nm["metadata"]["name"]
                try:
                    await self.client.patch(NODEMAINTENANCES, name, {"spec": {"stage": "Complete"}})
                    log.info("shutdown cancelled: completed maintenance %s", name)
                except NotFound:
                    continue
