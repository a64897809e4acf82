"""The eviction bridge on the upstream EvictionRequest API, pure: where the server serves
`lifecycle.k8s.io/v1alpha1`, the bridge asks for an eviction with a request of its own there
(`eviction-bridge-<pod UID>`, requester `nodeagent.io/eviction-bridge`, owned by the pod), and
reads the pod's Eviction as the decision reads a request of our CRD (`ourresponders`: the
responders named as the interceptors they stand for), so that :mod:`.decision` decides alike on
both APIs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from nodeagent.model.bodies import deleting, mapping, metadata_of, version_of
from nodeagent.model.bridge.writes import EnsureUpstreamRequest
from nodeagent.model.interceptors.requests import EvictionRequestView
from nodeagent.model.lifecycle.mirror import upstream_body
from nodeagent.model.lifecycle.ourresponders import ResponderNames, view_of_eviction
from nodeagent.model.lifecycle.responders import pod_responders
from nodeagent.model.lifecycle.succession import current
from nodeagent.model.names import BRIDGE_REQUESTER, IMPERATIVE_RESPONDER, UPSTREAM_BRIDGE_REQUESTER
from nodeagent.model.nodemaintenance.requests import eviction_request_body
from nodeagent.model.times import parse_time

__all__ = ["NAME_PREFIX", "bridge_view", "own_responders", "request_name", "upstream_write"]

NAME_PREFIX = "eviction-bridge-"


def request_name(pod_uid: str) -> str:
    return NAME_PREFIX + pod_uid


def _wants(request: Mapping[str, Any] | None) -> bool:
    return request is not None and mapping(request, "spec").get("intent") == "Eviction"


def bridge_view(
    ours: Mapping[str, Any] | None,
    evictions: Sequence[Mapping[str, Any]],
    names: ResponderNames,
) -> EvictionRequestView | None:
    """The pod's Eviction (the one its requests mirror) as a request of our CRD, the bridge's
    requester under its CRD name (also before the controller took in the bridge's request);
    before there is an Eviction, the bridge's own request as one no interceptor had a turn at
    yet; None when neither is there."""
    eviction = current(evictions)
    asked = parse_time(metadata_of(ours).get("creationTimestamp")) if ours else None
    if eviction is not None:
        view = view_of_eviction(eviction, names)
        requesters = [
            BRIDGE_REQUESTER if r == UPSTREAM_BRIDGE_REQUESTER else r for r in view.requesters
        ]
        if _wants(ours) and BRIDGE_REQUESTER not in requesters:
            requesters.append(BRIDGE_REQUESTER)
        return replace(
            view, requesters=tuple(requesters), creation_time=asked or view.creation_time
        )
    if ours is None:
        return None
    md = metadata_of(ours)
    target = mapping(mapping(mapping(ours, "spec"), "target"), "pod")
    return EvictionRequestView(
        namespace=str(md.get("namespace") or ""),
        name=str(md.get("name") or ""),
        uid=str(md.get("uid") or ""),
        generation=0,
        creation_time=asked,
        target_name=str(target.get("name") or ""),
        target_uid=str(target.get("uid") or ""),
        requesters=(BRIDGE_REQUESTER,) if _wants(ours) else (),
        target_interceptors=None,
        active=None,
        processed=(),
        resource_version=version_of(ours),
        deleting=deleting(ours),
    )


def upstream_write(pod: Mapping[str, Any]) -> EnsureUpstreamRequest:
    """What any write the decision asks for on our CRD (create the request, add the bridge as
    requester, ask again after a cancellation) is upstream, where each requester has a request
    of its own: the bridge's request for `pod`, wanting the eviction (made, or its intent set
    back to Eviction: the controller starts a canceled Eviction over for it)."""
    crd = eviction_request_body(pod, BRIDGE_REQUESTER)
    body = upstream_body(crd, requester=UPSTREAM_BRIDGE_REQUESTER, prefix=NAME_PREFIX)
    return EnsureUpstreamRequest(str(body["metadata"]["namespace"]), body)


def own_responders(pod: Mapping[str, Any], names: ResponderNames) -> tuple[str, ...]:
    """The pod's own `spec.evictionResponders` (besides the imperative evictor), named as the
    interceptors they stand for: the bridge waits for them too."""
    return tuple(
        names.interceptor(r.name) for r in pod_responders(pod) if r.name != IMPERATIVE_RESPONDER
    )
