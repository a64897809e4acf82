"""Coordinated reboot, the node side: while this node needs a reboot, ask for it with a
NodeMaintenance, and reboot through logind once the controllers report it drained.

    reboot required (sentinel, `nodeagent reboot`, sentinel command)
      -> this boot's request maintenance (nodeagent-reboot-<node>-<boot>, stage Drain): created,
         or adopted when it exists (an agent restarted mid-drain)
      -> it waits for its drain slot and drains (the controllers; its drainMessage says why)
      -> Drained=True, read again just before: logind's Reboot(false)
      -> PrepareForShutdown(true): the shutdown flow finds the request drained and lets go at once
      -> after the boot, `node.reboot.complete_previous_boots` completes and deletes it

The decisions are `nodeagent.model.reboot_request.next_action`'s. The request is followed by a
watch of its one name (never polled); a change of the requirement or of the request wakes the
decision. Only the request as read just before (a GET bounded by the client's request timeout)
reboots: a request that is not known to be drained (an API server that hangs, a request deleted
meanwhile) never does. When the requirement goes away first, the request is completed (the node
uncordoned) and deleted. The first request of a boot waits until the node is Ready (back from
its previous reboot).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import Any

from nodeagent.config import RebootConfig, ShutdownConfig
from nodeagent.kube.client import KubeClient
from nodeagent.kube.errors import AlreadyExists, Gone, KubeError, NotFound
from nodeagent.kube.resources import NODEMAINTENANCES
from nodeagent.logind.bus import BusError, CallFailed
from nodeagent.logind.manager import reboot
from nodeagent.logind.names import ERROR_OPERATION_IN_PROGRESS
from nodeagent.model import reboot_request
from nodeagent.model import shutdown as model
from nodeagent.model.backoff import JitteredBackoff
from nodeagent.model.bodies import metadata_of, name_of
from nodeagent.node.reboot import wait_node_ready
from nodeagent.node.reboot_triggers import RebootTriggers, boot_started

__all__ = ["RebootCoordinator"]

log = logging.getLogger(__name__)

REBOOT_KIND = "reboot"
_WATCH_TIMEOUT = 300


class RebootCoordinator:
    def __init__(
        self,
        client: KubeClient,
        node: str,
        boot_id: str,
        config: RebootConfig,
        shutdown: ShutdownConfig,
        *,
        triggers: RebootTriggers | None = None,
        backoff: JitteredBackoff | None = None,
    ) -> None:
        """`shutdown`: the logind bus (`dbusAddress`) and the drain plan the request asks for,
        as the shutdown maintenance's; `triggers`: None: from `config`, this boot's files
        counting from when it began."""
        self.client = client
        self.node = node
        self.boot_id = boot_id
        self.config = config
        self.shutdown = shutdown
        self.name = model.maintenance_name(node, boot_id, model.TRIGGER_REBOOT)
        self._wake = asyncio.Event()
        self.triggers = triggers or RebootTriggers(config, boot_started=boot_started())
        self.triggers.changed = self._wake.set
        self.backoff = backoff or JitteredBackoff(base=0.5, cap=30.0)
        # this boot's request as last seen (None: there is none); None until first read
        self.request: Mapping[str, Any] | None = None
        self.request_read = asyncio.Event()
        self.foreign = False  # the name is taken by a maintenance that is not ours
        self.rebooting = False  # logind took our Reboot: the node goes down
        self.actions: list[str] = []  # what was done, in order (for status and tests)
        self._drained_seen = False

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tg:
            tg.create_task(self.triggers.run(), name="reboot-triggers")
            tg.create_task(self._follow_request(), name="reboot-request-watch")
            tg.create_task(self._decide(), name="reboot-decide")

    # -- the request, as the API server reports it

    def _seen(self, obj: Mapping[str, Any] | None) -> None:
        foreign = (
            obj is not None
            and reboot_request.request_of_boot([obj], self.node, self.boot_id) is None
        )
        if foreign and not self.foreign:
            log.error(
                "NodeMaintenance %s is not this agent's reboot request (labels, node "
                "selector): it is left alone, and no reboot is asked for while it exists",
                self.name,
            )
        self.foreign = foreign
        self.request = None if foreign else obj
        drained = obj is not None and not foreign and model.is_drained(obj)
        if drained and not self._drained_seen:
            log.info("reboot request %s of %s is drained", self.name, self.node)
        self._drained_seen = drained
        self.request_read.set()
        self._wake.set()

    async def _follow_request(self) -> None:
        """List and watch this boot's request by name, for the agent's life."""
        field = f"metadata.name={self.name}"
        attempt = 0
        while True:
            try:
                listed = await self.client.list(NODEMAINTENANCES, field_selector=field)
                items = listed.get("items") or []
                self._seen(items[0] if items else None)
                events = self.client.watch(
                    NODEMAINTENANCES,
                    resource_version=metadata_of(listed).get("resourceVersion"),
                    field_selector=field,
                    timeout_seconds=_WATCH_TIMEOUT,
                )
                async with contextlib.aclosing(events):
                    async for event in events:
                        kind = event.get("type")
                        if kind == "BOOKMARK":
                            continue
                        self._seen(None if kind == "DELETED" else event.get("object"))
                attempt = 0
                continue  # the watch ended: list again
            except Gone:
                continue
            except (KubeError, TimeoutError) as e:
                attempt += 1
                log.warning("watching reboot request %s failed, again soon: %s", self.name, e)
            # pacing between retries against a failing API server
            await asyncio.sleep(self.backoff.delay(attempt))

    # -- deciding and acting

    async def _decide(self) -> None:
        await self._until_node_ready()
        await self.request_read.wait()
        attempt = 0
        while True:
            self._wake.clear()
            try:
                await self._step()
                attempt = 0
            except (KubeError, TimeoutError, BusError) as e:
                attempt += 1
                log.warning("coordinated reboot of %s: %s; trying again", self.node, e)
                # pacing between retries against a failing API server or bus (a change of the
                # requirement or of the request ends it early)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.backoff.delay(attempt)):
                        await self._wake.wait()
                continue
            await self._wake.wait()

    async def _until_node_ready(self) -> None:
        attempt = 0
        while True:
            try:
                await wait_node_ready(self.client, self.node)
                return
            except KubeError as e:
                attempt += 1
                log.warning("waiting for node %s to be Ready failed, again soon: %s", self.node, e)
            await asyncio.sleep(self.backoff.delay(attempt))

    async def _step(self) -> None:
        if self.rebooting or self.foreign:
            return
        need = self.triggers.current()
        action = reboot_request.next_action(need.required, self.request)
        if action == "create":
            await self._create(need.reason())
        elif action == "reboot":
            await self._reboot()
        elif action == "complete":
            await self._complete()
        elif action == "delete":
            await self._delete()

    async def _create(self, reason: str) -> None:
        body = model.shutdown_maintenance(
            self.node,
            self.boot_id,
            REBOOT_KIND,
            self.shutdown.drain_plan,
            trigger=model.TRIGGER_REBOOT,
            reason=reason,
        )
        try:
            created = await self.client.create(NODEMAINTENANCES, body)
        except AlreadyExists:
            # ours, from an answer lost (the watch brings it), else not ours (left alone)
            self._seen(await self.client.get(NODEMAINTENANCES, self.name))
            return
        self.actions.append("create")
        log.info(
            "reboot of %s asked for: created NodeMaintenance %s (%s); it waits for its drain "
            "slot and drains, then the node reboots",
            self.node,
            self.name,
            reason,
        )
        self._seen(created)

    async def _reboot(self) -> None:
        # only the request as read now reboots: not one drained a while ago and since deleted
        try:
            current: Mapping[str, Any] | None = await self.client.get(NODEMAINTENANCES, self.name)
        except NotFound:
            current = None
        if reboot_request.next_action(self.triggers.current().required, current) != "reboot":
            self._seen(current)
            return
        log.info("node %s is drained (%s): rebooting through logind", self.node, self.name)
        self.actions.append("reboot")
        try:
            await reboot(self.shutdown.dbus_address)
        except CallFailed as e:
            if e.name != ERROR_OPERATION_IN_PROGRESS:
                raise
            log.info("logind is already shutting down %s: %s", self.node, e.text)
        self.rebooting = True

    async def _complete(self) -> None:
        request = self.request
        assert request is not None
        with contextlib.suppress(NotFound):
            await self.client.patch(NODEMAINTENANCES, self.name, {"spec": {"stage": "Complete"}})
            self.actions.append("complete")
            log.info(
                "reboot of %s no longer required: completed request %s (the node is uncordoned)",
                self.node,
                name_of(request),
            )

    async def _delete(self) -> None:
        with contextlib.suppress(NotFound):
            await self.client.delete(NODEMAINTENANCES, self.name)
            self.actions.append("delete")
            log.info("deleted completed reboot request %s", self.name)
