"""List-then-watch cache of one resource, calling handlers on changes (client-go informer).

The informer lists, then watches from the list's resourceVersion with bookmarks (which only
advance that resourceVersion). A watch that ends normally is resumed from the last
resourceVersion seen. A watch that fails with `Gone` (the resourceVersion expired) forces a
relist, and the relist is diffed against the store, so handlers get exactly the changes they
missed: adds, updates only where the resourceVersion differs, deletes, and a delete plus an
add for objects recreated under the same name. Other failures are retried from the last
resourceVersion with jittered exponential backoff.

Handlers run synchronously on the loop and must be cheap; controllers enqueue keys.

`watch_until` is the same list, watch and relist for one object and one wait, without a cache.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from nodeagent.kube.errors import Gone, KubeError
from nodeagent.kube.protocols import Lister, Watcher
from nodeagent.kube.resources import Obj, Resource
from nodeagent.kube.store import Delta, Indexer, Store, key_of
from nodeagent.model.backoff import JitteredBackoff
from nodeagent.model.bodies import metadata_of

__all__ = [
    "WATCH_TIMEOUT_SECONDS",
    "Informer",
    "ListWatcher",
    "OnAdd",
    "OnDelete",
    "OnUpdate",
    "watch_until",
]

log = logging.getLogger(__name__)

# A watch ends after 1x to 2x this and is opened again: one request. kube-apiserver's own range
# for a watch that names no timeout (--min-request-timeout, 30 to 60 min), not client-go's 5 to
# 10: an idle node agent's five watches then cost 5,000 nodes ~9 requests/s, not ~55. A dead
# connection is not waited for that long: the client's TCP keepalive drops it within ~3 min.
WATCH_TIMEOUT_SECONDS = 1800

OnAdd = Callable[[Obj], None]
OnUpdate = Callable[[Obj, Obj], None]
OnDelete = Callable[[Obj], None]

# A watch that ends on its own this quickly with nothing in it counts as a failure, so a
# server that keeps hanging up does not make us spin.
_SHORT_WATCH_SECONDS = 1.0


class ListWatcher(Lister, Watcher, Protocol):
    """The part of `KubeClient` an informer needs."""


@dataclass(frozen=True, slots=True)
class _Handlers:
    on_add: OnAdd | None
    on_update: OnUpdate | None
    on_delete: OnDelete | None


class Informer:
    def __init__(
        self,
        client: ListWatcher,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        indexers: Mapping[str, Indexer] | None = None,
        backoff: JitteredBackoff | None = None,
        watch_timeout_seconds: int = WATCH_TIMEOUT_SECONDS,
        transform: Callable[[Obj], Obj] | None = None,
    ) -> None:
        """`transform`: what the store keeps of each listed or watched object (and what the
        handlers get), e.g. `cache_transforms.lean_pod`."""
        self._client = client
        self._transform = transform
        self.resource = resource
        self._namespace = namespace
        self._label_selector = label_selector
        self._field_selector = field_selector
        self.store = Store(indexers)
        self._backoff = backoff if backoff is not None else JitteredBackoff(base=0.5, cap=30.0)
        self._watch_timeout = max(1, watch_timeout_seconds)
        self._rng = random.Random()
        self._handlers: list[_Handlers] = []
        self._synced = asyncio.Event()
        self._rv: str | None = None
        self._progress = 0  # watch events seen, to tell a live watch from a failing one

    @property
    def has_synced(self) -> bool:
        """True once the first list has been loaded and its handlers called."""
        return self._synced.is_set()

    async def wait_synced(self) -> None:
        await self._synced.wait()

    @property
    def resource_version(self) -> str | None:
        """The resourceVersion the next watch starts from."""
        return self._rv

    def add_handler(
        self,
        on_add: OnAdd | None = None,
        on_update: OnUpdate | None = None,
        on_delete: OnDelete | None = None,
    ) -> None:
        """Register callbacks. A handler added late first gets `on_add` for every cached object."""
        handlers = _Handlers(on_add, on_update, on_delete)
        self._handlers.append(handlers)
        if on_add is not None:
            for obj in self.store.list():
                self._call(on_add, obj)

    async def run(self) -> None:
        """List and watch until cancelled."""
        loop = asyncio.get_running_loop()
        failures = 0
        relist = True
        while True:
            progress = self._progress
            started = loop.time()
            try:
                if relist:
                    await self._relist()
                    relist = False
                await self._watch()
                if self._progress != progress or loop.time() - started >= _SHORT_WATCH_SECONDS:
                    failures = 0
                    continue
                log.info("watch of %s ended at once without events", self.resource)
            except Gone as exc:
                log.info("watch of %s expired at %s (%s); relisting", self.resource, self._rv, exc)
                relist = True
            except KubeError as exc:
                log.warning("list/watch of %s failed: %s", self.resource, exc)
            except Exception:
                log.exception("list/watch of %s failed unexpectedly", self.resource)
            if self._progress != progress:
                failures = 0
            failures += 1
            if relist and failures == 1:
                continue  # an expired resourceVersion is routine; relist at once
            delay = self._backoff.delay(failures)
            log.debug("retrying list/watch of %s in %.2fs", self.resource, delay)
            await asyncio.sleep(delay)

    async def _relist(self) -> None:
        listed = await self._client.list(
            self.resource,
            self._namespace,
            label_selector=self._label_selector,
            field_selector=self._field_selector,
        )
        items = [self._kept(item) for item in listed.get("items") or [] if isinstance(item, dict)]
        deltas = self.store.replace(items)
        self._rv = metadata_of(listed).get("resourceVersion") or None
        log.debug(
            "listed %d %s at %s: %d changes", len(items), self.resource, self._rv, len(deltas)
        )
        for delta in deltas:
            self._dispatch(delta)
        self._synced.set()

    async def _watch(self) -> None:
        # Spread watch restarts out, as client-go does (timeout between 1x and 2x).
        timeout = int(self._watch_timeout * (1.0 + self._rng.random()))
        events = self._client.watch(
            self.resource,
            self._namespace,
            resource_version=self._rv,
            label_selector=self._label_selector,
            field_selector=self._field_selector,
            timeout_seconds=timeout,
            allow_bookmarks=True,
        )
        async with contextlib.aclosing(events):
            async for event in events:
                self._handle(event)

    def _handle(self, event: Obj) -> None:
        kind = event.get("type")
        obj = event.get("object")
        if not isinstance(obj, dict):
            log.warning("watch of %s sent a %s event without an object", self.resource, kind)
            return
        rv = metadata_of(obj).get("resourceVersion")
        self._progress += 1
        if kind == "BOOKMARK":
            if rv:
                self._rv = rv
            return
        obj = self._kept(obj)
        try:
            key = key_of(obj)
        except ValueError:
            log.warning(
                "watch of %s sent a %s event for an object without a name", self.resource, kind
            )
            return
        if kind in ("ADDED", "MODIFIED"):
            self._upserted(key, obj, rv)
        elif kind == "DELETED":
            self._deleted(key, obj)
        else:
            log.warning("watch of %s sent an unknown event type %r", self.resource, kind)
            return
        if rv:
            self._rv = rv

    def _kept(self, obj: Obj) -> Obj:
        """What the store keeps of a listed or watched object: with its kind (a list's items do
        not say it; watch events do), transformed."""
        obj.setdefault("apiVersion", self.resource.api_version)
        obj.setdefault("kind", self.resource.kind)
        return obj if self._transform is None else self._transform(obj)

    def _upserted(self, key: str, obj: Obj, rv: str | None) -> None:
        """An object added or modified at `rv`, stored, and its change dispatched."""
        old = self.store.upsert(obj)
        if old is None:
            self._dispatch(Delta("Added", key, None, obj))
        elif metadata_of(old).get("uid") != metadata_of(obj).get("uid"):
            self._dispatch(Delta("Deleted", key, old, None))
            self._dispatch(Delta("Added", key, None, obj))
        elif metadata_of(old).get("resourceVersion") != rv:
            self._dispatch(Delta("Updated", key, old, obj))
        # else: the same version again (a resumed watch); nothing changed

    def _deleted(self, key: str, obj: Obj) -> None:
        """An object deleted, removed from the store, and its delete dispatched."""
        if self.store.delete(key) is not None:
            # Handlers get the final state the server sent, as in client-go.
            self._dispatch(Delta("Deleted", key, obj, None))

    def _dispatch(self, delta: Delta) -> None:
        for handlers in self._handlers:
            if delta.type == "Added":
                if handlers.on_add is not None:
                    assert delta.new is not None
                    self._call(handlers.on_add, delta.new)
            elif delta.type == "Updated":
                if handlers.on_update is not None:
                    assert delta.old is not None and delta.new is not None
                    self._call(handlers.on_update, delta.old, delta.new)
            elif handlers.on_delete is not None:
                self._call(handlers.on_delete, delta.obj)

    def _call(self, handler: Callable[..., None], *args: Obj) -> None:
        try:
            handler(*args)
        except Exception:
            # One broken handler must not stop the informer or the other handlers.
            log.exception("%s event handler failed", self.resource)


async def watch_until(
    client: ListWatcher,
    resource: Resource,
    name: str,
    predicate: Callable[[Obj | None], bool],
    *,
    namespace: str | None = None,
    watch_timeout_seconds: int = 300,
) -> Obj | None:
    """Until the object `name` satisfies `predicate`, which gets None while there is no such
    object (not created yet, or deleted); returns what satisfied it.

    Lists that one object, then watches it from the list's resourceVersion; a watch that ends
    or expires (410 Gone) is followed by a new list. Other API errors propagate. It waits as long
    as it takes: the caller bounds it (`asyncio.timeout`). An informer would keep a cache of the
    resource for the agent's life; this is for one wait."""
    field = f"metadata.name={name}"
    while True:
        listed = await client.list(resource, namespace, field_selector=field)
        items = listed.get("items") or []
        obj: Obj | None = items[0] if items else None
        if predicate(obj):
            return obj
        events = client.watch(
            resource,
            namespace,
            resource_version=metadata_of(listed).get("resourceVersion"),
            field_selector=field,
            timeout_seconds=watch_timeout_seconds,
        )
        try:
            async with contextlib.aclosing(events):
                async for event in events:
                    kind = event.get("type")
                    if kind == "BOOKMARK":
                        continue
                    obj = None if kind == "DELETED" else event.get("object")
                    if predicate(obj):
                        return obj
        except Gone as exc:
            log.info("watch of %s %s expired (%s); listing it again", resource, name, exc)
