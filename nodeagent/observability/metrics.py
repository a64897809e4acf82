"""Prometheus metrics, always registered in a `CollectorRegistry` the caller passes in (never the
global default registry), so tests and several agents in one process do not collide.

- :class:`WorkQueueMetricsFactory`: client-go's workqueue metrics (``workqueue_depth``,
  ``workqueue_adds_total``, ``workqueue_retries_total``, ``workqueue_queue_duration_seconds``,
  ``workqueue_work_duration_seconds``, ``workqueue_unfinished_work_seconds``,
  ``workqueue_longest_running_processor_seconds``, labelled by queue ``name``); its
  :meth:`~WorkQueueMetricsFactory.for_queue` objects implement the ``WorkQueueMetrics`` protocol
  of :mod:`nodeagent.kube.workqueue`. Create one factory per registry and share it.
- :class:`EvictionRequestMetrics`: the KEP-4563 metrics of the eviction request controller.
- :class:`OperatorMetrics`: ``nodeagent_*`` metrics for operators, with low-cardinality labels
  only (the KEP's are per request and pod): build info, shutdown lock held, leader, maintenances
  by stage, drain durations, evictions and notifications by result; and the ``process_*``
  metrics.
- :class:`BridgeMetrics`: the eviction bridge's answers and the writes it could not make.
- :class:`GateMetrics`: ``nodeagent_gate{gate,state}``, each reboot gate's last evaluation.
"""

from __future__ import annotations

import contextlib
import platform
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from nodeagent.model.gates import GATE_STATES, GateState
from nodeagent.model.shutdown_standing import shutdown_waits_for_slot

# counters' and histograms' `_created` series read like counts (nodeagent_evictions_created)
# and say nothing an operator uses
disable_created_metrics()  # type: ignore[no-untyped-call]

__all__ = [
    "BridgeMetrics",
    "EvictionRequestMetrics",
    "OperatorMetrics",
    "QueueMetrics",
    "WorkQueueMetricsFactory",
]


# client-go's buckets: 1 us to 10 s, in powers of ten
_DURATION_BUCKETS = (1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0)


@dataclass
class _QueueSeries:
    depth: Gauge
    adds: Counter
    retries: Counter
    queue_duration: Histogram
    work_duration: Histogram
    unfinished: Gauge
    longest: Gauge


class QueueMetrics:
    """The metrics of one work queue; a `nodeagent.kube.workqueue.WorkQueueMetrics`."""

    def __init__(self, series: _QueueSeries) -> None:
        self._depth = series.depth
        self._adds = series.adds
        self._retries = series.retries
        self._queue_duration = series.queue_duration
        self._work_duration = series.work_duration
        self._unfinished = series.unfinished
        self._longest = series.longest

    def observe_queue_duration(self, seconds: float) -> None:
        self._queue_duration.observe(seconds)

    def observe_work_duration(self, seconds: float) -> None:
        self._work_duration.observe(seconds)

    def track_processing(self, running: Callable[[], list[float]]) -> None:
        """`running()`: how long each key now being processed has been so, read at scrape."""
        self._unfinished.set_function(lambda: sum(running()))
        self._longest.set_function(lambda: max(running(), default=0.0))

    def inc_adds(self) -> None:
        self._adds.inc()

    def set_depth(self, depth: int) -> None:
        self._depth.set(depth)

    def inc_retries(self) -> None:
        self._retries.inc()


class WorkQueueMetricsFactory:
    def __init__(self, registry: CollectorRegistry) -> None:
        self._depth = Gauge(
            "workqueue_depth", "Current depth of the work queue.", ["name"], registry=registry
        )
        self._adds = Counter(
            "workqueue_adds", "Adds handled by the work queue.", ["name"], registry=registry
        )
        self._retries = Counter(
            "workqueue_retries", "Retries handled by the work queue.", ["name"], registry=registry
        )
        self._queue_duration = Histogram(
            "workqueue_queue_duration_seconds",
            "How long a key waits in the work queue before it is handed out.",
            ["name"],
            buckets=_DURATION_BUCKETS,
            registry=registry,
        )
        self._work_duration = Histogram(
            "workqueue_work_duration_seconds",
            "How long processing a key from the work queue takes.",
            ["name"],
            buckets=_DURATION_BUCKETS,
            registry=registry,
        )
        self._unfinished = Gauge(
            "workqueue_unfinished_work_seconds",
            "Seconds of work in progress that no done() has reported yet (stuck workers).",
            ["name"],
            registry=registry,
        )
        self._longest = Gauge(
            "workqueue_longest_running_processor_seconds",
            "How long the longest-running processor of the work queue has been running.",
            ["name"],
            registry=registry,
        )

    def for_queue(self, name: str) -> QueueMetrics:
        return QueueMetrics(
            _QueueSeries(
                self._depth.labels(name=name),
                self._adds.labels(name=name),
                self._retries.labels(name=name),
                self._queue_duration.labels(name=name),
                self._work_duration.labels(name=name),
                self._unfinished.labels(name=name),
                self._longest.labels(name=name),
            )
        )


_REQUEST_LABELS = ["namespace", "evictionrequest", "pod"]


@dataclass
class _Series:
    """The label values one EvictionRequest currently has series under."""

    active: set[tuple[str, ...]] = field(default_factory=set)
    processed: set[tuple[str, ...]] = field(default_factory=set)
    requesters: set[tuple[str, ...]] = field(default_factory=set)
    pod_interceptors: set[tuple[str, ...]] = field(default_factory=set)
    evictions: set[tuple[str, ...]] = field(default_factory=set)


class EvictionRequestMetrics:
    """KEP-4563 "Monitoring Requirements" metrics. Per-request series are 1 while they hold and
    are removed when the request finishes or goes away (:meth:`forget`)."""

    def __init__(self, registry: CollectorRegistry, by_result: Counter | None = None) -> None:
        """`by_result`: also count each eviction there by its result alone (the operators'
        ``nodeagent_evictions_total``)."""
        self._by_result = by_result
        self.imperative_evictions = Counter(
            "evictionrequest_controller_imperative_evictions",
            "Eviction API calls made by the imperative-eviction.k8s.io interceptor, per "
            "EvictionRequest and pod, by result (evicted, refused, error).",
            [*_REQUEST_LABELS, "result"],
            registry=registry,
        )
        self.active_interceptor = Gauge(
            "evictionrequest_controller_active_interceptor",
            "The active interceptor of each EvictionRequest and target pod (1 while active).",
            [*_REQUEST_LABELS, "interceptor"],
            registry=registry,
        )
        self.processed_interceptor = Gauge(
            "evictionrequest_controller_processed_interceptor",
            "Interceptors whose turn has passed, per EvictionRequest and target pod.",
            [*_REQUEST_LABELS, "interceptor"],
            registry=registry,
        )
        self.active_requester = Gauge(
            "evictionrequest_controller_active_requester",
            "The requesters of each EvictionRequest and target pod (1 while listed).",
            [*_REQUEST_LABELS, "requester"],
            registry=registry,
        )
        self.pod_interceptors = Gauge(
            "evictionrequest_controller_pod_interceptors",
            "The interceptors available to each pod under an EvictionRequest.",
            ["namespace", "pod", "interceptor"],
            registry=registry,
        )
        self._series: dict[tuple[str, str], _Series] = {}

    def observe(
        self,
        namespace: str,
        request: str,
        pod: str,
        *,
        active: Iterable[str],
        processed: Iterable[str],
        requesters: Iterable[str],
        interceptors: Iterable[str],
    ) -> None:
        """Set the series of one request to its current state."""
        series = self._series.setdefault((namespace, request), _Series())
        base = (namespace, request, pod)
        _replace(self.active_interceptor, series.active, {(*base, n) for n in active})
        _replace(self.processed_interceptor, series.processed, {(*base, n) for n in processed})
        _replace(self.active_requester, series.requesters, {(*base, n) for n in requesters})
        _replace(
            self.pod_interceptors,
            series.pod_interceptors,
            {(namespace, pod, n) for n in interceptors},
        )

    def eviction_attempt(self, namespace: str, request: str, pod: str, result: str) -> None:
        labels = (namespace, request, pod, result)
        self.imperative_evictions.labels(*labels).inc()
        if self._by_result is not None:
            self._by_result.labels(result).inc()
        self._series.setdefault((namespace, request), _Series()).evictions.add(labels)

    def forget(self, namespace: str, request: str, *, keep_evictions: bool = False) -> None:
        """Remove the request's series (all of them unless ``keep_evictions``)."""
        series = self._series.get((namespace, request))
        if series is None:
            return
        _replace(self.active_interceptor, series.active, set())
        _replace(self.processed_interceptor, series.processed, set())
        _replace(self.active_requester, series.requesters, set())
        _replace(self.pod_interceptors, series.pod_interceptors, set())
        if keep_evictions:
            return
        for labels in series.evictions:
            _remove(self.imperative_evictions, labels)
        del self._series[(namespace, request)]


def _remove(metric: Gauge | Counter, labels: tuple[str, ...]) -> None:
    with contextlib.suppress(KeyError):
        metric.remove(*labels)


def _replace(metric: Gauge, current: set[tuple[str, ...]], wanted: set[tuple[str, ...]]) -> None:
    for labels in current - wanted:
        _remove(metric, labels)
    for labels in wanted:
        metric.labels(*labels).set(1)
    current.clear()
    current.update(wanted)


# a drain takes seconds to hours
_DRAIN_BUCKETS = (5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0, 3600.0, 7200.0)
_STAGES = ("Idle", "Cordon", "Drain", "Complete")


def kubelet_gns_state(gauge: Gauge, state: str) -> None:
    """Set the state gauge: 1 for `state`, 0 for the others (no sentinel values)."""
    for each in KUBELET_GNS_STATES:
        gauge.labels(each).set(1 if each == state else 0)


KUBELET_GNS_STATES = ("on", "off", "unknown")


class OperatorMetrics:
    """What an operator alerts on and graphs, per agent. ``maintenances`` is set by the leader
    while it leads (the stage counts come from its cache, at scrape time); other agents do not
    report ``nodeagent_maintenances``."""

    def __init__(self, registry: CollectorRegistry, version: str) -> None:
        self.build_info = Gauge(
            "nodeagent_build_info",
            "The agent's version and Python (always 1).",
            ["version", "python"],
            registry=registry,
        )
        self.build_info.labels(version, platform.python_version()).set(1)
        ProcessCollector(registry=registry)
        PlatformCollector(registry=registry)
        self.lock_held = Gauge(
            "nodeagent_shutdown_lock_held",
            "1 while this node's agent holds its logind shutdown delay lock.",
            registry=registry,
        )
        self.kubelet_graceful_shutdown = Gauge(
            "nodeagent_kubelet_graceful_shutdown",
            "The kubelet's Graceful Node Shutdown as this agent finds it: 1 for the state it is "
            "in (on: it voids the ordered drain; off; unknown: this agent cannot tell), 0 for "
            "the others.",
            ["state"],
            registry=registry,
        )
        self.leader = Gauge(
            "nodeagent_leader",
            "1 while this agent leads and runs the cluster controllers.",
            registry=registry,
        )
        self.evictions = Counter(
            "nodeagent_evictions",
            "Eviction API calls of the imperative-eviction.k8s.io interceptor, by result "
            "(evicted, refused, gone, error).",
            ["result"],
            registry=registry,
        )
        self.drain_duration = Histogram(
            "nodeagent_drain_duration_seconds",
            "From a NodeMaintenance's Drain stage starting to its Drained condition.",
            buckets=_DRAIN_BUCKETS,
            registry=registry,
        )
        self.notifications = Counter(
            "nodeagent_notifications",
            "Webhook notifications (drainStarted, lockReleased, nodeBack), per webhook that "
            "wants the event, by result (sent, failed after its attempts, dropped: queue full).",
            ["event", "result"],
            registry=registry,
        )
        self.maintenances: Callable[[], Iterable[Mapping[str, Any]]] | None = None
        registry.register(_StageCollector(self))


class _StageCollector(Collector):
    def __init__(self, metrics: OperatorMetrics) -> None:
        self._metrics = metrics

    def describe(self) -> Iterable[Metric]:
        return []  # collected on demand, so the registry does not call collect at register

    def collect(self) -> Iterator[Metric]:
        source = self._metrics.maintenances
        if source is None:
            return
        counts = dict.fromkeys(_STAGES, 0)
        for nm in source():
            stage = str((nm.get("spec") or {}).get("stage") or "Idle")
            counts[stage] = counts.get(stage, 0) + 1
        waiting = 0
        for nm in source():
            if shutdown_waits_for_slot(nm):
                waiting += 1
        family = GaugeMetricFamily(
            "nodeagent_maintenances", "NodeMaintenances by spec.stage.", labels=["stage"]
        )
        for stage, n in counts.items():
            family.add_metric([stage], n)
        yield family
        yield GaugeMetricFamily(
            "nodeagent_shutdowns_waiting_for_slot",
            "Shutdowns under way whose node waits for a drain slot: each goes down when its "
            "budget runs out, drained or not (reboots asked for wait for their turn instead).",
            value=waiting,
        )


class BridgeMetrics:
    """The eviction bridge's, on every replica that serves it: what it answered, and the
    EvictionRequest writes that did not go through (the 429 went out without them)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.answers = Counter(
            "nodeagent_eviction_bridge_answers",
            "Evictions the eviction bridge answered, by answer: allowed (own, dry-run, opted-out, "
            "no-interceptors, leaving, unknown, turn, unsupported), 429 (asked-once, waiting), 404 "
            "(gone), or unreadable (HTTP 400: the webhook's failurePolicy decides).",
            ["answer"],
            registry=registry,
        )
        self.write_failures = Counter(
            "nodeagent_eviction_bridge_write_failures",
            "EvictionRequest writes of the eviction bridge that did not go through before its "
            "answer, by reason (timeout, error); the client's next attempt tries again.",
            ["reason"],
            registry=registry,
        )

    def answered(self) -> dict[str, float]:
        """The answers counted so far, by answer."""
        return {
            sample.labels["answer"]: sample.value
            for metric in self.answers.collect()
            for sample in metric.samples
            if sample.name.endswith("_total")
        }


class GateMetrics:
    """``nodeagent_gate{gate,state}``: 1 for the state each reboot gate is in (open, closed,
    unknown: it cannot be evaluated, and a reboot asked for then waits: the fleet is held), 0
    for the others; absent until the gate is first evaluated (Prometheus is read only while a
    reboot waits for its admission)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.state = Gauge(
            "nodeagent_gate",
            "The state each reboot gate was last found in: open, closed, or unknown (cannot be "
            "evaluated: it holds the fleet); 1 for that state, 0 for the others.",
            ["gate", "state"],
            registry=registry,
        )

    def set(self, state: GateState) -> None:
        if state.metric is not None:
            for each in GATE_STATES:
                self.state.labels(state.gate, each).set(1 if each == state.metric else 0)
