"""What the EvictionRequests of a node's targeted pods call for."""

from __future__ import annotations

from typing import Any

from nodeagent.model.draintargets.pods import PodInfo, PodRef
from nodeagent.model.interceptors.requests import EvictionRequestView
from nodeagent.model.nodemaintenance.pods import BoundPods
from nodeagent.model.nodemaintenance.requests import node_requests

Obj = dict[str, Any]
REQUESTER = "nodemaintenance.k8s.io"


def pod(name: str, *, terminating: bool = False) -> Obj:
    meta: Obj = {"name": name, "namespace": "default", "uid": f"uid-{name}"}
    if terminating:
        meta["deletionTimestamp"] = "2024-05-01T10:00:00Z"
    return {"metadata": meta, "spec": {"nodeName": "a"}}


def request(name: str, requesters: list[str], *, canceled: bool = False) -> EvictionRequestView:
    conditions = [{"type": "Canceled", "status": "True"}] if canceled else []
    return EvictionRequestView.from_obj(
        {
            "metadata": {"name": f"uid-{name}", "namespace": "default", "uid": f"er-{name}"},
            "spec": {
                "target": {"pod": {"name": name, "uid": f"uid-{name}"}},
                "requesters": [{"name": r} for r in requesters],
            },
            "status": {"conditions": conditions},
        }
    )


def ref(name: str) -> PodRef:
    return PodRef("default", name, f"uid-{name}")


def test_each_targeted_pod_gets_a_request_unless_it_is_leaving() -> None:
    on = BoundPods.read([pod("p"), pod("q", terminating=True)], PodInfo.from_pod)
    asks = node_requests("a", on, [ref("p"), ref("q")], {})
    assert asks.uids == {"uid-p", "uid-q"}
    [create] = asks.creates
    assert create.body["metadata"]["name"] == "uid-p"
    assert create.body["metadata"]["labels"]["nodeagent.io/node"] == "a"
    assert create.body["spec"]["requesters"] == [{"name": REQUESTER}]
    assert not asks.deletes and not asks.requester_patches and asks.refused is None


def test_a_canceled_request_starts_anew_and_another_requester_is_joined() -> None:
    on = BoundPods.read([pod("p"), pod("q")], PodInfo.from_pod)
    views = {"uid-p": request("p", [], canceled=True), "uid-q": request("q", ["someone"])}
    asks = node_requests("a", on, [ref("p"), ref("q")], views)
    assert [(d.name, d.why) for d in asks.deletes] == [("uid-p", "recreate")]
    assert [c.body["metadata"]["name"] for c in asks.creates] == ["uid-p"]
    assert [(p.name, p.requesters) for p in asks.requester_patches] == [
        ("uid-q", ("someone", REQUESTER))
    ]
