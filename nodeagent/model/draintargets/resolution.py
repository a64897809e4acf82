""":func:`resolve`: the positions a :class:`~.resolver.Resolver` reaches, told as drainTargets,
drainMessages, counters and fast-forwards; a message names the maintenance that fast-forwards or
limits a node, or the nearest nodes still being evacuated."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from nodeagent.model.draintargets.pods import NO_PODS, PodInfo
from nodeagent.model.draintargets.resolver import Resolver
from nodeagent.model.draintargets.results import (
    FastForward,
    MaintenanceDrain,
    NodeDrainStatus,
    Resolution,
)
from nodeagent.model.draintargets.tracks import Tracks, join, to_entries, within
from nodeagent.model.draintargets.views import DRAIN_STAGE, MaintenanceView

__all__ = ["MSG_DRAINED", "MSG_EVACUATING", "resolve"]

MSG_EVACUATING = "Evacuating"
MSG_DRAINED = "Drained"
_MAX_NAMED_NODES = 5


def resolve(
    maintenances: Iterable[MaintenanceView], pods_by_node: Mapping[str, Iterable[PodInfo]]
) -> Resolution:
    """Resolve drainTargets, messages and counters for every maintenance in stage Drain.

    ``pods_by_node`` holds the pods bound to each selected node (a node missing from it has no
    pods), best as :class:`~.pods.NodePods` kept from one resolution to the next.
    Deterministic: the result depends only on the inputs, not on their order.
    """
    views = [m for m in maintenances if m.stage == DRAIN_STAGE]
    names = [v.name for v in views]
    if len(set(names)) != len(names):
        raise ValueError(f"maintenance names must be unique: {sorted(names)}")
    resolver = Resolver(views, pods_by_node)
    resolver.run()
    return _Report(resolver).result()


class _Report:
    """The result of a finished resolver: who fast-forwards or limits whom, and the messages."""

    def __init__(self, resolver: Resolver) -> None:
        self.r = resolver
        self._waiting_messages: dict[int, str] = {}

    # attribution

    def _least(self, candidates: list[int], power: Mapping[int, Tracks]) -> int:
        """The candidate with minimal ``power`` (track-wise), the oldest among equals."""
        minimal = [
            c
            for c in candidates
            if not any(
                within(power[o], power[c]) and not within(power[c], power[o]) for o in candidates
            )
        ]
        return min(minimal or candidates)

    def fast_forwarded_by(self, i: int, node: str) -> int | None:
        r = self.r
        want = r.want(i)
        if within(r.targets[node], want):
            return None
        holders = [
            j for j in r.members[node] if j != i and not within(r.stored[j].get(node, {}), want)
        ]
        if not holders:
            return None  # the progress is this maintenance's own, stored earlier
        return self._least(holders, {j: r.want(j) for j in holders})

    def limited_by(self, i: int, node: str) -> int | None:
        limiters = self.r.limiters(i, node)
        if not limiters:
            return None
        floor = self.r.floor[node]
        return self._least(limiters, {j: join((floor, self.r.want(j))) for j in limiters})

    # messages

    def waiting_message(self, i: int) -> str:
        """Name the nearest nodes that still have targeted pods: this maintenance's own first,
        then those of the maintenances it intersects, and so on outwards (the same for every
        node of the maintenance: worked out once)."""
        found = self._waiting_messages.get(i)
        if found is None:
            found = self._waiting_messages[i] = self._waiting_message(i)
        return found

    def _waiting_message(self, i: int) -> str:
        r = self.r
        seen_m, seen_nodes = {i}, set[str]()
        level = [i]
        while level:
            found: dict[str, int | None] = {}
            for j in level:  # level is oldest first, so a node goes to its oldest holder
                for node in sorted(r.views[j].nodes):
                    if node not in seen_nodes and node not in found and r.targeted(node):
                        found[node] = None if j == i else j
            if found:
                return _waiting_text(
                    [(node, None if j is None else r.views[j].label) for node, j in found.items()]
                )
            seen_nodes |= {node for j in level for node in r.views[j].nodes}
            nxt = sorted({k for j in level for k in r.neighbours[j]} - seen_m)
            seen_m |= set(nxt)
            level = nxt
        return "Waiting"

    def drain_message(self, i: int, node: str) -> str:
        r = self.r
        if r.covered[node].pods:
            message = MSG_EVACUATING
            if (ff := self.fast_forwarded_by(i, node)) is not None:
                older = "older " if ff < i else ""
                message += f" (fast-forwarded by {older}{r.views[ff].label})"
            elif (lim := self.limited_by(i, node)) is not None:
                message += f" (limited by {r.views[lim].label})"
            return message
        if not r.pods.get(node, NO_PODS).present:
            return MSG_DRAINED
        return self.waiting_message(i)

    # results

    def node_status(self, i: int, node: str) -> NodeDrainStatus:
        covered = self.r.covered[node]
        present = self.r.pods.get(node, NO_PODS).present
        return NodeDrainStatus(
            node=node,
            drain_targets=to_entries(self.r.targets[node]),
            drain_message=self.drain_message(i, node),
            targeted_pods=covered.refs,
            pods_pending_evacuation=len(present) - covered.evacuating,
            pods_evacuating=covered.evacuating,
            drained=not present,
        )

    def fast_forward(self, i: int, node: str) -> FastForward | None:
        r = self.r
        had = join((r.stored[i].get(node, {}), r.want(i)))
        if within(r.targets[node], had):
            return None
        by = self.fast_forwarded_by(i, node)
        if by is None:
            return None
        return FastForward(
            maintenance=r.views[i].label,
            node=node,
            by=r.views[by].label,
            by_older=by < i,
            targets=to_entries(r.targets[node]),
            entry=r.plans[i][r.pos[i]],
        )

    def result(self) -> Resolution:
        r = self.r
        out: dict[str, MaintenanceDrain] = {}
        for i, v in enumerate(r.views):
            nodes = tuple(self.node_status(i, node) for node in sorted(v.nodes))
            ffs = tuple(ff for node in sorted(v.nodes) if (ff := self.fast_forward(i, node)))
            out[v.name] = MaintenanceDrain(
                name=v.name,
                entry_index=r.pos[i],
                current_entry=r.plans[i][r.pos[i]],
                nodes=nodes,
                drained=all(s.drained for s in nodes),
                fast_forwards=ffs,
            )
        return Resolution(out)


def _waiting_text(found: list[tuple[str, str | None]]) -> str:
    """``Waiting for node one.``, ``Waiting for node two (maintenance-a).``,
    ``Waiting for nodes one, three, node two (maintenance-a).``"""
    groups: dict[str | None, list[str]] = {}
    for node, owner in found:
        groups.setdefault(owner, []).append(node)
    named, parts = 0, []
    for owner, nodes in groups.items():
        shown = nodes[: max(0, _MAX_NAMED_NODES - named)]
        if not shown:
            break
        named += len(shown)
        text = ("node " if len(shown) == 1 else "nodes ") + ", ".join(shown)
        parts.append(text + (f" ({owner})" if owner is not None else ""))
    more = len(found) - named
    return "Waiting for " + ", ".join(parts) + (f" and {more} more" if more else "") + "."
