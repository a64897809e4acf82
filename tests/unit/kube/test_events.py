from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from nodeagent.kube.errors import Forbidden
from nodeagent.kube.events import EventRecorder
from nodeagent.kube.resources import EVENTS

from .fakeapi import Backend, FakeClient

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "web-0", "namespace": "shop", "uid": "u-1", "resourceVersion": "42"},
}
NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1", "uid": "n-1"}}


def events(backend: Backend) -> list[dict[str, Any]]:
    return backend.all(EVENTS)


async def test_creates_a_core_v1_event() -> None:
    backend = Backend()
    rec = EventRecorder(FakeClient(backend), host="node-1", instance="nodeagent-node-1")
    await rec.warning(POD, "EvictionBlocked", "PDB shop/web allows no disruption")
    [ev] = events(backend)
    assert ev["apiVersion"] == "v1" and ev["kind"] == "Event"
    assert ev["metadata"]["namespace"] == "shop"
    assert ev["metadata"]["name"].startswith("web-0.")
    assert ev["involvedObject"] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": "web-0",
        "namespace": "shop",
        "uid": "u-1",
        "resourceVersion": "42",
    }
    assert ev["type"] == "Warning"
    assert ev["reason"] == "EvictionBlocked"
    assert ev["source"] == {"component": "nodeagent", "host": "node-1"}
    assert ev["reportingComponent"] == "nodeagent"
    assert ev["reportingInstance"] == "nodeagent-node-1"
    assert ev["count"] == 1
    assert ev["firstTimestamp"] == ev["lastTimestamp"]


async def test_cluster_scoped_objects_get_events_in_default() -> None:
    backend = Backend()
    await EventRecorder(FakeClient(backend)).normal(NODE, "Cordoned", "cordoned for maintenance")
    [ev] = events(backend)
    assert ev["metadata"]["namespace"] == "default"
    assert "namespace" not in ev["involvedObject"]


async def test_repeats_are_aggregated() -> None:
    backend = Backend()
    rec = EventRecorder(FakeClient(backend))
    for _ in range(3):
        await rec.warning(POD, "EvictionBlocked", "retry 1")
    await rec.warning(POD, "EvictionBlocked", "a different message")
    await rec.normal(POD, "EvictionBlocked", "retry 1")  # a different type
    counts = sorted((e["message"], e["type"], e["count"]) for e in events(backend))
    assert counts == [
        ("a different message", "Warning", 1),
        ("retry 1", "Normal", 1),
        ("retry 1", "Warning", 3),
    ]


async def test_concurrent_repeats_fold_into_one_event() -> None:
    backend = Backend()
    rec = EventRecorder(FakeClient(backend))
    await asyncio.gather(*(rec.normal(POD, "Draining", "draining node-1") for _ in range(10)))
    [ev] = events(backend)
    assert ev["count"] == 10


async def test_expired_event_is_recreated() -> None:
    backend = Backend()
    rec = EventRecorder(FakeClient(backend))
    await rec.normal(POD, "Draining", "draining")
    backend.objects.clear()  # the API server's event TTL ran out
    await rec.normal(POD, "Draining", "draining")
    [ev] = events(backend)
    assert ev["count"] == 1


async def test_failures_are_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    backend = Backend()
    client = FakeClient(backend)
    rec = EventRecorder(client)
    client.fail_next = [Forbidden("events is forbidden", status=403, reason="Forbidden")]
    with caplog.at_level(logging.WARNING, logger="nodeagent.kube.events"):
        await rec.warning(POD, "EvictionBlocked", "x")
    assert "cannot record event EvictionBlocked for Pod shop/web-0" in caplog.text
    client.down = True
    await rec.warning(POD, "EvictionBlocked", "x")
    await rec.warning({"metadata": "not a dict"}, "Weird", "x")  # malformed input, still quiet
    client.down = False
    await rec.warning(POD, "EvictionBlocked", "x")
    assert [e["count"] for e in events(backend)] == [1]


async def test_long_messages_are_truncated() -> None:
    backend = Backend()
    await EventRecorder(FakeClient(backend)).normal(POD, "Long", "x" * 5000)
    [ev] = events(backend)
    assert len(ev["message"]) == 1024 and ev["message"].endswith("...")


async def test_cache_is_bounded() -> None:
    backend = Backend()
    rec = EventRecorder(FakeClient(backend), cache_size=2)
    for msg in ["a", "b", "c", "a"]:
        await rec.normal(POD, "R", msg)
    # "a" fell out of the cache before its repeat, so the repeat made a new Event.
    assert sorted(e["message"] for e in events(backend)) == ["a", "a", "b", "c"]
