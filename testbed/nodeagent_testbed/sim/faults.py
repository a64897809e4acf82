"""Fault injection for the simulated API server, switchable from tests (in-process or over HTTP)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from nodeagent_testbed.sim.errors import ApiError


@dataclass
class Burst:
    code: int
    remaining: int
    verb: str | None = None  # get, list, watch, create, update, patch, delete, evict
    resource: str | None = None  # plural, e.g. "pods"


@dataclass
class LateAnswer:
    seconds: float
    verb: str | None = None
    resource: str | None = None


@dataclass
class Faults:
    latency: float = 0.0  # seconds added to every request
    bursts: list[Burst] = field(default_factory=list)
    late: list[LateAnswer] = field(default_factory=list)

    def answer_late(
        self, seconds: float, verb: str | None = None, resource: str | None = None
    ) -> None:
        """Matching requests are carried out at once and answered `seconds` later: a call still
        in flight when its effects (watch events) are already out."""
        self.late.append(LateAnswer(seconds, verb, resource))

    def answer_delay(self, verb: str, resource: str) -> float:
        return max(
            (
                a.seconds
                for a in self.late
                if a.verb in (None, verb) and a.resource in (None, resource)
            ),
            default=0.0,
        )

    def error_burst(
        self, code: int, count: int, verb: str | None = None, resource: str | None = None
    ) -> None:
        """The next `count` matching requests fail with `code` (429, 500, 409 ...)."""
        self.bursts.append(Burst(code, count, verb, resource))

    def clear(self) -> None:
        self.latency = 0.0
        self.bursts.clear()
        self.late.clear()

    def take(self, verb: str, resource: str) -> ApiError | None:
        for b in self.bursts:
            if b.remaining > 0 and b.verb in (None, verb) and b.resource in (None, resource):
                b.remaining -= 1
                if b.remaining == 0:
                    self.bursts.remove(b)
                return ApiError(b.code, f"injected fault: {b.code} for {verb} {resource}")
        return None


@dataclass
class Stats:
    """Requests served, by client (user agent's first word), verb and resource; and responses,
    by verb, resource and HTTP status (e.g. how many evictions were refused with 429)."""

    requests: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    responses: Counter[tuple[str, str, int]] = field(default_factory=Counter)

    def count(self, agent: str, verb: str, resource: str) -> None:
        self.requests[(agent, verb, resource)] += 1

    def count_response(self, verb: str, resource: str, status: int) -> None:
        self.responses[(verb, resource, status)] += 1

    def responded(self, verb: str, resource: str, status: int | None = None) -> int:
        """Responses to `verb` on `resource` (with `status`, or any)."""
        return sum(
            n
            for (v, r, s), n in self.responses.items()
            if v == verb and r == resource and status in (None, s)
        )

    def total(self, agent: str | None = None) -> int:
        return sum(n for (a, _, _), n in self.requests.items() if agent in (None, a))

    def as_json(self) -> list[dict[str, object]]:
        return [
            {"agent": a, "verb": v, "resource": r, "count": n}
            for (a, v, r), n in sorted(self.requests.items())
        ]
