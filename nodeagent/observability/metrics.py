"""Prometheus metrics, always registered in a `CollectorRegistry` the caller passes in (never the
global default registry), so tests and several agents in one process do not collide.

- :class:`WorkQueueMetricsFactory`: client-go's workqueue metrics (``workqueue_depth``,
  ``workqueue_adds_total``, ``workqueue_retries_total``, labelled by queue ``name``); its
  :meth:`~WorkQueueMetricsFactory.for_queue` objects implement the ``WorkQueueMetrics`` protocol
  of :mod:`nodeagent.kube.workqueue`. Create one factory per registry and share it.
- :class:`EvictionRequestMetrics`: the KEP-4563 metrics of the eviction request controller.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge

__all__ = ["EvictionRequestMetrics", "QueueMetrics", "WorkQueueMetricsFactory"]


class QueueMetrics:
    """The metrics of one work queue; a `nodeagent.kube.workqueue.WorkQueueMetrics`."""

    def __init__(self, depth: Gauge, adds: Counter, retries: Counter) -> None:
        self._depth = depth
        self._adds = adds
        self._retries = retries

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

    def for_queue(self, name: str) -> QueueMetrics:
        return QueueMetrics(
            self._depth.labels(name=name),
            self._adds.labels(name=name),
            self._retries.labels(name=name),
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
