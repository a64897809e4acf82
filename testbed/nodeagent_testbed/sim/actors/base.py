"""What the simulated actors share: a work queue, the reconcile loop, small object helpers.

Every actor listens to the store (`Store.listeners` get each committed change synchronously, in
commit order). The listener only maps the change to keys of objects to look at and queues them;
`run()` takes keys off the queue one at a time and reconciles each against the current state of
the store, like a client-go controller with a single worker.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime
from typing import Any, Generic, TypeVar

from nodeagent_testbed.sim.errors import ApiError
from nodeagent_testbed.sim.store import Change, Obj, Store

log = logging.getLogger(__name__)

K = TypeVar("K")
Key = tuple[str, str]  # (namespace, name)

# client-go's default controller rate limiter: per-item exponential backoff
_BACKOFF_BASE = 0.005
_BACKOFF_MAX = 30.0


class WorkQueue(Generic[K]):
    """Keys to reconcile, each queued at most once (client-go's workqueue, for one worker).

    A key added while it is being processed is queued again, so the change is not lost.
    """

    def __init__(self) -> None:
        self._queue: asyncio.Queue[K] = asyncio.Queue()
        self._queued: set[K] = set()
        self._timers: dict[K, asyncio.TimerHandle] = {}
        self._failures: dict[K, int] = {}

    def __len__(self) -> int:
        return len(self._queued)

    def add(self, key: K) -> None:
        if key not in self._queued:
            self._queued.add(key)
            self._queue.put_nowait(key)

    def add_after(self, key: K, delay: float) -> None:
        """Queue `key` after `delay` seconds; an earlier pending timer for it wins."""
        if delay <= 0:
            self.add(key)
            return
        loop = asyncio.get_running_loop()
        when = loop.time() + delay
        timer = self._timers.get(key)
        if timer is not None:
            if timer.when() <= when:
                return
            timer.cancel()
        self._timers[key] = loop.call_at(when, self._fire, key)

    def _fire(self, key: K) -> None:
        self._timers.pop(key, None)
        self.add(key)

    def retry(self, key: K) -> None:
        """Queue `key` again after an exponentially growing delay."""
        n = self._failures.get(key, 0)
        self._failures[key] = n + 1
        self.add_after(key, min(_BACKOFF_BASE * 2**n, _BACKOFF_MAX))

    def forget(self, key: K) -> None:
        self._failures.pop(key, None)

    async def get(self) -> K:
        key = await self._queue.get()
        self._queued.discard(key)
        return key

    def close(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()


class Controller(Generic[K]):
    """A reconcile loop over keys. Subclasses implement `on_change`, `initial_keys`, `reconcile`.

    `reconcile` is synchronous: it reads the store and writes it without awaiting, so nothing
    else changes the store in between and a read-modify-write cannot conflict.
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        self.queue: WorkQueue[K] = WorkQueue()

    def on_change(self, change: Change) -> None:
        raise NotImplementedError

    def initial_keys(self) -> Iterable[K]:
        raise NotImplementedError

    def reconcile(self, key: K) -> None:
        raise NotImplementedError

    def _listen(self, change: Change) -> None:
        # an exception here would surface in whichever writer committed the change
        try:
            self.on_change(change)
        except Exception:
            log.exception(
                "%s failed to handle a %s of %s", type(self).__name__, change[0], change[1]
            )

    def subscribe(self) -> None:
        """Start receiving the store's changes (in `_listen`)."""
        self.store.listeners.append(self._listen)

    def unsubscribe(self) -> None:
        self.store.listeners.remove(self._listen)

    async def run(self) -> None:
        self.subscribe()
        try:
            for key in self.initial_keys():
                self.queue.add(key)
            while True:
                key = await self.queue.get()
                self.process(key)
        finally:
            self.unsubscribe()
            self.queue.close()

    def process(self, key: K) -> None:
        try:
            self.reconcile(key)
        except ApiError as e:
            # 404: the object went meanwhile, which the retry will see; anything else is news
            log.log(
                logging.DEBUG if e.code == 404 else logging.WARNING,
                "%s: syncing %s failed, will retry: %s",
                type(self).__name__,
                key,
                e.message,
            )
            self.queue.retry(key)
        except Exception:
            # a malformed object must not stop the actor; retrying would not help
            log.exception("%s: syncing %s failed", type(self).__name__, key)
            self.queue.forget(key)
        else:
            self.queue.forget(key)


class OwnerIndex:
    """Which objects of one resource name a given uid as their controller (or any owner)."""

    def __init__(self, key: tuple[str, str], controller_only: bool = True) -> None:
        self.key = key
        self.controller_only = controller_only
        self._by_owner: defaultdict[str, set[Key]] = defaultdict(set)

    def _owners(self, obj: Obj | None) -> set[str]:
        if obj is None:
            return set()
        refs = obj["metadata"].get("ownerReferences") or []
        return {
            r["uid"]
            for r in refs
            if r.get("uid") and (r.get("controller") or not self.controller_only)
        }

    def observe(self, change: Change) -> None:
        kind, rkey, old, new = change
        if rkey != self.key:
            return
        k = key_of(new)
        gone = self._owners(old) if kind != "ADDED" else set()
        now = self._owners(new) if kind != "DELETED" else set()
        for uid in gone - now:
            deps = self._by_owner.get(uid)
            if deps is not None:
                deps.discard(k)
                if not deps:
                    del self._by_owner[uid]
        for uid in now:
            self._by_owner[uid].add(k)

    def rebuild(self, objects: Iterable[Obj]) -> None:
        self._by_owner.clear()
        for obj in objects:
            for uid in self._owners(obj):
                self._by_owner[uid].add(key_of(obj))

    def dependents(self, uid: str) -> set[Key]:
        return set(self._by_owner.get(uid, ()))


# --- object helpers ---------------------------------------------------------------------------


def key_of(obj: Obj) -> Key:
    m = obj["metadata"]
    return (m.get("namespace", ""), m["name"])


def uid_of(obj: Obj) -> str:
    return str(obj["metadata"]["uid"])


def controller_ref(obj: Obj) -> dict[str, Any] | None:
    for ref in obj["metadata"].get("ownerReferences") or []:
        if ref.get("controller"):
            return dict(ref)
    return None


def owned_by(obj: Obj, owner: Obj) -> bool:
    ref = controller_ref(obj)
    return ref is not None and ref.get("uid") == uid_of(owner)


def owner_reference(owner: Obj) -> dict[str, Any]:
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def terminating(obj: Obj) -> bool:
    return bool(obj["metadata"].get("deletionTimestamp"))


def pod_phase(pod: Obj) -> str:
    return str((pod.get("status") or {}).get("phase") or "")


def pod_active(pod: Obj) -> bool:
    """Counts as a replica: not terminating and not finished (controller.IsPodActive)."""
    return not terminating(pod) and pod_phase(pod) not in ("Succeeded", "Failed")


def condition(obj: Obj, type_: str) -> dict[str, Any] | None:
    """The condition of that type (the stored dict: do not change it)."""
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == type_:
            return c  # type: ignore[no-any-return]
    return None


def pod_ready(pod: Obj) -> bool:
    c = condition(pod, "Ready")
    return c is not None and c.get("status") == "True"


def set_condition(
    conditions: list[dict[str, Any]], new: dict[str, Any], now: str
) -> list[dict[str, Any]]:
    """`conditions` with `new` merged in; lastTransitionTime moves only when the status does."""
    out = []
    found = False
    for c in conditions:
        if c.get("type") == new["type"]:
            found = True
            merged = {**c, **new}
            if c.get("status") != new.get("status") or "lastTransitionTime" not in c:
                merged["lastTransitionTime"] = now
            out.append(merged)
        else:
            out.append(c)
    if not found:
        out.append({**new, "lastTransitionTime": now})
    return out


def node_ready(node: Obj) -> bool:
    c = condition(node, "Ready")
    return c is not None and c.get("status") == "True"


def int_or_percent(value: Any, total: int, round_up: bool) -> int:
    """intstr.GetScaledValueFromIntOrPercent."""
    if isinstance(value, str) and value.endswith("%"):
        pct = int(value[:-1])
        scaled = pct * total
        return -(-scaled // 100) if round_up else scaled // 100
    return int(value)


def parse_time(ts: str | None) -> float | None:
    """Seconds since the epoch of an RFC 3339 timestamp as the store writes them."""
    if not ts:
        return None
    try:
        return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def omit_zero(status: dict[str, Any], *required: str) -> dict[str, Any]:
    """Drop zero counters, as the real API's `omitempty` integer fields are dropped."""
    return {k: v for k, v in status.items() if k in required or v not in (0, None)}


def controller_key(obj: Obj | None, kind: str) -> Key | None:
    """(namespace, name) of the object's controller if it is a `kind`."""
    if obj is None:
        return None
    ref = controller_ref(obj)
    if ref is None or ref.get("kind") != kind:
        return None
    return (obj["metadata"].get("namespace", ""), str(ref.get("name")))


def spec_replicas(obj: Obj) -> int:
    value = (obj.get("spec") or {}).get("replicas")
    return 1 if value is None else int(value)
