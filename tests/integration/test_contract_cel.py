"""Contract tests of the CRDs' CEL rules (`x-kubernetes-validations`): the same invalid writes
against the simulated API server and kube-apiserver, each refused with 422 Invalid and the same
message and causes (the sim evaluates the rules since issue 25; see sim/cel.py), and the
writes next to them that both accept.

Raw HTTP, as in test_contract: the Status body is the point. Writes go as create (POST), update
(PUT), JSON merge patch and status update, as kube-apiserver validates each.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from typing import Any

import pytest

from nodeagent.kube.resources import Obj
from tests.clusters import TestCluster
from tests.integration.test_contract import Http

ERS = "/apis/nodeagent.io/v1alpha1/namespaces/default/evictionrequests"
NMS = "/apis/nodeagent.io/v1alpha1/nodemaintenances"
MERGE = "application/merge-patch+json"
T0 = "2030-01-01T00:00:00Z"

NOT_CHECKED = (
    "<nil>",
    "Invalid value: null: some validation rules were not checked because the object was "
    "invalid; correct the existing errors to complete validation",
)
HEARTBEAT = (
    "status.interceptors",
    "Invalid value: interceptors[].heartbeatTime: only the active interceptor may move its "
    "heartbeat, and at least 60s forward",
)
STAGE_FORWARD = (
    "stage may only move forward: Idle -> Cordon | Drain | Complete, Cordon -> Drain | "
    "Complete, Drain -> Complete"
)


@pytest.fixture
async def http(backend: TestCluster) -> AsyncIterator[Http]:
    await backend.install_crds()
    h = Http(backend)
    try:
        yield h
    finally:
        await h.session.close()


def eviction_request(uid: str, name: str | None = None, **spec: Any) -> Obj:
    return {
        "apiVersion": "nodeagent.io/v1alpha1",
        "kind": "EvictionRequest",
        "metadata": {"name": name or uid},
        "spec": {
            "target": {"pod": {"name": "web-0", "uid": uid}},
            "requesters": [{"name": "requester.example.com"}],
            **spec,
        },
    }


def maintenance(name: str, **spec: Any) -> Obj:
    return {
        "apiVersion": "nodeagent.io/v1alpha1",
        "kind": "NodeMaintenance",
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}]}
                ]
            },
            **spec,
        },
    }


def assert_invalid(
    answer: tuple[int, dict[str, str], Any], kind: str, name: str, *causes: tuple[str, str]
) -> None:
    """422 Invalid naming the object, the causes in order, the message as kube-apiserver's."""
    code, _, body = answer
    assert code == 422, body
    texts = [f"{f}: {m}" for f, m in causes]
    joined = texts[0] if len(texts) == 1 else f"[{', '.join(texts)}]"
    assert body["reason"] == "Invalid"
    assert body["message"] == f'{kind}.nodeagent.io "{name}" is invalid: {joined}'
    assert body["details"]["name"] == name
    assert body["details"]["kind"] == kind
    assert [(c["field"], c["message"]) for c in body["details"]["causes"]] == list(causes)


def assert_ok(answer: tuple[int, dict[str, str], Any]) -> Obj:
    code, _, body = answer
    assert code in (200, 201), body
    return dict(body)


async def test_eviction_request_create_rules(backend: TestCluster, http: Http) -> None:
    """The name must be the pod's UID (a rule at the root: field <nil>); a new request needs a
    requester (optionalOldSelf: runs on create, where there is no old object)."""
    assert_invalid(
        await http.call("POST", ERS, eviction_request("uid-1", name="not-the-uid")),
        "EvictionRequest",
        "not-the-uid",
        (
            "<nil>",
            "Invalid value: metadata.name must be the UID of the target pod (spec.target.pod.uid)",
        ),
    )
    body = eviction_request("uid-1")
    del body["spec"]["requesters"]
    assert_invalid(
        await http.call("POST", ERS, body),
        "EvictionRequest",
        "uid-1",
        (
            "spec.requesters",
            "Invalid value: at least one requester is required when creating an eviction request",
        ),
    )
    er = assert_ok(await http.call("POST", ERS, eviction_request("uid-1")))
    # once created, the last requester may leave (oldSelf.hasValue())
    emptied = copy.deepcopy(er)
    emptied["spec"]["requesters"] = []
    assert_ok(await http.call("PUT", f"{ERS}/uid-1", emptied))


async def test_eviction_request_target_is_immutable(backend: TestCluster, http: Http) -> None:
    er = assert_ok(await http.call("POST", ERS, eviction_request("uid-2")))
    moved = copy.deepcopy(er)
    moved["spec"]["target"]["pod"]["name"] = "web-1"
    target = ("spec.target", "Invalid value: target is immutable")
    assert_invalid(
        await http.call("PUT", f"{ERS}/uid-2", moved), "EvictionRequest", "uid-2", target
    )
    patch = {"spec": {"target": {"pod": {"name": "web-1"}}}}
    assert_invalid(
        await http.call("PATCH", f"{ERS}/uid-2", patch, MERGE), "EvictionRequest", "uid-2", target
    )


async def test_target_interceptors_are_immutable_once_set(backend: TestCluster, http: Http) -> None:
    """Set once through status; changed or removed after: refused. Their order is no change: the
    list is x-kubernetes-list-type map, whose CEL equality ignores order."""
    assert_ok(await http.call("POST", ERS, eviction_request("uid-3")))
    status = f"{ERS}/uid-3/status"
    targets = [{"name": "a.example.com"}, {"name": "b.example.com"}]
    assert_ok(await http.call("PATCH", status, {"status": {"targetInterceptors": targets}}, MERGE))
    immutable = (
        "status.targetInterceptors",
        "Invalid value: targetInterceptors is immutable once set",
    )
    for changed in ([targets[0]], [*targets, {"name": "c.example.com"}], None):
        assert_invalid(
            await http.call("PATCH", status, {"status": {"targetInterceptors": changed}}, MERGE),
            "EvictionRequest",
            "uid-3",
            immutable,
        )
    er = assert_ok(await http.call("GET", f"{ERS}/uid-3"))
    er["status"]["targetInterceptors"] = targets[::-1]
    assert_ok(await http.call("PUT", status, er))
    er = assert_ok(await http.call("GET", f"{ERS}/uid-3"))
    er["status"]["targetInterceptors"] = [{"name": "z.example.com"}]
    assert_invalid(await http.call("PUT", status, er), "EvictionRequest", "uid-3", immutable)


async def test_only_the_active_interceptor_heartbeats_60s_apart(
    backend: TestCluster, http: Http
) -> None:
    """KEP-4563: an interceptor not active may not write a heartbeat; the active one moves its
    heartbeat at least 60 s forward (or leaves it as it is)."""
    assert_ok(await http.call("POST", ERS, eviction_request("uid-4")))
    status = f"{ERS}/uid-4/status"
    a, b = "a.example.com", "b.example.com"
    setup = {
        "targetInterceptors": [{"name": a}, {"name": b}],
        "activeInterceptors": [a],
    }
    assert_ok(await http.call("PATCH", status, {"status": setup}, MERGE))

    def entries(*hb: tuple[str, str]) -> Obj:
        return {"status": {"interceptors": [{"name": n, "heartbeatTime": t} for n, t in hb]}}

    # the passive one: refused
    assert_invalid(
        await http.call("PATCH", status, entries((b, T0)), MERGE),
        "EvictionRequest",
        "uid-4",
        HEARTBEAT,
    )
    assert_ok(await http.call("PATCH", status, entries((a, T0)), MERGE))
    # 59 s later: too close; the same time again: no move, accepted
    too_soon = "2030-01-01T00:00:59Z"
    assert_invalid(
        await http.call("PATCH", status, entries((a, too_soon)), MERGE),
        "EvictionRequest",
        "uid-4",
        HEARTBEAT,
    )
    assert_ok(await http.call("PATCH", status, entries((a, T0)), MERGE))
    er = assert_ok(await http.call("PATCH", status, entries((a, "2030-01-01T00:01:00Z")), MERGE))
    # a status update (PUT) that adds the passive one's heartbeat beside it: refused
    er["status"]["interceptors"].append({"name": b, "heartbeatTime": T0})
    assert_invalid(await http.call("PUT", status, er), "EvictionRequest", "uid-4", HEARTBEAT)


async def test_nodemaintenance_stage_moves_only_forward(backend: TestCluster, http: Http) -> None:
    assert_ok(await http.call("POST", NMS, maintenance("nm-stage", stage="Drain")))
    back = ("spec.stage", f'Invalid value: "Cordon": {STAGE_FORWARD}')
    assert_invalid(
        await http.call("PATCH", f"{NMS}/nm-stage", {"spec": {"stage": "Cordon"}}, MERGE),
        "NodeMaintenance",
        "nm-stage",
        back,
    )
    nm = assert_ok(
        await http.call("PATCH", f"{NMS}/nm-stage", {"spec": {"stage": "Complete"}}, MERGE)
    )
    nm["spec"]["stage"] = "Idle"
    assert_invalid(
        await http.call("PUT", f"{NMS}/nm-stage", nm),
        "NodeMaintenance",
        "nm-stage",
        ("spec.stage", f'Invalid value: "Idle": {STAGE_FORWARD}'),
    )
    # a value the enum refuses blocks the CEL rules: one more error says they did not run
    assert_invalid(
        await http.call("PATCH", f"{NMS}/nm-stage", {"spec": {"stage": "Later"}}, MERGE),
        "NodeMaintenance",
        "nm-stage",
        (
            "spec.stage",
            'Unsupported value: "Later": supported values: "Idle", "Cordon", "Drain", "Complete"',
        ),
        NOT_CHECKED,
    )


async def test_nodemaintenance_drain_plan_is_immutable(backend: TestCluster, http: Http) -> None:
    plan = [{"podPriority": 1000, "podType": "Default"}]
    assert_ok(await http.call("POST", NMS, maintenance("nm-plan", drainPlan=plan)))
    assert_ok(await http.call("POST", NMS, maintenance("nm-noplan")))
    immutable = ("spec.drainPlan", "Invalid value: drainPlan is immutable")
    other = [{"podPriority": 2000, "podType": "Default"}]
    for name, new_plan in (("nm-plan", other), ("nm-plan", None), ("nm-noplan", plan)):
        assert_invalid(
            await http.call("PATCH", f"{NMS}/{name}", {"spec": {"drainPlan": new_plan}}, MERGE),
            "NodeMaintenance",
            name,
            immutable,
        )
    # the same plan again, with the stage moving on: accepted
    assert_ok(
        await http.call(
            "PATCH", f"{NMS}/nm-plan", {"spec": {"drainPlan": plan, "stage": "Cordon"}}, MERGE
        )
    )
