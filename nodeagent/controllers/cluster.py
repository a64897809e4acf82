"""The leader's part: every cluster controller over one set of shared informers."""

from __future__ import annotations

import asyncio
import logging

from prometheus_client import CollectorRegistry

from nodeagent.config import Config
from nodeagent.controllers.evictionrequest.controller import EvictionRequestController
from nodeagent.controllers.finalphase import FinalPhaseController
from nodeagent.controllers.interceptors.annotate import AnnotateInterceptors
from nodeagent.controllers.interceptors.daemonset import DaemonSetInterceptor
from nodeagent.controllers.nodemaintenance.controller import NodeMaintenanceController
from nodeagent.controllers.settings import EvictionSettings
from nodeagent.kube.client import KubeClient
from nodeagent.kube.controller import Controller, SharedInformers
from nodeagent.kube.events import EventRecorder
from nodeagent.kube.resources import NODEMAINTENANCES
from nodeagent.observability.metrics import (
    EvictionRequestMetrics,
    OperatorMetrics,
    WorkQueueMetricsFactory,
)

log = logging.getLogger(__name__)


class ClusterControllers:
    """Built once per agent (metrics register once); `run()` is called for every term as
    leader and runs until cancelled when leadership is lost."""

    def __init__(
        self,
        client: KubeClient,
        config: Config,
        registry: CollectorRegistry,
        operator: OperatorMetrics | None = None,
    ) -> None:
        self.client = client
        self.settings = EvictionSettings.from_config(config.eviction)
        self.maintenance_settings = config.node_maintenance
        self.request_concurrency = config.kube.max_concurrent_requests
        self.queue_metrics = WorkQueueMetricsFactory(registry)
        self.operator = operator
        self.eviction_metrics = EvictionRequestMetrics(
            registry, by_result=operator.evictions if operator is not None else None
        )
        self.recorder = EventRecorder(client, component="nodeagent-controllers")

    async def run(self) -> None:
        # fresh informers each term: a new leader must not act on an old term's cache
        informers = SharedInformers(self.client)
        parts = self._controllers(informers)
        log.info("leading: running the cluster controllers")
        if self.operator is not None:
            self.operator.leader.set(1)
            self.operator.maintenances = informers.informer(NODEMAINTENANCES).store.list
        try:
            async with asyncio.TaskGroup() as tg:
                tg.create_task(informers.run(), name="informers")
                for part in parts:
                    tg.create_task(part.run(), name=type(part).__name__)
        finally:
            if self.operator is not None:
                self.operator.leader.set(0)
                self.operator.maintenances = None

    def _controllers(self, informers: SharedInformers) -> list[Controller]:
        """This term's controllers and interceptors, on its informers."""
        parts: list[Controller] = [
            NodeMaintenanceController(
                self.client,
                informers,
                self.recorder,
                metrics=self.queue_metrics.for_queue("nodemaintenance"),
                drain_duration=self.operator.drain_duration if self.operator else None,
                settings=self.maintenance_settings,
            ),
            EvictionRequestController(
                self.client,
                informers,
                self.settings,
                metrics=self.eviction_metrics,
                queue_metrics=self.queue_metrics.for_queue("evictionrequest"),
                events=self.recorder,
                # A worker waits on one request at a time, and on a real API server an
                # eviction takes tens of ms under load: with fewer workers than the requests
                # the agent may have in flight, the drain's pace is set by the workers.
                workers=self.request_concurrency,
            ),
            DaemonSetInterceptor(
                self.client,
                informers,
                self.settings,
                events=self.recorder,
                queue_metrics=self.queue_metrics.for_queue("daemonset-interceptor"),
            ),
            FinalPhaseController(
                self.client,
                informers,
                self.recorder,
                queue_metrics=self.queue_metrics.for_queue("final-phase"),
            ),
        ]
        if self.settings.annotate:
            parts.append(
                AnnotateInterceptors(
                    self.client,
                    informers,
                    self.settings,
                    events=self.recorder,
                    queue_metrics=self.queue_metrics.for_queue("annotate-interceptors"),
                )
            )
        return parts
