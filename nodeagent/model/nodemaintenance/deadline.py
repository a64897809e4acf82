"""The drain deadline: ``spec.drainDeadlineSeconds``, else ``Inputs.drain_deadline``, counted
from the start of the Drain stage. Once it passes with pods left, condition
``DrainDeadlineExceeded=True`` names the pods left and what refuses their eviction (the
PodDisruptionBudget), and a Warning Event says so once; with escalation DeletePods the pods
left are then deleted (:func:`~nodeagent.model.nodemaintenance.evictions.escalation`). Before it
passes ``Actions.requeue_after`` asks to decide again when it does."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from nodeagent.model.bodies import (
    Event,
    as_map,
    items,
    mapping,
    set_condition,
)
from nodeagent.model.draintargets.results import MaintenanceDrain
from nodeagent.model.interceptors.requests import EvictionRequestView
from nodeagent.model.maintenance import (
    Stage,
)
from nodeagent.model.nodemaintenance.context import Context
from nodeagent.model.nodemaintenance.requests import refusal
from nodeagent.model.times import format_time, parse_time

DEADLINE_CONDITION = "DrainDeadlineExceeded"
_MAX_NAMED_PODS = 5


def deadline_seconds(nm: Mapping[str, Any], default: float | None) -> float | None:
    """``spec.drainDeadlineSeconds``, else ``default`` (None: no deadline)."""
    raw = mapping(nm, "spec").get("drainDeadlineSeconds")
    if isinstance(raw, int) and not isinstance(raw, bool) and raw > 0:
        return float(raw)
    return default


def _deadline_due(status: Mapping[str, Any], seconds: float) -> datetime | None:
    """When the drain deadline passes: ``seconds`` after the Drain stage started (None: its
    start is not recorded yet)."""
    started = next(
        (
            parse_time(as_map(s).get("startTimestamp"))
            for s in items(status, "stageStatuses")
            if as_map(s).get("name") == Stage.DRAIN.value
        ),
        None,
    )
    return None if started is None else started + timedelta(seconds=seconds)


def _blockers(drain: MaintenanceDrain, eviction_requests: Mapping[str, EvictionRequestView]) -> str:
    """The pods left that the drain targets, each with what refuses its eviction if anything
    does, then what the other nodes wait for."""
    refs = sorted(
        {ref for ns in drain.nodes for ref in ns.targeted_pods},
        key=lambda r: (r.namespace, r.name, r.uid),
    )
    parts: list[str] = []
    for ref in refs[:_MAX_NAMED_PODS]:
        er = eviction_requests.get(ref.uid)
        cause = refusal(er) if er is not None else None
        why = f" (eviction refused by {cause})" if cause is not None else ""
        parts.append(f"pod {ref.namespace}/{ref.name}{why}")
    if len(refs) > _MAX_NAMED_PODS:
        parts.append(f"{len(refs) - _MAX_NAMED_PODS} more targeted pods")
    waiting = [ns for ns in drain.nodes if not ns.drained and not ns.targeted_pods]
    if waiting:
        more = f" (and {len(waiting) - 1} more nodes)" if len(waiting) > 1 else ""
        parts.append(f"node {waiting[0].node}: {waiting[0].drain_message}{more}")
    return "; ".join(parts) or "pods left"


def deadline_status(
    status: Mapping[str, Any],
    conditions: list[dict[str, Any]],
    drain: MaintenanceDrain,
    seconds: float | None,
    now: datetime,
    observed: int | None,
    eviction_requests: Mapping[str, EvictionRequestView],
) -> list[Event]:
    """The DrainDeadlineExceeded condition; a Warning Event when it turns True."""
    old = next((c for c in conditions if c.get("type") == DEADLINE_CONDITION), None)
    if seconds is None:
        conditions[:] = [c for c in conditions if c.get("type") != DEADLINE_CONDITION]
        return []
    due = _deadline_due(status, seconds)
    if due is None:
        return []  # decided once the maintenance's own decision recorded the start of Drain
    if drain.drained:
        if old is None or old.get("status") != "True":  # once passed, it stays passed
            message = f"Drained before the deadline ({format_time(due)})"
            conditions[:] = set_condition(
                conditions, DEADLINE_CONDITION, "False", "Drained", message, now, observed
            )
        return []
    if now < due:
        message = f"The drain deadline is {format_time(due)} ({seconds:g}s after Drain started)"
        conditions[:] = set_condition(
            conditions, DEADLINE_CONDITION, "False", "WithinDeadline", message, now, observed
        )
        return []
    message = (
        f"The drain deadline ({seconds:g}s) passed at {format_time(due)}; still blocking: "
        + _blockers(drain, eviction_requests)
    )
    conditions[:] = set_condition(
        conditions, DEADLINE_CONDITION, "True", "DeadlineExceeded", message, now, observed
    )
    if old is None or old.get("status") != "True":
        return [Event("Warning", DEADLINE_CONDITION, message)]
    return []


def deadline_requeue(
    ctx: Context, status: Mapping[str, Any] | None, drain: MaintenanceDrain | None
) -> float | None:
    """Seconds until this maintenance's drain deadline passes, while it is ahead."""
    seconds = deadline_seconds(ctx.nm, ctx.inp.drain_deadline)
    if ctx.act_stage != Stage.DRAIN or drain is None or drain.drained or seconds is None:
        return None
    due = _deadline_due(status if status is not None else mapping(ctx.nm, "status"), seconds)
    if due is None:
        return None
    left = (due - ctx.inp.now).total_seconds()
    return left if left > 0 else None
