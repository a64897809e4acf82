"""The static-pod interceptor's first decision about an EvictionRequest, pure."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from nodeagent.model.drainplan import MIRROR_ANNOTATION
from nodeagent.node.staticpods.plan import plan_eviction
from nodeagent.node.staticpods.policy import INTERCEPTOR, EvictionView

NOW = "2030-01-01T12:00:00Z"
MINUTE = timedelta(minutes=1)


def request(
    *, active: bool = True, finished: bool = False, entry: dict[str, Any] | None = None
) -> EvictionView:
    status: dict[str, Any] = {
        "activeInterceptors": [INTERCEPTOR] if active else [],
        "interceptors": [entry] if entry else [],
    }
    if finished:
        status["conditions"] = [{"type": "Evicted", "status": "True"}]
    return EvictionView.of(
        {
            "metadata": {"name": "u1", "namespace": "kube-system", "resourceVersion": "3"},
            "spec": {"target": {"pod": {"name": "etcd-node-1", "uid": "u1"}}},
            "status": status,
        }
    )


def pod(uid: str = "u1", mirror: bool = True) -> dict[str, Any]:
    annotations = {MIRROR_ANNOTATION: "h"} if mirror else {}
    return {"metadata": {"name": "etcd-node-1", "namespace": "kube-system", "uid": uid,
                         "annotations": annotations}}  # fmt: skip


def test_a_static_pod_in_its_turn_is_stopped() -> None:
    assert plan_eviction(request(), pod(), now=NOW, heartbeat_every=MINUTE).action == "stop_pod"


def test_not_our_turn_or_done_is_skipped() -> None:
    done = {"name": INTERCEPTOR, "startTime": NOW, "completionTime": NOW}
    for view in (request(active=False), request(finished=True), request(entry=done)):
        assert plan_eviction(view, pod(), now=NOW, heartbeat_every=MINUTE).action == "skip"


def test_gone_or_not_static_finishes_with_completion() -> None:
    for target, says in (
        (None, "is gone already"),
        (pod(uid="u2"), "is gone already"),
        (pod(mirror=False), "not a static (mirror) pod"),
    ):
        plan = plan_eviction(request(), target, now=NOW, heartbeat_every=MINUTE)
        assert plan.action == "finish" and plan.entry is not None
        assert plan.entry["completionTime"] == NOW and says in plan.entry["message"]


@given(beat_age=st.integers(0, 600), active=st.booleans(), finished=st.booleans())
def test_a_started_request_keeps_its_recent_heartbeat_when_it_finishes(
    beat_age: int, active: bool, finished: bool
) -> None:
    """Once started, the interceptor answers even after its turn, and completes without moving
    a heartbeat (KEP-4563's CEL rule refuses one from an interceptor whose turn is over)."""
    beat = f"2030-01-01T11:{59 - beat_age // 60:02d}:{59 - beat_age % 60:02d}Z"
    entry = {"name": INTERCEPTOR, "startTime": beat, "heartbeatTime": beat}
    view = request(active=active, finished=finished, entry=entry)
    plan = plan_eviction(view, None, now=NOW, heartbeat_every=MINUTE)
    assert plan.action == "finish" and plan.entry is not None
    assert plan.entry["heartbeatTime"] == beat and plan.entry["startTime"] == beat
    assert "static pod kube-system/etcd-node-1 is gone" in plan.entry["message"]
