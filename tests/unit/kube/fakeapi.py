"""A tiny in-memory object API with resourceVersion compare-and-swap, for leader, event and
shutdown-timing tests that need exact control over failures (and a fake clock: it runs no
thread). Integration tests use the simulated cluster."""

from __future__ import annotations

import asyncio
import copy
import itertools
import re
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any

from nodeagent.kube.errors import AlreadyExists, Conflict, KubeError, NotFound, Unreachable
from nodeagent.kube.resources import Resource

Obj = dict[str, Any]


class Backend:
    def __init__(self) -> None:
        self.objects: dict[tuple[str, str | None, str], Obj] = {}
        self.rv = itertools.count(1)
        self.calls: list[tuple[str, str, str]] = []

    def key(
        self, resource: Resource, namespace: str | None, name: str
    ) -> tuple[str, str | None, str]:
        return (resource.plural, namespace if resource.namespaced else None, name)

    def all(self, resource: Resource) -> list[Obj]:
        return [o for (plural, _, _), o in self.objects.items() if plural == resource.plural]


class FakeClient:
    """One client's view of a shared Backend; `down` makes its calls fail like a partition."""

    def __init__(self, backend: Backend, name: str = "client") -> None:
        self.backend = backend
        self.name = name
        self.down = False
        self.fail_next: list[KubeError] = []

    async def _enter(self, verb: str, resource: Resource) -> None:
        await asyncio.sleep(0)  # a request is a suspension point, even one answered at once
        self.backend.calls.append((self.name, verb, resource.plural))
        if self.down:
            raise Unreachable("partitioned", reason="Unreachable")
        if self.fail_next:
            raise self.fail_next.pop(0)

    async def list(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        **_: Any,
    ) -> Obj:
        """Selectors of `key=value` terms only (labels; `metadata.name` for fields)."""
        await self._enter("list", resource)
        items = [
            copy.deepcopy(o)
            for o in self.backend.all(resource)
            if _selected(o["metadata"].get("labels") or {}, label_selector)
            and _selected({"metadata.name": o["metadata"]["name"]}, field_selector)
        ]
        return {"metadata": {"resourceVersion": "0"}, "items": items}

    async def watch(
        self, resource: Resource, namespace: str | None = None, **_: Any
    ) -> AsyncGenerator[Obj, None]:
        """A watch that stays quiet: the tests that use it change nothing while it runs."""
        await self._enter("watch", resource)
        await asyncio.Event().wait()
        yield {}  # never reached: makes this an async generator

    async def get(self, resource: Resource, name: str, namespace: str | None = None) -> Obj:
        await self._enter("get", resource)
        obj = self.backend.objects.get(self.backend.key(resource, namespace, name))
        if obj is None:
            raise NotFound(f"{resource} {name!r} not found", status=404, reason="NotFound")
        return copy.deepcopy(obj)

    async def create(
        self, resource: Resource, body: Mapping[str, Any], namespace: str | None = None
    ) -> Obj:
        await self._enter("create", resource)
        obj = copy.deepcopy(dict(body))
        meta = obj.setdefault("metadata", {})
        namespace = namespace or meta.get("namespace")
        key = self.backend.key(resource, namespace, meta["name"])
        if key in self.backend.objects:
            raise AlreadyExists("exists", status=409, reason="AlreadyExists")
        meta["resourceVersion"] = str(next(self.backend.rv))
        meta["uid"] = "uid-" + meta["resourceVersion"]
        if namespace:
            meta["namespace"] = namespace
        self.backend.objects[key] = obj
        return copy.deepcopy(obj)

    async def replace(
        self, resource: Resource, body: Mapping[str, Any], namespace: str | None = None
    ) -> Obj:
        await self._enter("update", resource)
        obj = copy.deepcopy(dict(body))
        meta = obj["metadata"]
        key = self.backend.key(resource, namespace or meta.get("namespace"), meta["name"])
        cur = self.backend.objects.get(key)
        if cur is None:
            raise NotFound("gone", status=404, reason="NotFound")
        rv = meta.get("resourceVersion")
        if rv and rv != cur["metadata"]["resourceVersion"]:
            raise Conflict("the object has been modified", status=409, reason="Conflict")
        meta["resourceVersion"] = str(next(self.backend.rv))
        meta["uid"] = cur["metadata"]["uid"]
        self.backend.objects[key] = obj
        return copy.deepcopy(obj)

    async def patch(
        self,
        resource: Resource,
        name: str,
        patch: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        namespace: str | None = None,
        *,
        patch_type: str = "merge",
    ) -> Obj:
        await self._enter("patch", resource)
        key = self.backend.key(resource, namespace, name)
        cur = self.backend.objects.get(key)
        if cur is None:
            raise NotFound("gone", status=404, reason="NotFound")
        assert isinstance(patch, Mapping)
        cur.update(copy.deepcopy(dict(patch)))  # top-level merge is all the tests need
        cur["metadata"]["resourceVersion"] = str(next(self.backend.rv))
        return copy.deepcopy(cur)


def _selected(fields: Mapping[str, str], selector: str | None) -> bool:
    """Equality terms and `key in (a,b)`, all the tests need."""
    for term in re.findall(r"[^,(]+(?:\([^)]*\))?", selector or ""):
        if " in (" in term:
            key, values = term.split(" in (", 1)
            if fields.get(key.strip()) not in values.rstrip(")").split(","):
                return False
        elif term.strip():
            key, value = term.split("=", 1)
            if fields.get(key.strip()) != value:
                return False
    return True
