"""What one NodeMaintenance decision reads, as the shell gathers it from its informers."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from nodeagent.model.bodies import (
    EvictionRequest,
    NodeMaintenance,
)
from nodeagent.model.draintargets.pods import PodInfo, PodInfoOf
from nodeagent.model.gates import GateState
from nodeagent.model.interceptors.requests import EvictionRequestView
from nodeagent.model.memo import Recall
from nodeagent.model.names import ZONE_LABEL
from nodeagent.model.shutdown_standing import DEFAULT_MAX_SHUTDOWN
from nodeagent.model.windows import ALWAYS, FINISH, Schedule

RequestViewOf = Callable[[Mapping[str, Any]], EvictionRequestView]
"""How a decision reads an EvictionRequest: :meth:`EvictionRequestView.from_obj`, or an
:class:`~nodeagent.model.memo.ObjectMemo` of it."""


@dataclass(frozen=True)
class Inputs:
    """What one reconcile of ``maintenance`` looks at.

    ``maintenances`` holds at least every maintenance connected to this one through shared
    nodes (it may hold all of them), ``maintenance`` included. ``nodes`` holds every node.
    ``pods`` holds the pods bound to each node of those maintenances (a missing node has none).
    ``eviction_requests`` maps pod UID (the request's name) to the EvictionRequest, for at
    least the pods on those nodes and the requests labelled with one of them.
    """

    maintenance: NodeMaintenance
    maintenances: Sequence[NodeMaintenance]
    nodes: Mapping[str, Mapping[str, Any]]
    pods: Mapping[str, Sequence[Mapping[str, Any]]]
    eviction_requests: Mapping[str, EvictionRequest]
    now: datetime
    max_draining: int | None = None
    """How many nodes may drain at once (None: no limit). With a limit, ``maintenances``
    holds every maintenance in Drain too, and the other fields cover their nodes."""
    zone_limit: int | None = None
    """At most this many nodes of one zone drain at once (with ``max_draining``)."""
    zone_label: str = ZONE_LABEL
    """The node label that names its zone."""
    max_shutdown: float = DEFAULT_MAX_SHUTDOWN
    """Seconds from its creation a shutdown maintenance counts at most (drain slots)."""
    cordon_while_waiting: bool = False
    """Cordon a node in Drain while it waits for a drain slot."""
    admitting: frozenset[str] = frozenset()
    """Nodes admitted to drain whose admission the caches do not show yet."""
    drain_deadline: float | None = None
    """Seconds from the start of Drain, for maintenances without spec.drainDeadlineSeconds."""
    deadline_escalation: str = "None"
    """For maintenances without spec.drainDeadlineEscalation (see ESCALATIONS)."""
    windows: Schedule = ALWAYS
    """When reboots asked for may be admitted to a drain slot (``rebootWindows``; with a
    limit: the shell sets one whenever windows or gates are configured)."""
    window_end: str = FINISH
    """What a reboot's drain under way does when the windows close (windows.FINISH, STOP)."""
    gates: tuple[GateState, ...] = ()
    """The state of each configured gate, as the shell last read it."""
    pod_info: PodInfoOf = PodInfo.from_pod
    """A pod's PodInfo: the controller passes a memo of it (PodInfoMemo)."""
    request_view: RequestViewOf = EvictionRequestView.from_obj
    """An EvictionRequest as the decision reads it: the controller passes a memo of it."""
    recall: Recall | None = None
    """What decisions derive per node (its pods as the drain reads them, what their requests
    call for) and per maintenance (its selected nodes, its stored progress; group
    :func:`recall_group`), kept from one decision to the next: the controller passes one, so a
    decision derives again only what changed. None: derived afresh."""
