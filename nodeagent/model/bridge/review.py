"""The eviction bridge's side of ``admission.k8s.io/v1`` AdmissionReview: what it reads of a
request for ``pods/eviction`` CREATE (and of a NodeMaintenance's CREATE or UPDATE, for
KEP-4212's warning served beside it), and the review it answers with.

A review that cannot be answered (not JSON, no ``request.uid``) is a :class:`BadReview`, which
the server answers with HTTP 400: the API server then applies the webhook's failurePolicy
(Ignore: the eviction goes ahead as if there were no bridge). A review that can be answered but
is not an eviction the bridge understands is allowed with a warning that says why, which is
what failurePolicy Ignore would do, said to the client.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nodeagent.model.bodies import as_map, items, mapping, metadata_of
from nodeagent.model.bridge.decision import EvictionAttempt, Verdict

__all__ = [
    "API_VERSION",
    "BadReview",
    "Unsupported",
    "allowed_review",
    "read_maintenance_review",
    "read_review",
    "review",
]

API_VERSION = "admission.k8s.io/v1"
_WARNING = "nodeagent eviction bridge"


class BadReview(ValueError):
    """Not an AdmissionReview the bridge can answer at all."""


class Unsupported(ValueError):
    """An AdmissionReview for something other than an eviction the bridge reads; the message
    says what. ``uid`` is the request's, to answer with."""

    def __init__(self, uid: str, why: str) -> None:
        super().__init__(why)
        self.uid = uid


def _request(body: object) -> tuple[str, Mapping[str, Any]]:
    """The review's UID and request; :class:`BadReview` when it has none."""
    if not isinstance(body, Mapping):
        raise BadReview("the body is not a JSON object")
    if body.get("apiVersion") != API_VERSION or body.get("kind") != "AdmissionReview":
        raise BadReview(f"expected an AdmissionReview of {API_VERSION}")
    request = body.get("request")
    uid = request.get("uid") if isinstance(request, Mapping) else None
    if not isinstance(uid, str) or not uid or not isinstance(request, Mapping):
        raise BadReview("the AdmissionReview has no request.uid")
    return uid, request


def read_maintenance_review(body: object) -> tuple[str, Mapping[str, Any]]:
    """The request's UID and the NodeMaintenance it would store (CREATE or UPDATE). Raises
    :class:`BadReview` or :class:`Unsupported`."""
    uid, request = _request(body)
    resource = mapping(request, "resource")
    if (
        resource.get("group") != "nodeagent.io"
        or resource.get("resource") != "nodemaintenances"
        or request.get("subResource")
        or request.get("operation") not in ("CREATE", "UPDATE")
    ):
        raise Unsupported(uid, "answers nodemaintenances CREATE and UPDATE only")
    nm = request.get("object")
    if not isinstance(nm, Mapping):
        raise Unsupported(uid, "the request carries no NodeMaintenance")
    return uid, nm


def read_review(body: object) -> tuple[str, EvictionAttempt]:
    """The request's UID and the eviction it asks about. Raises :class:`BadReview` or
    :class:`Unsupported`."""
    uid, request = _request(body)
    resource = mapping(request, "resource")
    if (
        resource.get("group", "") != ""
        or resource.get("resource") != "pods"
        or request.get("subResource") != "eviction"
        or request.get("operation") != "CREATE"
    ):
        raise Unsupported(uid, "the bridge answers pods/eviction CREATE only")
    eviction = as_map(request.get("object"))
    name = request.get("name") or metadata_of(eviction).get("name")
    namespace = request.get("namespace") or metadata_of(eviction).get("namespace")
    if not isinstance(name, str) or not name or not isinstance(namespace, str) or not namespace:
        raise Unsupported(uid, "the request names no pod (name and namespace)")
    options = mapping(eviction, "deleteOptions")
    precondition = mapping(options, "preconditions").get("uid")
    user = mapping(request, "userInfo").get("username")
    attempt = EvictionAttempt(
        namespace=namespace,
        name=name,
        uid=precondition if isinstance(precondition, str) and precondition else None,
        dry_run=request.get("dryRun") is True or bool(items(options, "dryRun")),
        user=user if isinstance(user, str) else "",
    )
    return uid, attempt


def _envelope(response: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": response}


def allowed_review(uid: str, warning: str | None = None, source: str = _WARNING) -> dict[str, Any]:
    """Allowed, with a warning for the client (``kubectl`` prints it) when there is one,
    prefixed with what says it (`source`)."""
    response: dict[str, Any] = {"uid": uid, "allowed": True}
    if warning:
        response["warnings"] = [f"{source}: {warning}"]
    return _envelope(response)


def review(uid: str, verdict: Verdict) -> dict[str, Any]:
    """The AdmissionReview answering with ``verdict`` (an allowed one's message as a warning).
    A denial's status carries its code and reason, and no ``retryAfterSeconds`` (see
    :func:`nodeagent.model.bridge.decision._wait`)."""
    if verdict.allowed:
        return allowed_review(uid, verdict.message or None)
    status: dict[str, Any] = {
        "status": "Failure",
        "code": verdict.code,
        "reason": verdict.reason,
        "message": verdict.message,
    }
    return _envelope({"uid": uid, "allowed": False, "status": status})
