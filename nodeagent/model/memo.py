"""What a decision reads of an object, remembered per object across decisions."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

__all__ = ["ObjectMemo"]

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
        metadata = obj.get("metadata")
        uid = str(metadata.get("uid") or "") if isinstance(metadata, Mapping) else ""
        hit = self._by_uid.get(uid)
        if hit is not None and hit[0] is obj:
            return hit[1]
        value = self._read(obj)
        self._by_uid[uid] = (obj, value)
        return value

    def forget(self, uid: str) -> None:
        """The object is gone: drop its entry."""
        self._by_uid.pop(uid, None)

    def __len__(self) -> int:
        return len(self._by_uid)
