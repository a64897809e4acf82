from __future__ import annotations

import json
from typing import Any

import pytest
import urllib3
from kubernetes.client.exceptions import ApiException, ApiValueError
from urllib3.exceptions import MaxRetryError, NewConnectionError, ProtocolError, ReadTimeoutError

from nodeagent.kube import errors
from nodeagent.kube.errors import (
    AlreadyExists,
    BadRequest,
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    KubeError,
    NotFound,
    ServerError,
    TooManyRequests,
    Unauthorized,
    Unreachable,
    from_status,
    translate,
)


def api_exception(
    code: int,
    reason: str = "",
    message: str = "",
    *,
    details: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
    body: str | None = None,
) -> ApiException:
    exc = ApiException(status=code, reason=reason.upper() or "X")
    if body is None:
        status: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": reason,
            "code": code,
        }
        if details is not None:
            status["details"] = details
        body = json.dumps(status)
    exc.body = body
    exc.headers = headers
    return exc


@pytest.mark.parametrize(
    ("code", "reason", "cls"),
    [
        (400, "BadRequest", BadRequest),
        (401, "Unauthorized", Unauthorized),
        (403, "Forbidden", Forbidden),
        (404, "NotFound", NotFound),
        (409, "Conflict", Conflict),
        (409, "AlreadyExists", AlreadyExists),
        (410, "Expired", Gone),
        (410, "Gone", Gone),
        (422, "Invalid", Invalid),
        (429, "TooManyRequests", TooManyRequests),
        (500, "InternalError", ServerError),
        (503, "ServiceUnavailable", ServerError),
        (504, "Timeout", ServerError),
        (418, "Teapot", KubeError),
    ],
)
def test_status_codes_map_to_classes(code: int, reason: str, cls: type[KubeError]) -> None:
    err = translate(api_exception(code, reason, "it went wrong"))
    assert type(err) is cls
    assert err.status == code
    assert err.reason == reason
    assert err.message == "it went wrong"
    assert "it went wrong" in str(err)


def test_already_exists_is_not_a_conflict() -> None:
    # Callers retrying optimistic-concurrency conflicts must not retry a taken name.
    err = translate(api_exception(409, "AlreadyExists", 'pods "a" already exists'))
    assert isinstance(err, AlreadyExists)
    assert not isinstance(err, Conflict)


def test_details_are_kept() -> None:
    details = {"name": "web-1", "kind": "pods", "causes": [{"reason": "DisruptionBudget"}]}
    err = translate(api_exception(429, "TooManyRequests", "pdb says no", details=details))
    assert err.details["causes"][0]["reason"] == "DisruptionBudget"


def test_retry_after_header_wins_over_details() -> None:
    err = translate(
        api_exception(
            429,
            "TooManyRequests",
            "slow down",
            details={"retryAfterSeconds": 7},
            headers={"retry-after": "3"},
        )
    )
    assert isinstance(err, TooManyRequests)
    assert err.retry_after == 3.0


def test_retry_after_from_details_and_header_dict_case() -> None:
    err = translate(api_exception(429, "TooManyRequests", details={"retryAfterSeconds": 7}))
    assert err.retry_after == 7.0
    headers = urllib3.HTTPHeaderDict({"Retry-After": "2"})
    err = translate(api_exception(503, "ServiceUnavailable", headers=dict(headers)))
    assert err.retry_after == 2.0


@pytest.mark.parametrize("value", ["soon", "-1", "Wed, 21 Oct 2015 07:28:00 GMT", "nan"])
def test_unusable_retry_after_is_ignored(value: str) -> None:
    err = translate(api_exception(429, "TooManyRequests", headers={"Retry-After": value}))
    assert err.retry_after is None


def test_non_status_body() -> None:
    exc = api_exception(502, body="<html>bad gateway</html>")
    exc.reason = "Bad Gateway"
    err = translate(exc)
    assert isinstance(err, ServerError)
    assert err.status == 502
    assert "bad gateway" in err.message


def test_empty_body_uses_http_reason() -> None:
    exc = ApiException(status=404, reason="Not Found")
    err = translate(exc)
    assert isinstance(err, NotFound)
    assert err.message == "Not Found"


def test_status_zero_is_unreachable() -> None:
    # The generated client raises ApiException(status=0) for TLS failures.
    err = translate(ApiException(status=0, reason="SSLError\ncertificate verify failed"))
    assert isinstance(err, Unreachable)
    assert err.status == 0
    assert "certificate" in str(err)


def test_urllib3_errors_are_unreachable() -> None:
    pool = urllib3.HTTPConnectionPool("127.0.0.1", 1)
    conn = urllib3.connection.HTTPConnection("127.0.0.1", 1)
    refused = NewConnectionError(conn, "Failed to establish a new connection: refused")
    cases: list[BaseException] = [
        MaxRetryError(pool, "/api", reason=refused),
        MaxRetryError(pool, "/api"),
        refused,
        ProtocolError("Connection aborted.", ConnectionResetError(104, "reset")),
        ReadTimeoutError(pool, "/api", "Read timed out."),
        ConnectionRefusedError(111, "Connection refused"),
        TimeoutError("timed out"),
        OSError(113, "No route to host"),
    ]
    for exc in cases:
        err = translate(exc)
        assert isinstance(err, Unreachable), exc
        assert err.status == 0
    assert "refused" in str(translate(cases[0]))


def test_translate_is_idempotent_and_total() -> None:
    nf = NotFound("x", status=404)
    assert translate(nf) is nf
    assert isinstance(translate(ApiValueError("bad param")), BadRequest)
    assert isinstance(translate(json.JSONDecodeError("x", "doc", 0)), ServerError)
    other = translate(RuntimeError("boom"))
    assert type(other) is KubeError
    assert "boom" in str(other)


def test_from_status_for_watch_error_event() -> None:
    status = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": "too old resource version: 1 (5)",
        "reason": "Expired",
        "code": 410,
    }
    err = from_status(status)
    assert isinstance(err, Gone)
    assert err.status == 410
    assert "too old" in err.message
    # A Status without a code is the server's fault, not ours.
    assert isinstance(from_status({"message": "??"}), ServerError)


def test_from_response_bytes_body() -> None:
    body = json.dumps({"kind": "Status", "code": 422, "reason": "Invalid", "message": "bad"})
    err = errors.from_response(422, "Unprocessable Entity", body.encode())
    assert isinstance(err, Invalid)
    assert err.message == "bad"


def test_repr_and_str() -> None:
    err = NotFound('pods "a" not found', status=404, reason="NotFound")
    assert str(err) == '404 NotFound: pods "a" not found'
    assert "NotFound(status=404" in repr(err)
    assert str(Unreachable("refused")) == "no response: refused"
