"""Plan positions and advancing them (see the package docstring): where each Drain
maintenance stands in its plan, recovered from what it stored, and the steps forward it takes
while its nodes and those of the maintenances it intersects have nothing targeted left."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from nodeagent.model.draintargets.pods import NO_PODS, Covered, NodePods, PodInfo
from nodeagent.model.draintargets.tracks import Tracks, join, meet, plan_tracks, to_tracks, within
from nodeagent.model.draintargets.views import MaintenanceView

__all__ = ["Resolver"]


class Resolver:
    """Plan positions of the Drain maintenances, advanced until nothing moves, and the
    drainTargets and covered pods of every node at those positions."""

    def __init__(
        self, views: Sequence[MaintenanceView], pods_by_node: Mapping[str, Iterable[PodInfo]]
    ) -> None:
        # Oldest first; index i is the age rank, so ties anywhere resolve to the oldest.
        self.views = sorted(views, key=lambda v: v.creation_key)
        self.pods = {
            node: pods if isinstance(pods, NodePods) else NodePods(pods)
            for node, pods in pods_by_node.items()
        }
        n = len(self.views)
        self.plans = [tuple(v.plan) for v in self.views]
        self._prefix: list[dict[int, Tracks]] = [{} for _ in range(n)]
        self.members: dict[str, list[int]] = {}
        for i, v in enumerate(self.views):
            for node in v.nodes:
                self.members.setdefault(node, []).append(i)
        self.stored: list[dict[str, Tracks]] = [
            {node: to_tracks(v.progress[node]) for node in v.nodes if node in v.progress}
            for v in self.views
        ]
        self.floor: dict[str, Tracks] = {
            node: join(self.stored[i].get(node, {}) for i in idx)
            for node, idx in self.members.items()
        }
        self.neighbours: list[set[int]] = [
            {j for node in v.nodes for j in self.members[node]} for v in self.views
        ]
        self.hood_nodes: list[set[str]] = [
            {node for j in self.neighbours[i] for node in self.views[j].nodes} for i in range(n)
        ]
        self.pos = self._initial_positions()
        self.targets: dict[str, Tracks] = {}
        self.covered: dict[str, Covered] = {}

    # plan positions

    def prefix(self, i: int, index: int) -> Tracks:
        cache = self._prefix[i]
        if index not in cache:
            cache[index] = plan_tracks(self.plans[i], index)
        return cache[index]

    def want(self, i: int) -> Tracks:
        return self.prefix(i, self.pos[i])

    def last(self, i: int) -> int:
        return len(self.plans[i]) - 1

    def _reached(self, i: int) -> dict[str, int]:
        """Per node, the last plan entry whose targets the stored drainTargets hold (-1: none)."""
        reached: dict[str, int] = {}
        for node in self.views[i].nodes:
            stored = self.stored[i].get(node)
            k = -1
            if stored:
                while k < self.last(i) and within(self.prefix(i, k + 1), stored):
                    k += 1
            reached[node] = k
        return reached

    def _initial_positions(self) -> list[int]:
        """Plan positions: the persisted entry_index, else recovered from stored drainTargets.

        Every entry before the current one was in force on every node when it completed, so
        the least entry reached on any node is a lower bound; it is one short exactly when the
        maintenance is limited on those nodes by another one. Without a persisted index, take
        the next entry when the maintenance's own progress shows on some node and every node
        behind is explained by another maintenance's want (then targets are unaffected either
        way; only messages and the next step depend on it). The lower bound also guards a
        persisted index that lags.
        """
        reached = [self._reached(i) for i in range(len(self.views))]
        base = [
            min(max(0, min(r.values(), default=0)), self.last(i)) for i, r in enumerate(reached)
        ]
        positions: list[int] = []
        for i, v in enumerate(self.views):
            k = base[i]
            if v.entry_index is not None:
                positions.append(min(max(k, v.entry_index), self.last(i)))
                continue
            if k < self.last(i) and any(r > k for r in reached[i].values()):
                nxt = self.prefix(i, k + 1)
                behind = [node for node, r in reached[i].items() if r <= k]
                if all(
                    any(
                        j != i and not within(nxt, self.prefix(j, base[j]))
                        for j in self.members[node]
                    )
                    for node in behind
                ):
                    k += 1
            positions.append(k)
        return positions

    # per-node state

    def compute_nodes(self, nodes: Iterable[str]) -> None:
        for node in nodes:
            wants = [self.want(j) for j in self.members[node]]
            tracks = join((self.floor[node], meet(wants)))
            self.targets[node] = tracks
            self.covered[node] = self.pods.get(node, NO_PODS).covered(tracks)

    def targeted(self, node: str) -> bool:
        """Whether covered pods are left on ``node``."""
        return bool(self.covered[node].pods)

    def at_entry(self, i: int) -> bool:
        want = self.want(i)
        return all(within(want, self.targets[node]) for node in self.views[i].nodes)

    def hood_settled(self, i: int) -> bool:
        return not any(self.covered[node].pods for node in self.hood_nodes[i])

    def limiters(self, i: int, node: str) -> list[int]:
        want = self.want(i)
        if within(want, self.targets[node]):
            return []
        return [j for j in self.members[node] if j != i and not within(want, self.want(j))]

    def run(self) -> None:
        self.compute_nodes(self.members)
        while True:
            movable = [i for i in range(len(self.views)) if self.pos[i] < self.last(i)]
            advance = [i for i in movable if self.at_entry(i) and self.hood_settled(i)]
            if not advance:
                advance = self._deadlocked([i for i in movable if self.hood_settled(i)])
            if not advance:
                return
            for i in advance:
                self.pos[i] += 1
            self.compute_nodes({node for i in advance for node in self.views[i].nodes})

    def _deadlocked(self, settled: list[int]) -> list[int]:
        """Settled maintenances not at their entry, limited only by each other: advance the
        lowest current entry of each such cluster (see the package docstring)."""
        stuck = {i for i in settled if not self.at_entry(i)}
        limited_by = {
            i: {j for node in self.views[i].nodes for j in self.limiters(i, node)} for i in stuck
        }
        changed = True
        while changed:
            changed = False
            for i in sorted(stuck):
                if not limited_by[i] <= stuck:
                    stuck.discard(i)
                    changed = True
        advance: list[int] = []
        remaining = set(stuck)
        while remaining:
            seed = min(remaining)
            cluster, frontier = {seed}, [seed]
            while frontier:
                i = frontier.pop()
                for j in limited_by[i] | {k for k in stuck if i in limited_by[k]}:
                    if j not in cluster:
                        cluster.add(j)
                        frontier.append(j)
            remaining -= cluster
            lowest = min(self.plans[i][self.pos[i]].sort_key for i in cluster)
            advance += [i for i in cluster if self.plans[i][self.pos[i]].sort_key == lowest]
        return sorted(advance)
