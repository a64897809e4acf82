"""The leader's part: every cluster controller over one set of shared informers."""

from __future__ import annotations

import asyncio
import logging
from functools import partial

from prometheus_client import CollectorRegistry

from nodeagent.config import Config
from nodeagent.config.eviction_settings import eviction_settings
from nodeagent.controllers.evictionrequest.controller import EvictionRequestController
from nodeagent.controllers.final_phase import FinalPhaseController
from nodeagent.controllers.interceptors.annotate import AnnotateInterceptors
from nodeagent.controllers.interceptors.daemonset import DaemonSetInterceptor
from nodeagent.controllers.lifecycle.controller import LifecycleEvictionController
from nodeagent.controllers.lifecycle.evictor import ImperativeEvictor
from nodeagent.controllers.nodemaintenance.controller import NodeMaintenanceController
from nodeagent.kube.client import KubeClient
from nodeagent.kube.controller import Controller, SharedInformers
from nodeagent.kube.discovery import ask_served, runs_lifecycle_here
from nodeagent.kube.events import EventRecorder
from nodeagent.kube.resources import NODEMAINTENANCES, UPSTREAM_EVICTIONREQUESTS
from nodeagent.model import evictionapi
from nodeagent.model.lifecycle.ourresponders import ResponderNames, upstream_evicts
from nodeagent.observability.metrics import (
    EvictionRequestMetrics,
    GateMetrics,
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
        self.settings = eviction_settings(config.eviction)
        self.maintenance_settings = config.node_maintenance
        self.request_concurrency = config.kube.max_concurrent_requests
        self.queue_metrics = WorkQueueMetricsFactory(registry)
        self.operator = operator
        self.eviction_metrics = EvictionRequestMetrics(
            registry, by_result=operator.evictions if operator is not None else None
        )
        self.recorder = EventRecorder(client, component="nodeagent-controllers")
        self.gate_metrics = GateMetrics(registry)
        self.eviction_api = config.eviction.api
        self.lifecycle_controller = config.eviction.lifecycle_controller

    async def upstream_api(self) -> bool:
        """Whether this term serves the upstream EvictionRequest API (`eviction.api`: auto
        asks the server, once per term: a gate turned on or off takes effect at the next).
        Until the server answers, and with `upstream` until it serves the group, the term
        waits (retrying with backoff, saying why once) rather than guess."""
        if not evictionapi.asks_server(self.eviction_api):
            return False
        required = (
            "eviction.api is upstream, but the API server does not serve "
            "lifecycle.k8s.io/v1alpha1 (feature gate EvictionRequestAPI and "
            "--runtime-config=lifecycle.k8s.io/v1alpha1=true); the controllers wait"
        )
        insist = evictionapi.insists(self.eviction_api)
        return await ask_served(
            self.client, UPSTREAM_EVICTIONREQUESTS, required=required if insist else None
        )

    async def run(self) -> None:
        # fresh informers each term: a new leader must not act on an old term's cache
        informers = SharedInformers(self.client)
        upstream = await self.upstream_api()
        ours = upstream and await runs_lifecycle_here(self.client, self.lifecycle_controller)
        parts = self._controllers(informers, upstream, lifecycle=ours)
        if not upstream:
            log.info("leading: running the cluster controllers")
        elif ours:
            log.info("leading: running the cluster controllers and those of lifecycle.k8s.io")
        else:
            log.info(
                "leading: running the cluster controllers; kube-controller-manager runs those "
                "of lifecycle.k8s.io (eviction.lifecycleController %s): requesting and "
                "responding only",
                self.lifecycle_controller,
            )
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

    def _controllers(
        self, informers: SharedInformers, upstream: bool, *, lifecycle: bool
    ) -> list[Controller]:
        """This term's controllers and interceptors, on its informers; with `upstream`, the
        interceptors respond to upstream Evictions too, and with `lifecycle` the upstream
        API's own controllers run."""
        names = ResponderNames(self.settings.configured) if upstream else None
        # which pods a maintenance asks for upstream: those whose interceptors all take turns
        # there, which Kubernetes' own controller gives none of ours (it lists the pod's own)
        routing = (
            ResponderNames(self.settings.configured, listed_by_us=lifecycle) if upstream else None
        )
        parts: list[Controller] = [
            NodeMaintenanceController(
                self.client,
                informers,
                self.recorder,
                metrics=self.queue_metrics.for_queue("nodemaintenance"),
                drain_duration=self.operator.drain_duration if self.operator else None,
                settings=self.maintenance_settings,
                # pods whose interceptors all respond upstream go to the upstream API
                upstream=partial(upstream_evicts, names=routing) if routing is not None else None,
                gate_metrics=self.gate_metrics,
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
                upstream=names,
            ),
            FinalPhaseController(
                self.client,
                informers,
                self.recorder,
                max_shutdown=self.maintenance_settings.max_shutdown,
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
                    upstream=names,
                )
            )
        if names is not None and lifecycle:
            parts += self._upstream_controllers(informers, names)
        return parts

    def _upstream_controllers(
        self, informers: SharedInformers, names: ResponderNames
    ) -> list[Controller]:
        """The evictionrequest-controller and the imperative evictor of lifecycle.k8s.io."""
        evictor = ImperativeEvictor(
            self.client,
            informers,
            backoff=(self.settings.backoff_base, self.settings.backoff_cap),
            queue_metrics=self.queue_metrics.for_queue("imperative-evictor"),
            workers=self.request_concurrency,
        )
        controller = LifecycleEvictionController(
            self.client,
            informers,
            names=names,
            evictor=evictor,
            heartbeat_deadline=self.settings.heartbeat_deadline.total_seconds(),
            queue_metrics=self.queue_metrics.for_queue("evictions"),
        )
        return [controller, evictor]
