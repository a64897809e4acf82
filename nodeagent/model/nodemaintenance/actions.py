"""What a NodeMaintenance decision asks the shell to do (see the package docstring for the
order in which it applies them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nodeagent.model.bodies import Event
from nodeagent.model.maintenance import Stage, Validity
from nodeagent.model.names import CORDONED_BY_ANNOTATION


@dataclass(frozen=True)
class NodePatch:
    """Set ``spec.unschedulable`` (None: leave it) and the cordoned-by annotation (None:
    remove it) on ``node``, if it is still at ``resource_version``."""

    node: str
    resource_version: str
    unschedulable: bool | None
    cordoned_by: str | None

    def to_patch(self) -> dict[str, Any]:
        """A JSON merge patch with the resourceVersion as precondition."""
        patch: dict[str, Any] = {
            "metadata": {
                "resourceVersion": self.resource_version,
                "annotations": {CORDONED_BY_ANNOTATION: self.cordoned_by},
            }
        }
        if self.unschedulable is not None:
            patch["spec"] = {"unschedulable": True if self.unschedulable else None}
        return patch


@dataclass(frozen=True)
class EvictionRequestCreate:
    namespace: str
    body: dict[str, Any]


@dataclass(frozen=True)
class RequesterPatch:
    """Replace ``spec.requesters`` of an EvictionRequest still at ``resource_version``."""

    namespace: str
    name: str
    resource_version: str
    requesters: tuple[str, ...]

    def to_patch(self) -> dict[str, Any]:
        return {
            "metadata": {"resourceVersion": self.resource_version},
            "spec": {"requesters": [{"name": r} for r in self.requesters]},
        }


@dataclass(frozen=True)
class EvictionRequestDelete:
    """Delete an EvictionRequest (preconditions: its uid and resourceVersion). ``why``:
    ``evicted``, ``canceled``, or ``recreate`` (a fresh one is created right after: it was
    canceled but the pod is targeted again)."""

    namespace: str
    name: str
    uid: str
    resource_version: str
    why: str


@dataclass(frozen=True)
class PodDelete:
    """Delete a pod past its disruption budget (the drain deadline's escalation), with its
    own grace period; precondition: its uid."""

    namespace: str
    name: str
    uid: str


@dataclass(frozen=True)
class StatusUpdate:
    """A new status for another maintenance in Drain (the shared drain resolution), written if
    that maintenance is still at ``resource_version``, with the events it is worth."""

    name: str
    resource_version: str
    status: dict[str, Any]
    events: tuple[Event, ...]


@dataclass(frozen=True)
class Actions:
    stage: Stage | None
    validity: Validity
    add_finalizer: bool = False
    cordon: tuple[NodePatch, ...] = ()
    status: dict[str, Any] | None = None
    """The whole new status, or None when it does not change."""
    events: tuple[Event, ...] = ()
    neighbours: tuple[StatusUpdate, ...] = ()
    """Drain status of the other maintenances of the same resolution (see StatusUpdate)."""
    delete_evictions: tuple[EvictionRequestDelete, ...] = ()
    create_evictions: tuple[EvictionRequestCreate, ...] = ()
    requester_patches: tuple[RequesterPatch, ...] = ()
    uncordon: tuple[NodePatch, ...] = ()
    remove_finalizer: bool = False
    admitted: frozenset[str] = frozenset()
    """Nodes this decision lets start draining under the limit (see Drain slots)."""
    requeue_after: float | None = None
    """Decide again after this many seconds (the drain deadline), unless something else
    asks first."""
    delete_pods: tuple[PodDelete, ...] = ()
    """The drain deadline passed and its escalation is DeletePods: the targeted pods left."""
    gates_wanted: bool = False
    """This maintenance is a reboot asked for that waits for its admission inside the reboot
    windows: the shell reads the gates (Prometheus) while one does, and only then."""

    @property
    def idle(self) -> bool:
        """Nothing to do."""
        return not (
            self.add_finalizer
            or self.cordon
            or self.status is not None
            or self.events
            or self.neighbours
            or self.delete_evictions
            or self.create_evictions
            or self.requester_patches
            or self.uncordon
            or self.remove_finalizer
            or self.delete_pods
        )


# --- the decision ------------------------------------------------------------------------------
