"""Gates between nodes (``nodeMaintenance.gates``): the next reboot asked for is admitted to a
drain slot only while every configured gate is open.

Pure. The controllers' shell reads what a gate needs (Prometheus's ``/api/v1/alerts``, the pod
informer's pods) and hands the decision each gate's :class:`GateState`; a gate that cannot be
evaluated (Prometheus unreachable, hanging, answering garbage) or not read yet holds the fleet as
a closed one does, saying so. Gates hold only admissions of reboots asked for: never a drain
under way, a shutdown under way or an admin's maintenance.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from nodeagent.model.bodies import deleting, labels_of, mapping, metadata_of
from nodeagent.model.podstate import pod_terminal
from nodeagent.model.selectors import LabelSelector

__all__ = [
    "GATE_PODS_READY",
    "GATE_PROMETHEUS",
    "WAITING_FOR_GATE",
    "GateState",
    "GateStatus",
    "PodsReady",
    "alerts_gate",
    "holding",
    "pod_ready",
    "pods_ready_gate",
    "unread",
]

GATE_PROMETHEUS = "prometheus"
GATE_PODS_READY = "podsReady"
WAITING_FOR_GATE = "Waiting for gate"
"""How the drainMessage of a reboot held by a gate starts."""
_MAX_NAMED = 3
_MAX_REASON = 200


class GateStatus(Enum):
    OPEN = 1
    CLOSED = 0
    UNKNOWN = -1
    """It cannot be evaluated: it holds the fleet."""
    UNREAD = -2
    """Not read yet (the shell reads it once a reboot waits): it holds, with no warning."""


GATE_STATES = ("open", "closed", "unknown")
_STATES = {GateStatus.OPEN: "open", GateStatus.CLOSED: "closed", GateStatus.UNKNOWN: "unknown"}


@dataclass(frozen=True)
class GateState:
    gate: str
    status: GateStatus
    reason: str = ""
    """Why it is closed or cannot be evaluated (one line)."""

    @property
    def holds(self) -> bool:
        return self.status is not GateStatus.OPEN

    @property
    def message(self) -> str:
        """The drainMessage of a reboot it holds."""
        return f"{WAITING_FOR_GATE} {self.gate}: {self.reason}"

    @property
    def metric(self) -> str | None:
        """The state ``nodeagent_gate{gate,state}`` says 1 for (open, closed, unknown: cannot
        be evaluated); None: unread."""
        return None if self.status is GateStatus.UNREAD else _STATES[self.status]


def unread(gate: str) -> GateState:
    return GateState(gate, GateStatus.UNREAD, "not read yet")


def holding(states: Iterable[GateState]) -> GateState | None:
    """The first gate that holds the next admission (None: all open)."""
    return next((s for s in states if s.holds), None)


def one_line(text: str) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= _MAX_REASON else flat[: _MAX_REASON - 3] + "..."


def _named(names: Sequence[str]) -> str:
    shown = ", ".join(names[:_MAX_NAMED])
    more = len(names) - _MAX_NAMED
    return shown + (f" and {more} more" if more > 0 else "")


# -- prometheus ---------------------------------------------------------------------------------


def alerts_gate(
    body: object,
    alert_filter: re.Pattern[str] | None = None,
    *,
    filter_match_only: bool = False,
    firing_only: bool = False,
) -> GateState:
    """The gate from Prometheus's ``GET /api/v1/alerts`` answer (its JSON, parsed): closed while
    an alert counts, as kured counts them: with ``alert_filter`` the alerts whose alertname
    matches are ignored (``--alert-filter-regexp``), or, with ``filter_match_only``, only those
    count (``--alert-filter-match-only``); pending alerts count too unless ``firing_only``
    (``--alert-firing-only``). An answer not of that form cannot be evaluated."""
    if not isinstance(body, Mapping) or body.get("status") != "success":
        error = body.get("error") if isinstance(body, Mapping) else None
        why = f": {error}" if isinstance(error, str) and error else ""
        return GateState(
            GATE_PROMETHEUS, GateStatus.UNKNOWN, one_line(f"Prometheus answered no success{why}")
        )
    alerts = mapping(body, "data").get("alerts")
    if not isinstance(alerts, list):
        return GateState(
            GATE_PROMETHEUS, GateStatus.UNKNOWN, "Prometheus answered no data.alerts list"
        )
    counted: list[str] = []
    for alert in alerts:
        if not isinstance(alert, Mapping):
            return GateState(GATE_PROMETHEUS, GateStatus.UNKNOWN, "Prometheus answered garbage")
        name = str(mapping(alert, "labels").get("alertname") or "")
        state = alert.get("state")
        if state not in ("firing", "pending") or (firing_only and state != "firing"):
            continue
        if alert_filter is not None and (alert_filter.search(name) is not None) != (
            filter_match_only
        ):
            continue
        counted.append(name)
    if not counted:
        return GateState(GATE_PROMETHEUS, GateStatus.OPEN, "no alert counts")
    names = sorted(set(counted))
    return GateState(
        GATE_PROMETHEUS,
        GateStatus.CLOSED,
        one_line(
            f"{len(counted)} {'alert' if len(counted) == 1 else 'alerts'} active: {_named(names)}"
        ),
    )


# -- podsReady ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class PodsReady:
    """One ``podsReady`` entry: every pod of ``namespace`` that ``selector`` matches is Ready."""

    namespace: str
    selector: LabelSelector

    def matches(self, pod: Mapping[str, Any]) -> bool:
        return metadata_of(pod).get("namespace") == self.namespace and self.selector.matches(
            labels_of(pod)
        )


def pod_ready(pod: Mapping[str, Any]) -> bool:
    """Ready, and not on its way out."""
    if deleting(pod):
        return False  # on its way out: its workload is short of it
    for cond in mapping(pod, "status").get("conditions") or ():
        if isinstance(cond, Mapping) and cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return False


def pods_ready_gate(entries: Sequence[PodsReady], pods: Iterable[Mapping[str, Any]]) -> GateState:
    """Closed while a pod some entry matches is not Ready (a terminal pod is no workload's any
    more: not counted); open when every one is, or none matches."""
    not_ready: list[str] = []
    for pod in pods:
        if pod_terminal(pod) or not any(e.matches(pod) for e in entries):
            continue
        if not pod_ready(pod):
            meta = metadata_of(pod)
            not_ready.append(f"{meta.get('namespace')}/{meta.get('name')}")
    if not not_ready:
        return GateState(GATE_PODS_READY, GateStatus.OPEN, "every pod Ready")
    not_ready.sort()
    return GateState(
        GATE_PODS_READY,
        GateStatus.CLOSED,
        one_line(
            f"{len(not_ready)} {'pod' if len(not_ready) == 1 else 'pods'} not Ready: "
            f"{_named(not_ready)}"
        ),
    )
