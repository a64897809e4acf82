"""The shutdown's final phase: what the kubelet's Graceful Node Shutdown would do, done through
the API server, and only when the ordered drain has run out of time.

The node's agent asks for it when it creates its shutdown maintenance (annotation
`nodeagent.io/final-phase`: the release deadline, wall clock, and the two periods); the
controllers carry it out, as only they may read pods. Nodes and controllers are expected to
keep their clocks in step (NTP), as leases already need.

It starts `grace_period` seconds before the release deadline and deletes the pods still on the
node in GNS's order: every pod below priority 2000000000 with grace min(its
terminationGracePeriodSeconds, grace_period - critical_pods_grace_period); then, once those are
gone or at `critical_pods_grace_period` before the deadline, the critical ones with grace
min(theirs, critical_pods_grace_period). No grace reaches past the deadline. Deleted pods are
recreated elsewhere by their controllers instead of ending Failed on a dead node. Never
touched: mirror pods (deleting one does nothing; static pods stay with the kubelet.k8s.io
interceptor), pods annotated `nodeagent.io/drain: skip` (the agent's own), pods already
terminating or terminal. Pure; the I/O is `nodeagent.controllers.final_phase`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from nodeagent.model.bodies import deleting, mapping, metadata_of, uid_of
from nodeagent.model.drainplan import PodType, classify
from nodeagent.model.names import FINAL_PHASE_ANNOTATION, SYSTEM_CRITICAL_PRIORITY
from nodeagent.model.podstate import pod_terminal
from nodeagent.model.times import format_micro_time, parse_time

__all__ = [
    "DEFAULT_TERMINATION_GRACE",
    "Deletion",
    "FinalPhase",
    "InvalidFinalPhase",
    "Step",
    "annotation",
    "plan",
    "release_deadline",
    "requested",
]

DEFAULT_TERMINATION_GRACE = 30  # the API server's default terminationGracePeriodSeconds
_DEADLINE, _GRACE, _CRITICAL = "deadline", "gracePeriodSeconds", "criticalPodsGracePeriodSeconds"


class InvalidFinalPhase(ValueError):
    """The annotation cannot be read; the message names the maintenance and what is wrong."""


@dataclass(frozen=True)
class FinalPhase:
    """`deadline`: when the lock goes (monotonic seconds); the phase is over by then."""

    deadline: float
    grace_period: float
    critical_grace_period: float

    @classmethod
    def fitted(
        cls, deadline: float, usable: float, grace_period: float, critical_grace_period: float
    ) -> FinalPhase:
        """The phase for a shutdown that may wait `usable` seconds in all: when logind grants
        less than the configured phase needs, it gets half (both periods scaled alike), so the
        ordered drain still has its turn first."""
        if grace_period > usable / 2 > 0:
            scale = usable / 2 / grace_period
            grace_period, critical_grace_period = usable / 2, critical_grace_period * scale
        return cls(deadline, grace_period, critical_grace_period)

    @property
    def start(self) -> float:
        return self.deadline - self.grace_period

    @property
    def critical_start(self) -> float:
        return self.deadline - self.critical_grace_period


def annotation(deadline: datetime, phase: FinalPhase) -> str:
    """The request a shutdown maintenance carries: `deadline` is when the lock goes (wall
    clock, to the microsecond: whole seconds would start the phase up to a second early)."""
    return json.dumps(
        {
            _DEADLINE: format_micro_time(deadline),
            _GRACE: phase.grace_period,
            _CRITICAL: phase.critical_grace_period,
        },
        separators=(",", ":"),
    )


def requested(nm: Mapping[str, Any]) -> FinalPhase | None:
    """The phase `nm` asks for, its deadline in seconds since the epoch; None when it asks
    none (or a phase of no length)."""
    read = _read(nm)
    if read is None:
        return None
    deadline, grace, critical = read
    if grace <= 0:
        return None
    return FinalPhase(deadline.timestamp(), grace, critical)


def release_deadline(nm: Mapping[str, Any]) -> datetime | None:
    """When the node's agent lets its node go, as its request says (a phase of no length
    still says when); None when it has no request."""
    read = _read(nm)
    return None if read is None else read[0]


def _read(nm: Mapping[str, Any]) -> tuple[datetime, float, float] | None:
    md = metadata_of(nm)
    raw = mapping(md, "annotations").get(FINAL_PHASE_ANNOTATION)
    if raw is None:
        return None
    where = f"NodeMaintenance {md.get('name')}: annotation {FINAL_PHASE_ANNOTATION}"
    try:
        value = json.loads(raw) if isinstance(raw, str) else None
    except ValueError as e:
        raise InvalidFinalPhase(f"{where}: not JSON ({e})") from None
    if not isinstance(value, dict):
        raise InvalidFinalPhase(f"{where}: must be a JSON object")
    deadline = parse_time(value.get(_DEADLINE))
    if deadline is None:
        raise InvalidFinalPhase(f"{where}: {_DEADLINE} must be an RFC 3339 time")
    periods = []
    for key in (_GRACE, _CRITICAL):
        period = value.get(key)
        if isinstance(period, bool) or not isinstance(period, int | float):
            raise InvalidFinalPhase(f"{where}: {key} must be a number of seconds")
        if not 0 <= period < math.inf:
            raise InvalidFinalPhase(f"{where}: {key} must be >= 0")
        periods.append(float(period))
    grace, critical = periods
    if critical > grace:
        raise InvalidFinalPhase(f"{where}: {_CRITICAL} must not exceed {_GRACE}")
    return deadline, grace, critical


@dataclass(frozen=True)
class Deletion:
    namespace: str
    name: str
    uid: str
    grace: int  # gracePeriodSeconds
    critical: bool


@dataclass(frozen=True)
class Step:
    deletions: tuple[Deletion, ...]
    next_at: float | None  # when to decide again without news; None: nothing more to do
    group: str  # "waiting", "pods", "critical pods", "done": for logs


def _grace(pod: Mapping[str, Any], cap: float, left: float) -> int:
    tgps = mapping(pod, "spec").get("terminationGracePeriodSeconds")
    if isinstance(tgps, bool) or not isinstance(tgps, int) or tgps < 0:
        tgps = DEFAULT_TERMINATION_GRACE
    # at least 1: 0 would be a force delete that does not wait for the kubelet at all
    return max(1, min(tgps, math.floor(cap), math.floor(left)))


def _candidates(pods: Iterable[Mapping[str, Any]], node: str) -> list[Mapping[str, Any]]:
    """The node's pods the phase may delete, whether or not already asked to."""
    out = []
    for pod in pods:
        if mapping(pod, "spec").get("nodeName") != node:
            continue
        cls = classify(pod)
        if cls.pod_type is PodType.STATIC or cls.skip or pod_terminal(pod):
            continue
        out.append(pod)
    return out


def is_critical(pod: Mapping[str, Any]) -> bool:
    return classify(pod).priority >= SYSTEM_CRITICAL_PRIORITY


def plan(
    pods: Iterable[Mapping[str, Any]],
    node: str,
    phase: FinalPhase,
    now: float,
    asked: frozenset[str] = frozenset(),
) -> Step:
    """What to delete now. `asked`: UIDs already deleted by this phase (the cache may not show
    their deletionTimestamp yet)."""
    if phase.grace_period <= 0 or now >= phase.deadline:
        return Step((), None, "done")
    if now < phase.start:
        return Step((), phase.start, "waiting")
    left = phase.deadline - now
    present = _candidates(pods, node)
    others = [p for p in present if not is_critical(p)]
    critical = [p for p in present if is_critical(p)]
    if others and now < phase.critical_start:
        cap = phase.grace_period - phase.critical_grace_period
        todo = [p for p in others if not deleting(p) and uid_of(p) not in asked]
        out = tuple(_deletion(p, _grace(p, cap, left), critical=False) for p in todo)
        return Step(out, phase.critical_start, "pods")
    if not critical:
        return Step((), None, "done") if not others else Step((), phase.deadline, "pods")
    todo = [p for p in critical if not deleting(p) and uid_of(p) not in asked]
    cap = phase.critical_grace_period
    out = tuple(_deletion(p, _grace(p, cap, left), critical=True) for p in todo)
    return Step(out, phase.deadline, "critical pods")


def _deletion(pod: Mapping[str, Any], grace: int, *, critical: bool) -> Deletion:
    md = metadata_of(pod)
    return Deletion(
        str(md.get("namespace") or "default"), str(md.get("name") or ""), uid_of(pod), grace,
        critical,
    )  # fmt: skip
