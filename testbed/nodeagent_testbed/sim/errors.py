"""API errors as the real API server reports them (metav1.Status)."""

from __future__ import annotations

from typing import Any

REASONS = {
    400: "BadRequest",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
}


class ApiError(Exception):
    def __init__(
        self,
        code: int,
        message: str,
        reason: str | None = None,
        details: dict[str, Any] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        # "" for none at all, as a Status an API handler returns itself has none
        self.reason = REASONS.get(code, "Unknown") if reason is None else reason
        self.details = details
        self.metadata = metadata or {}

    @property
    def retry_after(self) -> int:
        """details.retryAfterSeconds, which the server also sends as a Retry-After header."""
        return int((self.details or {}).get("retryAfterSeconds", 0))

    def status(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": dict(self.metadata),
            "status": "Failure",
            "message": self.message,
            "code": self.code,
        }
        if self.reason:
            out["reason"] = self.reason
        if self.details is not None:
            out["details"] = self.details
        return out


def not_found(resource: str, name: str, group: str = "") -> ApiError:
    qualified = f"{resource}.{group}" if group else resource
    return ApiError(
        404,
        f'{qualified} "{name}" not found',
        details={"name": name, "group": group, "kind": resource},
    )


def conflict(resource: str, name: str, group: str = "") -> ApiError:
    qualified = f"{resource}.{group}" if group else resource
    return ApiError(
        409,
        f'Operation cannot be fulfilled on {qualified} "{name}": the object has been modified; '
        "please apply your changes to the latest version and try again",
        details={"name": name, "group": group, "kind": resource},
    )


# field.ErrorType by how the error's body starts (field.Error.ErrorBody); a wrong type reads
# "Invalid value" too, told apart by go-openapi's wording
_CAUSE_TYPES = (
    ("Required value", "FieldValueRequired"),
    ("Forbidden", "FieldValueForbidden"),
    ("Unsupported value", "FieldValueNotSupported"),
    ("Duplicate value", "FieldValueDuplicate"),
    ("Too long", "FieldValueTooLong"),
    ("Too many", "FieldValueTooMany"),
    ("Internal error", "InternalError"),
    ("Not found", "FieldValueNotFound"),
)


def cause_type(message: str) -> str:
    """The StatusCause reason of a field error's message."""
    for prefix, reason in _CAUSE_TYPES:
        if message.startswith(prefix):
            return reason
    if " in body must be of type " in message:
        return "FieldValueTypeInvalid"
    return "FieldValueInvalid"


def invalid(kind: str, name: str, causes: list[tuple[str, str]], group: str = "") -> ApiError:
    # utilerrors.Aggregate: repeated messages once, more than one in brackets
    texts = list(dict.fromkeys(f"{f}: {m}" for f, m in causes))
    text = "" if not texts else f": {texts[0]}" if len(texts) == 1 else f": [{', '.join(texts)}]"
    return ApiError(
        422,
        f'{kind}{"." + group if group else ""} "{name}" is invalid{text}',
        details={
            "name": name,
            "group": group,
            "kind": kind,
            "causes": [{"reason": cause_type(m), "message": m, "field": f} for f, m in causes],
        },
    )


def json_kind(value: Any) -> str:
    """What Go's decoder calls a JSON value it cannot store."""
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    return "array" if isinstance(value, list) else "object"
