"""The drainTargets of every valid maintenance in Drain, resolved together
(:func:`nodeagent.model.draintargets.resolve`). Under a drain limit each node goes through the
drain plan at its own pace (its position is recovered from its own drainTargets): a node
waiting for a slot must not hold back the nodes of its maintenance that drain, and those must
finish for the slot to pass on. Maintenances sharing a node still meet on it."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from nodeagent.model.bodies import (
    mapping,
)
from nodeagent.model.drainslots import Slots
from nodeagent.model.draintargets.resolution import resolve
from nodeagent.model.draintargets.results import MaintenanceDrain, Resolution
from nodeagent.model.draintargets.views import DRAIN_STAGE, MaintenanceView
from nodeagent.model.maintenance import (
    Stage,
)
from nodeagent.model.nodemaintenance.context import MaintenanceState
from nodeagent.model.nodemaintenance.limits import waiting_status
from nodeagent.model.nodemaintenance.pods import PodsOn
from nodeagent.model.nodemaintenance.selection import creation_key
from nodeagent.model.shutdown import request_node


def _drain_view(o: MaintenanceState) -> MaintenanceView | None:
    if o.stage != Stage.DRAIN or not o.validity.valid:
        return None
    status = mapping(o.obj, "status")
    index = status.get("drainPlanIndex")
    entry_index = index if isinstance(index, int) and not isinstance(index, bool) else None
    if entry_index is not None and not 0 <= entry_index < len(o.validity.plan):
        entry_index = None
    return MaintenanceView(
        name=o.name,
        creation_key=creation_key(o.obj),
        stage=DRAIN_STAGE,
        plan=o.validity.plan,
        nodes=o.selected,
        progress=o.progress,
        entry_index=entry_index,
    )


def resolve_drain(
    others: Mapping[str, MaintenanceState],
    pods_on: PodsOn,
    slots: Slots | None,
    over: Mapping[str, str] | None = None,
    held: Mapping[str, str] | None = None,
) -> Resolution | None:
    """The drainTargets of every valid maintenance in Drain, resolved together (None: none).
    Under a limit, node by node and only on the nodes admitted (see Drain slots); ``over``:
    ignored shutdown maintenances (name -> why), which take no slot; ``held``: reboots asked
    for that the windows or gates hold (name -> drainMessage), which take no slot either and
    keep the drainTargets they stored."""
    views = [view for o in others.values() if (view := _drain_view(o)) is not None]
    if not views:
        return None
    if slots is None:
        nodes_needed = {n for v in views for n in v.nodes}
        return resolve(views, {n: pods_on(n) for n in nodes_needed})
    ignored = over or {}
    holds = held or {}
    rebooting = {o.name for o in others.values() if request_node(o.obj) is not None}

    def admitted(name: str) -> frozenset[str]:
        """The nodes `name` drains now: none while it is an ignored shutdown maintenance or a
        held reboot, even where another maintenance holds the node's slot."""
        return frozenset() if name in ignored or name in holds else slots.admitted

    per_node = [
        dataclasses.replace(
            v,
            name=f"{v.name}/{node}",  # "/" is in no object name: unique
            shown=v.name,
            nodes=frozenset({node}),
            progress={node: v.progress[node]} if node in v.progress else {},
            entry_index=None,  # recovered from the node's own drainTargets
        )
        for v in views
        for node in sorted(v.nodes & admitted(v.name))
    ]
    resolved = resolve(per_node, {n: pods_on(n) for v in per_node for n in v.nodes})
    parts: dict[str, list[MaintenanceDrain]] = {}
    for v in per_node:
        parts.setdefault(v.label, []).append(resolved[v.name])
    out: dict[str, MaintenanceDrain] = {}
    for v in views:
        mine = parts.get(v.name, [])
        waiting = [
            waiting_status(
                n,
                pods_on(n),
                slots,
                ignored.get(v.name),
                reboot=v.name in rebooting,
                held=holds.get(v.name),
                kept=v.progress.get(n, ()),  # a stopped drain's, until it resumes
            )
            for n in sorted(v.nodes - admitted(v.name))
        ]
        nodes = sorted([*(ns for m in mine for ns in m.nodes), *waiting], key=lambda ns: ns.node)
        # The least advanced node's entry; a node that waits has not started the plan.
        index = 0 if waiting or not mine else min(m.entry_index for m in mine)
        out[v.name] = MaintenanceDrain(
            name=v.name,
            entry_index=index,
            current_entry=v.plan[index],
            nodes=tuple(nodes),
            drained=all(ns.drained for ns in nodes),
            fast_forwards=tuple(ff for m in mine for ff in m.fast_forwards),
        )
    return Resolution(out)
