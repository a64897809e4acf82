"""The bridge's memory of pods gone: whichever delete event (pod or EvictionRequest) comes
first, only for the bridge's requests, and only for a while."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from nodeagent.bridge.departures import Departures
from nodeagent.model.bridge.decision import Departed
from nodeagent.model.interceptors.requests import EvictionRequestView
from nodeagent.model.names import BRIDGE_REQUESTER, REQUESTER
from nodeagent.model.times import format_time

START = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
ASKED = START - timedelta(minutes=1)
KEEP = timedelta(minutes=5)


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


def pod(uid: str = "u1") -> dict[str, Any]:
    return {"metadata": {"name": "db-0", "namespace": "ns", "uid": uid}}


def request(uid: str = "u1", requester: str = BRIDGE_REQUESTER) -> EvictionRequestView:
    return EvictionRequestView.from_obj(
        {
            "metadata": {"name": uid, "namespace": "ns", "creationTimestamp": format_time(ASKED)},
            "spec": {
                "target": {"pod": {"name": "db-0", "uid": uid}},
                "requesters": [{"name": requester}],
            },
        }
    )


def test_the_pod_first() -> None:
    d = Departures(KEEP, Clock())
    d.pod_deleted(pod(), request())
    d.request_deleted(request(), None)
    assert d.get("ns", "db-0") == Departed("u1", ASKED, START)


def test_the_request_first_is_kept_for_its_pods_delete_event() -> None:
    clock = Clock()
    d = Departures(KEEP, clock)
    d.request_deleted(request(), pod())  # the pod still cached
    assert d.get("ns", "db-0") is None
    clock.now += timedelta(seconds=1)
    d.pod_deleted(pod(), None)  # its request no longer cached
    assert d.get("ns", "db-0") == Departed("u1", ASKED, clock.now)


def test_a_request_deleted_after_its_pod_went_unseen() -> None:
    d = Departures(KEEP, Clock())
    d.request_deleted(request(), pod("u2"))  # replaced, the delete of u1 never seen
    assert d.get("ns", "db-0") == Departed("u1", ASKED, START)


def test_only_the_bridges_requests_count() -> None:
    d = Departures(KEEP, Clock())
    d.pod_deleted(pod(), request(requester=REQUESTER))
    d.request_deleted(request(requester=REQUESTER), None)
    d.pod_deleted(pod("u3"), None)
    assert d.get("ns", "db-0") is None and len(d) == 0


def test_forgotten_after_keep() -> None:
    clock = Clock()
    d = Departures(KEEP, clock)
    d.pod_deleted(pod(), request())
    d.request_deleted(request("u5"), pod("u5"))  # an orphan that never sees its pod go
    clock.now += KEEP + timedelta(seconds=1)
    d.pod_deleted(pod("u9"), None)  # any event expires what is too old
    assert d.get("ns", "db-0") is None
    d.pod_deleted(pod("u5"), None)  # the orphan expired with it
    assert d.get("ns", "db-0") is None
