"""The pods bound to each node as one decision reads them.

Cost: a decision over a large maintenance is taken again on every change of its pods, so what
it derives per node is kept in ``Inputs.recall`` and derived again only when the node's pods
changed: an unchanged node costs a lookup, not a pass over its pods. The result is the same
with or without it (the tests check both)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nodeagent.model.bodies import (
    metadata_of,
)
from nodeagent.model.draintargets.pods import NodePods, PodInfoOf
from nodeagent.model.memo import Recall
from nodeagent.model.nodemaintenance.inputs import Inputs


@dataclass(frozen=True, eq=False)
class BoundPods:
    """The pods bound to one node: as objects by UID, and as the drain reads them."""

    by_uid: Mapping[str, Mapping[str, Any]]
    pods: NodePods

    @classmethod
    def read(cls, objects: Sequence[Mapping[str, Any]], info: PodInfoOf) -> BoundPods:
        by_uid: dict[str, Mapping[str, Any]] = {}
        for pod in objects:
            uid = metadata_of(pod).get("uid")
            if isinstance(uid, str) and uid:
                by_uid[uid] = pod
        return cls(by_uid, NodePods(info(p) for p in objects))


PodsOn = Callable[[str], NodePods]
"""A node's pods as the drain reads them."""


class PodReader:
    """The pods bound to each node as one decision reads them, derived again only when they
    changed."""

    def __init__(self, inp: Inputs, recall: Recall) -> None:
        self._pods = inp.pods
        self._info = inp.pod_info
        self._recall = recall

    def on(self, node: str) -> BoundPods:
        objects = self._pods.get(node, ())
        key = objects if isinstance(objects, tuple) else tuple(objects)
        return self._recall(node, "pods", key, lambda: BoundPods.read(key, self._info))

    def pods(self, node: str) -> NodePods:
        return self.on(node).pods
