"""After a reboot: once the node is Ready again, complete and delete the agent's maintenances of
earlier boots, shutdown maintenances and coordinated reboot requests alike (the NodeMaintenance
controller then uncordons the node and the static-pod interceptor puts the manifests back).

This boot's are never touched. A reboot request of this boot is the coordinator's
(`node.coordinated_reboot`): a sentinel that survived the reboot does not ask again, as it was
written before this boot began (`model.reboot_request.sentinel_counts`)."""

from __future__ import annotations

import asyncio
import logging

from nodeagent.kube.client import KubeClient
from nodeagent.kube.errors import KubeError, NotFound
from nodeagent.kube.informer import ListWatcher, watch_until
from nodeagent.kube.resources import NODEMAINTENANCES, NODES
from nodeagent.model import notifications
from nodeagent.model import shutdown as model
from nodeagent.model.backoff import JitteredBackoff
from nodeagent.model.bodies import condition_true, name_of
from nodeagent.node.shutdown import complete_maintenance, shutdown_maintenances

log = logging.getLogger(__name__)


async def wait_node_ready(client: ListWatcher, node: str) -> None:
    await watch_until(
        client, NODES, node, lambda obj: obj is not None and condition_true(obj, "Ready")
    )


async def complete_previous_boots(
    client: KubeClient,
    node: str,
    boot_id: str,
    notify: notifications.Notify = notifications.no_notifications,
) -> None:
    """`notify`: told of each maintenance completed (nodeBack); it must not wait."""
    backoff = JitteredBackoff(base=0.5, cap=30.0)
    attempt = 0
    while True:
        try:
            await wait_node_ready(client, node)
            await _complete(client, node, boot_id, notify)
            return
        except KubeError as e:
            attempt += 1
            log.warning(
                "completing earlier boots' maintenances of %s failed, retrying: %s", node, e
            )
        await asyncio.sleep(backoff.delay(attempt))


async def _complete(
    client: KubeClient, node: str, boot_id: str, notify: notifications.Notify
) -> None:
    for nm in await shutdown_maintenances(client, node):
        if model.boot_of(nm) == boot_id:
            continue
        name = name_of(nm)
        try:
            await complete_maintenance(client, nm)
            # the controller's finalizer finishes Complete (uncordon, requesters) first
            await client.delete(NODEMAINTENANCES, name)
        except NotFound:
            continue
        what = "reboot request" if model.trigger_of(nm) == model.TRIGGER_REBOOT else "shutdown"
        log.info("node %s is back: completed and deleted %s maintenance %s", node, what, name)
        reason = f"{node} is Ready again after the shutdown; its maintenance is completed"
        notify(notifications.NODE_BACK, node, name, reason)
