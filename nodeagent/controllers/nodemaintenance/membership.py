"""Which nodes each maintenance has to do with, kept current from informer events.

A maintenance has to do with a node it selects, cordons, or reports in its status
(:func:`~nodeagent.model.nodemaintenance.selection.maintenance_nodes`). Maintenances that
share nodes are decided together, so every pod event asks which maintenances are connected to
its node. Walking the component costs as much as the maintenances' nodes, and a 500-node
maintenance answers it for every one of its pods' events; so the index also counts, per
maintenance, its nodes that another maintenance shares. A maintenance sharing none (the common
case) is its own component, answered without a walk.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from nodeagent.kube.resources import Obj
from nodeagent.model.bodies import metadata_of
from nodeagent.model.maintenance import involves, status_nodes
from nodeagent.model.nodemaintenance.selection import connected

__all__ = ["Membership"]


class Membership:
    """Maintenance -> nodes and node -> maintenances, with each maintenance's shared-node count."""

    def __init__(self, node_left: Callable[[str], None] = lambda node: None) -> None:
        """``node_left(node)``: no maintenance has ``node`` any more."""
        self._node_left = node_left
        self.by_nm: dict[str, set[str]] = {}
        self.by_node: dict[str, set[str]] = {}
        self._shared: dict[str, int] = {}  # maintenance -> its nodes another one also has
        self._covered: dict[str, set[str]] = {}  # selected or held, by maintenance
        self._generation: dict[str, object] = {}

    def _share(self, names: Iterable[str], delta: int) -> None:
        for name in names:
            self._shared[name] = self._shared.get(name, 0) + delta

    def assign(self, name: str, nodes: set[str]) -> None:
        """The nodes maintenance ``name`` has to do with are now ``nodes``."""
        old = self.by_nm.get(name, set())
        for n in old - nodes:
            members = self.by_node.get(n)
            if members is None or name not in members:
                continue
            members.discard(name)
            if len(members) == 1:
                self._share(members | {name}, -1)  # the one left no longer shares n
            elif members:
                self._share([name], -1)
            else:
                del self.by_node[n]
                self._node_left(n)
        for n in nodes - old:
            members = self.by_node.setdefault(n, set())
            if len(members) == 1:
                self._share(members | {name}, 1)  # the one there now shares n
            elif members:
                self._share([name], 1)
            members.add(name)
        self.by_nm[name] = nodes

    def maintenance_changed(self, nm: Obj, nodes: Callable[[], Iterable[Obj]]) -> None:
        name = str(metadata_of(nm).get("name"))
        generation = (metadata_of(nm).get("uid"), metadata_of(nm).get("generation"))
        if self._generation.get(name) != generation or name not in self._covered:
            self._covered[name] = {
                str(metadata_of(node).get("name")) for node in nodes() if involves(nm, node)
            }
            self._generation[name] = generation
        self.assign(name, self._covered[name] | status_nodes(nm))

    def maintenance_deleted(self, name: str) -> None:
        self._covered.pop(name, None)
        self._generation.pop(name, None)
        self.assign(name, set())
        self.by_nm.pop(name, None)
        self._shared.pop(name, None)

    def node_changed(
        self, node_name: str, node: Obj | None, maintenances: Mapping[str, Obj]
    ) -> None:
        for name, nm in maintenances.items():
            covered = self._covered.setdefault(name, set())
            if node is not None and involves(nm, node):
                covered.add(node_name)
            else:
                covered.discard(node_name)
            self.assign(name, covered | status_nodes(nm))

    def shares_nodes(self, name: str) -> bool:
        return self._shared.get(name, 0) > 0

    def component(self, names: Iterable[str]) -> tuple[set[str], set[str]]:
        """The maintenances connected to ``names`` through shared nodes, and their nodes."""
        start = {n for n in names if n in self.by_nm}
        if not any(self.shares_nodes(n) for n in start):
            return start, set().union(*(self.by_nm[n] for n in start))
        return connected(start, self.by_nm, self.by_node)

    def around_node(self, node: str) -> set[str]:
        """The maintenances connected to ``node``."""
        members = self.by_node.get(node, ())
        if len(members) == 1 and not self.shares_nodes(next(iter(members))):
            return set(members)
        return self.component(members)[0]
