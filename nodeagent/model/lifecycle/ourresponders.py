"""nodeagent's own interceptors as responders of upstream Evictions, pure: their names there,
which of a pod's interceptors take a turn upstream, and an Eviction read as the interceptors
read our CRD's requests (:class:`EvictionRequestView`), so that they run unchanged on both APIs.

`*.k8s.io` names are the server's, so ours are under `nodeagent.io`: the DaemonSet interceptor
responds as `nodeagent.io/daemonset`, the node agents' static-pod interceptor as
`nodeagent.io/static-pod` (each for its node's Evictions, which carry the node's label), an
annotate-and-wait rule as `annotate.nodeagent.io/<rule name>` (a rule whose name is too long
for that has no upstream name). Pods naming interceptors of others in
`nodeagent.io/eviction-interceptors`, which serve our CRD, stay on our CRD."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from nodeagent.model.bodies import condition, items, mapping
from nodeagent.model.interceptors.requests import CANCELED, EVICTED, EvictionRequestView
from nodeagent.model.interceptors.status import InterceptorStatus
from nodeagent.model.interceptors.targets import (
    InvalidInterceptors,
    SelectorInterceptor,
    target_interceptors,
)
from nodeagent.model.lifecycle.eviction import FAILED, TARGET_EVICTED
from nodeagent.model.lifecycle.responders import MAX_RESPONDERS, Responder, sort_responders
from nodeagent.model.names import (
    ANNOTATE_RESPONDER_DOMAIN,
    DAEMONSET_INTERCEPTOR,
    DAEMONSET_RESPONDER,
    IMPERATIVE_INTERCEPTOR,
    IMPERATIVE_RESPONDER,
    KUBELET_INTERCEPTOR,
    OWN_RESPONDER_PRIORITY,
    STATIC_POD_RESPONDER,
)
from nodeagent.model.selectors import validate_label_key

__all__ = [
    "ResponderNames",
    "as_interceptor_entry",
    "as_responder_entry",
    "our_responders",
    "responder_entry",
    "upstream_evicts",
    "view_of_eviction",
]

_FINAL = ("Interrupted", "Canceled", "Completed")
_FIXED = {
    IMPERATIVE_INTERCEPTOR: IMPERATIVE_RESPONDER,
    DAEMONSET_INTERCEPTOR: DAEMONSET_RESPONDER,
    KUBELET_INTERCEPTOR: STATIC_POD_RESPONDER,
}


class ResponderNames:
    """Our interceptors' names and their responder names upstream, both ways."""

    def __init__(
        self, configured: Sequence[SelectorInterceptor], *, listed_by_us: bool = True
    ) -> None:
        """`listed_by_us` False: the names as Kubernetes' own controller lists responders (the
        pod's own and the imperative evictor, none of ours); where it runs, a pod with one of
        our interceptors is asked for on our CRD, where that interceptor gets its turn."""
        self.configured = tuple(configured)
        to = dict(_FIXED) if listed_by_us else {IMPERATIVE_INTERCEPTOR: IMPERATIVE_RESPONDER}
        for c in configured if listed_by_us else ():
            name = f"{ANNOTATE_RESPONDER_DOMAIN}/{c.name}"
            if validate_label_key(name) is None:
                to[c.name] = name
        self._to = to
        self._back = {v: k for k, v in to.items()}

    def responder(self, interceptor: str) -> str | None:
        """`interceptor`'s responder name upstream; None when it takes no turn there."""
        return self._to.get(interceptor)

    def interceptor(self, responder: str) -> str:
        """The interceptor a responder name stands for (others' names as they are)."""
        return self._back.get(responder, responder)


def _interceptors(pod: Mapping[str, Any], names: ResponderNames) -> tuple[str, ...] | None:
    try:
        return target_interceptors(pod, names.configured)
    except InvalidInterceptors:
        return None  # our CRD's controller says what is wrong with it


def upstream_evicts(pod: Mapping[str, Any], names: ResponderNames) -> bool:
    """Whether every interceptor of `pod` takes its turn on the upstream API too, so a
    maintenance may ask for the pod's eviction there."""
    interceptors = _interceptors(pod, names)
    return interceptors is not None and all(names.responder(i) for i in interceptors)


def our_responders(pod: Mapping[str, Any] | None, names: ResponderNames) -> tuple[Responder, ...]:
    """The responders of ours an Eviction of `pod` gets besides the pod's own: its
    interceptors that have an upstream name, in their order on our CRD (priorities counting
    down from OWN_RESPONDER_PRIORITY), without the imperative eviction (always there)."""
    interceptors = _interceptors(pod, names) if pod is not None else None
    ours = [names.responder(i) for i in interceptors or () if i != IMPERATIVE_INTERCEPTOR]
    return tuple(
        Responder(name, OWN_RESPONDER_PRIORITY - i)
        for i, name in enumerate(n for n in ours if n is not None)
    )[: MAX_RESPONDERS - 1]


def view_of_eviction(eviction: Mapping[str, Any], names: ResponderNames) -> EvictionRequestView:
    """`eviction` as our interceptors read a request of our CRD: responders named as the
    interceptors they stand for, its Active one active, those in a final state processed,
    Evicted on TargetEvicted, Canceled when it failed (no requester wants it, or no responder
    is left), requesters those whose intent is Eviction."""
    status = mapping(eviction, "status")
    order = [
        (names.interceptor(str(t.get("name"))), t.get("state"))
        for t in sort_responders(items(status, "targetResponders"))
    ]
    conditions = []
    for type_, ours in ((TARGET_EVICTED, EVICTED), (FAILED, CANCELED)):
        c = condition(status, type_)
        if c is not None:
            conditions.append({**c, "type": ours})
    entries = {}
    for raw in items(status, "responders"):
        entry = InterceptorStatus.from_dict(as_interceptor_entry(raw, names))
        entries[entry.name] = entry
    base = EvictionRequestView.from_obj(eviction)
    return EvictionRequestView(
        namespace=base.namespace,
        name=base.name,
        uid=base.uid,
        generation=base.generation,
        creation_time=base.creation_time,
        target_name=base.target_name,
        target_uid=base.target_uid,
        requesters=tuple(
            str(r.get("name")) for r in items(status, "requesters") if r.get("intent") == "Eviction"
        ),
        target_interceptors=tuple(name for name, _ in order) or None,
        active=next((name for name, state in order if state == "Active"), None),
        processed=tuple(name for name, state in order if state in _FINAL),
        interceptors=entries,
        conditions=tuple(conditions),
        resource_version=base.resource_version,
        deleting=base.deleting,
    )


def responder_entry(entry: InterceptorStatus, names: ResponderNames) -> dict[str, Any]:
    """An interceptor's entry as its `status.responders` entry upstream."""
    return as_responder_entry(entry.to_dict(), names)


def as_responder_entry(entry: Mapping[str, Any], names: ResponderNames) -> dict[str, Any]:
    """A `status.interceptors` entry as the same interceptor's `status.responders` entry."""
    out = dict(entry)
    out["name"] = names.responder(str(entry.get("name"))) or entry.get("name")
    if "expectedFinishTime" in out:
        out["expectedCompletionTime"] = out.pop("expectedFinishTime")
    return out


def as_interceptor_entry(entry: Mapping[str, Any], names: ResponderNames) -> dict[str, Any]:
    """A `status.responders` entry as the `status.interceptors` entry of its interceptor."""
    out = {**entry, "name": names.interceptor(str(entry.get("name")))}
    if "expectedCompletionTime" in out:
        out["expectedFinishTime"] = out.pop("expectedCompletionTime")
    return out
