"""`fieldValidation` on writes, as kube-apiserver does for custom resources: fields the schema
does not know are dropped (pruning) and, per the request's `fieldValidation` query parameter,
reported in a `Warning` header (`Warn`, the default), refused (`Strict`, what `kubectl apply`
sends by default) or said nothing of (`Ignore`).

The write's request sets the mode for the admission that runs inside it (a context variable:
admission is called by the store, which knows nothing of requests)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field

from nodeagent_testbed.sim.errors import ApiError

__all__ = ["MODES", "Validation", "check_unknown", "validating"]

MODES = ("Ignore", "Warn", "Strict")


@dataclass
class Validation:
    mode: str = "Warn"
    unknown: list[str] = field(default_factory=list)

    def warnings(self) -> list[str]:
        """The `Warning` header values of the write (none but in Warn mode)."""
        if self.mode != "Warn":
            return []
        return [f'299 - "unknown field \\"{path}\\""' for path in self.unknown]


_CURRENT: ContextVar[Validation | None] = ContextVar("field_validation", default=None)


@contextlib.contextmanager
def validating(mode: str | None) -> Iterator[Validation]:
    """The validation of one write; `mode`: the request's fieldValidation (None: Warn)."""
    value = mode or "Warn"
    if value not in MODES:
        raise ApiError(
            400,
            f'fieldValidation: Unsupported value: "{value}": supported values: '
            + ", ".join(f'"{m}"' for m in MODES),
        )
    v = Validation(value)
    token = _CURRENT.set(v)
    try:
        yield v
    finally:
        _CURRENT.reset(token)


def check_unknown(kind: str, version: str, dropped: list[str]) -> None:
    """What admission found the schema does not know: refused under Strict, else recorded for
    the Warning header. Paths as kube-apiserver prints them (`spec.foo`)."""
    v = _CURRENT.get()
    if v is None or not dropped:
        return
    paths = [p.lstrip(".") for p in dropped]
    if v.mode == "Strict":
        unknown = ", ".join(f'unknown field "{p}"' for p in paths)
        raise ApiError(
            400,
            f'{kind} in version "{version}" cannot be handled as a {kind}: '
            f"strict decoding error: {unknown}",
            reason="BadRequest",
        )
    v.unknown.extend(paths)
