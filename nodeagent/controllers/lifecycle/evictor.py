"""The `imperative-eviction.k8s.io/evictor` responder of upstream Evictions (leader only):
:func:`nodeagent.model.lifecycle.evictor.evictor_turn` applied to every Eviction whose Active
responder it is. Keys are the Evictions' ``namespace/name``."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any, Protocol

from nodeagent.kube.controller import Controller, Result, SharedInformers
from nodeagent.kube.errors import NotFound
from nodeagent.kube.evict import EvictClient, evict_pod
from nodeagent.kube.expectations import WRITE_SEEN_TTL, Expectations
from nodeagent.kube.protocols import StatusPatcher
from nodeagent.kube.resources import EVICTIONS, PDBS, PODS, Obj
from nodeagent.kube.store import key_of, namespace_index, split_key, version_of
from nodeagent.kube.workqueue import WorkQueueMetrics
from nodeagent.model.bodies import items, mapping, metadata_of
from nodeagent.model.budgets import BudgetLedger, to_wake
from nodeagent.model.interceptors.imperative import ImperativeState
from nodeagent.model.lifecycle.eviction import target_index
from nodeagent.model.lifecycle.evictor import active_evictor, evictor_turn, requesters_of
from nodeagent.model.names import IMPERATIVE_RESPONDER
from nodeagent.model.times import Clock, utcnow

__all__ = ["EvictorClient", "ImperativeEvictor"]

log = logging.getLogger(__name__)


class EvictorClient(EvictClient, StatusPatcher, Protocol):
    """The part of `KubeClient` the evictor needs."""


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
        super().__init__(
            name,
            informers=[self.evictions, self.pods, self.budgets],
            workers=workers,
            metrics=queue_metrics,
        )
        self._client = client
        self._clock = clock
        self._backoff = backoff
        self._state: dict[str, tuple[str, ImperativeState]] = {}  # key -> (Eviction UID, state)
        self._ledger = BudgetLedger()
        self._evicting: set[str] = set()  # keys whose Eviction API call is in flight
        # Evictions we wrote, until the informer shows the write: a turn taken on the older
        # cache would write again onto the replaced version (a 409, and a retry)
        self._written = Expectations(WRITE_SEEN_TTL)
        self.evictions.add_handler(self._seen, lambda _, new: self._seen(new), self._forget)
        self.enqueue_on(self.evictions, lambda e: [key_of(e)])
        self.enqueue_on(self.pods, self._keys_for_pod)
        self.budgets.add_handler(
            self._on_budget, lambda _, new: self._on_budget(new), self._ledger.forget
        )

    def _seen(self, eviction: Obj) -> None:
        self._written.observed(key_of(eviction), version_of(eviction))

    def _forget(self, eviction: Obj) -> None:
        self._state.pop(key_of(eviction), None)
        self._written.forget(key_of(eviction))

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

    async def reconcile(self, key: str) -> Result | None:
        eviction = self.evictions.store.get(key)
        entry = active_evictor(eviction) if eviction is not None else None
        if eviction is None or entry is None:
            self._state.pop(key, None)
            return None
        if (unseen := self._written.left(key)) is not None:
            return Result(unseen)  # its informer event comes first, most likely
        uid = str(metadata_of(eviction).get("uid"))
        kept = self._state.get(key)
        state = kept[1] if kept is not None and kept[0] == uid else None
        target = mapping(mapping(eviction, "spec"), "target").get("pod") or {}
        namespace = str(metadata_of(eviction).get("namespace"))
        pod = self.pods.store.get(f"{namespace}/{target.get('name')}")
        budgets = self.budgets.store.by_index("namespace", namespace)
        gate = self._ledger.gate(pod, budgets) if pod is not None else None
        target_uid = str(target.get("uid"))
        args = (pod, target_uid, state)
        requesters = requesters_of(eviction)
        turn = evictor_turn(entry, *args, None, gate, self._backoff, self._clock(), requesters)
        if turn.call:
            self._ledger.let_through(gate)
            self._evicting.add(key)
            try:
                outcome = await evict_pod(
                    self._client, namespace, str(target.get("name")), target_uid
                )
            finally:
                self._evicting.discard(key)
            if outcome.kind != "evicted":
                self._ledger.let_through(gate, -1)  # the server let nothing through
            log.info(
                "eviction of pod %s/%s: %s %s",
                namespace,
                target.get("name"),
                outcome.kind,
                outcome.detail,
            )
            turn = evictor_turn(
                entry,
                pod,
                target_uid,
                turn.state,
                outcome,
                gate,
                self._backoff,
                self._clock(),
                requesters,
            )
        if turn.state is not None:
            self._state[key] = (uid, turn.state)
        if turn.entry is not None:
            await self._write(eviction, turn.entry)
        return Result(turn.requeue_after) if turn.requeue_after is not None else None

    async def _write(self, eviction: Mapping[str, Any], entry: Obj) -> None:
        """The evictor's entry, at the version decided from (merge patches replace whole
        lists: a write of the controller's meanwhile is a 409 and a new turn)."""
        md = metadata_of(eviction)
        responders = [
            entry if r.get("name") == IMPERATIVE_RESPONDER else r
            for r in items(mapping(eviction, "status"), "responders")
        ]
        body = {
            "metadata": {"resourceVersion": md.get("resourceVersion")},
            "status": {"responders": responders},
        }
        key, onto = key_of(eviction), version_of(eviction)
        with contextlib.suppress(NotFound):  # gone with its last request
            written = await self._client.patch_status(
                EVICTIONS, str(md["name"]), body, str(md["namespace"])
            )
            shown = self.evictions.store.version(key)
            self._written.expect_write(key, [onto], shown, answer=version_of(written))
