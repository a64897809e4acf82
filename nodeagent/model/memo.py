"""What a decision reads of an object, or derives from a part of its inputs, remembered
across decisions."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar, cast

from nodeagent.model.bodies import uid_of

__all__ = ["ObjectMemo", "Recall"]

T = TypeVar("T")


class ObjectMemo(Generic[T]):
    """``read(obj)`` remembered per object, for decisions taken over and over on the same
    informer cache. What ``read`` returns depends on its object alone, and the cache replaces an
    object on every change (it never mutates one), so an entry holds while its object is the
    one asked about; any other object, even of the same UID, is read anew."""

    def __init__(self, read: Callable[[Mapping[str, Any]], T]) -> None:
        self._read = read
        self._by_uid: dict[str, tuple[Mapping[str, Any], T]] = {}

    def __call__(self, obj: Mapping[str, Any]) -> T:
        uid = uid_of(obj)
        hit = self._by_uid.get(uid)
        if hit is not None and hit[0] is obj:
            return hit[1]
        value = self._read(obj)
        self._by_uid[uid] = (obj, value)
        return value

    def forget(self, obj: Mapping[str, Any]) -> None:
        """``obj`` is gone (an informer's delete handler): drop its entry."""
        self._by_uid.pop(uid_of(obj), None)

    def __len__(self) -> int:
        return len(self._by_uid)


class Recall:
    """Values a decision derives from parts of its inputs, remembered across decisions: one
    per slot of a group (say, the kinds of value derived for one node), reused while the part
    asked about is equal to the one it was derived from. The informer cache hands out the same
    objects (and the same tuple for an unchanged index bucket) while nothing changes, so most
    comparisons are by identity. A value must depend on its key alone and never be mutated."""

    def __init__(self) -> None:
        self._groups: dict[str, dict[str, tuple[object, object]]] = {}

    def __call__(self, group: str, slot: str, key: object, derive: Callable[[], T]) -> T:
        slots = self._groups.setdefault(group, {})
        hit = slots.get(slot)
        if hit is not None and (hit[0] is key or hit[0] == key):
            return cast(T, hit[1])
        value = derive()
        slots[slot] = (key, value)
        return value

    def forget(self, group: str) -> None:
        """The group's subject is gone, or no decision reads it now: drop its values."""
        self._groups.pop(group, None)

    def __len__(self) -> int:
        return len(self._groups)
