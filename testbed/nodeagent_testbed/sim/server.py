"""HTTP front of the simulated API server: discovery, REST verbs, watch streams, tables."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import itertools
import json
import logging
import random
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import yaml
from aiohttp import web

from nodeagent_testbed.sim import eviction, lifecycle, protobuf
from nodeagent_testbed.sim.errors import ApiError
from nodeagent_testbed.sim.faults import Faults, Stats
from nodeagent_testbed.sim.fieldvalidation import Validation, validating
from nodeagent_testbed.sim.patch import (
    PatchError,
    json_merge_patch,
    json_patch,
    strategic_merge_patch,
)
from nodeagent_testbed.sim.resources import BUILTIN, ResourceType
from nodeagent_testbed.sim.selectors import (
    FieldSelector,
    LabelSelector,
    SelectorError,
    parse_field_selector,
    parse_label_selector,
)
from nodeagent_testbed.sim.store import INITIAL_EVENTS_END, Obj, Store
from nodeagent_testbed.sim.tables import table

log = logging.getLogger(__name__)

VERSION = {
    "major": "1",
    "minor": "37",
    "gitVersion": "v1.37.0-nodeagent-sim",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.25",
    "compiler": "gc",
    "platform": "linux/amd64",
}

# field selectors each type supports besides metadata.name and metadata.namespace
FIELD_LABELS: dict[str, set[str]] = {
    "pods": {
        "spec.nodeName",
        "status.phase",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "status.podIP",
        "status.nominatedNodeName",
        "spec.hostNetwork",
    },
    "nodes": {"spec.unschedulable"},
    "events": {
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    },
    "namespaces": {"status.phase"},
    "replicasets": {"status.replicas"},
}
SUBRESOURCE_VERBS = {
    "status": ["get", "patch", "update"],
    "scale": ["get", "patch", "update"],
    "eviction": ["create"],
    "binding": ["create"],
}
SUBRESOURCE_KIND = {
    "eviction": ("policy", "v1", "Eviction"),
    "binding": ("", "v1", "Binding"),
    "scale": ("autoscaling", "v1", "Scale"),
}
DEFAULT_BOOKMARK_INTERVAL = 5.0
_SNAPSHOTS = 16  # paged lists in progress that are served from a snapshot


@dataclass
class Target:
    rt: ResourceType
    namespace: str | None
    name: str | None
    subresource: str | None


class ApiServer:
    def __init__(
        self,
        store: Store,
        faults: Faults | None = None,
        stats: Stats | None = None,
        bookmark_interval: float = DEFAULT_BOOKMARK_INTERVAL,
    ) -> None:
        self.store = store
        self.faults = faults or Faults()
        self.stats = stats or Stats()
        self.bookmark_interval = bookmark_interval
        # paged lists: the full result of each recent first page, so that the next pages are
        # slices of it (a consistent snapshot, as the real server serves them from etcd at the
        # first page's revision) instead of listing and sorting everything again per page
        # (resourceVersion, items, compactions when taken); a token of an older one is expired
        self._snapshots: OrderedDict[int, tuple[str, list[Obj], int]] = OrderedDict()
        self._snapshot_ids = itertools.count(1)

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._middleware], client_max_size=64 * 1024**2)
        r = app.router
        r.add_get("/version", self._version)
        for p in ("/healthz", "/readyz", "/livez"):
            r.add_get(p, self._ok)
        r.add_get("/openapi/v3", self._openapi_index)
        r.add_get("/openapi/v3/{gv:.*}", self._openapi_gv)
        r.add_get("/api", self._api_versions)
        r.add_get("/apis", self._api_groups)
        r.add_post("/sim/faults", self._set_faults)
        r.add_get("/sim/stats", self._get_stats)
        r.add_route("*", "/api/{rest:.*}", self._dispatch)
        r.add_route("*", "/apis/{rest:.*}", self._dispatch)
        return app

    # --- middleware ----------------------------------------------------------------------------

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Any) -> web.StreamResponse:
        counted: tuple[str, str] | None = None
        try:
            if not request.path.startswith("/sim/"):
                verb, resource = counted = self._classify(request)
                agent = request.headers.get("User-Agent", "unknown").split("/")[0]
                self.stats.count(agent, verb, resource)
                if self.faults.latency:
                    await asyncio.sleep(self.faults.latency)  # injected latency is the point
                fault = self.faults.take(verb, resource)
                if fault is not None:
                    raise fault
            resp: web.StreamResponse = await handler(request)
        except ApiError as e:
            resp = web.json_response(e.status(), status=e.code)
            if e.retry_after > 0:
                resp.headers["Retry-After"] = str(e.retry_after)
        if counted is not None:
            self.stats.count_response(*counted, resp.status)
            if delay := self.faults.answer_delay(*counted):
                await asyncio.sleep(delay)  # the answer held back is the point
        return resp

    def _classify(self, request: web.Request) -> tuple[str, str]:
        parts = [p for p in request.path.split("/") if p]
        if not parts or parts[0] not in ("api", "apis"):
            return ("get", "nonresource")
        rest = parts[2:] if parts[0] == "api" else parts[3:]
        if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] not in ("status", "finalize"):
            rest = rest[2:]
        if not rest:
            return ("get", "discovery")
        resource = rest[0]
        named = len(rest) >= 2
        sub = rest[2] if len(rest) >= 3 else None
        m = request.method
        if m == "GET":
            if request.query.get("watch") in ("true", "1"):
                return ("watch", resource)
            return ("get" if named else "list", resource)
        if m == "POST":
            return ("evict" if sub == "eviction" else "create", resource)
        if m == "PUT":
            return ("update", resource)
        if m == "PATCH":
            return ("patch", resource)
        if m == "DELETE":
            return ("delete" if named else "deletecollection", resource)
        return (m.lower(), resource)

    async def _version(self, request: web.Request) -> web.Response:
        return web.json_response(VERSION)

    async def _ok(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    # --- discovery -----------------------------------------------------------------------------

    async def _api_versions(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "kind": "APIVersions",
                "versions": ["v1"],
                "serverAddressByClientCIDRs": [
                    {"clientCIDR": "0.0.0.0/0", "serverAddress": request.host}
                ],
            }
        )

    def _groups(self) -> dict[str, list[str]]:
        groups: dict[str, list[str]] = {}
        for g, v, _ in self.store.types:
            if g and v not in groups.setdefault(g, []):
                groups[g].append(v)
        return groups

    def _group(self, name: str, versions: list[str]) -> dict[str, Any]:
        # the real server prefers the newest stable version; ours serve one version at a time
        vs = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
        return {"name": name, "versions": vs, "preferredVersion": vs[0]}

    async def _api_groups(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "kind": "APIGroupList",
                "apiVersion": "v1",
                "groups": [self._group(g, vs) for g, vs in sorted(self._groups().items())],
            }
        )

    def _resource_list(self, group: str, version: str) -> dict[str, Any]:
        resources: list[dict[str, Any]] = []
        for (g, v, _), rt in sorted(self.store.types.items()):
            if (g, v) != (group, version):
                continue
            entry: dict[str, Any] = {
                "name": rt.plural,
                "singularName": rt.singular,
                "namespaced": rt.namespaced,
                "kind": rt.kind,
                "verbs": list(rt.verbs),
            }
            if rt.short_names:
                entry["shortNames"] = list(rt.short_names)
            if rt.categories:
                entry["categories"] = list(rt.categories)
            resources.append(entry)
            for sub in rt.subresources:
                s: dict[str, Any] = {
                    "name": f"{rt.plural}/{sub}",
                    "singularName": "",
                    "namespaced": rt.namespaced,
                    "kind": rt.kind,
                    "verbs": SUBRESOURCE_VERBS[sub],
                }
                if sub in SUBRESOURCE_KIND:
                    s["group"], s["version"], s["kind"] = SUBRESOURCE_KIND[sub]
                resources.append(s)
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": f"{group}/{version}" if group else version,
            "resources": resources,
        }

    # --- openapi ---------------------------------------------------------------------------------
    # Only paths and operations: enough for kubectl to see that the server validates fields
    # itself (fieldValidation), so it needs no schemas; kubectl then merges with its built-in
    # knowledge of the core types.

    def _group_versions(self) -> list[tuple[str, str]]:
        return sorted({(g, v) for g, v, _ in self.store.types})

    async def _openapi_index(self, request: web.Request) -> web.Response:
        paths = {}
        for g, v in self._group_versions():
            gv = f"apis/{g}/{v}" if g else f"api/{v}"
            paths[gv] = {"serverRelativeURL": f"/openapi/v3/{gv}?hash={self.store.rv}"}
        return web.json_response({"paths": paths})

    async def _openapi_gv(self, request: web.Request) -> web.Response:
        parts = request.match_info["gv"].split("/")
        if parts[0] == "api" and len(parts) == 2:
            group, version = "", parts[1]
        elif parts[0] == "apis" and len(parts) == 3:
            group, version = parts[1], parts[2]
        else:
            raise ApiError(404, "the server could not find the requested resource")
        types = [rt for (g, v, _), rt in self.store.types.items() if (g, v) == (group, version)]
        if not types:
            raise ApiError(404, "the server could not find the requested resource")
        paths: dict[str, Any] = {}
        for rt in types:
            base = f"/api/{version}" if not group else f"/apis/{group}/{version}"
            ns = "/namespaces/{namespace}" if rt.namespaced else ""
            gvk = {"group": group, "version": version, "kind": rt.kind}
            validation = {"name": "fieldValidation", "in": "query", "schema": {"type": "string"}}

            def op(
                action: str,
                validates: bool,
                gvk: dict[str, str] = gvk,
                validation: dict[str, Any] = validation,
            ) -> dict[str, Any]:
                return {
                    "x-kubernetes-action": action,
                    "x-kubernetes-group-version-kind": gvk,
                    "parameters": [validation] if validates else [],
                    "responses": {"200": {"description": "OK"}},
                }

            paths[f"{base}{ns}/{rt.plural}"] = {
                "get": op("list", False),
                "post": op("post", True),
            }
            paths[f"{base}{ns}/{rt.plural}/{{name}}"] = {
                "get": op("get", False),
                "put": op("put", True),
                "patch": op("patch", True),
                "delete": op("delete", False),
            }
        return web.json_response(
            {
                "openapi": "3.0.0",
                "info": {"title": "Kubernetes (nodeagent sim)", "version": VERSION["gitVersion"]},
                "paths": paths,
                "components": {"schemas": _custom_schemas(types, group, version)},
            }
        )

    # --- routing -------------------------------------------------------------------------------

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        parts = [p for p in request.path.split("/") if p]
        if parts[0] == "api":
            if len(parts) < 2 or parts[1] != "v1":
                raise ApiError(404, "the server could not find the requested resource")
            group, version, rest = "", "v1", parts[2:]
        else:
            if len(parts) == 2:
                vs = self._groups().get(parts[1])
                if not vs:
                    raise ApiError(404, "the server could not find the requested resource")
                return web.json_response(
                    {"kind": "APIGroup", "apiVersion": "v1", **self._group(parts[1], vs)}
                )
            group, version, rest = parts[1], parts[2], parts[3:]
        if not rest:
            if not any(k[:2] == (group, version) for k in self.store.types):
                raise ApiError(404, "the server could not find the requested resource")
            return web.json_response(self._resource_list(group, version))
        target = self._target(group, version, rest)
        m = request.method
        if m == "GET":
            if target.name is None:
                if request.query.get("watch") in ("true", "1"):
                    return await self._watch(request, target)
                return self._list(request, target)
            return self._respond(request, target.rt, self._get(target))
        if m == "POST":
            return await self._post(request, target)
        if m == "PUT":
            return await self._put(request, target)
        if m == "PATCH":
            return await self._patch(request, target)
        if m == "DELETE":
            return await self._delete(request, target)
        raise ApiError(405, f"method {m} is not allowed")

    def _target(self, group: str, version: str, rest: list[str]) -> Target:
        ns: str | None = None
        if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] not in ("status", "finalize"):
            ns, rest = rest[1], rest[2:]
        rt = self.store.resource(group, version, rest[0])
        if ns is not None and not rt.namespaced:
            raise ApiError(404, "the server could not find the requested resource")
        name = rest[1] if len(rest) >= 2 else None
        sub = rest[2] if len(rest) >= 3 else None
        if sub is not None and (sub not in rt.subresources or len(rest) > 3):
            raise ApiError(404, "the server could not find the requested resource")
        return Target(rt, ns, name, sub)

    # --- reads ---------------------------------------------------------------------------------

    def _get(self, t: Target) -> Obj:
        assert t.name is not None
        obj = self.store.get(t.rt, t.namespace, t.name)
        if t.subresource == "scale":
            return _scale(obj)
        return obj

    def _selectors(
        self, request: web.Request, rt: ResourceType
    ) -> tuple[LabelSelector | None, FieldSelector | None]:
        try:
            ls = request.query.get("labelSelector")
            fs = request.query.get("fieldSelector")
            labels = parse_label_selector(ls) if ls else None
            fields = parse_field_selector(fs) if fs else None
        except SelectorError as e:
            raise ApiError(400, f"unable to parse requirement: {e}") from e
        if fields is not None:
            allowed = {"metadata.name", "metadata.namespace"} | FIELD_LABELS.get(rt.plural, set())
            for f in (r.field for r in fields.requirements):
                if f not in allowed:
                    raise ApiError(
                        400,
                        f"field label not supported: {f}",
                    )
        return labels, fields

    def _list(self, request: web.Request, t: Target) -> web.StreamResponse:
        labels, fields = self._selectors(request, t.rt)
        meta: dict[str, Any] = {"resourceVersion": str(self.store.rv)}
        token = request.query.get("continue")
        snapshot_id: int | None = None
        if token:
            # [snapshot id, offset, sort key of the last item sent]; snapshot id LATEST: go on
            # with the current state after that key (what the Status of an expired token offers)
            snapshot_id, offset, after = _decode_continue(token)
            if snapshot_id == _LATEST:
                snapshot_id = None
                items = [
                    o
                    for o in self.store.list(t.rt, t.namespace, labels, fields)
                    if _sort_key(o) > after
                ]
                offset = 0
            else:
                snapshot = self._snapshots.get(snapshot_id)
                if snapshot is None or snapshot[2] != self.store.compactions:
                    # as kube-apiserver after an etcd compaction: 410, and a token to go on with
                    # an inconsistent list
                    self._snapshots.pop(snapshot_id, None)
                    raise ApiError(
                        410,
                        _INCONSISTENT_CONTINUE,
                        reason="Expired",
                        metadata={"continue": _encode_continue(_LATEST, 0, after)},
                    )
                meta["resourceVersion"], everything, _ = snapshot
                items = everything[offset:]
        else:
            items = self.store.list(t.rt, t.namespace, labels, fields)
            offset = 0
        limit = int(request.query.get("limit") or 0)
        if limit and len(items) > limit:
            if snapshot_id is None:
                snapshot_id = next(self._snapshot_ids)
                self._snapshots[snapshot_id] = (
                    meta["resourceVersion"],
                    items,
                    self.store.compactions,
                )
                while len(self._snapshots) > _SNAPSHOTS:
                    self._snapshots.popitem(last=False)
            meta["remainingItemCount"] = len(items) - limit
            items = items[:limit]
            meta["continue"] = _encode_continue(snapshot_id, offset + limit, _sort_key(items[-1]))
        if _wants_table(request):
            out = table(
                t.rt,
                [self._at_version(t.rt, o) for o in items],
                request.query.get("includeObject", "PartialObjectMetadata"),
                list_rv=meta["resourceVersion"],
            )
            out["metadata"] = meta  # kubectl pages tables too, with `continue`
            return _json(out)
        body = {
            "kind": f"{t.rt.kind}List",
            "apiVersion": t.rt.api_version,
            "metadata": meta,
            "items": [self._at_version(t.rt, o) for o in items],
        }
        return _json(body)

    def _at_version(self, rt: ResourceType, obj: Obj) -> Obj:
        # custom resources are stored once and served at every version (conversion "None")
        if obj.get("apiVersion") != rt.api_version:
            return {**obj, "apiVersion": rt.api_version}
        return obj

    def _respond(
        self, request: web.Request, rt: ResourceType, obj: Obj, status: int = 200
    ) -> web.Response:
        if _wants_table(request) and obj.get("kind") == rt.kind:
            return web.json_response(
                table(rt, [obj], request.query.get("includeObject", "PartialObjectMetadata")),
                status=status,
            )
        return _json(self._at_version(rt, obj) if obj.get("kind") == rt.kind else obj, status)

    async def _watch(self, request: web.Request, t: Target) -> web.StreamResponse:
        labels, fields = self._selectors(request, t.rt)
        rv = request.query.get("resourceVersion")
        bookmarks = request.query.get("allowWatchBookmarks") in ("true", "1")
        timeout = float(request.query.get("timeoutSeconds") or random.uniform(1800, 3600))
        initial = request.query.get("sendInitialEvents") in ("true", "1")
        if initial and not bookmarks:
            raise ApiError(422, "sendInitialEvents requires allowWatchBookmarks=true")
        try:
            w = self.store.open_watch(t.rt, t.namespace, labels, fields, rv, initial)
        except ApiError as e:
            if e.code != 410:
                raise
            # as kube-apiserver's watch cache: a resourceVersion too old is an ERROR event in
            # an HTTP 200 stream, not an HTTP 410
            resp = web.StreamResponse(headers={"Content-Type": "application/json"})
            resp.enable_chunked_encoding()
            await resp.prepare(request)
            with contextlib.suppress(ConnectionResetError):
                await resp.write(_line({"type": "ERROR", "object": e.status()}))
                await resp.write_eof()
            return resp
        as_table = _wants_table(request)
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            while True:
                left = deadline - loop.time()
                if left <= 0:
                    break
                try:
                    async with asyncio.timeout(min(left, self.bookmark_interval)):
                        ev = await w.queue.get()
                except TimeoutError:
                    if bookmarks and w.queue.empty():
                        await resp.write(
                            _line(
                                {
                                    "type": "BOOKMARK",
                                    "object": {
                                        "kind": t.rt.kind,
                                        "apiVersion": t.rt.api_version,
                                        "metadata": {"resourceVersion": str(self.store.rv)},
                                    },
                                }
                            )
                        )
                    continue
                if ev is None:
                    break  # dropped by fault injection
                kind, obj = ev
                if kind == INITIAL_EVENTS_END:
                    await resp.write(
                        _line(
                            {
                                "type": "BOOKMARK",
                                "object": {
                                    "kind": t.rt.kind,
                                    "apiVersion": t.rt.api_version,
                                    "metadata": {
                                        "resourceVersion": obj["resourceVersion"],
                                        "annotations": {"k8s.io/initial-events-end": "true"},
                                    },
                                },
                            }
                        )
                    )
                    continue
                out = self._at_version(t.rt, obj)
                if as_table:
                    out = table(
                        t.rt, [out], request.query.get("includeObject", "PartialObjectMetadata")
                    )
                await resp.write(_line({"type": kind, "object": out}))
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self.store.close_watch(w)
        with contextlib.suppress(ConnectionResetError):
            await resp.write_eof()
        return resp

    # --- writes --------------------------------------------------------------------------------

    async def _body(self, request: web.Request) -> Any:
        raw = await request.read()
        if protobuf.is_protobuf(request.content_type):
            # client-go's typed clients send built-in objects as protobuf, with no fallback
            try:
                return protobuf.decode(raw)
            except protobuf.ProtobufError as e:
                raise ApiError(415, f"the protobuf body could not be decoded: {e}") from e
        if "cbor" in request.content_type:
            raise ApiError(
                415,
                f"the body of the request was in an unknown format ({request.content_type}) - "
                "accepted media types include: application/json, application/yaml, "
                "application/vnd.kubernetes.protobuf",
            )
        if not raw:
            return {}
        try:
            if "yaml" in request.content_type:
                return yaml.safe_load(raw)
            return json.loads(raw)
        except (ValueError, yaml.YAMLError) as e:
            raise ApiError(400, f"unable to decode the request body: {e}") from e

    async def _post(self, request: web.Request, t: Target) -> web.Response:
        dry_run = request.query.getall("dryRun", [])
        dry = _dry_run(dry_run)
        body = await self._body(request)
        if not isinstance(body, dict):
            raise ApiError(400, "the request body must be an object")
        if t.subresource == "eviction":
            assert t.name is not None and t.namespace is not None
            status = eviction.evict(self.store, t.namespace, t.name, body, dry_run)
            return _json(status, status["code"])
        if t.subresource == "binding":
            assert t.name is not None
            node = (body.get("target") or {}).get("name")
            if not node:
                raise ApiError(422, "target.name: Required value")
            if not dry:
                self.store.mutate(
                    t.rt,
                    t.namespace,
                    t.name,
                    lambda p: p.setdefault("spec", {}).__setitem__("nodeName", node),
                )
            return _json(
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "metadata": {},
                    "status": "Success",
                    "code": 201,
                },
                201,
            )
        if t.name is not None:
            raise ApiError(405, "POST to a named resource is not allowed")
        _check_custom_kind(t.rt, body)
        with validating(request.query.get("fieldValidation")) as v:
            obj = self.store.create(t.rt, t.namespace, body, dry_run=dry)
        return _warned(self._respond(request, t.rt, obj, 201), v)

    async def _put(self, request: web.Request, t: Target) -> web.Response:
        dry = _dry_run(request.query.getall("dryRun", []))
        if t.name is None:
            raise ApiError(405, "PUT needs a named resource")
        body = await self._body(request)
        if t.subresource == "scale":
            obj = self._set_scale(t, body, dry)
            return _json(_scale(obj))
        _check_custom_kind(t.rt, body)
        with validating(request.query.get("fieldValidation")) as v:
            obj = self.store.update(
                t.rt, t.namespace, t.name, body, t.subresource, owned=True, dry_run=dry
            )
        return _warned(self._respond(request, t.rt, obj), v)

    async def _patch(self, request: web.Request, t: Target) -> web.Response:
        dry = _dry_run(request.query.getall("dryRun", []))
        if t.name is None:
            raise ApiError(405, "PATCH needs a named resource")
        body = await self._body(request)
        cur = self.store.get(t.rt, t.namespace, t.name)
        base = _scale(cur) if t.subresource == "scale" else cur
        ctype = request.content_type
        try:
            if ctype == "application/merge-patch+json":
                new = json_merge_patch(base, body)
            elif ctype == "application/json-patch+json":
                new = json_patch(base, body)
            elif ctype == "application/strategic-merge-patch+json":
                if t.rt.schema is not None or t.rt.group not in (
                    "",
                    "apps",
                    "policy",
                    "coordination.k8s.io",
                    "lifecycle.k8s.io",
                ):
                    raise ApiError(
                        415,
                        "the body of the request was in an unknown format - accepted media "
                        "types include: application/json-patch+json, "
                        "application/merge-patch+json, application/apply-patch+yaml",
                    )
                new = strategic_merge_patch(base, body, t.rt.kind)
            else:
                raise ApiError(415, f"the content type {ctype!r} is not supported for PATCH")
        except PatchError as e:
            raise ApiError(422, f"the patch could not be applied: {e}") from e
        if not isinstance(new, dict):
            raise ApiError(422, "the patch did not produce an object")
        if t.subresource == "scale":
            return _json(_scale(self._set_scale(t, new, dry)))
        lifecycle.check_patch(t.rt, new)
        # only a patch that names a resourceVersion asks for optimistic concurrency
        named_rv = isinstance(body, dict) and (body.get("metadata") or {}).get("resourceVersion")
        if not named_rv:
            new.setdefault("metadata", {}).pop("resourceVersion", None)
        with validating(request.query.get("fieldValidation")) as v:
            obj = self.store.update(t.rt, t.namespace, t.name, new, t.subresource, dry_run=dry)
        return _warned(self._respond(request, t.rt, obj), v)

    def _set_scale(self, t: Target, scale: Obj, dry_run: bool) -> Obj:
        assert t.name is not None
        replicas = (scale.get("spec") or {}).get("replicas")
        if not isinstance(replicas, int) or replicas < 0:
            raise ApiError(422, "spec.replicas: must be a non-negative integer")
        obj = copy.deepcopy(self.store.get(t.rt, t.namespace, t.name))
        obj.setdefault("spec", {})["replicas"] = replicas
        obj["metadata"].pop("resourceVersion", None)
        return self.store.update(t.rt, t.namespace, t.name, obj, owned=True, dry_run=dry_run)

    async def _delete(self, request: web.Request, t: Target) -> web.Response:
        body = await self._body(request)
        if not isinstance(body, dict):
            raise ApiError(400, "the request body must be DeleteOptions")
        if not body:
            # as kube-apiserver: DeleteOptions come from the body, or from the query if none
            q = request.query
            body = {k: q[k] for k in ("propagationPolicy", "orphanDependents") if k in q}
            if "orphanDependents" in body:
                body["orphanDependents"] = body["orphanDependents"] in ("true", "1")
            if "gracePeriodSeconds" in q:
                try:
                    body["gracePeriodSeconds"] = int(q["gracePeriodSeconds"])
                except ValueError as e:
                    raise ApiError(400, f"gracePeriodSeconds: {e}") from e
            body["dryRun"] = q.getall("dryRun", [])
        dry = _dry_run(body.get("dryRun") or [])
        grace = body.get("gracePeriodSeconds")
        pre = body.get("preconditions")
        if t.name is None:
            labels, fields = self._selectors(request, t.rt)
            for o in self.store.list(t.rt, t.namespace, labels, fields):
                m = o["metadata"]
                with contextlib.suppress(ApiError):
                    self.store.delete(t.rt, m.get("namespace"), m["name"], grace, dry_run=dry)
            return _json(
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "metadata": {},
                    "status": "Success",
                    "code": 200,
                }
            )
        propagation = body.get("propagationPolicy")
        if body.get("orphanDependents") is True:
            propagation = "Orphan"
        finalizer = {"Orphan": "orphan", "Foreground": "foregroundDeletion"}.get(propagation or "")
        if finalizer is not None and not dry:
            # the garbage collector does the rest, as it does behind the real API server
            self.store.mutate(t.rt, t.namespace, t.name, lambda o: _add_finalizer(o, finalizer))
        obj = self.store.delete(t.rt, t.namespace, t.name, grace, pre, dry_run=dry)
        return self._respond(request, t.rt, obj)

    # --- simulator control -----------------------------------------------------------------------

    async def _set_faults(self, request: web.Request) -> web.Response:
        body = await self._body(request)
        if body.get("clear"):
            self.faults.clear()
        if "latency" in body:
            self.faults.latency = float(body["latency"])
        for a in body.get("late", []):
            self.faults.answer_late(float(a["seconds"]), a.get("verb"), a.get("resource"))
        for b in body.get("bursts", []):
            self.faults.error_burst(
                int(b["code"]), int(b["count"]), b.get("verb"), b.get("resource")
            )
        dropped = self.store.drop_watches() if body.get("dropWatches") else 0
        if body.get("compact"):
            self.store.compact()
        return web.json_response({"droppedWatches": dropped})

    async def _get_stats(self, request: web.Request) -> web.Response:
        return web.json_response({"requests": self.stats.as_json()})


_BUILTIN_KEYS = {rt.key for rt in BUILTIN}


def _check_custom_kind(rt: ResourceType, body: Any) -> None:
    """A custom object sent whole must say its kind: kube-apiserver decodes it as unstructured,
    with no type to take the kind from."""
    if rt.key not in _BUILTIN_KEYS and isinstance(body, dict) and not body.get("kind"):
        raise ApiError(
            400,
            f"the object provided is unrecognized (must be of type {rt.kind}): Object 'Kind' is "
            f"missing in '{json.dumps(body)}'",
        )


def _custom_schemas(types: list[ResourceType], group: str, version: str) -> dict[str, Any]:
    """The custom resources' schemas as kube-apiserver publishes them in OpenAPI v3 (named
    after the reversed group, with the GVK extension), which `kubectl explain` reads. The
    built-in types' schemas are not modelled: kubectl knows those itself."""
    prefix = ".".join(reversed(group.split(".")))
    out: dict[str, Any] = {}
    for rt in types:
        if rt.schema is None:
            continue
        schema = copy.deepcopy(rt.schema)
        schema["x-kubernetes-group-version-kind"] = [
            {"group": group, "version": version, "kind": rt.kind}
        ]
        out[f"{prefix}.{version}.{rt.kind}"] = schema
    return out


def _warned(response: web.Response, v: Validation) -> web.Response:
    """The write's unknown fields as `Warning` headers (fieldValidation Warn), as kubectl shows
    them ("Warning: unknown field ...")."""
    for warning in v.warnings():
        response.headers.add("Warning", warning)
    return response


def _dry_run(values: list[str]) -> bool:
    """Whether a request's dryRun values (["All"] or none) ask for a dry run."""
    for v in values:
        if v != "All":
            raise ApiError(400, f'dryRun: Unsupported value: "{v}": supported values: "All"')
    return bool(values)


def _add_finalizer(obj: Obj, finalizer: str) -> None:
    finalizers = obj["metadata"].setdefault("finalizers", [])
    if finalizer not in finalizers:
        finalizers.append(finalizer)


_LATEST = -1
_INCONSISTENT_CONTINUE = (
    "The provided continue parameter is too old to display a consistent list result. You can "
    "start a new list without the continue parameter, or use the continue token in this "
    "response to retrieve the remainder of the results. Continuing with the provided token "
    "results in an inconsistent list - objects that were created, modified, or deleted between "
    "the time the first chunk was returned and now may show up in the list."
)


def _encode_continue(snapshot_id: int, offset: int, after: tuple[str, str]) -> str:
    return base64.b64encode(json.dumps([snapshot_id, offset, list(after)]).encode()).decode()


def _decode_continue(token: str) -> tuple[int, int, tuple[str, str]]:
    try:
        snapshot_id, offset, after = json.loads(base64.b64decode(token, validate=True))
        namespace, name = after
        if not isinstance(namespace, str) or not isinstance(name, str):
            raise ValueError("the last key is not two strings")
        return int(snapshot_id), int(offset), (namespace, name)
    except (ValueError, TypeError) as e:
        raise ApiError(400, f"invalid continue token: continue key is not valid: {e}") from e


def _sort_key(o: Obj) -> tuple[str, str]:
    m = o["metadata"]
    return (m.get("namespace", ""), m["name"])


def _wants_table(request: web.Request) -> bool:
    accept = request.headers.get("Accept", "")
    first = accept.split(",")[0]
    return "as=Table" in first


def _line(ev: dict[str, Any]) -> bytes:
    return json.dumps(ev, separators=(",", ":")).encode() + b"\n"


def _json(body: Any, status: int = 200) -> web.Response:
    return web.Response(
        body=json.dumps(body, separators=(",", ":")).encode(),
        status=status,
        content_type="application/json",
    )


def _scale(obj: Obj) -> Obj:
    m = obj["metadata"]
    sel = ((obj.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            k: m[k]
            for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            if k in m
        },
        "spec": {"replicas": (obj.get("spec") or {}).get("replicas", 1)},
        "status": {
            "replicas": (obj.get("status") or {}).get("replicas", 0),
            "selector": ",".join(f"{k}={v}" for k, v in sorted(sel.items())),
        },
    }
