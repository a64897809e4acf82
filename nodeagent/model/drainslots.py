"""A cluster-wide limit on nodes draining at once (``nodeMaintenance.maxDrainingNodes``).

Pure. A node *drains* while it is admitted (some maintenance in Drain stored drainTargets for
it, or the controller admitted it and its cache does not show that yet) and pods are still on
it. Nodes that are selected by a maintenance in Drain, have pods and were never admitted *wait*
for a slot, in order: the creation of the oldest maintenance in Drain that selects them (time,
then name), then the node's name. Admission is sticky: a node keeps its slot until its pods are
gone, so lowering the limit never stops a drain half-way; it only holds back the next ones. A
node with no pods needs no slot: it is drained the moment it is admitted, and always admitted.
With a limit per zone (``nodeMaintenance.maxDrainingNodesPerZone``) a node is admitted only
while its zone has a slot too; a node whose zone is full waits without holding back the nodes
of other zones behind it in line.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

__all__ = ["WAITING_FOR_SLOT", "Candidate", "DrainLimit", "InvalidLimit", "Slots", "allot"]

_MAX_NAMED = 5
WAITING_FOR_SLOT = "Waiting for a drain slot"
"""How the drainMessage of a node waiting for its slot starts."""
_PERCENT = re.compile(r"([0-9]+)%")


class InvalidLimit(ValueError):
    """The limit as written is not a positive count or a percentage from 1% to 100%."""


@dataclass(frozen=True)
class DrainLimit:
    """``maxDrainingNodes``: a count of nodes, or a percentage of the cluster's nodes (rounded
    down, at least one node, so a small cluster still makes progress)."""

    count: int | None = None
    percent: int | None = None

    @classmethod
    def parse(cls, value: object) -> DrainLimit:
        if isinstance(value, bool):
            raise InvalidLimit(f"must be a number of nodes or a percentage, got {value!r}")
        if isinstance(value, int):
            if value < 1:
                raise InvalidLimit(f"must be at least 1, got {value}")
            return cls(count=value)
        if isinstance(value, str) and (m := _PERCENT.fullmatch(value.strip())):
            percent = int(m.group(1))
            if not 1 <= percent <= 100:
                raise InvalidLimit(f"must be a percentage from 1% to 100%, got {value!r}")
            return cls(percent=percent)
        raise InvalidLimit(f"must be a number of nodes or a percentage like '20%', got {value!r}")

    def slots(self, cluster_nodes: int) -> int:
        """How many nodes may drain at once in a cluster of ``cluster_nodes`` nodes."""
        if self.count is not None:
            return self.count
        return max(1, math.floor((self.percent or 100) * cluster_nodes / 100))

    def __str__(self) -> str:
        return f"{self.count}" if self.count is not None else f"{self.percent}%"


@dataclass(frozen=True)
class Candidate:
    """A node selected by a valid maintenance in Drain."""

    node: str
    order: tuple[str, str]
    """Creation (time, name) of the oldest maintenance in Drain selecting the node."""
    admitted: bool
    """It was admitted before: drainTargets are stored for it, or an admission is in flight."""
    busy: bool
    """Pods that count for the drain are still on it."""
    zone: str | None = None
    """Its zone (``nodeMaintenance.zoneLabel``), for a limit per zone; None: in none."""


@dataclass(frozen=True)
class Slots:
    limit: int
    draining: tuple[str, ...]
    """Admitted nodes with pods left, in admission order (they hold the slots)."""
    admitted: frozenset[str]
    """Nodes that may drain now: the draining ones, those admitted by this allotment, and
    nodes with no pods left."""
    newly: tuple[str, ...]
    """Nodes this allotment admits that were not admitted before."""
    waiting: tuple[str, ...]
    """Nodes held back, first in line first."""
    zone_limit: int | None = None
    zones: Mapping[str, str] = field(default_factory=dict)
    """The zone of each node in one, for ``zone_limit`` (at most that many per zone)."""

    def waiting_message(self, node: str) -> str:
        """``Waiting for a drain slot (1 of 1 nodes draining: node-a)``, with the place in line
        when others wait ahead; for a zone's, ``... in zone a (1 of 1 nodes of zone a ...)``."""
        holders = [*self.draining, *self.newly]
        zone = self.zones.get(node)
        local = [n for n in holders if zone is not None and self.zones.get(n) == zone]
        if self.zone_limit is not None and len(local) >= self.zone_limit:
            shown = local[:_MAX_NAMED]
            more = len(local) - len(shown)
            names = ", ".join(shown) + (f" and {more} more" if more else "")
            return (
                f"{WAITING_FOR_SLOT} in zone {zone} ({len(local)} of {self.zone_limit} nodes "
                f"of the zone draining: {names})"
            )
        shown = holders[:_MAX_NAMED]
        more = len(holders) - len(shown)
        names = ", ".join(shown) + (f" and {more} more" if more else "")
        text = f"{WAITING_FOR_SLOT} ({len(holders)} of {self.limit} nodes draining"
        text += f": {names})" if names else ")"
        ahead = self.waiting.index(node) if node in self.waiting else 0
        if ahead:
            text += f", {ahead} {'node' if ahead == 1 else 'nodes'} ahead in line"
        return text


def allot(candidates: Iterable[Candidate], limit: int, zone_limit: int | None = None) -> Slots:
    """Which nodes may drain now under ``limit``, and ``zone_limit`` per zone (see the module
    docstring): a node whose zone is full waits without holding back the nodes of other
    zones behind it. Deterministic: the result does not depend on the order of
    ``candidates``."""
    by_node: dict[str, Candidate] = {}
    for c in candidates:
        seen = by_node.get(c.node)
        if seen is None:
            by_node[c.node] = c
        else:  # the same node through several maintenances: the oldest order, any admission
            by_node[c.node] = Candidate(
                c.node,
                min(seen.order, c.order),
                seen.admitted or c.admitted,
                seen.busy or c.busy,
                seen.zone if seen.zone is not None else c.zone,
            )
    ordered = sorted(by_node.values(), key=lambda c: (c.order, c.node))
    zones = {c.node: c.zone for c in ordered if c.zone is not None}
    draining = [c.node for c in ordered if c.admitted and c.busy]
    per_zone = Counter(zones[n] for n in draining if n in zones)
    free = max(0, limit - len(draining))
    newly: list[str] = []
    waiting: list[str] = []
    for c in ordered:
        if c.admitted or not c.busy:
            continue
        zone_full = zone_limit is not None and c.zone is not None and per_zone[c.zone] >= zone_limit
        if len(newly) < free and not zone_full:
            newly.append(c.node)
            if c.zone is not None:
                per_zone[c.zone] += 1
        else:
            waiting.append(c.node)
    idle = {c.node for c in ordered if not c.busy}
    return Slots(
        limit=limit,
        draining=tuple(draining),
        admitted=frozenset(draining) | frozenset(newly) | idle,
        newly=tuple(newly),
        waiting=tuple(waiting),
        zone_limit=zone_limit,
        zones=zones,
    )
