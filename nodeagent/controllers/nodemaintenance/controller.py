"""The NodeMaintenance controller shell: informers in, the pure decision
(:func:`nodeagent.model.nodemaintenance.decide.decide`) in between, API calls out.

Watches NodeMaintenances, Nodes, Pods (indexed by node) and EvictionRequests (indexed by the
``nodeagent.io/node`` label). Any change enqueues every maintenance connected to it through
shared nodes (drainTargets are resolved across intersecting maintenances, and the next plan
entry of one depends on pods of its neighbours). Nothing polls.

Under a limit on nodes draining at once (``nodeMaintenance.maxDrainingNodes``) every
maintenance in Drain depends on every other: each decision of one in Drain is handed all of
them, and a change around any of them enqueues them all (a node that finishes its drain frees a
slot for a node of another maintenance). A decision that admits nodes to drain counts them as
draining until the cache shows their drainTargets, so decisions taken meanwhile on the older
cache cannot admit more.

Writes use the resourceVersion of the object they were decided on as a precondition, so a
decision taken on a stale cache fails with Conflict and is retried on fresher state rather
than, say, storing drainTargets behind the ones already stored.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from functools import partial
from typing import Any, cast

from prometheus_client import Histogram

from nodeagent.config import NodeMaintenanceConfig
from nodeagent.controllers.nodemaintenance.gates import Gates, GateSink
from nodeagent.controllers.nodemaintenance.membership import Membership
from nodeagent.controllers.nodemaintenance.requestsource import RequestSource
from nodeagent.controllers.nodemaintenance.signatures import (
    drain_started,
    eviction_request_node_index,
    node_signature,
    pod_signature,
    progress_only,
    request_keys,
    requests_by_name,
)
from nodeagent.controllers.nodemaintenance.writes import NodeMaintenanceClient, Writes
from nodeagent.kube.controller import Controller, SharedInformers
from nodeagent.kube.events import EventSink
from nodeagent.kube.expectations import Expectations
from nodeagent.kube.resources import NODEMAINTENANCES, NODES, PODS, Obj
from nodeagent.kube.store import key_of, pod_node_index
from nodeagent.kube.workqueue import WorkQueueMetrics
from nodeagent.model.bodies import EvictionRequest, as_maintenance, as_map, metadata_of, name_of
from nodeagent.model.draintargets.pods import PodInfoMemo
from nodeagent.model.interceptors.requests import EvictionRequestView
from nodeagent.model.maintenance import Stage, effective_stage
from nodeagent.model.memo import ObjectMemo, Recall
from nodeagent.model.nodemaintenance.actions import Actions
from nodeagent.model.nodemaintenance.decide import decide
from nodeagent.model.nodemaintenance.inputs import Inputs
from nodeagent.model.nodemaintenance.limits import admitted_in_status
from nodeagent.model.nodemaintenance.requests import refusal
from nodeagent.model.nodemaintenance.selection import recall_group

__all__ = [
    "NodeMaintenanceClient",
    "NodeMaintenanceController",
    "drain_started",
    "eviction_request_node_index",
]


# A decision reads every pod of every node involved: with thousands of pods it takes
# milliseconds, and during a drain the events that ask for the next one arrive faster than
# that. A maintenance is decided again at the earliest PACING times as long after its last
# decision as that decision took, so deciding never takes more than about a ninth of the
# event loop, and the EvictionRequest controller, which does the evicting, keeps the rest
# (a 3,000-pod drain: 21.0 s with 3, 17.2 s with 8). Small maintenances decide in a
# millisecond and are not slowed down noticeably.
PACING = 8.0
# Progress alone (the pod counters, the "N pods left" message) is written at most this often;
# anything else (drainTargets, Drained, messages) at once. Each write is a request and a watch
# event to every client of the maintenance: 5 s keeps a 110-pod drain at ~3 writes of
# progress, and `kubectl get nm -w` still moves visibly.
PROGRESS_INTERVAL = 5.0


class NodeMaintenanceController(Controller):
    """Leader-only. Construct, then run `informers.run()` and `controller.run()` together."""

    def __init__(
        self,
        client: NodeMaintenanceClient,
        informers: SharedInformers,
        recorder: EventSink,
        *,
        workers: int = 4,
        max_concurrent_writes: int = 16,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        metrics: WorkQueueMetrics | None = None,
        drain_duration: Histogram | None = None,
        settings: NodeMaintenanceConfig | None = None,
        upstream: Callable[[Mapping[str, Any]], bool] | None = None,
        gate_metrics: GateSink | None = None,
    ) -> None:
        self._settings = settings or NodeMaintenanceConfig()
        self._schedule = self._settings.schedule
        # the gates' states for each decision; Prometheus read while a reboot waits (gates.py)
        self.gates = Gates(self._settings.gates, sink=gate_metrics, on_change=self._wake_drains)
        self._maintenances = informers.informer(NODEMAINTENANCES)
        self._nodes = informers.informer(NODES)
        self._pods = informers.informer(PODS, indexers={"node": pod_node_index})
        # with `upstream`, ours on lifecycle.k8s.io too, shown as the CRD's (requestsource.py)
        self._requests = RequestSource(informers, upstream=upstream)
        super().__init__(
            "nodemaintenance",
            informers=[self._maintenances, self._nodes, self._pods, *self._requests.informers],
            workers=workers,
            metrics=metrics,
        )
        self._clock = clock
        self._writes = Writes(
            client,
            recorder,
            maintenances=self._maintenances.store,
            requests=self._requests.store,
            upstream=self._upstream_target,
            enqueue_after=self.enqueue_after,
            clock=clock,
            max_concurrent_writes=max_concurrent_writes,
            drain_duration=drain_duration,
        )
        # what decisions derive per node and maintenance, while it stays the same (Inputs.recall);
        # a node no maintenance has is read by no decision: its values (pod objects) go
        self._recall = Recall()
        self._members = Membership(node_left=self._recall.forget)
        self._joint = asyncio.Lock()  # decisions of intersecting maintenances, one at a time
        self._pod_info = PodInfoMemo()
        self._request_view = ObjectMemo(EvictionRequestView.from_obj)
        self._not_before: dict[str, float] = {}  # maintenance -> loop time, see PACING
        self._in_drain: set[str] = set()  # maintenances in stage Drain
        self._admitting = Expectations()  # nodes admitted; drainTargets unseen
        self._maintenances.add_handler(
            self._on_maintenance, self._on_maintenance_update, self._on_maintenance_delete
        )
        self._nodes.add_handler(self._on_node, self._on_node_update, self._on_node_delete)
        self._pods.add_handler(self._on_pod, self._on_pod_update, self._on_pod)
        # the expectations about a pod end with it (they would pile up over drains otherwise)
        self._pods.add_handler(on_delete=self._pod_gone)
        self._requests.add_handler(self._on_request, self._on_request_update, self._on_request)
        self._requests.add_handler(self._request_seen, None, self._request_gone)

    # -- event handlers: keep the membership index, enqueue what is affected ---------------------

    def _all_maintenances(self) -> dict[str, Obj]:
        return {str(metadata_of(nm).get("name")): nm for nm in self._maintenances.store.list()}

    def _enqueue_all(self, names: Iterable[str]) -> None:
        names = set(names)
        if self._settings.limited and names & self._in_drain:
            names |= self._in_drain  # under a limit every drain depends on every other
        for name in names:
            self.enqueue(name)

    def _on_maintenance(self, nm: Obj) -> None:
        name = key_of(nm)
        self._writes.maintenance_seen(nm)
        before = self._members.component([name])[0]
        if name in self._in_drain:
            before.add(name)  # it may leave Drain: the others are woken as it was
        self._members.maintenance_changed(nm, self._nodes.store.list)
        self._enqueue_all(before)
        if effective_stage(nm) == Stage.DRAIN:
            self._in_drain.add(name)
        else:
            self._in_drain.discard(name)
        for ns in (nm.get("status") or {}).get("nodeStatuses") or ():
            if isinstance(ns, Mapping) and admitted_in_status(ns):
                self._admitting.observed(str(as_map(ns.get("nodeRef")).get("name")))
        self._enqueue_all(self._members.component([name])[0] | {name})

    def _on_maintenance_update(self, old: Obj, new: Obj) -> None:
        self._on_maintenance(new)

    def _on_maintenance_delete(self, nm: Obj) -> None:
        name = key_of(nm)
        self.gates.want(name, False)
        self._writes.maintenance_gone(name)
        self._recall.forget(recall_group(name))
        before = self._members.component([name])[0]
        self._members.maintenance_deleted(name)
        if name in self._in_drain:
            self._in_drain.discard(name)
            before |= self._in_drain if self._settings.limited else set()
        self._enqueue_all(before - {name})

    def _on_node(self, node: Obj) -> None:
        name = key_of(node)
        before = self._members.around_node(name)
        self._members.node_changed(name, node, self._all_maintenances())
        self._enqueue_all(before | self._members.around_node(name))

    def _on_node_update(self, old: Obj, new: Obj) -> None:
        if node_signature(old) != node_signature(new):
            self._on_node(new)

    def _on_node_delete(self, node: Obj) -> None:
        name = key_of(node)
        before = self._members.around_node(name)
        self._members.node_changed(name, None, self._all_maintenances())
        self._enqueue_all(before)

    def _on_pod(self, pod: Obj) -> None:
        for node in pod_node_index(pod):
            self._enqueue_all(self._members.around_node(node))
        if self.gates.watches(pod):  # a podsReady gate's pod came or went
            self._wake_drains()

    def _on_pod_update(self, old: Obj, new: Obj) -> None:
        if pod_signature(old) != pod_signature(new):
            self._on_pod(old)
            self._on_pod(new)
        elif self.gates.readiness_changed(old, new):
            self._wake_drains()

    def _wake_drains(self) -> None:
        """A gate changed: every maintenance in Drain is decided again (a reboot waits)."""
        for name in self._in_drain:
            self.enqueue(name)

    def _request_nodes(self, er: Obj) -> list[str]:
        nodes = eviction_request_node_index(er)
        if nodes:
            return nodes
        found = self._cached_target(er)
        return pod_node_index(found) if found is not None else []

    def _cached_target(self, er: Obj) -> Obj | None:
        """The pod informer's object of the pod the request names (by name: any UID)."""
        pod = ((er.get("spec") or {}).get("target") or {}).get("pod") or {}
        namespace = metadata_of(er).get("namespace")
        if not (namespace and pod.get("name")):
            return None
        return self._pods.store.get(f"{namespace}/{pod['name']}")

    def _on_request(self, er: Obj) -> None:
        for node in self._request_nodes(er):
            self._enqueue_all(self._members.around_node(node))

    def _on_request_update(self, old: Obj, new: Obj) -> None:
        if (
            old.get("spec") != new.get("spec")
            or (old.get("status") or {}).get("conditions")
            != (new.get("status") or {}).get("conditions")
            # status.summary.blockedBy
            or refusal(self._request_view(old)) != refusal(self._request_view(new))
        ):
            self._on_request(new)

    def _request_seen(self, er: Obj) -> None:
        self._writes.request_seen(er)

    def _request_gone(self, er: Obj) -> None:
        view = self._request_view(er)
        self._request_view.forget(er)
        pod = self._cached_target(er)  # a request is named after its pod's UID
        self._writes.request_gone(
            er,
            with_its_pod=view.owned_by_target
            and pod is not None
            and metadata_of(pod).get("uid") == name_of(er),
        )

    def _upstream_target(self, namespace: str, pod_name: str, request_key: str) -> bool:
        """Whether a request is ours on lifecycle.k8s.io: one there already, or a new one for
        a pod of a kind its evictor evicts."""
        if self._requests.store.upstream(request_key):
            return True
        if request_key in self._requests.crd.store:
            return False
        return self._requests.goes_upstream(self._pods.store.get(f"{namespace}/{pod_name}"))

    def _pod_gone(self, pod: Obj) -> None:
        self._writes.pod_gone(pod)
        self._pod_info.forget(pod)

    # -- reconcile ---------------------------------------------------------------------------------

    def _scope(self, key: str) -> tuple[set[str], set[str]]:
        """The maintenances and nodes a decision on `key` takes in."""
        start = {key}
        if self._settings.limited and key in self._in_drain:
            start |= self._in_drain
        return self._members.component(start)

    def inputs(self, key: str) -> Inputs | None:
        """The decision's inputs for maintenance `key` from the caches; None if it is gone."""
        nm = self._maintenances.store.get(key)
        if nm is None:
            return None
        limit = self._settings.max_draining_nodes
        cluster = len(self._nodes.store)
        # a limit per zone alone: every node may drain but those of a full zone
        max_draining = limit.slots(cluster) if limit is not None else None
        if max_draining is None and self._settings.limited:
            max_draining = max(1, cluster)
        names, node_names = self._scope(key)
        maintenances = [m for n in sorted(names) if (m := self._maintenances.store.get(n))]
        nodes = {n: obj for n in sorted(node_names) if (obj := self._nodes.store.get(n))}
        pods = {n: self._pods.store.by_index("node", n) for n in node_names}
        requests: dict[str, Obj] = {}
        for n in node_names:
            labelled = self._requests.store.by_index("node", n)
            by_name = self._recall(
                n, "labelled requests", labelled, partial(requests_by_name, labelled)
            )
            requests.update(by_name)
            on_node = pods[n]
            uids, keys = self._recall(n, "request keys", on_node, partial(request_keys, on_node))
            for uid, found in zip(uids, map(self._requests.store.get, keys), strict=True):
                if found is not None:
                    requests[uid] = found
        return Inputs(
            maintenance=as_maintenance(nm),
            maintenances=[as_maintenance(m) for m in maintenances],
            nodes=nodes,
            pods=pods,
            eviction_requests=cast("dict[str, EvictionRequest]", requests),  # read, never checked
            now=self._clock(),
            max_draining=max_draining,
            zone_limit=self._settings.max_draining_nodes_per_zone,
            zone_label=self._settings.zone_label,
            max_shutdown=self._settings.max_shutdown,
            windows=self._schedule,
            window_end=self._settings.window_end,
            gates=self.gates.states(self._pods.store.list) if self.gates.configured else (),
            cordon_while_waiting=self._settings.cordon_while_waiting,
            admitting=self._admitting.pending(),
            drain_deadline=self._settings.drain_deadline,
            deadline_escalation=self._settings.drain_deadline_escalation,
            pod_info=self._pod_info,
            request_view=self._request_view,
            recall=self._recall,
        )

    async def run(self) -> None:
        """The controller, and beside it the Prometheus gate's reader (gates.py)."""
        async with asyncio.TaskGroup() as tg:
            tg.create_task(super().run(), name="nodemaintenance")
            tg.create_task(self.gates.run(), name="gate prometheus")

    def enqueue(self, key: str) -> None:
        not_before = self._not_before.get(key)
        if not_before is not None:
            delay = not_before - asyncio.get_running_loop().time()
            if delay > 0:
                self.queue.add_after(key, delay)
                return
        self.queue.add(key)

    async def reconcile(self, key: str) -> None:
        if not self._scope(key)[0] - {key}:
            decided = await self._decide_and_store(key)
        else:
            # One resolution spans intersecting maintenances and is stored in each of them, in
            # as many writes: decided side by side, two decisions would each store part of
            # theirs (the other's writes refused) and leave the maintenances' positions out of
            # step. What follows the stored resolution (the EvictionRequests, however many or
            # slow) is done outside, so the others' decisions do not wait for it.
            async with self._joint:
                decided = await self._decide_and_store(key)
        if decided is not None:
            await self._writes.act(*decided)

    async def _decide_and_store(self, key: str) -> tuple[Mapping[str, Any], Actions] | None:
        """Decide on `key` and store the resolution (the maintenances' writes); the stored
        maintenance and the decision's actions, if there is more to do."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        unseen = self._writes.written.longest(self._scope(key)[0] | {key})
        if unseen is not None:
            # its informer event enqueues us again; the timeout, should it never come
            self.enqueue_after(key, unseen)
            return None
        inputs = self.inputs(key)
        if inputs is None:
            self._not_before.pop(key, None)
            self._writes.progress_written.pop(key, None)
            return None
        actions = decide(inputs)
        self.gates.want(key, actions.gates_wanted)
        now = loop.time()
        for node in actions.admitted:  # before any await: decisions taken meanwhile count it
            self._admitting.expect(node)
        if actions.requeue_after is not None:
            self.enqueue_after(key, actions.requeue_after)
        self._not_before[key] = now + (now - started) * PACING
        if actions.status is not None and progress_only(
            as_map(inputs.maintenance.get("status")), actions.status
        ):
            written = self._writes.progress_written.get(key)
            if written is not None and now - written < PROGRESS_INTERVAL:
                actions = dataclasses.replace(actions, status=None)
                self.enqueue_after(key, written + PROGRESS_INTERVAL - now)
        if actions.idle:
            return None
        try:
            return await self._writes.store(inputs.maintenance, actions), actions
        except BaseException:
            for node in actions.admitted:  # not stored: the next decision admits afresh
                self._admitting.forget(node)
            raise
