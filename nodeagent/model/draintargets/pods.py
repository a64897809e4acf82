"""The pods of a selected node as the drainTargets resolution reads them, and those a set of
drainTargets covers."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from nodeagent.model.drainplan import PodClass, classify, entry_covers, pod_labels
from nodeagent.model.draintargets.tracks import Track, to_entries, track_order
from nodeagent.model.interceptors.targets import InvalidInterceptors, target_interceptors
from nodeagent.model.memo import ObjectMemo
from nodeagent.model.podstate import pod_terminal, pod_terminating

__all__ = [
    "NO_PODS",
    "Covered",
    "NodePods",
    "PodInfo",
    "PodInfoMemo",
    "PodInfoOf",
    "PodRef",
]


@dataclass(frozen=True)
class PodRef:
    namespace: str
    name: str
    uid: str


def _ref_order(ref: PodRef) -> tuple[str, str, str]:
    return (ref.namespace, ref.name, ref.uid)


@dataclass(frozen=True)
class PodInfo:
    """A pod of a selected node. ``terminal``: phase Succeeded or Failed (counts as gone);
    ``terminating``: deletionTimestamp set (still there, but leaving)."""

    namespace: str
    name: str
    uid: str
    pod_class: PodClass
    labels: Mapping[str, str] = field(default_factory=dict, hash=False)
    terminal: bool = False
    terminating: bool = False
    interceptors_error: str | None = None
    """Why the pod's interceptors annotation is ignored (malformed), if it is."""

    @functools.cached_property
    def ref(self) -> PodRef:
        return PodRef(self.namespace, self.name, self.uid)

    @property
    def present(self) -> bool:
        """Counts for the drain: not terminal and not skipped."""
        return not self.terminal and not self.pod_class.skip

    @classmethod
    def from_pod(cls, pod: Mapping[str, Any]) -> PodInfo:
        metadata = pod.get("metadata")
        md: Mapping[str, Any] = metadata if isinstance(metadata, Mapping) else {}
        try:
            target_interceptors(pod)
            interceptors_error = None
        except InvalidInterceptors as exc:
            interceptors_error = str(exc)
        return cls(
            namespace=str(md.get("namespace") or "default"),
            name=str(md.get("name") or ""),
            uid=str(md.get("uid") or ""),
            pod_class=classify(pod),
            labels=pod_labels(pod),
            terminal=pod_terminal(pod),
            terminating=pod_terminating(pod),
            interceptors_error=interceptors_error,
        )


PodInfoOf = Callable[[Mapping[str, Any]], PodInfo]
"""How a decision gets a pod's PodInfo: :meth:`PodInfo.from_pod`, or a :class:`PodInfoMemo`."""


class PodInfoMemo(ObjectMemo[PodInfo]):
    """:meth:`PodInfo.from_pod` remembered per pod object."""

    def __init__(self) -> None:
        super().__init__(PodInfo.from_pod)


@dataclass(frozen=True)
class Covered:
    """The pods of a node that a set of drainTargets covers (present ones only)."""

    pods: tuple[PodInfo, ...]
    refs: tuple[PodRef, ...]
    """Their references, by namespace, name and UID."""
    evacuating: int
    """The node's present pods that are leaving: covered, or terminating anyway."""


class NodePods:
    """One node's pods as a resolution reads them, with what it derives from them kept with
    them: the pods left, and those each set of drainTargets covers. A controller that keeps
    one while the node's pods stay the same objects derives nothing again for that node, so a
    decision costs what changed rather than every pod of the maintenance."""

    def __init__(self, pods: Iterable[PodInfo]) -> None:
        self._pods = tuple(pods)
        self.present = tuple(p for p in self._pods if p.present)
        self.leaving = sum(1 for p in self.present if p.terminating)
        """Present pods that are terminating."""
        self.ignored_interceptors = tuple(p for p in self._pods if p.interceptors_error)
        """Pods whose interceptors annotation is malformed (ignored)."""
        self._covered: dict[tuple[tuple[Track, int], ...], Covered] = {}

    def __iter__(self) -> Iterator[PodInfo]:
        return iter(self._pods)

    def covered(self, tracks: Mapping[Track, int]) -> Covered:
        key = tuple(sorted(tracks.items(), key=track_order))
        found = self._covered.get(key)
        if found is None:
            entries = to_entries(tracks)
            pods = tuple(
                p
                for p in self.present
                if any(entry_covers(e, p.pod_class, p.labels) for e in entries)
            )
            uids = {p.uid for p in pods}
            found = self._covered[key] = Covered(
                pods=pods,
                refs=tuple(sorted({p.ref for p in pods}, key=_ref_order)),
                evacuating=sum(1 for p in self.present if p.uid in uids or p.terminating),
            )
        return found


NO_PODS = NodePods(())
"""The pods of a node missing from a resolution's input."""
