"""The operators' nodeagent_* metrics: low-cardinality labels, process metrics, build info."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from prometheus_client import CollectorRegistry

from nodeagent import version
from nodeagent.controllers.nodemaintenance.controller import drain_started
from nodeagent.model import shutdown
from nodeagent.observability.metrics import (
    EvictionRequestMetrics,
    OperatorMetrics,
    kubelet_gns_state,
)


def test_build_info_process_metrics_and_the_lock() -> None:
    registry = CollectorRegistry()
    metrics = OperatorMetrics(registry, version())
    assert [
        s.labels["version"]
        for m in registry.collect()
        if m.name == "nodeagent_build_info"
        for s in m.samples
    ] == [version()]
    assert (registry.get_sample_value("process_resident_memory_bytes") or 0) > 0
    held = [False]
    metrics.lock_held.set_function(lambda: held[0])
    assert registry.get_sample_value("nodeagent_shutdown_lock_held") == 0
    held[0] = True
    assert registry.get_sample_value("nodeagent_shutdown_lock_held") == 1


def test_maintenances_by_stage_only_while_leading() -> None:
    registry = CollectorRegistry()
    metrics = OperatorMetrics(registry, "1.0")
    assert registry.get_sample_value("nodeagent_maintenances", {"stage": "Drain"}) is None
    cache: list[dict[str, Any]] = [
        {"spec": {"stage": "Drain"}},
        {"spec": {"stage": "Drain"}},
        {"spec": {}},
    ]
    metrics.maintenances = lambda: cache
    counts = {
        stage: registry.get_sample_value("nodeagent_maintenances", {"stage": stage})
        for stage in ("Idle", "Cordon", "Drain", "Complete")
    }
    assert counts == {"Idle": 1, "Cordon": 0, "Drain": 2, "Complete": 0}


def test_shutdowns_waiting_for_a_slot_are_counted_at_once() -> None:
    registry = CollectorRegistry()
    metrics = OperatorMetrics(registry, "1.0")
    boot = "11420bea-f724-4165-9bde-f219df708610"
    waits = shutdown.shutdown_maintenance("one", boot, "reboot")
    waits["status"] = {
        "nodeStatuses": [{"nodeRef": {"name": "one"}, "drainMessage": "Waiting for a drain slot"}]
    }
    drains = shutdown.shutdown_maintenance("two", boot, "reboot")
    drains["status"] = {"nodeStatuses": [{"nodeRef": {"name": "two"}, "drainMessage": "x"}]}
    # a reboot asked for waits for its turn: nothing to warn of
    asked = shutdown.shutdown_maintenance("three", boot, "reboot", trigger=shutdown.TRIGGER_REBOOT)
    asked["status"] = waits["status"]
    cache = [waits, drains, asked]
    metrics.maintenances = lambda: cache
    assert registry.get_sample_value("nodeagent_shutdowns_waiting_for_slot") == 1


def test_evictions_by_result_have_no_per_pod_labels() -> None:
    registry = CollectorRegistry()
    operator = OperatorMetrics(registry, "1.0")
    kep = EvictionRequestMetrics(registry, by_result=operator.evictions)
    for pod in ("web-1", "web-2", "web-3"):
        kep.eviction_attempt("default", f"uid-{pod}", pod, "refused")
    kep.eviction_attempt("default", "uid-web-1", "web-1", "evicted")
    total = {
        tuple(sorted(s.labels.items())): s.value
        for m in registry.collect()
        if m.name == "nodeagent_evictions"
        for s in m.samples
        if s.name == "nodeagent_evictions_total"
    }
    assert total == {(("result", "refused"),): 3, (("result", "evicted"),): 1}


def test_drain_started_from_the_stage_statuses() -> None:
    nm = {
        "status": {"stageStatuses": [{"name": "Drain", "startTimestamp": "2026-01-01T00:00:00Z"}]}
    }
    assert drain_started(nm) == datetime(2026, 1, 1, tzinfo=UTC)
    assert drain_started({"status": {"stageStatuses": [{"name": "Cordon"}]}}) is None
    assert drain_started({}) is None


def test_no_created_series_and_no_sentinel_values() -> None:
    """Prometheus naming: a counter's `_created` series reads like a count; a gauge's -1 for
    "cannot tell" is a sentinel a dashboard sums. States are labels instead."""
    registry = CollectorRegistry()
    metrics = OperatorMetrics(registry, "1.0")
    metrics.evictions.labels("evicted").inc()
    metrics.drain_duration.observe(5.0)
    names = {s.name for m in registry.collect() for s in m.samples}
    assert "nodeagent_evictions_total" in names
    assert not {n for n in names if n.endswith("_created")}, names
    kubelet_gns_state(metrics.kubelet_graceful_shutdown, "unknown")
    values = {
        state: registry.get_sample_value("nodeagent_kubelet_graceful_shutdown", {"state": state})
        for state in ("on", "off", "unknown")
    }
    assert values == {"on": 0, "off": 0, "unknown": 1}
    assert all(s.value >= 0 for m in registry.collect() if m.type == "gauge" for s in m.samples)
