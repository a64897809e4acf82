"""The Table columns of `lifecycle.k8s.io/v1alpha1` for `kubectl get`, as kube-apiserver v1.37's
printers (pkg/printers/internalversion: printEvictionRequest, printEviction) fill them; the
server prints wide, so every row has the Eviction's two wide cells. Column descriptions are the
first sentence of the types' documentation."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from nodeagent_testbed.sim.tables import AGE_DESC, NAME_DESC, human_duration, parse_time

__all__ = ["PRINTERS"]

Obj = dict[str, Any]
Column = dict[str, Any]
Printer = Callable[[Obj, float], list[Any]]


def _col(name: str, desc: str, priority: int = 0, fmt: str = "") -> Column:
    return {
        "name": name,
        "type": "string",
        "format": fmt,
        "description": desc,
        "priority": priority,
    }


_TARGET = "target contains a reference to an object (e.g. a pod) that should be evicted."
_CONDITIONS = "conditions contain information about the eviction request."
_REQUEST_COLUMNS = (
    _col("Name", NAME_DESC, fmt="name"),
    _col("Target", _TARGET),
    _col("Target Type", _TARGET),
    _col("Status", _CONDITIONS),
    _col(
        "Requester",
        "requester allows you to identify the entity, that requested the eviction of the target.",
    ),
    _col("Intent", "intent specifies the action that should be taken for the specified target."),
    _col("Age", AGE_DESC),
)
_EVICTION_COLUMNS = (
    *_REQUEST_COLUMNS[:4],
    _col(
        "Active Responder",
        "state specifies a state that is assigned by the evictionrequest-controller.",
    ),
    _col(
        "Responder Status",
        "ResponderStatus represents the last observed status of the eviction process of the "
        "responder.",
    ),
    _col(
        "Responder Expected Finish",
        "expectedCompletionTime is the time at which the eviction process step is expected to "
        "end for the responder.",
    ),
    _col(
        "Requesters",
        "requesters allow you to identify the entities, that requested the eviction of the target.",
    ),
    _col("Age", AGE_DESC),
    _col(
        "Responder Heartbeat",
        "heartbeatTime is the last time at which the eviction process was reported to be in "
        "progress by the responder.",
        priority=1,
    ),
    _col(
        "Responder Status Message",
        "message provides human-readable details about the state of the responder and the "
        "eviction process.",
        priority=1,
    ),
)
_FINAL = ("Canceled", "Interrupted", "Completed")


def _part(o: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = o.get(key)
    return value if isinstance(value, Mapping) else {}


def _since(value: Any, now: float) -> str:
    t = parse_time(value)
    return "<unknown>" if t is None else human_duration(now - t)


def _target(o: Obj) -> list[str]:
    pod = _part(_part(o, "spec"), "target").get("pod")
    if isinstance(pod, Mapping):
        return [str(pod.get("name", "")), "Pod"]
    return ["<unset>", "<unset>"]


def _status(status: Mapping[str, Any]) -> str:
    """resolveEvictionStatusConditions."""
    text = "Progressing" if (status.get("observedGeneration") or 0) > 0 else "Pending"
    found = {c.get("type"): c for c in status.get("conditions") or [] if isinstance(c, Mapping)}
    for type_ in ("Failed", "TargetEvicted"):  # TargetEvicted wins
        c = found.get(type_)
        if c is not None and c.get("status") == "True":
            text = f"{type_} ({c.get('reason', '')})"
    return text


def _request(o: Obj, now: float) -> list[Any]:
    spec = _part(o, "spec")
    return [
        o["metadata"].get("name", ""),
        *_target(o),
        _status(_part(o, "status")),
        str(spec.get("requester", "")),
        str(spec.get("intent", "")),
        _since(o["metadata"].get("creationTimestamp"), now),
    ]


def _eviction(o: Obj, now: float) -> list[Any]:
    status = _part(o, "status")
    targets = [t for t in status.get("targetResponders") or [] if isinstance(t, Mapping)]
    taken = [t for t in targets if t.get("state") in (*_FINAL, "Active")]
    active = next((t for t in reversed(taken) if t.get("state") == "Active"), None)
    shown = active or next((t for t in reversed(taken) if t.get("state") in _FINAL), None)
    name = str(shown.get("name")) if shown is not None else "<unset>"
    cells = [
        o["metadata"].get("name", ""),
        *_target(o),
        _status(status),
        f"{name} ({len(taken)}/{len(targets)})",
    ]
    state, finish, heartbeat, message = "<unset>", "<unknown>", "<unset>", "<unset>"
    entries = [r for r in status.get("responders") or [] if isinstance(r, Mapping)]
    entry = next((r for r in entries if shown is not None and r.get("name") == name), None)
    if shown is not None and entry is not None:
        state = str(shown.get("state"))
        if state == "Active" and entry.get("startTime"):
            state = f"Started ({_since(entry['startTime'], now)} ago)"
            expected = parse_time(entry.get("expectedCompletionTime"))
            if expected is not None:
                left = human_duration(abs(expected - now))
                finish = f"in {left}" if expected > now else f"{left} ago"
        elif state in _FINAL:
            finish = "-"
            if state == "Completed" and entry.get("completionTime"):
                state = f"Completed ({_since(entry['completionTime'], now)} ago)"
        if entry.get("heartbeatTime"):
            heartbeat = f"{_since(entry['heartbeatTime'], now)} ago"
        message = str(entry.get("message") or "").strip() or "<unset>"
    requesters = [r for r in status.get("requesters") or [] if isinstance(r, Mapping)]
    wanting = sorted(str(r.get("name")) for r in requesters if r.get("intent") != "Withdrawn")
    shown_requesters = "<withdrawn>" if requesters else "<none>"
    if wanting:
        more = f" + {len(wanting) - 1} more..." if len(wanting) > 1 else ""
        shown_requesters = wanting[0] + more
    age = _since(o["metadata"].get("creationTimestamp"), now)
    return [*cells, state, finish, shown_requesters, age, heartbeat, message]


PRINTERS: dict[tuple[str, str], tuple[tuple[Column, ...], Printer]] = {
    ("lifecycle.k8s.io", "evictionrequests"): (_REQUEST_COLUMNS, _request),
    ("lifecycle.k8s.io", "evictions"): (_EVICTION_COLUMNS, _eviction),
}
