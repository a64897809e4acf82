"""`LimitedWorld`: the reconcile tests' `World` with the limit's inputs (nodes draining at once,
the drain deadline). A maintenance is decided on the whole world (the shell hands every
maintenance in Drain to each decision under a limit)."""

from __future__ import annotations

import dataclasses

from nodeagent.model import shutdown
from nodeagent.model.names import REQUESTER
from nodeagent.model.nodemaintenance.inputs import Inputs
from tests.unit.controllers.nodemaintenance.world import World

__all__ = ["LimitedWorld", "agents_maintenance", "message", "reports_boot"]


class LimitedWorld(World):
    def __init__(
        self,
        limit: int | None,
        *,
        nodes: tuple[str, ...] = ("one", "two", "three", "four", "five"),
        cordon_while_waiting: bool = False,
        deadline: float | None = None,
        zone_limit: int | None = None,
    ) -> None:
        super().__init__(nodes)
        self.limit = limit
        self.zone_limit = zone_limit
        self.cordon_while_waiting = cordon_while_waiting
        self.deadline = deadline
        self.escalation = "None"

    def inputs(self, name: str) -> Inputs:
        return dataclasses.replace(
            super().inputs(name),
            max_draining=self.limit,
            zone_limit=self.zone_limit,
            cordon_while_waiting=self.cordon_while_waiting,
            drain_deadline=self.deadline,
            deadline_escalation=self.escalation,
        )

    def open_requests(self) -> dict[str, set[str]]:
        """Node -> pods with an EvictionRequest of ours whose pod is still there."""
        out: dict[str, set[str]] = {}
        for er in self.ers.values():
            pod = self.pods.get(er["metadata"]["name"])
            if pod is not None and {"name": REQUESTER} in er["spec"]["requesters"]:
                out.setdefault(pod["spec"]["nodeName"], set()).add(pod["metadata"]["name"])
        return out

    def evict_requested(self) -> None:
        for uid in [u for u in self.ers if u in self.pods]:
            del self.pods[uid]


def message(w: World, nm: str, node: str) -> str:
    return str(w.status(nm, node)["drainMessage"])


def agents_maintenance(
    w: World, node: str, boot: str, trigger: str = shutdown.TRIGGER_SHUTDOWN
) -> str:
    """`node`'s agent's maintenance of `boot` (a shutdown under way, or a reboot asked for),
    as the agent writes it."""
    body = shutdown.shutdown_maintenance(node, boot, "reboot", trigger=trigger)
    name = str(body["metadata"]["name"])
    nm = w.maintenance(name, [node], selector=shutdown.node_selector(node))
    nm["metadata"]["labels"] = body["metadata"]["labels"]
    return name


def reports_boot(w: World, node: str, boot: str) -> None:
    """The node's kubelet reports `boot` (status.nodeInfo.bootID)."""
    w.edit_node(node).setdefault("status", {})["nodeInfo"] = {"bootID": boot}
