"""Our upstream requests as the NodeMaintenance decision reads requests
(nodeagent.model.lifecycle.mirror)."""

from __future__ import annotations

from typing import Any

from nodeagent.model.interceptors.requests import EvictionRequestView
from nodeagent.model.lifecycle.mirror import (
    as_crd_request,
    intent,
    upstream_body,
    upstream_name,
)
from nodeagent.model.names import (
    IMPERATIVE_INTERCEPTOR,
    IMPERATIVE_RESPONDER,
    NODE_LABEL,
    REQUESTER,
)

UID = "9d3c2b1a-0000-4000-8000-00000000000a"
OWNER = {"apiVersion": "v1", "kind": "Pod", "name": "web-0", "uid": UID}
CRD_BODY = {
    "apiVersion": "nodeagent.io/v1alpha1",
    "kind": "EvictionRequest",
    "metadata": {
        "name": UID,
        "namespace": "default",
        "labels": {"app": "web", NODE_LABEL: "node-1"},
        "ownerReferences": [OWNER],
    },
    "spec": {"target": {"pod": {"name": "web-0", "uid": UID}}, "requesters": [{"name": REQUESTER}]},
}


def ours(intent_: str = "Eviction") -> dict[str, Any]:
    body = upstream_body(CRD_BODY)
    body["metadata"].update(
        uid="req-uid", resourceVersion="11", creationTimestamp="2026-11-27T10:00:00Z"
    )
    body["spec"]["intent"] = intent_
    return body


def eviction(**conditions: tuple[str, str]) -> dict[str, Any]:
    return {
        "status": {
            "conditions": [
                {"type": t, "status": s, "reason": r} for t, (s, r) in conditions.items()
            ],
            "responders": [{"name": IMPERATIVE_RESPONDER, "message": "number of retries: 3"}],
        }
    }


def test_the_decisions_create_becomes_our_upstream_request() -> None:
    body = upstream_body(CRD_BODY)
    assert body["metadata"]["name"] == upstream_name(UID) == "nodemaintenance-" + UID
    assert body["metadata"]["labels"] == {"app": "web", NODE_LABEL: "node-1"}
    assert body["metadata"]["ownerReferences"] == [OWNER]  # collected with its pod
    assert body["spec"] == {
        "target": {"pod": {"name": "web-0", "uid": UID}},
        "requester": "nodeagent.io/node-maintenance",
        "intent": "Eviction",
    }


def test_our_requester_in_or_out_is_our_intent() -> None:
    assert intent((REQUESTER,)) == "Eviction"
    assert intent(("someone.else",)) == "Withdrawn"


def test_a_request_in_progress_reads_as_ours_with_the_evictors_message() -> None:
    view = EvictionRequestView.from_obj(
        as_crd_request(ours(), eviction(Failed=("False", "AwaitingEviction")))
    )
    assert (view.name, view.uid, view.resource_version) == (UID, "req-uid", "11")
    assert view.requesters == (REQUESTER,) and not view.finished
    assert view.node == "node-1" and view.owned_by_target
    assert view.entry(IMPERATIVE_INTERCEPTOR).message == "number of retries: 3"


def test_evicted_withdrawn_and_failed_read_as_evicted_or_canceled() -> None:
    evicted = as_crd_request(ours(), eviction(TargetEvicted=("True", "PodDeleted")))
    assert EvictionRequestView.from_obj(evicted).evicted
    withdrawn = EvictionRequestView.from_obj(as_crd_request(ours("Withdrawn"), None))
    assert withdrawn.canceled and withdrawn.requesters == ()
    failed = as_crd_request(ours(), eviction(Failed=("True", "NoFurtherResponder")))
    assert EvictionRequestView.from_obj(failed).canceled
