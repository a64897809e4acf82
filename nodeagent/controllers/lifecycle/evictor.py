"""The `imperative-eviction.k8s.io/evictor` responder of upstream Evictions (leader only):
:func:`nodeagent.model.lifecycle.evictor.evictor_turn` applied to every Eviction whose Active
responder it is. Keys are the Evictions' ``namespace/name``."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any, NamedTuple, Protocol

from nodeagent.kube.caswrite import CasClient, CasWriter
from nodeagent.kube.controller import Controller, Result, SharedInformers
from nodeagent.kube.errors import NotFound
from nodeagent.kube.evict import EvictClient, evict_pod
from nodeagent.kube.resources import EVICTIONS, PDBS, PODS, UPSTREAM_EVICTIONREQUESTS, Obj
from nodeagent.kube.store import key_of, namespace_index, split_key, version_of
from nodeagent.kube.workqueue import WorkQueueMetrics
from nodeagent.model.bodies import mapping, metadata_of
from nodeagent.model.budgets import BudgetGate, BudgetLedger, to_wake
from nodeagent.model.interceptors.imperative import EvictionOutcome, ImperativeState
from nodeagent.model.lifecycle.eviction import target_index
from nodeagent.model.lifecycle.evictor import (
    EvictorTurn,
    active_evictor,
    evictor_turn,
    requesters_of,
    with_entry,
)
from nodeagent.model.lifecycle.ownership import collected_with_pod
from nodeagent.model.times import Clock, utcnow

__all__ = ["EvictorClient", "ImperativeEvictor"]

log = logging.getLogger(__name__)


class EvictorClient(EvictClient, CasClient, Protocol):
    """The part of `KubeClient` the evictor needs."""


class _Inputs(NamedTuple):
    """What one turn on an Eviction is decided from."""

    key: str
    uid: str
    namespace: str
    pod_name: str
    target_uid: str
    entry: Mapping[str, Any]
    pod: Mapping[str, Any] | None
    state: ImperativeState | None
    gate: BudgetGate | None
    requesters: tuple[str, ...]


class ImperativeEvictor(Controller):
    def __init__(
        self,
        client: EvictorClient,
        informers: SharedInformers,
        *,
        backoff: tuple[float, float],
        clock: Clock = utcnow,
        workers: int = 4,
        queue_metrics: WorkQueueMetrics | None = None,
        name: str = "imperative-evictor",
    ) -> None:
        self.evictions = informers.informer(EVICTIONS, indexers={"target": target_index})
        self.pods = informers.informer(PODS)
        self.budgets = informers.informer(PDBS, indexers={"namespace": namespace_index})
        self.requests = informers.informer(
            UPSTREAM_EVICTIONREQUESTS, indexers={"target": target_index}
        )
        super().__init__(
            name,
            informers=[self.evictions, self.pods, self.budgets, self.requests],
            workers=workers,
            metrics=queue_metrics,
        )
        self._client = client
        self._clock = clock
        self._backoff = backoff
        self._state: dict[str, tuple[str, ImperativeState]] = {}  # key -> (Eviction UID, state)
        self._ledger = BudgetLedger()
        self._evicting: set[str] = set()  # keys whose Eviction API call is in flight
        # a turn waits for the informer to show our last write: taken on the older cache, it
        # would write again onto the replaced version
        self._writes = CasWriter(client, EVICTIONS, self.evictions.store)
        self.evictions.add_handler(self._seen, lambda _, new: self._seen(new), self._forget)
        self.enqueue_on(self.evictions, lambda e: [key_of(e)])
        self.enqueue_on(self.pods, self._keys_for_pod)
        self.budgets.add_handler(
            self._on_budget, lambda _, new: self._on_budget(new), self._ledger.forget
        )

    def _seen(self, eviction: Obj) -> None:
        self._writes.seen(eviction)

    def _forget(self, eviction: Obj) -> None:
        self._state.pop(key_of(eviction), None)
        self._writes.gone(key_of(eviction))

    def _keys_for_pod(self, pod: Obj) -> Iterable[str]:
        md = metadata_of(pod)
        return self.evictions.store.index_keys("target", f"{md.get('namespace')}/{md.get('uid')}")

    def _on_budget(self, pdb: Obj) -> None:
        """A budget allows disruptions again: the evictions it held back or refused are asked
        for now rather than when their backoff runs out, those waiting longest first."""
        self._ledger.seen(pdb)
        waiting = []
        for key, (_, state) in self._state.items():
            if state.evicted or (state.next_attempt is None and state.held_since is None):
                continue
            eviction = self.evictions.store.get(key) or {}
            target = mapping(mapping(eviction, "spec"), "target").get("pod") or {}
            namespace, _ = split_key(key)
            waiting.append(
                (key, state.retries, self.pods.store.get(f"{namespace}/{target.get('name')}"))
            )
        for key in to_wake(pdb, waiting, self._evicting):
            uid, state = self._state[key]
            self._state[key] = (uid, replace(state, next_attempt=None, held_since=None))
            self.enqueue(key)

    def _inputs(self, eviction: Mapping[str, Any], entry: Mapping[str, Any]) -> _Inputs:
        key = key_of(eviction)
        uid = str(metadata_of(eviction).get("uid"))
        kept = self._state.get(key)
        target = mapping(mapping(eviction, "spec"), "target").get("pod") or {}
        namespace = str(metadata_of(eviction).get("namespace"))
        pod = self.pods.store.get(f"{namespace}/{target.get('name')}")
        budgets = self.budgets.store.by_index("namespace", namespace)
        return _Inputs(
            key,
            uid,
            namespace,
            str(target.get("name")),
            str(target.get("uid")),
            entry,
            pod,
            kept[1] if kept is not None and kept[0] == uid else None,
            self._ledger.gate(pod, budgets) if pod is not None else None,
            requesters_of(eviction),
        )

    def _turn(self, i: _Inputs, outcome: EvictionOutcome | None = None) -> EvictorTurn:
        backoff, now = self._backoff, self._clock()
        return evictor_turn(
            i.entry, i.pod, i.target_uid, i.state, outcome, i.gate, backoff, now, i.requesters
        )

    def report(self, eviction: Mapping[str, Any]) -> EvictorTurn | None:
        """The evictor's turn on `eviction` short of calling the Eviction API (None where it
        is not the Active responder, or would call now), for the controller to write its
        first words with its own as it makes it Active. Its state is kept (when a budget
        began holding it back), as its own turn would keep it."""
        entry = active_evictor(eviction)
        if entry is None:
            return None
        i = self._inputs(eviction, entry)
        turn = self._turn(i)
        if turn.call:
            return None
        if turn.state is not None:
            self._state[i.key] = (i.uid, turn.state)
        return turn

    async def reconcile(self, key: str) -> Result | None:
        eviction = self.evictions.store.get(key)
        entry = active_evictor(eviction) if eviction is not None else None
        if eviction is None or entry is None:
            self._state.pop(key, None)
            return None
        if (unseen := self._writes.left(key)) is not None:
            return Result(unseen)  # its informer event comes first, most likely
        i = self._inputs(eviction, entry)
        turn = self._turn(i)
        if turn.call:
            turn = self._turn(i._replace(state=turn.state), await self._evict(i))
        if turn.state is not None:
            self._state[key] = (i.uid, turn.state)
        if turn.entry is not None and not (turn.ends_with_pod and self._collected(eviction, i)):
            await self._write(eviction, turn.entry)
        return Result(turn.requeue_after) if turn.requeue_after is not None else None

    def _collected(self, eviction: Mapping[str, Any], i: _Inputs) -> bool:
        """Whether the garbage collector removes `eviction` with its requests now."""
        requests = self.requests.store.by_index("target", f"{i.namespace}/{i.target_uid}")
        return collected_with_pod(i.target_uid, requests, i.pod, eviction)

    async def _evict(self, i: _Inputs) -> EvictionOutcome:
        self._ledger.let_through(i.gate)
        self._evicting.add(i.key)
        try:
            outcome = await evict_pod(self._client, i.namespace, i.pod_name, i.target_uid)
        finally:
            self._evicting.discard(i.key)
        if outcome.kind != "evicted":
            self._ledger.let_through(i.gate, -1)  # the server let nothing through
        log.info(
            "eviction of pod %s/%s: %s %s", i.namespace, i.pod_name, outcome.kind, outcome.detail
        )
        return outcome

    async def _write(self, eviction: Mapping[str, Any], entry: Obj) -> None:
        """The evictor's entry, at the version decided from (merge patches replace whole
        lists: a write of the controller's meanwhile is a 409 and a new turn)."""
        responders = mapping(with_entry(eviction, entry), "status").get("responders")
        body = {"status": {"responders": responders}}
        with contextlib.suppress(NotFound):  # gone with its last request
            await self._writes.patch(key_of(eviction), body, version_of(eviction), status=True)
