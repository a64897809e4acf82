"""In-memory object storage with the semantics of the real API server.

One global, monotonically increasing resourceVersion; optimistic concurrency; generation;
finalizers and deletionTimestamp; graceful pod deletion; per resource a window of recent events
sized as kube-apiserver's watch cache sizes it, so that a watch from a resourceVersion before the
window gets 410 Expired; watches filtered by namespace and selectors that see an object leaving
their selection as DELETED, as the real watch cache does; dry runs that change nothing.

Committed objects are never mutated: every write stores a new dict, so readers may serialise what
they get without copying. Code that wants to change an object deep-copies it first.
"""

from __future__ import annotations

import asyncio
import copy
import random
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from nodeagent_testbed.sim.errors import ApiError, conflict, invalid, not_found
from nodeagent_testbed.sim.resources import BUILTIN, ResourceType
from nodeagent_testbed.sim.selectors import FieldSelector, LabelSelector

Obj = dict[str, Any]
Key = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped
# (type, resource key, old, new): type is ADDED, MODIFIED or DELETED
Change = tuple[str, tuple[str, str], Obj | None, Obj]
Admission = Callable[["Store", ResourceType, Obj, Obj | None], None]

INITIAL_EVENTS_END = "INITIAL_EVENTS_END"
# kube-apiserver's watch cache: it keeps at least HISTORY_MIN events of a resource, and grows up to
# HISTORY_MAX while all of them are younger than FRESH_SECONDS (DefaultEventFreshDuration)
HISTORY_MIN = 100
HISTORY_MAX = 100 * 1024
FRESH_SECONDS = 75.0
_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"


def now_iso(t: float | None = None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if t is None else t))


def random_suffix(n: int = 5) -> str:
    return "".join(random.choice(_NAME_CHARS) for _ in range(n))


def meta(obj: Obj) -> dict[str, Any]:
    m: dict[str, Any] = obj.setdefault("metadata", {})
    return m


def _without_volatile(obj: Obj) -> Obj:
    """The object minus fields that change on every write, to detect no-op updates."""
    out = dict(obj)
    m = dict(out.get("metadata") or {})
    m.pop("resourceVersion", None)
    m.pop("managedFields", None)
    out["metadata"] = m
    return out


def _spec_part(obj: Obj) -> Obj:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


def selected(
    obj: Obj, namespace: str | None, labels: LabelSelector | None, fields: FieldSelector | None
) -> bool:
    m = obj.get("metadata") or {}
    if namespace and m.get("namespace") != namespace:
        return False
    if labels is not None and not labels.matches(m.get("labels") or {}):
        return False
    return fields is None or fields.matches(obj)


@dataclass(eq=False)
class History:
    """The recent events of one resource (watchCacheHistory): a watch can resume from any
    resourceVersion from `floor` on; before it, the events are gone."""

    floor: int  # every event of the resource after this resourceVersion is in `events`
    upper: int = HISTORY_MAX
    capacity: int = HISTORY_MIN
    # (resourceVersion, event type, old, new, when)
    events: deque[tuple[int, str, Obj | None, Obj, float]] = field(default_factory=deque)

    def add(self, rv: int, kind: str, old: Obj | None, new: Obj, now: float) -> None:
        full = len(self.events) >= self.capacity
        if full and now - self.events[0][4] < FRESH_SECONDS:
            self.capacity = min(self.capacity * 2, self.upper)  # all fresh: keep them
        elif full and now - self.events[-(self.capacity // 4)][4] > FRESH_SECONDS:
            self.capacity = max(self.capacity // 2, HISTORY_MIN)  # long quiet: shrink
        dropped = False
        while self.events and len(self.events) >= self.capacity:
            self.events.popleft()
            dropped = True
        self.events.append((rv, kind, old, new, now))
        if dropped:
            self.floor = self.events[0][0] - 1

    def clear(self, rv: int) -> None:
        self.events.clear()
        self.floor = rv


@dataclass(eq=False)
class Watch:
    """One open watch: the server drains `queue` and writes the events to the client."""

    rt: ResourceType
    namespace: str | None
    labels: LabelSelector | None
    fields: FieldSelector | None
    queue: asyncio.Queue[tuple[str, Obj] | None] = field(default_factory=asyncio.Queue)

    def matches(self, obj: Obj | None) -> bool:
        return obj is not None and selected(obj, self.namespace, self.labels, self.fields)

    def event_for(self, kind: str, old: Obj | None, new: Obj) -> tuple[str, Obj] | None:
        """The event this watch sees, translating selection changes as the watch cache does."""
        if kind == "DELETED":
            return ("DELETED", new) if self.matches(new) else None
        was, now = self.matches(old), self.matches(new)
        if was and now:
            return ("MODIFIED", new)
        if now:
            return ("ADDED", new)
        if was:
            return ("DELETED", new)
        return None


class Store:
    def __init__(
        self, history_size: int = HISTORY_MAX, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.rv = 1
        self.types: dict[tuple[str, str, str], ResourceType] = {}
        self.objects: dict[tuple[str, str], dict[Key, Obj]] = {}
        # per resource, from when it is first served (its watch cache's start)
        self.histories: dict[tuple[str, str], History] = {}
        self.history_size = history_size
        self.clock = clock
        # compactions so far (fault injection): the continue tokens of lists from before the
        # last one are expired, as after an etcd compaction
        self.compactions = 0
        self.watches: set[Watch] = set()
        self.listeners: list[Callable[[Change], None]] = []
        self.admission: dict[tuple[str, str], list[Admission]] = {}
        self.on_commit: list[Callable[[Change], None]] = []
        self._pending: deque[Change] = deque()
        self._dispatching = False
        for rt in BUILTIN:
            self.register(rt)

    # --- types -------------------------------------------------------------------------------

    def register(self, rt: ResourceType) -> None:
        self.types[(rt.group, rt.version, rt.plural)] = rt
        self.objects.setdefault(rt.key, {})
        if rt.key not in self.histories:
            self.histories[rt.key] = History(floor=self.rv, upper=self.history_size)

    def unregister_group_plural(self, group: str, plural: str) -> None:
        for k in [k for k in self.types if k[0] == group and k[2] == plural]:
            del self.types[k]

    def drop_resource(self, group: str, plural: str) -> None:
        """A resource no longer served (its CRD deleted): its objects and history go."""
        self.objects.pop((group, plural), None)
        self.histories.pop((group, plural), None)

    def resource(self, group: str, version: str, plural: str) -> ResourceType:
        rt = self.types.get((group, version, plural))
        if rt is None:
            raise ApiError(404, "the server could not find the requested resource")
        return rt

    def type_of(self, api_version: str, kind: str) -> ResourceType:
        group, _, version = api_version.rpartition("/")
        for rt in self.types.values():
            if rt.group == group and rt.version == version and rt.kind == kind:
                return rt
        raise ApiError(404, f'no kind "{kind}" is registered for version "{api_version}"')

    def add_admission(self, group: str, plural: str, fn: Admission) -> None:
        self.admission.setdefault((group, plural), []).append(fn)

    # --- reads -------------------------------------------------------------------------------

    def get(self, rt: ResourceType, namespace: str | None, name: str) -> Obj:
        obj = self.objects.get(rt.key, {}).get((namespace or "", name))
        if obj is None:
            raise not_found(rt.plural, name, rt.group)
        return obj

    def find(self, rt: ResourceType, namespace: str | None, name: str) -> Obj | None:
        return self.objects.get(rt.key, {}).get((namespace or "", name))

    def list(
        self,
        rt: ResourceType,
        namespace: str | None = None,
        labels: LabelSelector | None = None,
        fields: FieldSelector | None = None,
    ) -> list[Obj]:
        items = self.objects.get(rt.key, {})
        return [o for _, o in sorted(items.items()) if selected(o, namespace, labels, fields)]

    def iter_kind(self, rt: ResourceType) -> Iterable[Obj]:
        return list(self.objects.get(rt.key, {}).values())

    # --- writes ------------------------------------------------------------------------------

    def create(
        self, rt: ResourceType, namespace: str | None, obj: Obj, *, dry_run: bool = False
    ) -> Obj:
        """Store a new object; `dry_run`: only say what would be stored."""
        obj = copy.deepcopy(obj)
        m = meta(obj)
        self._check_kind(rt, obj)
        if rt.namespaced:
            ns = namespace or m.get("namespace") or "default"
            if m.get("namespace") and m["namespace"] != ns:
                raise ApiError(
                    400,
                    "the namespace of the provided object does not match the namespace sent "
                    "on the request",
                )
            m["namespace"] = ns
            ns_type = self.types[("", "v1", "namespaces")]
            if self.find(ns_type, None, ns) is None:
                raise not_found("namespaces", ns)
        else:
            m.pop("namespace", None)
        if not m.get("name"):
            if not m.get("generateName"):
                raise invalid(rt.kind, "", [("metadata.name", "name or generateName is required")])
            m["name"] = m["generateName"] + random_suffix()
        if self.find(rt, m.get("namespace"), m["name"]) is not None:
            raise ApiError(
                409,
                f'{rt.plural}{"." + rt.group if rt.group else ""} "{m["name"]}" already exists',
                reason="AlreadyExists",
                details={"name": m["name"], "group": rt.group, "kind": rt.plural},
            )
        m["uid"] = str(uuid.uuid4())
        m["creationTimestamp"] = now_iso()
        m["generation"] = 1
        for k in ("deletionTimestamp", "deletionGracePeriodSeconds", "resourceVersion"):
            m.pop(k, None)
        obj["apiVersion"], obj["kind"] = rt.api_version, rt.kind
        _status_on_create(rt, obj)
        self._admit(rt, obj, None)
        if dry_run:
            return obj
        return self._commit(rt, "ADDED", None, obj)

    def update(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        obj: Obj,
        subresource: str | None = None,
        *,
        owned: bool = False,
        dry_run: bool = False,
    ) -> Obj:
        """Replace an object (PUT). `owned`: the caller hands over `obj` and keeps no reference,
        so it need not be copied. `dry_run`: only say what would be stored."""
        cur = self.get(rt, namespace, name)
        if not owned:
            obj = copy.deepcopy(obj)
        m = meta(obj)
        self._check_kind(rt, obj)
        if m.get("name", name) != name:
            raise ApiError(400, "the name of the object does not match the name on the URL")
        rv = m.get("resourceVersion")
        if rv and rv != cur["metadata"]["resourceVersion"]:
            raise conflict(rt.plural, name, rt.group)
        if subresource == "status":
            new = copy.deepcopy(cur)
            new["status"] = obj.get("status")
            if new["status"] is None:
                new.pop("status")
        else:
            new = obj
            nm = meta(new)
            cm = cur["metadata"]
            for k in (
                "uid",
                "creationTimestamp",
                "namespace",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
            ):
                if k in cm:
                    nm[k] = cm[k]
                else:
                    nm.pop(k, None)
            nm["name"] = name
            if rt.has_status:
                if "status" in cur:
                    new["status"] = copy.deepcopy(cur["status"])
                else:
                    new.pop("status", None)
            if cm.get("deletionTimestamp"):
                added = set(nm.get("finalizers") or []) - set(cm.get("finalizers") or [])
                if added:
                    raise invalid(
                        rt.kind,
                        name,
                        [
                            (
                                "metadata.finalizers",
                                f"no new finalizers can be added if the object is being deleted, "
                                f"found new finalizers {sorted(added)}",
                            )
                        ],
                        rt.group,
                    )
            if _spec_part(new) != _spec_part(cur):
                nm["generation"] = int(cm.get("generation", 1)) + 1
        new["apiVersion"], new["kind"] = cur["apiVersion"], cur["kind"]
        self._admit(rt, new, cur)
        if _without_volatile(new) == _without_volatile(cur):
            return cur  # a no-op write does not bump the resourceVersion
        if dry_run:
            new["metadata"]["resourceVersion"] = cur["metadata"]["resourceVersion"]
            return new
        finished = not new["metadata"].get("finalizers") and not (
            rt.kind == "Pod" and _pod_still_running(new)
        )
        if new["metadata"].get("deletionTimestamp") and finished:
            return self._remove(rt, new)
        return self._commit(rt, "MODIFIED", cur, new)

    def mutate(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        fn: Callable[[Obj], None],
        subresource: str | None = None,
    ) -> Obj:
        """Read-modify-write for in-process actors (they run on the loop, so no conflicts)."""
        obj = copy.deepcopy(self.get(rt, namespace, name))
        fn(obj)
        obj["metadata"].pop("resourceVersion", None)
        return self.update(rt, namespace, name, obj, subresource, owned=True)

    def delete(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        grace_period: int | None = None,
        preconditions: dict[str, Any] | None = None,
        *,
        dry_run: bool = False,
    ) -> Obj:
        """Delete an object, gracefully for a running pod or one with finalizers; `dry_run`:
        only say what the object would become."""
        cur = self.get(rt, namespace, name)
        cm = cur["metadata"]
        pre = preconditions or {}
        if pre.get("uid") and pre["uid"] != cm["uid"]:
            raise ApiError(
                409,
                f"Precondition failed: UID in precondition: {pre['uid']}, UID in object meta: "
                f"{cm['uid']}",
            )
        if pre.get("resourceVersion") and pre["resourceVersion"] != cm["resourceVersion"]:
            raise conflict(rt.plural, name, rt.group)
        grace = 0
        if rt.kind == "Pod":
            grace = self._pod_grace(cur, grace_period)
        if grace == 0 and not cm.get("finalizers"):
            return cur if dry_run else self._remove(rt, cur)
        new = copy.deepcopy(cur)
        nm = new["metadata"]
        deadline = time.time() + grace
        # a repeated delete may only shorten the grace period
        if cm.get("deletionTimestamp") and grace >= int(cm.get("deletionGracePeriodSeconds", 0)):
            return cur
        nm["deletionTimestamp"] = now_iso(deadline)
        nm["deletionGracePeriodSeconds"] = grace
        if rt.kind == "Pod":
            new.setdefault("spec", {})
        if dry_run:
            return new
        return self._commit(rt, "MODIFIED", cur, new)

    def remove_now(self, rt: ResourceType, namespace: str | None, name: str) -> None:
        """Final removal of a pod whose containers stopped (what the kubelet's delete with grace 0
        does); objects with finalizers keep waiting for them."""
        cur = self.find(rt, namespace, name)
        if cur is None:
            return
        if cur["metadata"].get("finalizers"):
            if not cur["metadata"].get("deletionTimestamp"):
                self.delete(rt, namespace, name, grace_period=0)
            return
        self._remove(rt, cur)

    def _pod_grace(self, pod: Obj, requested: int | None) -> int:
        spec = pod.get("spec") or {}
        if not spec.get("nodeName"):
            return 0  # never scheduled: nothing runs, gone at once
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            return 0
        if requested is not None:
            return max(int(requested), 0)
        return int(spec.get("terminationGracePeriodSeconds", 30))

    def _remove(self, rt: ResourceType, cur: Obj) -> Obj:
        final = copy.deepcopy(cur)
        m = final["metadata"]
        del self.objects[rt.key][(m.get("namespace", ""), m["name"])]
        return self._commit(rt, "DELETED", cur, final, store=False)

    # --- internals ---------------------------------------------------------------------------

    def _check_kind(self, rt: ResourceType, obj: Obj) -> None:
        kind = obj.get("kind")
        if kind and kind != rt.kind:
            raise ApiError(400, f"the kind {kind!r} does not match the resource {rt.plural!r}")

    def _admit(self, rt: ResourceType, obj: Obj, old: Obj | None) -> None:
        for fn in self.admission.get(rt.key, ()):
            fn(self, rt, obj, old)

    def _commit(
        self, rt: ResourceType, kind: str, old: Obj | None, new: Obj, store: bool = True
    ) -> Obj:
        self.rv += 1
        new["metadata"]["resourceVersion"] = str(self.rv)
        m = new["metadata"]
        if store:
            self.objects[rt.key][(m.get("namespace", ""), m["name"])] = new
        self.histories[rt.key].add(self.rv, kind, old, new, self.clock())
        for w in self.watches:
            if w.rt.key == rt.key:
                ev = w.event_for(kind, old, new)
                if ev is not None:
                    w.queue.put_nowait(ev)
        change: Change = (kind, rt.key, old, new)
        for hook in self.on_commit:
            hook(change)
        self._pending.append(change)
        self._dispatch()
        return new

    def _dispatch(self) -> None:
        # Listeners may write; their writes are delivered after the current change reached every
        # listener, so all listeners see changes in commit order.
        if self._dispatching:
            return
        self._dispatching = True
        try:
            while self._pending:
                change = self._pending.popleft()
                for listener in list(self.listeners):
                    listener(change)
        finally:
            self._dispatching = False

    # --- watches -----------------------------------------------------------------------------

    def open_watch(
        self,
        rt: ResourceType,
        namespace: str | None,
        labels: LabelSelector | None,
        fields: FieldSelector | None,
        resource_version: str | None,
        send_initial_events: bool = False,
    ) -> Watch:
        """A watch from `resource_version` (replaying history), or from the current state as
        synthetic ADDED events; with `send_initial_events` (client-go's streaming list) the
        initial events end with an INITIAL_EVENTS_END marker."""
        w = Watch(rt, namespace, labels, fields)
        if send_initial_events or not resource_version or resource_version == "0":
            for obj in self.list(rt, namespace, labels, fields):
                w.queue.put_nowait(("ADDED", obj))
            if send_initial_events:
                w.queue.put_nowait((INITIAL_EVENTS_END, {"resourceVersion": str(self.rv)}))
        else:
            try:
                since = int(resource_version)
            except ValueError as e:
                raise ApiError(400, f"invalid resource version: {resource_version!r}") from e
            history = self.histories[rt.key]
            if since < history.floor:
                raise ApiError(
                    410,
                    f"too old resource version: {since} ({history.floor})",
                    reason="Expired",
                )
            for rv, kind, old, new, _ in history.events:
                if rv > since:
                    ev = w.event_for(kind, old, new)
                    if ev is not None:
                        w.queue.put_nowait(ev)
        self.watches.add(w)
        return w

    def close_watch(self, w: Watch) -> None:
        self.watches.discard(w)

    def drop_watches(self) -> int:
        """Fault injection: end every open watch, as an API server restart would."""
        n = len(self.watches)
        for w in list(self.watches):
            w.queue.put_nowait(None)
        self.watches.clear()
        return n

    def compact(self) -> None:
        """Fault injection: forget the history, so any watch from an older version gets 410,
        and expire the continue tokens of earlier lists, as an etcd compaction would."""
        for history in self.histories.values():
            history.clear(self.rv)
        self.compactions += 1


# The status kube-apiserver's strategies (PrepareForCreate) give the built-in types with a status
# subresource whatever the create sent; pods get theirs in admission, nodes keep what they send.
_CREATED_STATUS: dict[tuple[str, str], Obj] = {
    ("", "namespaces"): {"phase": "Active"},
    ("", "services"): {"loadBalancer": {}},
    ("apps", "deployments"): {},
    ("apps", "replicasets"): {"replicas": 0},
    ("apps", "statefulsets"): {"replicas": 0, "availableReplicas": 0},
    ("apps", "daemonsets"): {
        "currentNumberScheduled": 0,
        "numberMisscheduled": 0,
        "desiredNumberScheduled": 0,
        "numberReady": 0,
    },
    ("policy", "poddisruptionbudgets"): {
        "disruptionsAllowed": 0,
        "currentHealthy": 0,
        "desiredHealthy": 0,
        "expectedPods": 0,
    },
}


def _status_on_create(rt: ResourceType, obj: Obj) -> None:
    if rt.key in _CREATED_STATUS:
        obj["status"] = copy.deepcopy(_CREATED_STATUS[rt.key])
    elif rt.has_status and rt.group not in ("", "apps", "policy"):
        obj.pop("status", None)  # CRDs and custom resources: status only through the subresource


def _pod_still_running(pod: Obj) -> bool:
    # a pod on a node with a grace period left is finished by its kubelet, not by the store
    return (
        bool((pod.get("spec") or {}).get("nodeName"))
        and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        and int(pod["metadata"].get("deletionGracePeriodSeconds", 0)) > 0
    )
