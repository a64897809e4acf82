"""The EvictionRequests of the targeted pods as one decision reads them: for each node, which
requests to create, start anew or add our requester to, and which pod's eviction the imperative
interceptor reports refused. Kept in ``Inputs.recall`` per node, derived again only when the
node's pods, its targeted pods or their requests changed."""

from __future__ import annotations

import operator
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nodeagent.model.bodies import deleting, labels_of, mapping, metadata_of
from nodeagent.model.draintargets.pods import PodRef
from nodeagent.model.draintargets.results import NodeDrainStatus
from nodeagent.model.interceptors.imperative import imperative_refusal_cause
from nodeagent.model.interceptors.requests import EvictionRequestView
from nodeagent.model.memo import Recall
from nodeagent.model.names import IMPERATIVE_INTERCEPTOR, NODE_LABEL, REQUESTER
from nodeagent.model.nodemaintenance.actions import (
    EvictionRequestCreate,
    EvictionRequestDelete,
    RequesterPatch,
)
from nodeagent.model.nodemaintenance.inputs import Inputs, RequestViewOf
from nodeagent.model.nodemaintenance.pods import BoundPods, PodReader


class _RequestViews(Mapping[str, EvictionRequestView]):
    """EvictionRequests by pod UID, each read when it is first looked up (a decision looks up
    each several times)."""

    def __init__(self, requests: Mapping[str, Mapping[str, Any]], view: RequestViewOf) -> None:
        self._requests = requests
        self._view = view
        self._read: dict[str, EvictionRequestView] = {}

    def __getitem__(self, uid: str) -> EvictionRequestView:
        found = self._read.get(uid)
        if found is None:
            found = self._read[uid] = self._view(self._requests[uid])
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(self._requests)

    def __len__(self) -> int:
        return len(self._requests)


# --- inputs and actions ------------------------------------------------------------------------

_Refused = tuple[str, str, str, str]
"""A targeted pod whose eviction is refused: namespace, name, UID, the refusal's cause."""


@dataclass(frozen=True)
class NodeRequests:
    """What the EvictionRequests of a node's targeted pods call for."""

    uids: frozenset[str]
    """The targeted pods'."""
    creates: tuple[EvictionRequestCreate, ...]
    deletes: tuple[EvictionRequestDelete, ...]
    requester_patches: tuple[RequesterPatch, ...]
    refused: _Refused | None
    """The first (by namespace and name) whose eviction the imperative interceptor reports
    refused."""
    terminating: tuple[str, str] | None = None
    """The first (namespace, name) that is terminating (evicted or deleted, still there)."""


def eviction_request_body(
    pod: Mapping[str, Any], requester: str, node: str | None = None
) -> dict[str, Any]:
    """A ``nodeagent.io/v1alpha1`` EvictionRequest for ``pod``, named after its UID, asked for
    by ``requester``, labelled with the pod's labels and ``node`` (the pod's ``spec.nodeName``
    when None) for the node's agent to watch. Owned by the pod: the garbage collector deletes
    the request with its pod, no delete of ours."""
    md = metadata_of(pod)
    name, uid = str(md.get("name") or ""), str(md.get("uid") or "")
    labels = {k: v for k, v in labels_of(pod).items() if isinstance(v, str)}
    node = node or mapping(pod, "spec").get("nodeName")
    if isinstance(node, str) and node:
        labels[NODE_LABEL] = node
    return {
        "apiVersion": "nodeagent.io/v1alpha1",
        "kind": "EvictionRequest",
        "metadata": {
            "name": uid,
            "namespace": str(md.get("namespace") or "default"),
            "labels": labels,
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": name, "uid": uid}],
        },
        "spec": {
            "target": {"pod": {"name": name, "uid": uid}},
            "requesters": [{"name": requester}],
        },
    }


def refusal(er: EvictionRequestView) -> str | None:
    """Why the imperative interceptor's evictions of a request's pod are refused (briefly, as
    ``status.summary.blockedBy`` shows it), or None. The shell reconciles the maintenances of
    a request's node when this changes."""
    entry = er.interceptors.get(IMPERATIVE_INTERCEPTOR)
    if er.finished or entry is None:
        return None
    return imperative_refusal_cause(entry.message)


_UID = operator.attrgetter("uid")


def node_requests(
    node: str,
    on: BoundPods,
    refs: Sequence[PodRef],
    views: Mapping[str, EvictionRequestView],
) -> NodeRequests:
    """Ask for the eviction of every targeted pod of ``node`` (``refs``): create its request,
    start a canceled one anew, or add our requester to someone else's; and which one's
    eviction is refused."""
    creates: list[EvictionRequestCreate] = []
    deletes: list[EvictionRequestDelete] = []
    patches: list[RequesterPatch] = []
    refused: list[_Refused] = []
    terminating: list[tuple[str, str]] = []
    for ref in refs:
        er = views.get(ref.uid)
        if er is not None and (cause := refusal(er)) is not None:
            refused.append((ref.namespace, ref.name, ref.uid, cause))
        pod = on.by_uid.get(ref.uid)
        if pod is None:
            continue
        if deleting(pod):
            terminating.append((ref.namespace, ref.name))
        if er is None:
            # A terminating pod is leaving already; its request (if it had one) may be
            # gone with it before the pod informer shows the pod gone.
            if not deleting(pod):
                creates.append(
                    EvictionRequestCreate(
                        ref.namespace, eviction_request_body(pod, REQUESTER, node)
                    )
                )
            continue
        if er.canceled:
            # A canceled request for a pod that is targeted again: start anew.
            if not er.deleting:
                deletes.append(
                    EvictionRequestDelete(
                        ref.namespace, ref.uid, er.uid, er.resource_version, "recreate"
                    )
                )
                creates.append(
                    EvictionRequestCreate(
                        ref.namespace, eviction_request_body(pod, REQUESTER, node)
                    )
                )
            continue
        if REQUESTER not in er.requesters and not er.deleting:
            patches.append(
                RequesterPatch(
                    ref.namespace, ref.uid, er.resource_version, (*er.requesters, REQUESTER)
                )
            )
    return NodeRequests(
        frozenset(ref.uid for ref in refs),
        tuple(creates),
        tuple(deletes),
        tuple(patches),
        min(refused, default=None),
        min(terminating, default=None),
    )


class RequestReader:
    """The EvictionRequests as one decision reads them: by pod UID (each read once), and what
    they call for on each node, derived again only when the node's pods, its targeted pods or
    their requests changed."""

    def __init__(self, inp: Inputs, recall: Recall, bound: PodReader) -> None:
        self._objects = inp.eviction_requests
        self.views: Mapping[str, EvictionRequestView] = _RequestViews(
            inp.eviction_requests, inp.request_view
        )
        self._recall = recall
        self._bound = bound
        # node -> (its targeted pods, what they call for) in this decision: asked for twice
        self._decided: dict[str, tuple[tuple[PodRef, ...], NodeRequests]] = {}

    def on(self, ns: NodeDrainStatus) -> NodeRequests:
        refs = ns.targeted_pods
        decided = self._decided.get(ns.node)
        if decided is not None and decided[0] is refs:
            return decided[1]
        on = self._bound.on(ns.node)
        key = (on, refs, tuple(map(self._objects.get, map(_UID, refs))))
        found = self._recall(
            ns.node, "requests", key, lambda: node_requests(ns.node, on, refs, self.views)
        )
        self._decided[ns.node] = (refs, found)
        return found
