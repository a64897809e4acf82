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


def invalid(kind: str, name: str, causes: list[tuple[str, str]], group: str = "") -> ApiError:
    text = ", ".join(f"{f}: {m}" for f, m in causes)
    return ApiError(
        422,
        f'{kind}{"." + group if group else ""} "{name}" is invalid: {text}',
        details={
            "name": name,
            "group": group,
            "kind": kind,
            "causes": [
                {"reason": "FieldValueInvalid", "message": m, "field": f} for f, m in causes
            ],
        },
    )
