"""A small controller runtime: shared informers and a workqueue-driven controller base.

Usage::

    informers = SharedInformers(client)
    nodes = informers.informer(NODES)
    pods = informers.informer(PODS, indexers={"node": pod_node_index})

    class MyController(Controller):
        async def reconcile(self, key: str) -> Result | None:
            ...  # raise to retry with rate limiting; return to forget the key's failures
            return Result(requeue_after=30.0)  # and look again in 30 s

    ctl = MyController("my-controller", informers=[nodes, pods], workers=4)
    ctl.enqueue_on(nodes, lambda node: [key_of(node)])
    async with asyncio.TaskGroup() as tg:
        tg.create_task(informers.run())
        tg.create_task(ctl.run())

`Controller.run` waits until every informer it was given has synced before any worker starts,
so a reconcile never sees a half-filled cache. Event handlers only enqueue keys; all work
happens in `reconcile`, at most once at a time per key (the `WorkQueue` guarantees).
"""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from nodeagent.kube.cache_transforms import transform_for
from nodeagent.kube.errors import Conflict, KubeError, NotFound
from nodeagent.kube.informer import WATCH_TIMEOUT_SECONDS, Informer, ListWatcher
from nodeagent.kube.ratelimit import RateLimiter
from nodeagent.kube.resources import Obj, Resource
from nodeagent.kube.store import Indexer
from nodeagent.kube.workqueue import ShutDown, WorkQueue, WorkQueueMetrics
from nodeagent.model.backoff import JitteredBackoff

__all__ = ["Controller", "KeyMapper", "Result", "SharedInformers"]

log = logging.getLogger(__name__)

KeyMapper = Callable[[Obj], Iterable[str]]
"""Maps an object an informer saw to the keys of the objects to reconcile because of it."""


@dataclass(frozen=True, slots=True)
class Result:
    """What a successful reconcile asks of the runtime (controller-runtime's Result):
    `requeue_after` seconds, to look at the key again then (an event may bring it back sooner)."""

    requeue_after: float | None = None


@dataclass(frozen=True, slots=True)
class _InformerKey:
    resource: Resource
    namespace: str | None
    label_selector: str | None
    field_selector: str | None


class SharedInformers:
    """Hands out one `Informer` per (resource, namespace, label selector, field selector) and
    runs them all.

    Indexers may be requested by every user of an informer until `run` starts it; a name that
    is already taken must come with the same indexer function.
    """

    def __init__(
        self,
        client: ListWatcher,
        *,
        watch_timeout_seconds: int = WATCH_TIMEOUT_SECONDS,
        backoff: Callable[[], JitteredBackoff] | None = None,
    ) -> None:
        self._client = client
        self._watch_timeout = watch_timeout_seconds
        self._backoff = backoff
        self._informers: dict[_InformerKey, Informer] = {}
        self._indexers: dict[_InformerKey, dict[str, Indexer]] = {}
        self._started = False

    def informer(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        indexers: Mapping[str, Indexer] | None = None,
    ) -> Informer:
        key = _InformerKey(resource, namespace, label_selector or None, field_selector or None)
        wanted = dict(indexers or {})
        informer = self._informers.get(key)
        if informer is None:
            informer = Informer(
                self._client,
                resource,
                namespace=namespace,
                label_selector=key.label_selector,
                field_selector=key.field_selector,
                indexers=wanted,
                backoff=self._backoff() if self._backoff is not None else None,
                watch_timeout_seconds=self._watch_timeout,
                transform=transform_for(resource.plural),
            )
            self._informers[key] = informer
            self._indexers[key] = wanted
            return informer
        have = self._indexers[key]
        for name, fn in wanted.items():
            if name in have and have[name] is not fn:
                raise ValueError(f"informer of {resource}: index {name!r} is already defined")
        missing = {name: fn for name, fn in wanted.items() if name not in have}
        if missing:
            if self._started:
                raise RuntimeError(
                    f"informer of {resource} already runs; cannot add indexes {sorted(missing)}"
                )
            have.update(missing)
            # nothing has been listed yet; the store stays the same object, for those who
            # took a reference to it already
            informer.store.add_indexers(missing)
        return informer

    @property
    def informers(self) -> list[Informer]:
        return list(self._informers.values())

    async def wait_synced(self) -> None:
        """Until every informer handed out so far has loaded its first list."""
        for informer in list(self._informers.values()):
            await informer.wait_synced()

    async def run(self) -> None:
        """Run every informer until cancelled (informers handed out later are not started)."""
        self._started = True
        async with asyncio.TaskGroup() as tg:
            for key, informer in self._informers.items():
                tg.create_task(informer.run(), name=f"informer {key.resource}")


class Controller(ABC):
    """A named work queue of string keys (usually `namespace/name`) served by `workers`
    concurrent workers calling `reconcile`.

    `reconcile(key)` returning means success: the key's failure history is forgotten, and a
    `Result` with `requeue_after` queues the key again after that delay. Raising
    re-queues the key with the rate limiter's delay (client-go's default controller rate
    limiter unless another is given). A key is never reconciled twice at the same time; a key
    enqueued while it is being reconciled is reconciled again afterwards.

    A failure of one of `expected_errors` is logged without a traceback (API errors by default:
    a conflict, a server hiccup are routine).
    """

    expected_errors: tuple[type[Exception], ...] = (KubeError,)

    def __init__(
        self,
        name: str,
        *,
        informers: Sequence[Informer] = (),
        workers: int = 1,
        rate_limiter: RateLimiter | None = None,
        metrics: WorkQueueMetrics | None = None,
    ) -> None:
        if workers < 1:
            raise ValueError("a controller needs at least one worker")
        self.name = name
        self.workers = workers
        self._informers = list(informers)
        self.queue: WorkQueue[str] = WorkQueue(name, rate_limiter, metrics)
        self._log = logging.getLogger(f"{__name__}.{name}")

    @abstractmethod
    async def reconcile(self, key: str) -> Result | None:
        """Bring the object under `key` to its desired state; raise to retry later, return a
        `Result` to look again after a delay."""

    def enqueue(self, key: str) -> None:
        self.queue.add(key)

    def enqueue_after(self, key: str, delay: float) -> None:
        self.queue.add_after(key, delay)

    def enqueue_on(self, informer: Informer, keys: KeyMapper) -> None:
        """Enqueue `keys(obj)` for every add, update and delete the informer sees (for updates,
        the keys of both the old and the new state). The informer is also waited on by `run`."""

        def on_add(obj: Obj) -> None:
            for key in keys(obj):
                self.enqueue(key)

        def on_update(old: Obj, new: Obj) -> None:
            for key in dict.fromkeys([*keys(old), *keys(new)]):
                self.enqueue(key)

        informer.add_handler(on_add, on_update, on_add)
        if informer not in self._informers:
            self._informers.append(informer)

    async def wait_synced(self) -> None:
        for informer in self._informers:
            await informer.wait_synced()

    async def run(self) -> None:
        """Wait for the informers to sync, then serve the queue until cancelled."""
        await self.wait_synced()
        self._log.info("controller %s started with %d workers", self.name, self.workers)
        try:
            async with asyncio.TaskGroup() as tg:
                for i in range(self.workers):
                    tg.create_task(self._worker(), name=f"{self.name} worker {i}")
        finally:
            self.queue.shutdown()

    async def _worker(self) -> None:
        while True:
            try:
                key = await self.queue.get()
            except ShutDown:
                return
            try:
                result = await self.reconcile(key)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                retries = self.queue.num_requeues(key)
                # A conflict, or a 404 for an object deleted meanwhile, only means the cache was
                # behind the API server: routine; the retry sees the newer state (a conflicting
                # write of a `CasWriter` holds its key until the informer shows it).
                self._log.log(
                    _level(exc),
                    "%s: reconciling %s failed (retry %d): %s",
                    self.name,
                    key,
                    retries + 1,
                    exc,
                    exc_info=not isinstance(exc, self.expected_errors),
                )
                self.queue.add_rate_limited(key)
            else:
                self.queue.forget(key)
                if result is not None and result.requeue_after is not None:
                    self.queue.add_after(key, result.requeue_after)
            finally:
                self.queue.done(key)


def _level(exc: Exception) -> int:
    """How loud a reconcile's failure is: a Conflict is the cache catching up (debug), a 404
    an object gone meanwhile (info); anything else deserves a look."""
    if isinstance(exc, Conflict):
        return logging.DEBUG
    return logging.INFO if isinstance(exc, NotFound) else logging.WARNING
