"""An indexed, in-memory cache of API objects (client-go `cache.Indexer`).

Objects are the plain dicts the API returned. The store does not copy them: treat everything
it hands out as read-only, and build a new dict to change an object.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from nodeagent.kube.resources import Obj
from nodeagent.model.bodies import metadata_of, uid_of, version_of

__all__ = [
    "Delta",
    "DeltaType",
    "Indexer",
    "Store",
    "key_of",
    "namespace_index",
    "pod_node_index",
    "split_key",
    "version_of",
]

Indexer = Callable[[Obj], list[str]]
DeltaType = Literal["Added", "Updated", "Deleted"]


def key_of(obj: Mapping[str, Any]) -> str:
    """`namespace/name`, or `name` for cluster-scoped objects (client-go's MetaNamespaceKey)."""
    meta = metadata_of(obj)
    name = meta.get("name")
    if not name:
        raise ValueError("object has no metadata.name")
    namespace = meta.get("namespace")
    return str(namespace) + "/" + str(name) if namespace else str(name)


def split_key(key: str) -> tuple[str | None, str]:
    """Inverse of `key_of`: (namespace or None, name)."""
    namespace, sep, name = key.partition("/")
    return (namespace, name) if sep else (None, key)


def namespace_index(obj: Obj) -> list[str]:
    """Index objects by namespace; the usual first indexer."""
    namespace = metadata_of(obj).get("namespace")
    return [namespace] if namespace else []


def pod_node_index(pod: Obj) -> list[str]:
    """Index pods by the node they are bound to (the NodeMaintenance and final-phase
    controllers share the index)."""
    node = (pod.get("spec") or {}).get("nodeName")
    return [node] if isinstance(node, str) and node else []


@dataclass(frozen=True, slots=True)
class Delta:
    """One change to the store. `old` is None for Added, `new` is None for Deleted."""

    type: DeltaType
    key: str
    old: Obj | None
    new: Obj | None

    @property
    def obj(self) -> Obj:
        """The object the change is about: the new state, or the last one for Deleted."""
        obj = self.new if self.new is not None else self.old
        assert obj is not None
        return obj


class Store:
    """Objects by key, with named secondary indexes. Not thread-safe: use it from one loop."""

    def __init__(self, indexers: Mapping[str, Indexer] | None = None) -> None:
        self._items: dict[str, Obj] = {}
        self._indexers: dict[str, Indexer] = dict(indexers or {})
        # index name -> indexed value -> keys
        self._indices: dict[str, dict[str, set[str]]] = {name: {} for name in self._indexers}
        # key -> index name -> values it was filed under (so removal needs no indexer call)
        self._filed: dict[str, dict[str, builtins.list[str]]] = {}
        # (index name, value) -> its objects as by_index last returned them, until one changes
        self._buckets: dict[tuple[str, str], tuple[Obj, ...]] = {}

    def add_indexers(self, indexers: Mapping[str, Indexer]) -> None:
        """More indexes, while the store is still empty (it never changes identity: its users
        keep a reference to it from before the informers start)."""
        if self._items:
            raise RuntimeError("indexes can only be added to an empty store")
        for name, indexer in indexers.items():
            if name in self._indexers:
                raise ValueError(f"index {name!r} is already defined")
            self._indexers[name] = indexer
            self._indices[name] = {}

    def version(self, key: str) -> str | None:
        """The resourceVersion of the object under `key`, or None when there is none."""
        obj = self._items.get(key)
        return None if obj is None else version_of(obj)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def get(self, key: str) -> Obj | None:
        return self._items.get(key)

    def list(self) -> builtins.list[Obj]:
        return list(self._items.values())

    def keys(self) -> builtins.list[str]:
        return list(self._items)

    def by_index(self, index: str, value: str) -> tuple[Obj, ...]:
        """Objects the indexer `index` filed under `value`, in key order. The same tuple is
        returned until one of them changes, so a caller can tell an unchanged bucket by
        identity (decisions remember what they derived from one)."""
        bucket = self._buckets.get((index, value))
        if bucket is not None:
            return bucket
        try:
            keys = self._indices[index].get(value, ())
        except KeyError:
            raise KeyError(f"no index named {index!r}") from None
        if not keys:
            return ()  # not kept: values come and go (nodes), empty buckets would pile up
        bucket = self._buckets[(index, value)] = tuple(self._items[k] for k in sorted(keys))
        return bucket

    def index_keys(self, index: str, value: str) -> builtins.list[str]:
        try:
            return sorted(self._indices[index].get(value, ()))
        except KeyError:
            raise KeyError(f"no index named {index!r}") from None

    def index_values(self, index: str) -> builtins.list[str]:
        """Every value the index currently holds objects under."""
        try:
            return sorted(self._indices[index])
        except KeyError:
            raise KeyError(f"no index named {index!r}") from None

    def upsert(self, obj: Obj) -> Obj | None:
        """Add or replace `obj`; returns the previous object under its key."""
        key = key_of(obj)
        # Run the indexers before touching anything, so one that raises leaves the store intact.
        filed = {
            name: list(dict.fromkeys(indexer(obj))) for name, indexer in self._indexers.items()
        }
        old = self._items.get(key)
        if old is not None:
            self._unfile(key)
        self._items[key] = obj
        self._file(key, filed)
        return old

    def delete(self, key: str) -> Obj | None:
        """Remove the object under `key`; returns it, or None if there was none."""
        old = self._items.pop(key, None)
        if old is not None:
            self._unfile(key)
        return old

    def replace(self, objs: Iterable[Obj]) -> builtins.list[Delta]:
        """Make the store hold exactly `objs` and return what changed.

        Unchanged objects (same resourceVersion) yield no delta. An object that was deleted and
        recreated under the same name (new uid) yields Deleted then Added, not an Updated that
        would hide the deletion. Deleted deltas for vanished keys come last.
        """
        deltas: builtins.list[Delta] = []
        seen: set[str] = set()
        for obj in objs:
            key = key_of(obj)
            seen.add(key)
            old = self.upsert(obj)
            if old is None:
                deltas.append(Delta("Added", key, None, obj))
            elif uid_of(old) != uid_of(obj):
                deltas.append(Delta("Deleted", key, old, None))
                deltas.append(Delta("Added", key, None, obj))
            elif version_of(old) != version_of(obj) or not version_of(obj):
                deltas.append(Delta("Updated", key, old, obj))
        for key in [k for k in self._items if k not in seen]:
            old = self.delete(key)
            assert old is not None
            deltas.append(Delta("Deleted", key, old, None))
        return deltas

    def _file(self, key: str, filed: dict[str, builtins.list[str]]) -> None:
        for name, values in filed.items():
            index = self._indices[name]
            for value in values:
                index.setdefault(value, set()).add(key)
                self._buckets.pop((name, value), None)
        self._filed[key] = filed

    def _unfile(self, key: str) -> None:
        for name, values in self._filed.pop(key, {}).items():
            index = self._indices[name]
            for value in values:
                self._buckets.pop((name, value), None)
                keys = index.get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del index[value]
