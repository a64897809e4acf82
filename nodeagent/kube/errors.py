"""The one place that turns client and transport failures into our own exceptions.

Callers above `nodeagent.kube` catch these classes and never see `kubernetes` or `urllib3`
exception types. Classification follows the HTTP status code first (what client-go's
`apierrors.IsNotFound` and friends do), then the `Status.reason` where one code means two
things (409 Conflict vs AlreadyExists).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import urllib3.exceptions
from kubernetes.client.exceptions import ApiException, ApiValueError

__all__ = [
    "AlreadyExists",
    "BadRequest",
    "Conflict",
    "Forbidden",
    "Gone",
    "Invalid",
    "KubeConfigError",
    "KubeError",
    "NotFound",
    "ServerError",
    "TooManyRequests",
    "Unauthorized",
    "Unreachable",
    "from_response",
    "from_status",
    "translate",
]


class KubeError(Exception):
    """An API call failed. `status` is the HTTP code, 0 when no response arrived."""

    def __init__(
        self,
        message: str,
        *,
        status: int = 0,
        reason: str = "",
        details: Mapping[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.reason = reason
        self.details: Mapping[str, Any] = details or {}
        # Seconds the server asked us to wait (429, some 5xx); None when it did not say.
        self.retry_after = retry_after

    def __str__(self) -> str:
        head = str(self.status) if self.status else "no response"
        if self.reason:
            head = head + " " + self.reason
        return head + ": " + self.message if self.message else head

    def __repr__(self) -> str:
        name = type(self).__name__
        return f"{name}(status={self.status!r}, reason={self.reason!r}, message={self.message!r})"


class BadRequest(KubeError):
    """400."""


class Unauthorized(KubeError):
    """401: credentials missing or expired."""


class Forbidden(KubeError):
    """403: RBAC says no."""


class NotFound(KubeError):
    """404."""


class Conflict(KubeError):
    """409 with a stale resourceVersion or failed precondition: re-read and retry."""


class AlreadyExists(KubeError):
    """409 on create: the name is taken. Not a Conflict, as in client-go."""


class Gone(KubeError):
    """410: the requested resourceVersion is too old (expired); relist."""


class Invalid(KubeError):
    """422: the object failed validation; retrying the same request will not help."""


class TooManyRequests(KubeError):
    """429: throttled, or an eviction refused by a PodDisruptionBudget."""


class ServerError(KubeError):
    """5xx."""


class Unreachable(KubeError):
    """No usable response: connection refused or reset, DNS failure, TLS failure, timeout."""


class KubeConfigError(Exception):
    """No usable client configuration (kubeconfig unreadable, not running in a cluster)."""


_BY_STATUS: dict[int, type[KubeError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    422: Invalid,
    429: TooManyRequests,
}


def _header(headers: Mapping[str, str] | None, name: str) -> str | None:
    if not headers:
        return None
    value = headers.get(name)
    if value is not None:
        return value
    # Plain dicts (tests, some code paths) are not case-insensitive like HTTPHeaderDict.
    lowered = name.lower()
    for key, val in headers.items():
        if key.lower() == lowered:
            return val
    return None


def _seconds(value: object) -> float | None:
    # Kubernetes always sends delta-seconds; an HTTP-date Retry-After is not worth parsing.
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        try:
            seconds = float(value.strip())
        except ValueError:
            return None
    else:
        return None
    if not math.isfinite(seconds) or seconds < 0:
        return None
    return seconds


def _class_for(status: int, reason: str) -> type[KubeError]:
    if status == 409 and reason == "AlreadyExists":
        return AlreadyExists
    if 500 <= status <= 599:
        return ServerError
    if status == 0:
        return Unreachable
    return _BY_STATUS.get(status, KubeError)


def from_status(
    status_obj: Mapping[str, Any],
    *,
    http_status: int | None = None,
    headers: Mapping[str, str] | None = None,
) -> KubeError:
    """Build the error for a `meta/v1 Status` object (a response body or a watch ERROR event).

    `http_status` wins over `Status.code` when given; the two agree on real servers.
    """
    code = http_status
    if code is None:
        raw = status_obj.get("code")
        # A Status without a code is the server's fault.
        code = raw if isinstance(raw, int) and not isinstance(raw, bool) else 500
    reason = status_obj.get("reason")
    reason = reason if isinstance(reason, str) else ""
    message = status_obj.get("message")
    message = message if isinstance(message, str) else ""
    details = status_obj.get("details")
    details = details if isinstance(details, Mapping) else {}
    retry_after = _seconds(_header(headers, "Retry-After"))
    if retry_after is None:
        retry_after = _seconds(details.get("retryAfterSeconds"))
    cls = _class_for(code, reason)
    return cls(message, status=code, reason=reason, details=details, retry_after=retry_after)


def from_response(
    status: int,
    reason: str | None,
    body: str | bytes | None,
    headers: Mapping[str, str] | None = None,
) -> KubeError:
    """Build the error for a non-2xx HTTP response."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else (body or "")
    status_obj: Mapping[str, Any] = {}
    if text:
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        if isinstance(parsed, Mapping) and parsed.get("kind") == "Status":
            status_obj = parsed
    if not status_obj:
        # Not a Status (a proxy's HTML page, an empty body): keep what we have.
        status_obj = {"reason": reason or "", "message": text.strip()[:512] or (reason or "")}
    return from_status(status_obj, http_status=status, headers=headers)


def translate(exc: BaseException) -> KubeError:
    """Map any exception raised while talking to the API server to a `KubeError`."""
    if isinstance(exc, KubeError):
        return exc
    if isinstance(exc, ApiException):
        status = exc.status if isinstance(exc.status, int) else 0
        if status == 0:
            # The generated client reports TLS failures as ApiException(status=0).
            return Unreachable(str(exc.reason or "request failed"), reason="Unreachable")
        return from_response(status, exc.reason, exc.body, exc.headers)
    if isinstance(exc, urllib3.exceptions.MaxRetryError):
        inner = exc.reason if exc.reason is not None else exc
        return Unreachable(_exception_text(inner), reason="Unreachable")
    if isinstance(
        exc,
        urllib3.exceptions.ProtocolError
        | urllib3.exceptions.TimeoutError
        | urllib3.exceptions.NewConnectionError
        | urllib3.exceptions.SSLError
        | urllib3.exceptions.ProxyError
        | urllib3.exceptions.DecodeError
        | urllib3.exceptions.HTTPError,
    ):
        return Unreachable(_exception_text(exc), reason="Unreachable")
    if isinstance(exc, OSError):
        # socket errors, ConnectionError, TimeoutError (socket.timeout is an alias)
        return Unreachable(_exception_text(exc), reason="Unreachable")
    if isinstance(exc, ApiValueError):
        return BadRequest(str(exc), reason="ClientValidation")
    if isinstance(exc, ValueError):
        # A 2xx body that is not JSON: the server (or something in between) is broken.
        return ServerError(
            "malformed response: " + _exception_text(exc), reason="MalformedResponse"
        )
    return KubeError(_exception_text(exc), reason="Unknown")


def _exception_text(exc: BaseException) -> str:
    text = str(exc)
    return type(exc).__name__ + (": " + text if text else "")
