"""`KubeClient`'s calls as small protocols, declared once: each part of the product says which
calls it makes by deriving its client protocol from these (`LeaseClient(Getter, Creator,
Replacer)`), so a signature is written here and nowhere else, and tests can pass any object
with those calls."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from typing import Any, Literal, Protocol

from nodeagent.kube.resources import Obj, Resource

__all__ = [
    "Creator",
    "Deleter",
    "Evicter",
    "Getter",
    "Lister",
    "Patcher",
    "Replacer",
    "StatusPatcher",
    "StrategicStatusPatcher",
    "Watcher",
]


class Getter(Protocol):
    async def get(self, resource: Resource, name: str, namespace: str | None = ...) -> Obj: ...


class Lister(Protocol):
    async def list(
        self,
        resource: Resource,
        namespace: str | None = ...,
        *,
        label_selector: str | None = ...,
        field_selector: str | None = ...,
        resource_version: str | None = ...,
        page_size: int = ...,
    ) -> Obj: ...


class Watcher(Protocol):
    def watch(
        self,
        resource: Resource,
        namespace: str | None = ...,
        *,
        resource_version: str | None = ...,
        label_selector: str | None = ...,
        field_selector: str | None = ...,
        timeout_seconds: int | None = ...,
        allow_bookmarks: bool = ...,
    ) -> AsyncGenerator[Obj, None]: ...


class Creator(Protocol):
    async def create(
        self, resource: Resource, body: Mapping[str, Any], namespace: str | None = ...
    ) -> Obj: ...


class Replacer(Protocol):
    async def replace(
        self, resource: Resource, body: Mapping[str, Any], namespace: str | None = ...
    ) -> Obj: ...


class Patcher(Protocol):
    """A JSON merge patch."""

    async def patch(
        self,
        resource: Resource,
        name: str,
        patch: Mapping[str, Any],
        namespace: str | None = ...,
    ) -> Obj: ...


class StatusPatcher(Protocol):
    """A JSON merge patch of the status subresource."""

    async def patch_status(
        self,
        resource: Resource,
        name: str,
        patch: Mapping[str, Any],
        namespace: str | None = ...,
    ) -> Obj: ...


class StrategicStatusPatcher(Protocol):
    """A patch of the status subresource of the given type: a strategic merge patch merges a
    built-in object's lists by key (a Node's conditions by type, leaving the kubelet's)."""

    async def patch_status(
        self,
        resource: Resource,
        name: str,
        patch: Mapping[str, Any],
        namespace: str | None = ...,
        *,
        patch_type: Literal["merge", "json", "strategic"] = ...,
    ) -> Obj: ...


class Deleter(Protocol):
    async def delete(
        self,
        resource: Resource,
        name: str,
        namespace: str | None = ...,
        *,
        grace_period_seconds: int | None = ...,
        uid: str | None = ...,
        resource_version: str | None = ...,
    ) -> Obj: ...


class Evicter(Protocol):
    async def evict(
        self,
        namespace: str,
        name: str,
        *,
        grace_period_seconds: int | None = ...,
        uid: str | None = ...,
    ) -> Obj: ...
