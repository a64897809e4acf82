"""An asyncio facade over the official client, on plain JSON dicts.

We use only the official client's transport (`Configuration` and the REST layer: config, auth,
TLS, connection pool; see `nodeagent.kube.transport`, loaded by `nodeagent.kube.connection`) and
never its model classes: building them is slow and they do not exist for our CRDs. Every call is
a raw REST request whose JSON body is returned as a dict.

The generated client blocks, so requests run in a bounded thread pool: the pool size is the
limit on concurrent API calls. Watches are long-lived and would starve that pool, so each
gets a dedicated thread (`nodeagent.kube.watchstream`).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

from nodeagent.kube.errors import (
    Gone,
    KubeError,
    ServerError,
    from_response,
    translate,
)
from nodeagent.kube.requestparts import (
    Propagation,
    Query,
    body_name,
    body_namespace,
    delete_options,
    selectors,
    watch_query,
    with_type,
)
from nodeagent.kube.resources import PODS, SERVICEACCOUNTS, Obj, Resource
from nodeagent.kube.transport import Transport
from nodeagent.kube.watchstream import WatchStream
from nodeagent.model.bodies import metadata_of

__all__ = ["KubeClient", "PatchType", "RequestHook"]

log = logging.getLogger(__name__)

PatchType = Literal["merge", "json", "strategic"]
# Called on the event loop after each request: (verb, resource, HTTP status or 0 if none).
RequestHook = Callable[[str, Resource, int], None]

_PATCH_CONTENT_TYPES: dict[str, str] = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
}


def _decode(data: bytes) -> Obj:
    if not data.strip():
        return {}
    decoded = json.loads(data)
    if not isinstance(decoded, dict):
        raise ValueError(f"expected a JSON object, got {type(decoded).__name__}")
    return decoded


class KubeClient:
    """Async API calls on dicts. All failures raise `nodeagent.kube.errors.KubeError`.

    The `Transport` stays the caller's: `close()` stops our threads but does not close it.
    """

    def __init__(
        self,
        transport: Transport,
        *,
        max_workers: int = 8,
        request_timeout: float = 60.0,
        connect_timeout: float = 10.0,
        on_request: RequestHook | None = None,
        field_manager: str | None = None,
    ) -> None:
        if max_workers < 1:
            raise ValueError("max_workers must be at least 1")
        self._transport = transport
        self._executor = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="kube-api")
        self._timeout = request_timeout
        self._connect_timeout = connect_timeout
        self._on_request = on_request
        self._field_manager = field_manager
        self._watches: set[WatchStream] = set()
        self._closed = False

    async def __aenter__(self) -> KubeClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close open watches and stop the request threads. Never waits for a request in
        flight: one that hangs ends with its own timeout, in the background."""
        self._closed = True
        for stream in list(self._watches):
            stream.close()
        self._executor.shutdown(wait=False, cancel_futures=True)

    # -- reads --------------------------------------------------------------------------

    async def get(self, resource: Resource, name: str, namespace: str | None = None) -> Obj:
        return await self._call("get", resource, "GET", resource.path(namespace, name))

    async def list(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resource_version: str | None = None,
        page_size: int = 500,
    ) -> Obj:
        """All matching objects as one list object; pages (limit/continue) are followed.

        Items get `apiVersion` and `kind` filled in (the API omits them in lists), and
        `metadata.resourceVersion` is the list's, to watch from.
        """
        path = resource.path(namespace)
        base = selectors(label_selector, field_selector)
        items: list[Obj] = []
        token: str | None = None
        while True:
            query = list(base)
            if token is not None:
                query.append(("continue", token))
            elif resource_version is not None:
                # The API refuses resourceVersion together with continue.
                query.append(("resourceVersion", resource_version))
            if page_size > 0:
                query.append(("limit", str(page_size)))
            try:
                page = await self._call("list", resource, "GET", path, query=query)
            except Gone:
                if token is None:
                    raise
                # The continue token expired between pages: fall back to one full list,
                # as client-go's pager does.
                log.info("continue token for %s expired; listing without pagination", resource)
                query = list(base)
                if resource_version is not None:
                    query.append(("resourceVersion", resource_version))
                page = await self._call("list", resource, "GET", path, query=query)
                items = []
                token = None
            items.extend(page.get("items") or [])
            meta = metadata_of(page)
            token = meta.get("continue") or None
            if token is None:
                break
        for item in items:
            item.setdefault("apiVersion", resource.api_version)
            item.setdefault("kind", resource.kind)
        meta = dict(metadata_of(page))
        meta.pop("continue", None)
        meta.pop("remainingItemCount", None)
        return {
            "apiVersion": page.get("apiVersion", resource.api_version),
            "kind": page.get("kind", resource.kind + "List"),
            "metadata": meta,
            "items": items,
        }

    # -- writes -------------------------------------------------------------------------

    async def create(
        self, resource: Resource, body: Mapping[str, Any], namespace: str | None = None
    ) -> Obj:
        """POST `body`; the namespace defaults to `metadata.namespace`."""
        namespace = body_namespace(resource, namespace, body)
        return await self._call(
            "create",
            resource,
            "POST",
            resource.path(namespace),
            query=self._manager_query(),
            body=with_type(resource, body),
        )

    async def replace(
        self, resource: Resource, body: Mapping[str, Any], namespace: str | None = None
    ) -> Obj:
        """PUT `body`; a `metadata.resourceVersion` in it makes this a compare-and-swap."""
        namespace = body_namespace(resource, namespace, body)
        return await self._call(
            "update",
            resource,
            "PUT",
            resource.path(namespace, body_name(body)),
            query=self._manager_query(),
            body=with_type(resource, body),
        )

    async def replace_status(
        self, resource: Resource, body: Mapping[str, Any], namespace: str | None = None
    ) -> Obj:
        namespace = body_namespace(resource, namespace, body)
        return await self._call(
            "update",
            resource,
            "PUT",
            resource.path(namespace, body_name(body), "status"),
            query=self._manager_query(),
            body=with_type(resource, body),
        )

    async def patch(
        self,
        resource: Resource,
        name: str,
        patch: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        namespace: str | None = None,
        *,
        patch_type: PatchType = "merge",
    ) -> Obj:
        """PATCH; `patch_type` picks the content type (JSON patch takes a list of operations)."""
        return await self._patch(resource, name, patch, namespace, patch_type, None)

    async def patch_status(
        self,
        resource: Resource,
        name: str,
        patch: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        namespace: str | None = None,
        *,
        patch_type: PatchType = "merge",
    ) -> Obj:
        return await self._patch(resource, name, patch, namespace, patch_type, "status")

    async def delete(
        self,
        resource: Resource,
        name: str,
        namespace: str | None = None,
        *,
        grace_period_seconds: int | None = None,
        uid: str | None = None,
        resource_version: str | None = None,
        propagation: Propagation | None = None,
    ) -> Obj:
        """DELETE. `uid` / `resource_version` are preconditions (409 Conflict when they fail).

        Returns the object (still there while finalizers or graceful deletion run) or a Status.
        """
        options = delete_options(grace_period_seconds, uid, resource_version, propagation)
        return await self._call(
            "delete", resource, "DELETE", resource.path(namespace, name), body=options
        )

    async def evict(
        self,
        namespace: str,
        name: str,
        *,
        grace_period_seconds: int | None = None,
        uid: str | None = None,
    ) -> Obj:
        """POST a policy/v1 Eviction. A PDB refusal raises TooManyRequests.

        `uid` makes the eviction apply only to that incarnation of the pod.
        """
        body: Obj = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
        }
        options = delete_options(grace_period_seconds, uid, None, None)
        if len(options) > 2:
            body["deleteOptions"] = options
        return await self._call(
            "evict", PODS, "POST", PODS.path(namespace, name, "eviction"), body=body
        )

    async def request_token(self, namespace: str, name: str, spec: Mapping[str, Any]) -> Obj:
        """POST an authentication.k8s.io/v1 TokenRequest for the ServiceAccount: the new token
        is the response's status.token."""
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}
        return await self._call(
            "create",
            SERVICEACCOUNTS,
            "POST",
            SERVICEACCOUNTS.path(namespace, name, "token"),
            body=body,
        )

    # -- watch --------------------------------------------------------------------------

    async def watch(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout_seconds: int | None = None,
        allow_bookmarks: bool = True,
    ) -> AsyncGenerator[Obj, None]:
        """Yield watch events (`{"type": ..., "object": ...}`) until the server ends the watch.

        An ERROR event raises its error (`Gone` for an expired resourceVersion). Close the
        iterator (`contextlib.aclosing`) when done early: that closes the HTTP response and
        ends the reading thread.
        """
        query, read_timeout = watch_query(
            resource_version=resource_version,
            label_selector=label_selector,
            field_selector=field_selector,
            timeout_seconds=timeout_seconds,
            allow_bookmarks=allow_bookmarks,
        )
        if self._closed:
            raise RuntimeError("KubeClient is closed")
        path = resource.path(namespace)
        stream = WatchStream(
            asyncio.get_running_loop(),
            str(resource),
            lambda: self._send(
                "GET",
                path,
                query,
                None,
                None,
                (self._connect_timeout, read_timeout),
            ),
        )
        self._watches.add(stream)
        try:
            stream.start()
            opened = await stream.queue.get()
            if isinstance(opened, KubeError):
                self._count("watch", resource, opened.status)
                raise opened
            self._count("watch", resource, opened if isinstance(opened, int) else 200)
            while True:
                item = await stream.queue.get()
                if item is None:
                    return
                if isinstance(item, KubeError):
                    raise item
                if isinstance(item, dict):
                    yield item
        finally:
            stream.close()
            self._watches.discard(stream)

    # -- plumbing -----------------------------------------------------------------------

    def _manager_query(self) -> Query:
        return [("fieldManager", self._field_manager)] if self._field_manager else []

    async def _patch(
        self,
        resource: Resource,
        name: str,
        patch: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        namespace: str | None,
        patch_type: PatchType,
        subresource: str | None,
    ) -> Obj:
        body: Any = dict(patch) if isinstance(patch, Mapping) else [dict(op) for op in patch]
        if (patch_type == "json") != isinstance(body, list):
            # The generated client would silently send a dict JSON patch as strategic merge.
            raise ValueError("a JSON patch is a list of operations; merge patches are objects")
        content_type = _PATCH_CONTENT_TYPES[patch_type]
        return await self._call(
            "patch",
            resource,
            "PATCH",
            resource.path(namespace, name, subresource),
            query=self._manager_query(),
            body=body,
            content_type=content_type,
        )

    async def _call(
        self,
        verb: str,
        resource: Resource,
        method: str,
        path: str,
        *,
        query: Query | None = None,
        body: Any = None,
        content_type: str | None = None,
    ) -> Obj:
        loop = asyncio.get_running_loop()
        try:
            status, result = await loop.run_in_executor(
                self._executor, self._request, method, path, query or [], body, content_type
            )
        except KubeError as exc:
            self._count(verb, resource, exc.status)
            raise
        self._count(verb, resource, status)
        return result

    def _request(
        self,
        method: str,
        path: str,
        query: Query,
        body: Any,
        content_type: str | None,
    ) -> tuple[int, Obj]:
        """Runs in a pool thread: one request, fully read, decoded or translated."""
        try:
            response = self._send(method, path, query, body, content_type, self._timeout)
            try:
                data = response.read()
            finally:
                response.response.release_conn()
            if not 200 <= response.status <= 299:
                raise from_response(response.status, response.reason, data, response.headers)
            try:
                return response.status, _decode(data)
            except ValueError as exc:
                raise ServerError(
                    f"malformed response body: {exc}",
                    status=response.status,
                    reason="MalformedResponse",
                ) from exc
        except KubeError:
            raise
        except Exception as exc:
            raise translate(exc) from exc

    def _send(
        self,
        method: str,
        path: str,
        query: Query,
        body: Any,
        content_type: str | None,
        timeout: float | tuple[float, float | None],
    ) -> Any:
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type or "application/json"
        return self._transport.request(method, path, query, headers, body, timeout)

    def _count(self, verb: str, resource: Resource, status: int) -> None:
        if self._on_request is None:
            return
        try:
            self._on_request(verb, resource, status)
        except Exception:
            log.exception("request hook failed")
