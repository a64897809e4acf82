"""Is the kubelet's Graceful Node Shutdown (GNS) on? Pure: logind's inhibitors and the kubelet's
configuration in, a verdict with its evidence out.

With GNS on, the kubelet SIGTERMs every pod below priority 2000000000 within milliseconds of
`PrepareForShutdown`, without PodDisruptionBudgets or order, and caps every delay lock at its
own `InhibitDelayMaxSec` (notes/real-node.md): nodeagent's ordered drain is void. The kubelet's
delay lock is the strongest evidence (it is what the running kubelet does); without it, the
configuration says what the kubelet does once it (re)starts. The I/O is
`nodeagent.node.kubelet_shutdown`.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from nodeagent.model.names import SYSTEM_CRITICAL_PRIORITY

__all__ = [
    "EVENT_OFF",
    "EVENT_ON",
    "KUBELET_WHO",
    "GnsState",
    "InhibitorView",
    "KubeletShutdownSettings",
    "MalformedKubeletConfig",
    "Verdict",
    "decide",
    "event_message",
    "kubelet_lock",
    "parse_go_duration",
    "settings_from_documents",
]

KUBELET_WHO = "kubelet"
EVENT_ON = "KubeletGracefulShutdownOn"
EVENT_OFF = "KubeletGracefulShutdownOff"

GRACE_PERIOD = "shutdownGracePeriod"
CRITICAL_GRACE_PERIOD = "shutdownGracePeriodCriticalPods"
BY_POD_PRIORITY = "shutdownGracePeriodByPodPriority"


class GnsState(enum.Enum):
    ON = "on"
    OFF = "off"
    UNKNOWN = "unknown"


class InhibitorView(Protocol):
    """One of logind's inhibitors (`nodeagent.logind.manager.InhibitorInfo`)."""

    @property
    def what(self) -> str: ...
    @property
    def who(self) -> str: ...
    @property
    def mode(self) -> str: ...
    @property
    def pid(self) -> int: ...


class MalformedKubeletConfig(ValueError):
    """A KubeletConfiguration the kubelet itself would refuse; the text names file and field."""


# Go's time.ParseDuration: a sequence of decimal numbers with units, "0" alone, optional sign
_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def parse_go_duration(text: str) -> float:
    """Seconds of a Go duration ("30s", "1m30s", "1.5h", "0"); ValueError if it is none."""
    s = text.strip()
    sign = -1.0 if s.startswith("-") else 1.0
    if s and s[0] in "+-":
        s = s[1:]
    if s == "0":
        return 0.0
    if not s:
        raise ValueError(f"{text!r} is not a duration")
    total, pos = 0.0, 0
    while pos < len(s):
        m = _PART.match(s, pos)
        if m is None:
            raise ValueError(f"{text!r} is not a duration (like 30s or 1m30s)")
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    return sign * total


@dataclass(frozen=True)
class KubeletShutdownSettings:
    """The three GNS settings of a KubeletConfiguration, in seconds (unset: 0)."""

    grace_period: float = 0.0
    critical_grace_period: float = 0.0
    by_priority: tuple[tuple[int, float], ...] = ()
    source: str = ""  # the files they came from, for messages

    @property
    def enabled(self) -> bool:
        """As the kubelet: the priority list replaces the two-group scheme when set."""
        if self.by_priority:
            return any(grace > 0 for _, grace in self.by_priority)
        return self.grace_period > 0

    def describe(self) -> str:
        if self.by_priority:
            pairs = ", ".join(f"{p}: {g:g}s" for p, g in self.by_priority)
            return f"{BY_POD_PRIORITY} [{pairs}]"
        return (
            f"{GRACE_PERIOD} {self.grace_period:g}s, "
            f"{CRITICAL_GRACE_PERIOD} {self.critical_grace_period:g}s"
        )


def _duration(doc: Mapping[str, Any], key: str, where: str) -> float | None:
    if key not in doc or doc[key] is None:
        return None
    value = doc[key]
    if not isinstance(value, str):
        raise MalformedKubeletConfig(f"{where}: {key}: {value!r} is not a duration string")
    try:
        seconds = parse_go_duration(value)
    except ValueError as e:
        raise MalformedKubeletConfig(f"{where}: {key}: {e}") from None
    if seconds < 0:
        raise MalformedKubeletConfig(f"{where}: {key}: {value!r} is negative")
    return seconds


def _by_priority(doc: Mapping[str, Any], where: str) -> tuple[tuple[int, float], ...] | None:
    raw = doc.get(BY_POD_PRIORITY)
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise MalformedKubeletConfig(f"{where}: {BY_POD_PRIORITY}: must be a list")
    out: list[tuple[int, float]] = []
    for i, item in enumerate(raw):
        field = f"{BY_POD_PRIORITY}[{i}]"
        if not isinstance(item, Mapping):
            raise MalformedKubeletConfig(f"{where}: {field}: must be a mapping")
        priority = item.get("priority", 0)
        grace = item.get("shutdownGracePeriodSeconds", 0)
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise MalformedKubeletConfig(f"{where}: {field}.priority: {priority!r} is no integer")
        if isinstance(grace, bool) or not isinstance(grace, int) or grace < 0:
            raise MalformedKubeletConfig(
                f"{where}: {field}.shutdownGracePeriodSeconds: {grace!r} is no count of seconds"
            )
        out.append((priority, float(grace)))
    return tuple(out)


def settings_from_documents(
    documents: Sequence[tuple[str, object]],
) -> KubeletShutdownSettings:
    """Merge the kubelet's config file and its drop-ins, in the order the kubelet applies them
    (later wins per field). Raises MalformedKubeletConfig naming the file and field."""
    grace, critical = 0.0, 0.0
    by_priority: tuple[tuple[int, float], ...] = ()
    for where, doc in documents:
        if doc is None:
            continue  # an empty file sets nothing
        if not isinstance(doc, Mapping):
            raise MalformedKubeletConfig(
                f"{where}: {GRACE_PERIOD}: cannot be read, the file is not a mapping"
            )
        if (value := _duration(doc, GRACE_PERIOD, where)) is not None:
            grace = value
        if (value := _duration(doc, CRITICAL_GRACE_PERIOD, where)) is not None:
            critical = value
        if (pairs := _by_priority(doc, where)) is not None:
            by_priority = pairs
    source = ", ".join(where for where, _ in documents)
    return KubeletShutdownSettings(grace, critical, by_priority, source)


def kubelet_lock(inhibitors: Sequence[InhibitorView]) -> InhibitorView | None:
    """The kubelet's delay lock on shutdown, if logind lists one."""
    for inh in inhibitors:
        if inh.who == KUBELET_WHO and inh.mode == "delay" and "shutdown" in inh.what.split(":"):
            return inh
    return None


@dataclass(frozen=True)
class Verdict:
    state: GnsState
    evidence: str  # one line: what the verdict rests on
    lock_pid: int | None = None  # the kubelet holding its delay lock, when one does


def decide(
    inhibitors: Sequence[InhibitorView] | None,
    settings: KubeletShutdownSettings | None,
    problem: str | None = None,
) -> Verdict:
    """`inhibitors`: None when logind could not be asked; `settings`: None when no kubelet
    configuration was found or it is malformed (`problem` says which)."""
    lock = kubelet_lock(inhibitors) if inhibitors is not None else None
    if lock is not None:
        evidence = f"the kubelet (pid {lock.pid}) holds a logind delay lock on shutdown"
        if settings is not None and settings.enabled:
            evidence += f"; {settings.describe()} in {settings.source}"
        return Verdict(GnsState.ON, evidence, lock.pid)
    if settings is not None:
        where = f"in {settings.source}" if settings.source else ""
        if settings.enabled:
            return Verdict(GnsState.ON, f"{settings.describe()} {where}".strip())
        return Verdict(GnsState.OFF, f"{settings.describe()} {where}".strip())
    if problem is not None:
        return Verdict(GnsState.UNKNOWN, problem)
    if inhibitors is None:
        return Verdict(GnsState.UNKNOWN, "neither logind nor the kubelet's configuration answer")
    return Verdict(GnsState.UNKNOWN, "no kubelet delay lock and no kubelet configuration found")


def event_message(verdict: Verdict) -> str:
    """What the Node's Event tells an operator: what GNS costs, and the fix."""
    if verdict.state is GnsState.ON:
        return (
            f"The kubelet's Graceful Node Shutdown is on ({verdict.evidence}). At a shutdown it "
            f"stops every pod below priority {SYSTEM_CRITICAL_PRIORITY} at once, without "
            "PodDisruptionBudgets or drain order, and cuts nodeagent's wait at its own "
            "shutdownGracePeriod: nodeagent's ordered drain is void. Fix: set "
            "shutdownGracePeriod: 0 (and no shutdownGracePeriodByPodPriority) in the "
            "KubeletConfiguration and restart the kubelet; nodeagent then drains in order and "
            "deletes what is left in the kubelet's order (shutdown.finalPhase)."
        )
    return f"The kubelet's Graceful Node Shutdown is off ({verdict.evidence})."
