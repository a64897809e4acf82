"""What of the watched objects the NodeMaintenance shell reads: the informers' node indexes,
the parts of pods and nodes a decision depends on (other updates enqueue nothing), and which
status writes are progress alone (written at a limited rate)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from nodeagent.kube.resources import Obj
from nodeagent.model.bodies import as_map, metadata_of
from nodeagent.model.names import CORDONED_BY_ANNOTATION, NODE_LABEL
from nodeagent.model.times import parse_time

__all__ = [
    "drain_started",
    "eviction_request_node_index",
    "node_signature",
    "pod_signature",
    "progress_only",
    "request_keys",
    "requests_by_name",
]


def eviction_request_node_index(er: Obj) -> list[str]:
    node = (metadata_of(er).get("labels") or {}).get(NODE_LABEL)
    return [node] if isinstance(node, str) and node else []


def pod_signature(pod: Obj) -> tuple[object, ...]:
    """What of a pod the decision depends on; other updates (status churn) are ignored."""
    meta = metadata_of(pod)
    spec = pod.get("spec") or {}
    annotations = meta.get("annotations") or {}
    return (
        meta.get("uid"),
        spec.get("nodeName"),
        spec.get("priority"),
        (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"),
        meta.get("deletionTimestamp") is not None,
        tuple(sorted((meta.get("labels") or {}).items())),
        tuple(sorted(annotations.items())),
        tuple(
            (r.get("kind"), r.get("controller"))
            for r in meta.get("ownerReferences") or ()
            if isinstance(r, Mapping)
        ),
    )


def requests_by_name(objs: Iterable[Obj]) -> dict[str, Obj]:
    return {str(metadata_of(o).get("name")): o for o in objs}


def request_keys(pods: Iterable[Obj]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The pods' UIDs, and the store keys of the EvictionRequests named after them."""
    metas = [metadata_of(p) for p in pods]
    uids = tuple(str(m.get("uid")) for m in metas)
    return uids, tuple(f"{m.get('namespace')}/{uid}" for m, uid in zip(metas, uids, strict=True))


def _without_progress(status: Mapping[str, Any]) -> dict[str, Any]:
    """`status` minus what changes with every pod that leaves: the pod counters (the summary's
    podsLeft among them) and the message of a Drained condition that is not True yet ("N pods
    left ...")."""
    out = dict(status)
    out["summary"] = {k: v for k, v in as_map(status.get("summary")).items() if k != "podsLeft"}
    out["nodeStatuses"] = [
        {k: v for k, v in ns.items() if k not in ("podsPendingEvacuation", "podsEvacuating")}
        for ns in status.get("nodeStatuses") or ()
        if isinstance(ns, Mapping)
    ]
    out["conditions"] = [
        {
            k: v
            for k, v in c.items()
            if not (k == "message" and c.get("type") == "Drained" and c.get("status") != "True")
        }
        for c in status.get("conditions") or ()
        if isinstance(c, Mapping)
    ]
    return out


def progress_only(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    return bool(old) and _without_progress(old) == _without_progress(new)


def node_signature(node: Obj) -> tuple[object, ...]:
    meta = metadata_of(node)
    return (
        tuple(sorted((meta.get("labels") or {}).items())),
        (meta.get("annotations") or {}).get(CORDONED_BY_ANNOTATION),
        (node.get("spec") or {}).get("unschedulable"),
        # a new boot ends the drain slot of the node's shutdown maintenance of the boot before
        as_map(as_map(node.get("status")).get("nodeInfo")).get("bootID"),
    )


def drain_started(nm: Mapping[str, Any]) -> datetime | None:
    """When the maintenance's Drain stage started (status.stageStatuses), if it says."""
    for entry in (nm.get("status") or {}).get("stageStatuses") or ():
        if isinstance(entry, Mapping) and entry.get("name") == "Drain":
            return parse_time(entry.get("startTimestamp"))
    return None
