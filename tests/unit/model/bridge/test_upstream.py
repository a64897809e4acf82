"""The eviction bridge on the upstream EvictionRequest API (nodeagent.model.bridge.upstream):
the pod's Eviction read as a request of our CRD, the bridge's own request, and the pod's own
responders waited for."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from nodeagent.model.bridge.decision import BridgeSettings, EvictionAttempt, decide
from nodeagent.model.bridge.upstream import bridge_view, request_name, upstream_write
from nodeagent.model.bridge.writes import EnsureUpstreamRequest
from nodeagent.model.interceptors.targets import SelectorInterceptor
from nodeagent.model.lifecycle.ourresponders import ResponderNames
from nodeagent.model.names import (
    BRIDGE_REQUESTER,
    IMPERATIVE_INTERCEPTOR,
    IMPERATIVE_RESPONDER,
    UPSTREAM_BRIDGE_REQUESTER,
)
from nodeagent.model.selectors import label_selector_from_dict

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
MOVER = SelectorInterceptor(
    "mover.example.com", label_selector_from_dict({"matchLabels": {"app": "db"}})
)
NAMES = ResponderNames([MOVER])
MOVER_RESPONDER = "annotate.nodeagent.io/mover.example.com"
OWN = "system:serviceaccount:nodeagent-system:nodeagent-controllers"
SETTINGS = BridgeSettings(own_users=frozenset({OWN}), configured=(MOVER,), responders=NAMES)
ATTEMPT = EvictionAttempt("ns", "db-0", None, dry_run=False, user="kubectl")


def pod(labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "db-0",
            "namespace": "ns",
            "uid": "u1",
            "labels": {"app": "db"} if labels is None else labels,
            "creationTimestamp": "2026-11-27T11:00:00Z",
        },
        "spec": {"nodeName": "node-1", **spec},
    }


def ours(intent: str = "Eviction") -> dict[str, Any]:
    body = upstream_write(pod()).body
    body["metadata"].update(uid="r1", resourceVersion="5", creationTimestamp="2026-11-27T11:59:00Z")
    body["spec"]["intent"] = intent
    return body


def eviction(
    active: str | None, *requesters: str, failed: bool = False, reason: str = "X"
) -> dict[str, Any]:
    """The pod's Eviction with `active` Active and those before it Completed; with None, every
    responder Completed."""
    states = {MOVER_RESPONDER: "Inactive", IMPERATIVE_RESPONDER: "Inactive"}
    if active is None:
        states = dict.fromkeys(states, "Completed")
    else:
        states[active] = "Active"
    if active == IMPERATIVE_RESPONDER:
        states[MOVER_RESPONDER] = "Completed"
    return {
        "metadata": {"name": "u1", "namespace": "ns", "uid": "e1", "resourceVersion": "9"},
        "spec": {"target": {"pod": {"name": "db-0", "uid": "u1"}}},
        "status": {
            "requesters": [{"name": r, "intent": "Eviction"} for r in requesters],
            "targetResponders": [
                {"name": MOVER_RESPONDER, "priority": 10000, "state": states[MOVER_RESPONDER]},
                {
                    "name": IMPERATIVE_RESPONDER,
                    "priority": 100,
                    "state": states[IMPERATIVE_RESPONDER],
                },
            ],
            "responders": [
                {"name": MOVER_RESPONDER, "message": "annotated; waiting for the pod to go."},
                {"name": IMPERATIVE_RESPONDER},
            ],
            "conditions": (
                [{"type": "Failed", "status": "True", "reason": reason}] if failed else []
            ),
        },
    }


def test_the_bridges_request_upstream() -> None:
    write = upstream_write(pod())
    assert write.namespace == "ns" and write.name == request_name("u1") == "eviction-bridge-u1"
    spec = write.body["spec"]
    assert spec == {
        "target": {"pod": {"name": "db-0", "uid": "u1"}},
        "requester": UPSTREAM_BRIDGE_REQUESTER,
        "intent": "Eviction",
    }
    assert write.body["metadata"]["ownerReferences"][0]["uid"] == "u1"


def test_an_eviction_without_the_bridge_gets_its_request() -> None:
    view = bridge_view(None, [eviction(MOVER_RESPONDER, "acme.io/drainer")], NAMES)
    assert view is not None and view.active == MOVER.name
    verdict = decide(ATTEMPT, pod(), view, None, SETTINGS, NOW)
    assert verdict.code == 429 and verdict.write is not None
    assert "interceptor mover.example.com" in verdict.message
    assert "annotated; waiting for the pod to go." in verdict.message


def test_the_bridges_request_counts_before_the_controller_took_it_in() -> None:
    # no Eviction yet: the bridge's own request, no interceptor's turn yet
    early = bridge_view(ours(), [], NAMES)
    assert early is not None and early.requesters == (BRIDGE_REQUESTER,)
    verdict = decide(ATTEMPT, pod(), early, None, SETTINGS, NOW)
    assert verdict.code == 429 and verdict.write is None
    # an Eviction that does not list it yet
    view = bridge_view(ours(), [eviction(MOVER_RESPONDER, "acme.io/drainer")], NAMES)
    assert view is not None and BRIDGE_REQUESTER in view.requesters
    assert decide(ATTEMPT, pod(), view, None, SETTINGS, NOW).write is None
    # listed under its upstream name: read as the bridge's
    listed = bridge_view(ours(), [eviction(MOVER_RESPONDER, UPSTREAM_BRIDGE_REQUESTER)], NAMES)
    assert listed is not None and listed.requesters == (BRIDGE_REQUESTER,)
    assert listed.creation_time == datetime(2026, 11, 27, 11, 59, tzinfo=UTC)


def test_the_evictors_turn_lets_the_eviction_through() -> None:
    view = bridge_view(ours(), [eviction(IMPERATIVE_RESPONDER, UPSTREAM_BRIDGE_REQUESTER)], NAMES)
    assert view is not None and view.active == IMPERATIVE_INTERCEPTOR
    assert decide(ATTEMPT, pod(), view, None, SETTINGS, NOW).allowed


def test_a_withdrawn_request_or_a_failed_eviction_is_asked_again() -> None:
    failed = eviction(MOVER_RESPONDER, failed=True)
    view = bridge_view(ours("Withdrawn"), [failed], NAMES)
    assert view is not None and view.canceled and BRIDGE_REQUESTER not in view.requesters
    verdict = decide(ATTEMPT, pod(), view, None, SETTINGS, NOW)
    assert verdict.code == 429 and verdict.write is not None


def test_an_eviction_no_responder_is_left_for_lets_the_eviction_through() -> None:
    # every responder is done and the pod is still there: the controller starts no new turn
    # for a new request, so asking again would answer 429 until the drain gives up
    failed = eviction(None, UPSTREAM_BRIDGE_REQUESTER, failed=True, reason="NoFurtherResponder")
    view = bridge_view(ours(), [failed], NAMES)
    assert view is not None and view.canceled and view.active is None
    verdict = decide(ATTEMPT, pod(), view, None, SETTINGS, NOW)
    assert verdict.allowed and verdict.why == "turn" and verdict.write is None


def test_the_pods_own_responders_are_waited_for() -> None:
    plain = pod(labels={"app": "web"})
    assert decide(ATTEMPT, plain, None, None, SETTINGS, NOW).allowed  # no interceptors
    declared = pod(
        labels={"app": "web"}, evictionResponders=[{"name": "acme.io/keeper", "priority": 20000}]
    )
    verdict = decide(ATTEMPT, declared, None, None, SETTINGS, NOW)
    assert verdict.code == 429 and "acme.io/keeper goes first" in verdict.message
    # on our CRD, which knows no responders, the bridge does not wait for them
    crd = replace(SETTINGS, responders=None)
    assert decide(ATTEMPT, declared, None, None, crd, NOW).allowed


def test_a_dry_run_writes_nothing_upstream_either() -> None:
    attempt = replace(ATTEMPT, dry_run=True)
    assert decide(attempt, pod(), None, None, SETTINGS, NOW).write is None
    assert isinstance(upstream_write(pod()), EnsureUpstreamRequest)
