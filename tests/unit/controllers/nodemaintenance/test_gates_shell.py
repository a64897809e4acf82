"""The gates: Prometheus's alerts as kured counts them and podsReady (model.gates, hypothesis),
and the shell's Prometheus reader against a real HTTP server that answers like
``/api/v1/alerts``, hangs, refuses, or answers garbage; read only while a reboot waits."""

from __future__ import annotations

import asyncio
import re
import socket
import time
from typing import Any

import aiohttp
import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from nodeagent.config.schema import GatesConfig, PrometheusGateConfig
from nodeagent.controllers.nodemaintenance.gates import Gates, read_alerts
from nodeagent.model.gates import (
    GateState,
    GateStatus,
    PodsReady,
    alerts_gate,
    holding,
    pods_ready_gate,
    unread,
)
from nodeagent.model.selectors import label_selector_from_dict
from nodeagent.observability.metrics import GateMetrics
from tests.prometheusserver import alert, prometheus_server

# -- model: alerts -------------------------------------------------------------------------------

names = st.sampled_from(("Watchdog", "KubeNodeNotReady", "EtcdNoLeader", "InfoInhibitor"))
alerts = st.lists(st.tuples(names, st.sampled_from(("firing", "pending", "inactive"))))


def answer(listed: list[tuple[str, str]]) -> dict[str, Any]:
    return {"status": "success", "data": {"alerts": [alert(n, s) for n, s in listed]}}


@given(listed=alerts, firing_only=st.booleans(), match_only=st.booleans(), use=st.booleans())
def test_the_gate_is_closed_exactly_while_an_alert_counts_as_kured_counts_it(
    listed: list[tuple[str, str]], firing_only: bool, match_only: bool, use: bool
) -> None:
    pattern = re.compile("^(Watchdog|InfoInhibitor)$") if use else None
    state = alerts_gate(
        answer(listed), pattern, filter_match_only=match_only, firing_only=firing_only
    )
    counted = [
        n
        for n, s in listed
        if (s == "firing" or (s == "pending" and not firing_only))
        and (pattern is None or bool(pattern.search(n)) == match_only)
    ]
    assert state.status is (GateStatus.CLOSED if counted else GateStatus.OPEN)
    for n in sorted(set(counted))[:3]:  # named in order, three at most
        assert n in state.reason
    assert "\n" not in state.message


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("not json", "Prometheus answered no success"),
        ({"status": "error", "error": "query timed out"}, "no success: query timed out"),
        ({"status": "success", "data": {}}, "no data.alerts list"),
        ({"status": "success", "data": {"alerts": ["x"]}}, "garbage"),
    ],
)
def test_an_answer_not_prometheus_s_cannot_be_evaluated(body: object, reason: str) -> None:
    state = alerts_gate(body)
    assert state.status is GateStatus.UNKNOWN and reason in state.reason
    assert state.holds and state.metric == "unknown"


def test_an_unread_gate_holds_without_a_metric() -> None:
    state = unread("prometheus")
    assert state.holds and state.metric is None
    assert holding([GateState("podsReady", GateStatus.OPEN), state]) is state
    assert holding([GateState("podsReady", GateStatus.OPEN)]) is None


# -- model: podsReady ----------------------------------------------------------------------------


def pod(name: str, ready: bool | None, namespace: str = "db", **extra: Any) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": extra.pop("phase", "Running")}
    if ready is not None:
        status["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
    meta = {"name": name, "namespace": namespace, "labels": {"app": "etcd"}, **extra}
    return {"metadata": meta, "status": status}


ETCD = PodsReady("db", label_selector_from_dict({"matchLabels": {"app": "etcd"}}))


@given(st.lists(st.tuples(st.booleans(), st.sampled_from(("db", "web"))), max_size=8))
def test_pods_ready_is_closed_while_a_matching_pod_is_not_ready(
    pods: list[tuple[bool, str]],
) -> None:
    objs = [pod(f"p{i}", ready, namespace) for i, (ready, namespace) in enumerate(pods)]
    state = pods_ready_gate([ETCD], objs)
    bad = [i for i, (ready, namespace) in enumerate(pods) if namespace == "db" and not ready]
    assert state.status is (GateStatus.CLOSED if bad else GateStatus.OPEN)
    if bad:
        assert state.reason.startswith(f"{len(bad)} pod")


def test_terminating_and_unreported_pods_are_not_ready_and_finished_ones_do_not_count() -> None:
    assert pods_ready_gate([ETCD], [pod("a", None)]).status is GateStatus.CLOSED
    leaving = pod("a", True, deletionTimestamp="2024-05-01T10:00:00Z")
    assert pods_ready_gate([ETCD], [leaving]).reason == "1 pod not Ready: db/a"
    assert pods_ready_gate([ETCD], [pod("a", False, phase="Succeeded")]).status is GateStatus.OPEN


# -- the shell: reading Prometheus ---------------------------------------------------------------


def prometheus(url: str, **kw: Any) -> PrometheusGateConfig:
    return PrometheusGateConfig(url=url, **{"interval": 0.2, "timeout": 0.5, **kw})


async def read(cfg: PrometheusGateConfig) -> GateState:
    async with aiohttp.ClientSession() as session:
        return await read_alerts(session, cfg)


async def test_alerts_as_prometheus_answers_them() -> None:
    async with prometheus_server() as server:
        server.alerts = [alert("Watchdog"), alert("EtcdNoLeader", "pending")]
        state = await read(prometheus(server.url))
        assert state == GateState(
            "prometheus", GateStatus.CLOSED, "2 alerts active: EtcdNoLeader, Watchdog"
        )
        ignored = await read(prometheus(server.url, alert_filter="^Watchdog$", firing_only=True))
        assert ignored.status is GateStatus.OPEN


async def test_a_hanging_prometheus_cannot_be_evaluated_within_the_timeout() -> None:
    async with prometheus_server() as server:
        server.hang = True
        started = time.monotonic()
        state = await read(prometheus(server.url, timeout=0.3))
        assert time.monotonic() - started < 2
        assert state.status is GateStatus.UNKNOWN
        assert state.reason == f"no answer from {server.url}/api/v1/alerts within 0.3s"


async def test_a_refused_connection_cannot_be_evaluated() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed when the block ends: nobody listens there
    state = await read(prometheus(f"http://127.0.0.1:{port}"))
    assert state.status is GateStatus.UNKNOWN
    assert state.reason.startswith(f"cannot reach http://127.0.0.1:{port}/api/v1/alerts: ")
    assert state.message.startswith("Waiting for gate prometheus: cannot reach http://")


@pytest.mark.parametrize(
    ("status", "body", "reason"),
    [
        (200, b"<html>a login page</html>", "answered HTTP 200 with no JSON"),
        (200, b'{"status": "success", "data": {"alerts": 3}}', "no data.alerts list"),
        (500, None, "Prometheus answered no success: boom"),
        (404, b'{"status": "success", "data": {"alerts": []}}', "answered HTTP 404"),
    ],
)
async def test_garbage_and_errors_cannot_be_evaluated(
    status: int, body: bytes | None, reason: str
) -> None:
    async with prometheus_server() as server:
        server.status, server.body = status, body
        state = await read(prometheus(server.url))
        assert state.status is GateStatus.UNKNOWN
        assert reason in state.reason and server.url in state.reason


async def test_prometheus_is_read_only_while_a_reboot_waits_and_each_change_wakes() -> None:
    registry = CollectorRegistry()
    changes: list[int] = []
    async with prometheus_server() as server:
        server.alerts = [alert("EtcdNoLeader")]
        gates = Gates(
            GatesConfig(prometheus=prometheus(server.url)),
            sink=GateMetrics(registry),
            on_change=lambda: changes.append(1),
        )
        assert gates.states(list)[0].status is GateStatus.UNREAD
        task = asyncio.create_task(gates.run())
        try:
            gates.want("nodeagent-reboot-one", True)
            async with asyncio.timeout(10):
                await gates.until_read(1)
            assert gates.states(list)[0].status is GateStatus.CLOSED and changes == [1]
            assert (
                registry.get_sample_value(
                    "nodeagent_gate", {"gate": "prometheus", "state": "closed"}
                )
                == 1
            )
            server.alerts = []
            async with asyncio.timeout(10):
                await gates.until_read(2)  # the next read, an interval later
            assert gates.states(list)[0].status is GateStatus.OPEN and changes == [1, 1]
            assert (
                registry.get_sample_value("nodeagent_gate", {"gate": "prometheus", "state": "open"})
                == 1
            )
            server.hang = True
            async with asyncio.timeout(10):
                await gates.until_read(3)
            assert gates.states(list)[0].status is GateStatus.UNKNOWN
            assert (
                registry.get_sample_value(
                    "nodeagent_gate", {"gate": "prometheus", "state": "unknown"}
                )
                == 1
            )
            server.resume()
            gates.want("nodeagent-reboot-one", False)  # admitted: nothing waits any more
            seen = server.requests
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(1.0):  # five intervals: no read
                    await server.until_requests(seen + 1)
            assert server.requests == seen
        finally:
            task.cancel()


def test_pods_ready_comes_from_the_cache_and_sets_its_metric() -> None:
    registry = CollectorRegistry()
    gates = Gates(
        GatesConfig(
            pods_ready=({"namespace": "db", "selector": {"matchLabels": {"app": "etcd"}}},)
        ),
        sink=GateMetrics(registry),
    )
    (state,) = gates.states(lambda: [pod("etcd-0", True), pod("etcd-1", False)])
    assert state == GateState("podsReady", GateStatus.CLOSED, "1 pod not Ready: db/etcd-1")
    assert (
        registry.get_sample_value("nodeagent_gate", {"gate": "podsReady", "state": "closed"}) == 1
    )
    assert gates.watches(pod("etcd-1", False)) and not gates.watches(pod("x", True, "web"))
    assert gates.readiness_changed(pod("etcd-1", False), pod("etcd-1", True))
    assert not gates.readiness_changed(pod("etcd-1", True), pod("etcd-1", True))
