"""The parts of an API request that `KubeClient` builds from its arguments: query parameters,
typed bodies, the namespace and name a body gives, delete options.

Pure functions on dicts; the client sends what they return.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from nodeagent.kube.resources import Obj, Resource
from nodeagent.model.bodies import metadata_of

__all__ = [
    "Propagation",
    "Query",
    "body_name",
    "body_namespace",
    "delete_options",
    "selectors",
    "watch_query",
    "with_type",
]

Propagation = Literal["Foreground", "Background", "Orphan"]
Query = list[tuple[str, str]]


def with_type(resource: Resource, body: Mapping[str, Any]) -> Obj:
    return {"apiVersion": resource.api_version, "kind": resource.kind, **body}


def body_namespace(
    resource: Resource, namespace: str | None, body: Mapping[str, Any]
) -> str | None:
    if not resource.namespaced:
        return namespace  # Resource.path rejects a namespace for cluster-scoped resources
    namespace = namespace or metadata_of(body).get("namespace")
    if not namespace:
        raise ValueError(f"{resource} is namespaced: give a namespace or set metadata.namespace")
    return str(namespace)


def body_name(body: Mapping[str, Any]) -> str:
    name = metadata_of(body).get("name")
    if not name:
        raise ValueError("body has no metadata.name")
    return str(name)


def selectors(label_selector: str | None, field_selector: str | None) -> Query:
    query: Query = []
    if label_selector:
        query.append(("labelSelector", label_selector))
    if field_selector:
        query.append(("fieldSelector", field_selector))
    return query


def watch_query(
    *,
    resource_version: str | None,
    label_selector: str | None,
    field_selector: str | None,
    timeout_seconds: int | None,
    allow_bookmarks: bool,
) -> tuple[Query, float | None]:
    """The query of a watch, and the read timeout of its connection (None: no limit)."""
    query = selectors(label_selector, field_selector)
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
    return query, read_timeout


def delete_options(
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
