"""The AdmissionReview the bridge reads and the one it answers with."""

from __future__ import annotations

from typing import Any

import pytest

from nodeagent.model.bridge.decision import EvictionAttempt, Verdict
from nodeagent.model.bridge.review import (
    BadReview,
    Unsupported,
    allowed_review,
    read_maintenance_review,
    read_review,
    review,
)


def admission(**request: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "uid": "r1",
        "kind": {"group": "policy", "version": "v1", "kind": "Eviction"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "subResource": "eviction",
        "name": "db-0",
        "namespace": "ns",
        "operation": "CREATE",
        "userInfo": {"username": "admin"},
        "object": {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": "db-0", "namespace": "ns"},
        },
        "dryRun": False,
    }
    base.update(request)
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": base}


def test_a_kubectl_drain_eviction_is_read() -> None:
    assert read_review(admission()) == ("r1", EvictionAttempt("ns", "db-0", None, False, "admin"))


def test_the_uid_precondition_and_both_dry_runs_are_read() -> None:
    options = {"preconditions": {"uid": "u1"}, "dryRun": ["All"]}
    obj = {"metadata": {"name": "db-0"}, "deleteOptions": options}
    _, a = read_review(admission(object=obj))
    assert (a.uid, a.dry_run) == ("u1", True)
    _, a = read_review(admission(dryRun=True))
    assert a.dry_run


@pytest.mark.parametrize(
    "body",
    [[], {"apiVersion": "v1", "kind": "Status"}, {**admission(), "request": {"name": "x"}}],
)
def test_what_cannot_be_answered_is_a_bad_review(body: object) -> None:
    with pytest.raises(BadReview):
        read_review(body)


@pytest.mark.parametrize(
    "change",
    [{"subResource": "status"}, {"operation": "UPDATE"}, {"name": None, "object": {}}],
)
def test_other_requests_are_unsupported_with_their_uid(change: dict[str, Any]) -> None:
    with pytest.raises(Unsupported) as raised:
        read_review(admission(**change))
    assert raised.value.uid == "r1"


def test_a_denial_carries_code_and_reason_and_no_retry_after() -> None:
    # a Retry-After would have client-go retry by itself, silently and past kubectl's timeout
    verdict = Verdict(False, "waiting", "wait", code=429)
    assert review("r1", verdict) == {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {
            "uid": "r1",
            "allowed": False,
            "status": {
                "status": "Failure",
                "code": 429,
                "reason": "TooManyRequests",
                "message": "wait",
            },
        },
    }
    gone = review("r1", Verdict(False, "gone", "gone", code=404))["response"]["status"]
    assert (gone["code"], gone["reason"], "details" in gone) == (404, "NotFound", False)


def test_allowed_answers_with_a_warning_only_when_there_is_one() -> None:
    assert review("r1", Verdict(True, "own"))["response"] == {"uid": "r1", "allowed": True}
    warned = allowed_review("r1", "not an eviction")["response"]
    assert warned["warnings"] == ["nodeagent eviction bridge: not an eviction"]


def maintenance_review(**request: Any) -> dict[str, Any]:
    body = admission(
        kind={"group": "nodeagent.io", "version": "v1alpha1", "kind": "NodeMaintenance"},
        resource={"group": "nodeagent.io", "version": "v1alpha1", "resource": "nodemaintenances"},
        subResource=None,
        name="m1",
        namespace=None,
        object={"metadata": {"name": "m1"}, "spec": {}},
    )
    body["request"].update(request)
    return body


def test_a_maintenance_review_is_read_for_create_and_update() -> None:
    assert read_maintenance_review(maintenance_review()) == (
        "r1",
        {"metadata": {"name": "m1"}, "spec": {}},
    )
    assert read_maintenance_review(maintenance_review(operation="UPDATE"))[0] == "r1"


@pytest.mark.parametrize(
    "change",
    [
        {"operation": "DELETE"},
        {"subResource": "status"},
        {"resource": {"group": "", "version": "v1", "resource": "pods"}},
        {"object": None},
        {"object": ["not", "an", "object"]},
    ],
)
def test_other_maintenance_requests_are_unsupported_with_their_uid(change: dict[str, Any]) -> None:
    with pytest.raises(Unsupported) as raised:
        read_maintenance_review(maintenance_review(**change))
    assert raised.value.uid == "r1"


def test_an_unreadable_maintenance_review_is_a_bad_review() -> None:
    bodies: list[object] = [
        [],
        {"apiVersion": "v1"},
        {**maintenance_review(), "request": {"uid": ""}},
    ]
    for body in bodies:
        with pytest.raises(BadReview):
            read_maintenance_review(body)
