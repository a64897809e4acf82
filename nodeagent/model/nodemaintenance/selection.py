"""Which nodes a maintenance has to do with, and which maintenances intersect through shared nodes.

A maintenance selects the nodes its nodeSelector matches; it has to do with those, the nodes its
status reports and the nodes it holds a cordon on (annotation ``nodeagent.io/cordoned-by``).
Maintenances sharing such nodes are decided together."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from typing import Any

from nodeagent.model.bodies import mapping, metadata_of, name_of
from nodeagent.model.maintenance import (
    selected_nodes,
)
from nodeagent.model.memo import Recall
from nodeagent.model.nodemaintenance.inputs import Inputs


def recall_group(maintenance: str) -> str:
    """The Recall group of what decisions derive for a maintenance (a node's is its name; no
    node name has a "/")."""
    return f"nodemaintenance/{maintenance}"


def selection(inp: Inputs, recall: Recall, nm: Mapping[str, Any]) -> frozenset[str]:
    """:func:`selected_nodes` of ``nm``, derived again only when its selector or a node
    changed."""
    key = (mapping(nm, "spec").get("nodeSelector"), tuple(inp.nodes), tuple(inp.nodes.values()))
    group = recall_group(name_of(nm))
    return recall(group, "selection", key, lambda: selected_nodes(nm, inp.nodes))


def connected(
    start: Iterable[str],
    node_sets: Mapping[str, AbstractSet[str]],
    by_node: Mapping[str, Iterable[str]] | None = None,
) -> tuple[set[str], set[str]]:
    """The maintenances (by name) transitively sharing nodes with ``start``, and their nodes.

    ``node_sets`` maps every maintenance to its nodes (:func:`maintenance_nodes`); ``by_node``
    is its reverse, if the caller keeps one."""
    if by_node is None:
        reverse: dict[str, list[str]] = {}
        for name, ns in node_sets.items():
            for n in ns:
                reverse.setdefault(n, []).append(name)
        by_node = reverse
    seen = {s for s in start if s in node_sets}
    frontier = list(seen)
    nodes: set[str] = set()
    while frontier:
        current = frontier.pop()
        for n in node_sets[current]:
            if n in nodes:
                continue
            nodes.add(n)
            for other in by_node.get(n, ()):
                if other not in seen:
                    seen.add(other)
                    frontier.append(other)
    return seen, nodes


def creation_key(nm: Mapping[str, Any]) -> tuple[str, str]:
    md = metadata_of(nm)
    return (str(md.get("creationTimestamp") or ""), str(md.get("name") or ""))


def selects_every_node(
    selected: frozenset[str], nodes: Mapping[str, Mapping[str, Any]]
) -> str | None:
    """KEP-4212 asks for a warning when a maintenance selects every node of the cluster (a
    cordon of all of them leaves nowhere to go); the message, or None."""
    if len(nodes) > 1 and selected >= set(nodes):
        return (
            f"The maintenance selects every node of the cluster ({len(nodes)}): pods it drains "
            "have nowhere to go until nodes come back"
        )
    return None


def admission_warning(nm: Mapping[str, Any], nodes: Mapping[str, Mapping[str, Any]]) -> str | None:
    """The warning a NodeMaintenance gets as it is created or its selector changed (KEP-4212:
    it selects every node), naming it; None when it has none."""
    warning = selects_every_node(selected_nodes(nm, nodes), nodes)
    if warning is None:
        return None
    md = metadata_of(nm)
    return f"NodeMaintenance {md.get('name') or md.get('generateName')}: {warning}"
