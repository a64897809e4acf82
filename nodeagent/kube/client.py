"""An asyncio facade over the official client, on plain JSON dicts.

We use only the official client's transport (`Configuration` and the REST layer: config, auth,
TLS, connection pool; see `nodeagent.kube.transport`) and never its model classes: building
them is slow and they do not exist for our CRDs. Every call is a raw REST request whose JSON
body is returned as a dict.

The generated client blocks, so requests run in a bounded thread pool: the pool size is the
limit on concurrent API calls. Watches are long-lived and would starve that pool, so each
gets a dedicated thread that feeds decoded events into the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import threading
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

from kubernetes.client.configuration import Configuration
from kubernetes.config.config_exception import ConfigException
from urllib3.connection import HTTPConnection
from urllib3.util.retry import Retry

from nodeagent.kube.errors import (
    Gone,
    KubeConfigError,
    KubeError,
    ServerError,
    from_response,
    from_status,
    translate,
)
from nodeagent.kube.resources import PODS, SERVICEACCOUNTS, Obj, Resource
from nodeagent.kube.tokenfile import TokenFile, kubeconfig_token_file
from nodeagent.kube.transport import Transport

__all__ = ["KubeClient", "PatchType", "Propagation", "RequestHook", "load_api_client"]

log = logging.getLogger(__name__)

PatchType = Literal["merge", "json", "strategic"]
Propagation = Literal["Foreground", "Background", "Orphan"]
# Called on the event loop after each request: (verb, resource, HTTP status or 0 if none).
RequestHook = Callable[[str, Resource, int], None]

_PATCH_CONTENT_TYPES: dict[str, str] = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
}
_READ_SIZE = 64 * 1024
Query = list[tuple[str, str]]


def load_api_client(
    kubeconfig: str | None = None,
    context: str | None = None,
    *,
    connection_pool_maxsize: int | None = None,
) -> Transport:
    """The transport from `kubeconfig`; else in-cluster config; else ~/.kube/config ($KUBECONFIG).

    Size the connection pool for the request pool plus the watches, or urllib3 keeps
    discarding connections. Only the loader used is imported: `kube_config` brings requests
    and oauthlib (its OIDC refresh), which an agent in a pod never needs.
    """
    config = Configuration()
    try:
        if kubeconfig:
            _load_kube_config(config, config_file=kubeconfig, context=context)
            token_file = kubeconfig_token_file(kubeconfig, context)
            if token_file is not None:
                # the loader read the file once; this rereads it when it changes (renewed)
                config.refresh_api_key_hook = TokenFile(token_file)  # type: ignore[assignment]
        elif os.environ.get("KUBERNETES_SERVICE_HOST") and context is None:
            from kubernetes.config.incluster_config import load_incluster_config

            load_incluster_config(client_configuration=config)  # type: ignore[no-untyped-call]
        else:
            _load_kube_config(config, context=context)
    except (ConfigException, OSError, ValueError) as exc:
        where = kubeconfig or "in-cluster or default kubeconfig"
        raise KubeConfigError(f"cannot load Kubernetes client config ({where}): {exc}") from exc
    if connection_pool_maxsize is not None:
        config.connection_pool_maxsize = connection_pool_maxsize
    # no hidden retries of a request the server received: one that hangs must fail after its
    # own timeout, not three times that (urllib3 retries reads by default); a refused or
    # broken connection is retried once at once
    config.retries = Retry(total=1, connect=1, read=0, redirect=0, status=0, other=0)
    # a watch lasts up to an hour: a peer gone without a word (a node's network, a load
    # balancer that forgot us) must be noticed sooner. The client's keep_alive is off by default
    config.socket_options = _keepalive_options()
    return Transport(config)


def _keepalive_options() -> list[tuple[int, int, int]]:
    """urllib3's own socket options (no Nagle) and TCP keepalive with client-go's timings: the
    first probe after 30 s idle, the connection dropped after 9 more unanswered 15 s apart."""
    options = list(HTTPConnection.default_socket_options)
    options.append((socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1))
    for name, value in (("TCP_KEEPIDLE", 30), ("TCP_KEEPINTVL", 15), ("TCP_KEEPCNT", 9)):
        if hasattr(socket, name):
            options.append((socket.IPPROTO_TCP, getattr(socket, name), value))
    return options


def _load_kube_config(config: Configuration, **kw: Any) -> None:
    from kubernetes.config.kube_config import load_kube_config

    load_kube_config(client_configuration=config, persist_config=False, **kw)  # type: ignore[no-untyped-call]


def _decode(data: bytes) -> Obj:
    if not data.strip():
        return {}
    decoded = json.loads(data)
    if not isinstance(decoded, dict):
        raise ValueError(f"expected a JSON object, got {type(decoded).__name__}")
    return decoded


def _with_type(resource: Resource, body: Mapping[str, Any]) -> Obj:
    return {"apiVersion": resource.api_version, "kind": resource.kind, **body}


def _body_namespace(
    resource: Resource, namespace: str | None, body: Mapping[str, Any]
) -> str | None:
    if not resource.namespaced:
        return namespace  # Resource.path rejects a namespace for cluster-scoped resources
    namespace = namespace or (body.get("metadata") or {}).get("namespace")
    if not namespace:
        raise ValueError(f"{resource} is namespaced: give a namespace or set metadata.namespace")
    return str(namespace)


def _body_name(body: Mapping[str, Any]) -> str:
    name = (body.get("metadata") or {}).get("name")
    if not name:
        raise ValueError("body has no metadata.name")
    return str(name)


def _selectors(label_selector: str | None, field_selector: str | None) -> Query:
    query: Query = []
    if label_selector:
        query.append(("labelSelector", label_selector))
    if field_selector:
        query.append(("fieldSelector", field_selector))
    return query


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
        self._watches: set[_WatchStream] = set()
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
        base = _selectors(label_selector, field_selector)
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
            meta = page.get("metadata") or {}
            token = meta.get("continue") or None
            if token is None:
                break
        for item in items:
            item.setdefault("apiVersion", resource.api_version)
            item.setdefault("kind", resource.kind)
        meta = dict(page.get("metadata") or {})
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
        namespace = _body_namespace(resource, namespace, body)
        return await self._call(
            "create",
            resource,
            "POST",
            resource.path(namespace),
            query=self._manager_query(),
            body=_with_type(resource, body),
        )

    async def replace(
        self, resource: Resource, body: Mapping[str, Any], namespace: str | None = None
    ) -> Obj:
        """PUT `body`; a `metadata.resourceVersion` in it makes this a compare-and-swap."""
        namespace = _body_namespace(resource, namespace, body)
        return await self._call(
            "update",
            resource,
            "PUT",
            resource.path(namespace, _body_name(body)),
            query=self._manager_query(),
            body=_with_type(resource, body),
        )

    async def replace_status(
        self, resource: Resource, body: Mapping[str, Any], namespace: str | None = None
    ) -> Obj:
        namespace = _body_namespace(resource, namespace, body)
        return await self._call(
            "update",
            resource,
            "PUT",
            resource.path(namespace, _body_name(body), "status"),
            query=self._manager_query(),
            body=_with_type(resource, body),
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
        options = _delete_options(grace_period_seconds, uid, resource_version, propagation)
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
        options = _delete_options(grace_period_seconds, uid, None, None)
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
        query = _selectors(label_selector, field_selector)
        query.append(("watch", "true"))
        if resource_version is not None:
            query.append(("resourceVersion", resource_version))
        if allow_bookmarks:
            query.append(("allowWatchBookmarks", "true"))
        read_timeout: float | None = None
        if timeout_seconds is not None:
            query.append(("timeoutSeconds", str(int(timeout_seconds))))
            # Generous margin: the server ends the watch, this only catches a dead connection.
            read_timeout = timeout_seconds + 30.0
        if self._closed:
            raise RuntimeError("KubeClient is closed")
        path = resource.path(namespace)
        stream = _WatchStream(
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


def _delete_options(
    grace_period_seconds: int | None,
    uid: str | None,
    resource_version: str | None,
    propagation: Propagation | None,
) -> Obj:
    options: Obj = {"apiVersion": "v1", "kind": "DeleteOptions"}
    if grace_period_seconds is not None:
        options["gracePeriodSeconds"] = grace_period_seconds
    preconditions = {}
    if uid is not None:
        preconditions["uid"] = uid
    if resource_version is not None:
        preconditions["resourceVersion"] = resource_version
    if preconditions:
        options["preconditions"] = preconditions
    if propagation is not None:
        options["propagationPolicy"] = propagation
    return options


# What the watch thread hands the loop: the HTTP status once the stream is open, then events,
# then None at a clean end; a KubeError at any point ends the stream.
_Item = int | Obj | KubeError | None


class _WatchStream:
    """One streaming GET read in its own thread; `close()` (loop side) ends it promptly."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, name: str, open_response: Callable[[], Any]
    ) -> None:
        self._loop = loop
        self._name = name
        self._open = open_response
        self.queue: asyncio.Queue[_Item] = asyncio.Queue()
        self._lock = threading.Lock()
        self._closed = False
        self._raw: Any = None  # the urllib3 response, once open

    def start(self) -> None:
        threading.Thread(target=self._run, name="watch " + self._name, daemon=True).start()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            raw = self._raw
        if raw is not None:
            # Unblocks the thread's pending read; closing from here would race with it.
            with contextlib.suppress(ValueError, RuntimeError, OSError):
                raw.shutdown()

    @property
    def _is_closed(self) -> bool:
        with self._lock:
            return self._closed

    def _post(self, item: _Item) -> None:
        try:
            self._loop.call_soon_threadsafe(self.queue.put_nowait, item)
        except RuntimeError:
            # The loop is closed; nobody is listening any more.
            with self._lock:
                self._closed = True

    def _run(self) -> None:
        try:
            response = self._open()
        except Exception as exc:
            if not self._is_closed:
                self._post(translate(exc))
            return
        raw = response.response
        with self._lock:
            closed = self._closed
            self._raw = raw
        try:
            if closed:
                return
            if response.status != 200:
                self._post(
                    from_response(response.status, response.reason, raw.read(), response.headers)
                )
                return
            self._post(response.status)
            self._pump(raw)
        except Exception as exc:
            if not self._is_closed:
                self._post(translate(exc))
        finally:
            with contextlib.suppress(Exception):
                raw.close()
            with contextlib.suppress(Exception):
                raw.release_conn()

    def _pump(self, raw: Any) -> None:
        buffer = bytearray()
        while not self._is_closed:
            chunk = raw.read1(_READ_SIZE)
            if not chunk:
                break
            buffer += chunk
            start = 0
            while (end := buffer.find(b"\n", start)) >= 0:
                line = bytes(buffer[start:end])
                start = end + 1
                if line.strip() and not self._event(line):
                    return
            del buffer[:start]
        if self._is_closed:
            return
        if bytes(buffer).strip() and not self._event(bytes(buffer)):
            return
        self._post(None)

    def _event(self, line: bytes) -> bool:
        """Hand one event to the loop; False ends the stream."""
        try:
            event = json.loads(line)
        except ValueError:
            self._post(ServerError(f"malformed watch event: {line[:200]!r}", reason="BadEvent"))
            return False
        if not isinstance(event, dict):
            self._post(ServerError(f"malformed watch event: {line[:200]!r}", reason="BadEvent"))
            return False
        if event.get("type") == "ERROR":
            status = event.get("object")
            self._post(from_status(status if isinstance(status, dict) else {}))
            return False
        self._post(event)
        return True
