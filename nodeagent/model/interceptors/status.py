"""One ``status.interceptors[]`` entry of an EvictionRequest, and its place in the list."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from nodeagent.model.times import format_micro_time, parse_time

__all__ = ["InterceptorStatus", "with_interceptor_status"]


@dataclass(frozen=True)
class InterceptorStatus:
    """One ``status.interceptors[]`` entry."""

    name: str
    heartbeat_time: datetime | None = None
    start_time: datetime | None = None
    expected_finish_time: datetime | None = None
    completion_time: datetime | None = None
    message: str = ""

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> InterceptorStatus:
        message = d.get("message")
        return cls(
            name=str(d.get("name") or ""),
            heartbeat_time=parse_time(d.get("heartbeatTime")),
            start_time=parse_time(d.get("startTime")),
            expected_finish_time=parse_time(d.get("expectedFinishTime")),
            completion_time=parse_time(d.get("completionTime")),
            message=message if isinstance(message, str) else "",
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        for key, value in (
            ("heartbeatTime", self.heartbeat_time),
            ("expectedFinishTime", self.expected_finish_time),
            ("startTime", self.start_time),
            ("completionTime", self.completion_time),
        ):
            if value is not None:
                out[key] = format_micro_time(value)
        if self.message:
            out["message"] = self.message
        return out

    @property
    def last_report(self) -> datetime | None:
        """The latest of startTime and heartbeatTime: the last sign of life."""
        times = [t for t in (self.start_time, self.heartbeat_time) if t is not None]
        return max(times) if times else None

    def heartbeat(self, now: datetime, message: str | None = None) -> InterceptorStatus:
        """This entry with heartbeatTime ``now`` (and startTime, the first time)."""
        return replace(
            self,
            heartbeat_time=now,
            start_time=self.start_time or now,
            message=self.message if message is None else message,
        )

    def complete(self, now: datetime, message: str | None = None) -> InterceptorStatus:
        """This entry completed (completionTime ``now`` unless set). A heartbeat already there
        stays: the CRD (KEP-4563) refuses one moved less than 60 s forward, and a completed turn
        has no deadline left to keep off."""
        done = self if self.heartbeat_time is not None else self.heartbeat(now)
        return replace(
            done,
            completion_time=self.completion_time or now,
            message=self.message if message is None else message,
        )


def with_interceptor_status(
    entries: Iterable[Mapping[str, Any]], entry: InterceptorStatus
) -> list[dict[str, Any]]:
    """``status.interceptors`` with ``entry`` replacing the one of the same name (or appended)."""
    out: list[dict[str, Any]] = []
    placed = False
    for raw in entries:
        if isinstance(raw, Mapping) and raw.get("name") == entry.name:
            if not placed:
                out.append(entry.to_dict())
                placed = True
        else:
            out.append(dict(raw))
    if not placed:
        out.append(entry.to_dict())
    return out
