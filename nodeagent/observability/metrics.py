"""Prometheus metrics, always registered in a `CollectorRegistry` the caller passes in (never the
global default registry), so tests and several agents in one process do not collide.

- :class:`WorkQueueMetricsFactory`: client-go's workqueue metrics (``workqueue_depth``,
  ``workqueue_adds_total``, ``workqueue_retries_total``, ``workqueue_queue_duration_seconds``,
  ``workqueue_work_duration_seconds``, ``workqueue_unfinished_work_seconds``,
  ``workqueue_longest_running_processor_seconds``, labelled by queue ``name``); its
  :meth:`~WorkQueueMetricsFactory.for_queue` objects implement the ``WorkQueueMetrics`` protocol
  of :mod:`nodeagent.kube.workqueue`. Create one factory per registry and share it.
- :class:`EvictionRequestMetrics`: the KEP-4563 metrics of the eviction request controller.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["EvictionRequestMetrics", "QueueMetrics", "WorkQueueMetricsFactory"]


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

    def __init__(self, registry: CollectorRegistry) -> None:
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
