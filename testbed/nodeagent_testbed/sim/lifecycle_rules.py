"""The Eviction status rules kube-apiserver v1.37 enforces (`pkg/apis/lifecycle/validation`),
in Python: which status updates of a `lifecycle.k8s.io/v1alpha1` Eviction the server refuses.
The simulated cluster is to serve the upstream API with them; the property tests of
`nodeagent.model.lifecycle` hold every write of the controller to them, and
tests/integration/upstream runs the same cases on the real server to keep them true.

Covered: final conditions never reverted; `targetResponders` keys and length fixed once set;
`responders` with the same keys; the responders' state machine (one Active at a time, in the
server's order, each ending Interrupted, Canceled or Completed); an Active responder kept
Active within 20 minutes (less 30 s skew) of its last heartbeat unless it completed or the
Eviction ended; Completed only with a `completionTime`; reserved priorities; `startTime`
required for an Active responder and set to the present; a finished responder's entry
immutable. Not covered: field formats, list sizes, times near the present other than
`startTime`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from nodeagent_testbed.sim.lifecycle_types import (
    IMPERATIVE_RESPONDER,
    IMPERATIVE_RESPONDER_PRIORITY,
    parse_time,
)

__all__ = ["HEARTBEAT_DEADLINE", "TIME_SKEW", "refusals", "server_order"]

HEARTBEAT_DEADLINE = timedelta(minutes=20)
TIME_SKEW = timedelta(seconds=30)
_FINAL = ("Interrupted", "Canceled", "Completed")


def server_order(targets: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """`targetResponders` as the server orders them, the sim's own (not the agent's
    `sort_responders`): highest priority first; a tie by the name's domain compared label by
    label from its top one (`io` before `acme`), then the part after the slash."""

    def rank(t: Mapping[str, Any]) -> tuple[int, list[str], str]:
        priority = t.get("priority")
        domain, _, rest = str(t.get("name", "")).partition("/")
        labels = domain.split(".")
        labels.reverse()
        return (-priority if isinstance(priority, int) else 1, labels, rest)

    return sorted(targets, key=rank)


def refusals(old: Mapping[str, Any], new: Mapping[str, Any], now: datetime) -> list[str]:
    """The server's reasons to refuse replacing Eviction status `old` by `new` at `now`."""
    out: list[str] = []
    evicted, failed = _final_conditions(old, new, out)
    targets = [t for t in _items(new, "targetResponders") if isinstance(t, Mapping)]
    old_targets = [t for t in _items(old, "targetResponders") if isinstance(t, Mapping)]
    if old_targets and sorted(_names(targets)) != sorted(_names(old_targets)):
        return [*out, "status.targetResponders: must preserve the same length and the same keys"]
    responders = {
        str(r.get("name")): r for r in _items(new, "responders") if isinstance(r, Mapping)
    }
    if sorted(responders) != sorted(_names(targets)):
        return [*out, "status.responders: must contain the same keys as status.targetResponders"]
    if targets:
        out += _states(targets, old_targets, responders, evicted or failed, now)
    out += _responder_entries(old, responders, targets, now)
    return out


def _final_conditions(
    old: Mapping[str, Any], new: Mapping[str, Any], out: list[str]
) -> tuple[bool, bool]:
    final = []
    for type_ in ("TargetEvicted", "Failed"):
        was, now_ = _condition(old, type_), _condition(new, type_)
        if was is not None and was.get("status") == "True":
            same = now_ is not None and now_.get("status") == "True"
            if not same or now_ is None or was.get("reason") != now_.get("reason"):
                out.append(f"status.conditions: {type_} condition status cannot be reverted")
            final.append(True)
        else:
            final.append(now_ is not None and now_.get("status") == "True")
    return final[0], final[1]


def _states(
    targets: Sequence[Mapping[str, Any]],
    old_targets: Sequence[Mapping[str, Any]],
    responders: Mapping[str, Mapping[str, Any]],
    final: bool,
    now: datetime,
) -> list[str]:
    order = server_order(targets)
    old_order = server_order(old_targets)
    last_active = next((i for i, t in enumerate(old_order) if t.get("state") == "Active"), -1)
    never_active = not old_order
    active_changed = last_active >= 0 and order[last_active].get("state") != "Active"
    all_done = final or (bool(old_order) and old_order[-1].get("state") in _FINAL)
    out = []
    for i, t in enumerate(order):
        if i < last_active or (old_order and last_active < 0 and all_done):
            expected = {old_order[i].get("state")}
        elif i == last_active:
            expected = set(_FINAL) if active_changed or final else {"Active"}
        elif (i == 0 and never_active) or (i == last_active + 1 and active_changed):
            expected = {"Inactive"} if final else {"Active"}
        else:
            expected = {"Inactive"}
        out += _target(t, responders.get(str(t.get("name"))), expected, final, now)
    return out


def _target(
    t: Mapping[str, Any],
    progress: Mapping[str, Any] | None,
    expected: set[Any],
    final: bool,
    now: datetime,
) -> list[str]:
    name, state, priority = t.get("name"), t.get("state"), t.get("priority")
    where = f"status.targetResponders[{name}]"
    if progress is None:
        return [f"{where}: has to be tracked in status.responders first"]
    out = []
    if name == IMPERATIVE_RESPONDER and priority != IMPERATIVE_RESPONDER_PRIORITY:
        out.append(f"{where}.priority: core k8s responder is expected to have priority 100")
    elif name != IMPERATIVE_RESPONDER and isinstance(priority, int) and 0 <= priority < 1000:
        out.append(f"{where}.priority: priorities 0-999 are reserved")
    if state not in expected:
        return [*out, f"{where}.state: {state} must be one of {sorted(map(str, expected))}"]
    start = parse_time(progress.get("startTime"))
    if state != "Active" and start and not progress.get("completionTime") and not final:
        beat = parse_time(progress.get("heartbeatTime")) or start
        if now < beat + HEARTBEAT_DEADLINE - TIME_SKEW:
            out.append(f"{where}.state: must stay Active because the responder is in progress")
    if state == "Completed" and not progress.get("completionTime"):
        out.append(f"{where}.state: cannot become Completed without completionTime")
    return out


def _responder_entries(
    old: Mapping[str, Any],
    responders: Mapping[str, Mapping[str, Any]],
    targets: Sequence[Mapping[str, Any]],
    now: datetime,
) -> list[str]:
    states = {str(t.get("name")): t.get("state") for t in targets}
    before = {str(r.get("name")): r for r in _items(old, "responders") if isinstance(r, Mapping)}
    out = []
    for name, r in responders.items():
        was = before.get(name)
        where = f"status.responders[{name}]"
        if was is not None and dict(was) != dict(r) and states.get(name) != "Active":
            out.append(f"{where}: field is immutable")
            continue
        start = r.get("startTime")
        if start is None and states.get(name) == "Active":
            out.append(f"{where}.startTime: is required for an active responder")
        elif start is not None and (was or {}).get("startTime") != start:
            when = parse_time(start)
            if when is None or abs(when - now) >= TIME_SKEW:
                out.append(f"{where}.startTime: must be set to the present time")
    return out


def _items(obj: Mapping[str, Any], key: str) -> list[Any]:
    """`obj[key]` if that is a list, else none."""
    value = obj.get(key)
    return value if isinstance(value, list) else []


def _condition(status: Mapping[str, Any], type_: str) -> Mapping[str, Any] | None:
    """The first condition of `type_` in `status.conditions`."""
    found = (c for c in _items(status, "conditions") if isinstance(c, Mapping))
    return next((c for c in found if c.get("type") == type_), None)


def _names(entries: Sequence[Mapping[str, Any]]) -> list[str]:
    return [str(e.get("name")) for e in entries]
