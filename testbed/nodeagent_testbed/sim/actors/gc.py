"""The garbage collector: deletes objects whose owners are all gone.

Owners are matched by uid, so an owner deleted and recreated under the same name does not keep
the old dependents. A dependent with some owners left only loses the references to the missing
ones. Owners deleted with the `orphan` finalizer release their dependents; owners deleted with
`foregroundDeletion` wait until their blocking dependents are gone (each deleted in the
foreground as well). Orphaned objects are deleted in the background, pods with their grace
period.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from nodeagent_testbed.sim.actors.base import Controller, terminating
from nodeagent_testbed.sim.resources import ResourceType
from nodeagent_testbed.sim.store import Change, Obj, Store

log = logging.getLogger(__name__)

Ref = tuple[str, str, str, str]  # group, plural, namespace, name
ORPHAN = "orphan"
FOREGROUND = "foregroundDeletion"


def _ref(key: tuple[str, str], obj: Obj) -> Ref:
    m = obj["metadata"]
    return (key[0], key[1], m.get("namespace", ""), m["name"])


def _owner_uids(obj: Obj | None) -> set[str]:
    if obj is None:
        return set()
    return {r["uid"] for r in obj["metadata"].get("ownerReferences") or [] if r.get("uid")}


def _waits_for_gc(obj: Obj) -> bool:
    finalizers = obj["metadata"].get("finalizers") or []
    return terminating(obj) and (ORPHAN in finalizers or FOREGROUND in finalizers)


class GarbageCollector(Controller[Ref]):
    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self._live: dict[str, Ref] = {}  # uid -> object
        self._dependents: defaultdict[str, set[Ref]] = defaultdict(set)  # owner uid -> objects

    def on_change(self, change: Change) -> None:
        kind, rkey, old, new = change
        ref = _ref(rkey, new)
        uid = new["metadata"].get("uid", "")
        before = _owner_uids(old) if kind != "ADDED" else set()
        after = _owner_uids(new) if kind != "DELETED" else set()
        for owner in before - after:
            self._drop_dependent(owner, ref)
        for owner in after:
            self._dependents[owner].add(ref)
        if kind == "DELETED":
            self._live.pop(uid, None)
            for dependent in self._dependents.get(uid, ()):
                self.queue.add(dependent)
            for owner in before:  # an owner deleted in the foreground may be waiting for this
                if owner in self._live:
                    self.queue.add(self._live[owner])
            return
        self._live[uid] = ref
        if (after and after != before) or _waits_for_gc(new):
            self.queue.add(ref)

    def _drop_dependent(self, owner: str, ref: Ref) -> None:
        deps = self._dependents.get(owner)
        if deps is not None:
            deps.discard(ref)
            if not deps:
                del self._dependents[owner]

    def initial_keys(self) -> Iterable[Ref]:
        self._live.clear()
        self._dependents.clear()
        keys = []
        for rkey, objects in self.store.objects.items():
            for obj in objects.values():
                ref = _ref(rkey, obj)
                self._live[obj["metadata"]["uid"]] = ref
                for owner in _owner_uids(obj):
                    self._dependents[owner].add(ref)
                if _owner_uids(obj) or _waits_for_gc(obj):
                    keys.append(ref)
        return keys

    def _type(self, group: str, plural: str) -> ResourceType | None:
        for rt in self.store.types.values():
            if rt.key == (group, plural):
                return rt
        return None

    def _find(self, ref: Ref) -> tuple[ResourceType, Obj] | None:
        rt = self._type(ref[0], ref[1])
        obj = self.store.find(rt, ref[2], ref[3]) if rt is not None else None
        return None if rt is None or obj is None else (rt, obj)

    def reconcile(self, ref: Ref) -> None:
        found = self._find(ref)
        if found is None:
            return
        rt, obj = found
        uid = obj["metadata"]["uid"]
        finalizers = obj["metadata"].get("finalizers") or []
        if terminating(obj) and ORPHAN in finalizers:
            self._orphan_dependents(uid)
            self._drop_finalizer(rt, ref, ORPHAN)
        elif terminating(obj) and FOREGROUND in finalizers and not self._delete_dependents(uid):
            self._drop_finalizer(rt, ref, FOREGROUND)
        refs = obj["metadata"].get("ownerReferences") or []
        absent = {r.get("uid") for r in refs} - self._live.keys()
        if not refs or not absent:
            return
        if len(absent) < len(refs):
            log.info("removing references to deleted owners from %s %s/%s", rt.kind, ref[2], ref[3])
            self.store.mutate(rt, ref[2], ref[3], lambda o: _drop_refs(o, absent))
        elif not terminating(obj):
            log.info("deleting %s %s/%s: its owners are gone", rt.kind, ref[2], ref[3])
            self.store.delete(rt, ref[2], ref[3])

    def _orphan_dependents(self, uid: str) -> None:
        for dep in list(self._dependents.get(uid, ())):
            found = self._find(dep)
            if found is not None:
                self.store.mutate(found[0], dep[2], dep[3], lambda o: _drop_refs(o, {uid}))

    def _delete_dependents(self, uid: str) -> bool:
        """Delete the dependents of a foreground deletion; whether any still block it."""
        blocking = False
        for dep in list(self._dependents.get(uid, ())):
            found = self._find(dep)
            if found is None:
                continue
            rt, obj = found
            if not terminating(obj):
                if self._dependents.get(obj["metadata"]["uid"]) and rt.kind != "Pod":
                    self.store.mutate(rt, dep[2], dep[3], _add_foreground)
                self.store.delete(rt, dep[2], dep[3])
                still = self.store.find(rt, dep[2], dep[3])
                if still is None:
                    continue
                obj = still
            blocking = blocking or any(
                r.get("uid") == uid and r.get("blockOwnerDeletion")
                for r in obj["metadata"].get("ownerReferences") or []
            )
        return blocking

    def _drop_finalizer(self, rt: ResourceType, ref: Ref, name: str) -> None:
        def drop(o: Obj) -> None:
            o["metadata"]["finalizers"] = [f for f in o["metadata"]["finalizers"] if f != name]

        self.store.mutate(rt, ref[2], ref[3], drop)


def _drop_refs(obj: Obj, uids: set[Any]) -> None:
    refs = [r for r in obj["metadata"].get("ownerReferences") or [] if r.get("uid") not in uids]
    if refs:
        obj["metadata"]["ownerReferences"] = refs
    else:
        obj["metadata"].pop("ownerReferences", None)


def _add_foreground(obj: Obj) -> None:
    finalizers = obj["metadata"].setdefault("finalizers", [])
    if FOREGROUND not in finalizers:
        finalizers.append(FOREGROUND)
