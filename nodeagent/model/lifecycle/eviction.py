"""How one pod's Eviction moves on (the evictionrequest-controller of `lifecycle.k8s.io`).

Every EvictionRequest names a target pod (by name and UID) and a requester with an intent. All
requests of one target share one Eviction, which the controller makes, owns through the
requests (the garbage collector removes it with the last of them) and moves on: its
responders, highest priority first, get the Active state one at a time; each ends Completed
(it reported `completionTime`), Interrupted (its heartbeat lapsed, or the pod ended and
`GRACEFUL_COMPLETION_DELAY` passed before it reported) or Canceled (every
requester withdrew). The Eviction ends when the pod is gone or terminal (`TargetEvicted`), or
with `Failed` when no responder is left or no requester wants the eviction any more. Each
request gets the Eviction's two conditions copied into its status.

The server's validation holds the same state machine (tests/integration/upstream pins it): it
refuses a responder moved before the one ahead of it is done, an Active responder interrupted
within 20 minutes of its last heartbeat, a final condition reverted. So an Eviction that ended
unsuccessfully (canceled, or no responder evicted the pod) cannot start over: a new Eviction
intent after it gets the next Eviction (:mod:`.succession`), and the first stays beside it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from nodeagent.model.bodies import (
    Obj,
    condition,
    deleting,
    generation,
    items,
    mapping,
    metadata_of,
    set_condition,
)
from nodeagent.model.lifecycle.evictionplan import EvictionPlan, RequestStatus, StatusWrite, Target
from nodeagent.model.lifecycle.ownership import (
    EVICTIONS_API_VERSION,
    collected_with_pod,
    metadata_patch,
    owners,
    role_labels,
)
from nodeagent.model.lifecycle.responders import Responder, pod_responders, sort_responders
from nodeagent.model.lifecycle.succession import (
    FAILED,
    TARGET_EVICTED,
    adopt,
    final,
    new_intent,
    next_name,
    target_index,
)
from nodeagent.model.times import format_time, parse_time

__all__ = [
    "COMPLETION_GRACE",
    "EVICTIONS_API_VERSION",
    "FAILED",
    "GRACEFUL_COMPLETION_DELAY",
    "SERVER_HEARTBEAT_DEADLINE",
    "TARGET_EVICTED",
    "EvictionPlan",
    "RequestStatus",
    "StatusWrite",
    "Target",
    "decide",
    "target_index",
]

SERVER_HEARTBEAT_DEADLINE = timedelta(minutes=20)
"""The server refuses to move an Active responder on sooner (less 30 s of clock skew)."""
COMPLETION_GRACE = timedelta(seconds=10)
"""How long the last responder's completion waits for the pod to be seen terminating or gone
before the Eviction fails with no responder left."""

GRACEFUL_COMPLETION_DELAY = timedelta(seconds=5)
"""Upstream's GracefulCompletionDelay: the pod gone or terminal while the Active responder has
not reported `completionTime`, the Eviction waits this long after the pod's deletion for it
to; then the responder is Interrupted and the Eviction ends."""
_ENDED = {
    "PodDeleted": "Target pod has been deleted.",
    "PodTerminal": "Pod has reached terminal state.",
}

Intent = Literal["Eviction", "Withdrawn"]


@dataclass(frozen=True)
class _Pod:
    """What the decision needs of the target pod."""

    gone: str | None  # PodDeleted or PodTerminal, once it is
    terminating: bool
    obj: Mapping[str, Any] | None = field(default=None, compare=False)
    deleted_at: datetime | None = None  # its deletionTimestamp, or when it was seen gone
    ours: Sequence[Responder] = ()


def decide(
    target: Target,
    requests: Sequence[Mapping[str, Any]],
    evictions: Sequence[Mapping[str, Any]],
    pod: Mapping[str, Any] | None,
    now: datetime,
    heartbeat_deadline: timedelta = SERVER_HEARTBEAT_DEADLINE,
    responders: Sequence[Responder] = (),
    gone_at: datetime | None = None,
    siblings: Sequence[Mapping[str, Any]] = (),
) -> EvictionPlan:
    """The writes that move `target`'s Eviction on. `requests` and `evictions` are those of the
    target's UID; `pod` the pod of its name, whatever its UID; `responders` nodeagent's
    responders of the pod, which a new Eviction lists with the pod's own; `gone_at` when the
    target was seen deleted, if it was; `siblings` the namespace's Evictions of the pod's name
    (whatever their UID: the next one's name counts on from theirs)."""
    intents = _intents(requests)
    ours, duplicates = adopt(evictions)
    invalid = tuple(_invalid(e, now) for e in duplicates)
    if collected_with_pod(target.uid, requests, pod, ours):
        # as for our CRD: the garbage collector deletes the requests and the Eviction now, and
        # nobody reads what would be made or written (on the real server mostly a 404 anyway)
        return EvictionPlan(invalid=invalid)
    if ours is None or _succeeded_by_next(mapping(ours, "status"), intents):
        if "Eviction" not in intents.values():
            return EvictionPlan(invalid=invalid)
        if (why := _invalid_target(target, pod)) is not None:
            return EvictionPlan(invalid=invalid, requests=_refused_requests(requests, why, now))
        name = next_name(target.name, (*siblings, *evictions))
        create = _new_eviction(
            target, name, requests, intents, _pod_state(target, pod, responders, gone_at)
        )
        return EvictionPlan(create=create, invalid=invalid)
    md = metadata_of(ours)
    status = mapping(ours, "status")
    deadline = max(heartbeat_deadline, SERVER_HEARTBEAT_DEADLINE)
    new_status, requeue = _next_status(
        status, intents, _pod_state(target, pod, responders, gone_at), now, deadline
    )
    new_status["observedGeneration"] = generation(ours) or 1
    write = None
    if _differs(new_status, status):
        write = StatusWrite(str(md["name"]), str(md.get("resourceVersion", "")), new_status)
    return EvictionPlan(
        metadata=metadata_patch(ours, requests, new_status, _node(target, pod)),
        status=write,
        invalid=invalid,
        requests=_request_statuses(requests, new_status),
        requeue_after=requeue,
    )


# -- requests and the Eviction they share ------------------------------------------------------


def _intents(requests: Sequence[Mapping[str, Any]]) -> dict[str, Intent]:
    """Each requester's intent; a request being deleted is withdrawn, and one requester with
    several requests wants the eviction if any of them does."""
    out: dict[str, Intent] = {}
    for r in requests:
        spec = mapping(r, "spec")
        name = spec.get("requester")
        if not isinstance(name, str):
            continue
        intent: Intent = "Eviction" if spec.get("intent") == "Eviction" else "Withdrawn"
        if deleting(r):
            intent = "Withdrawn"
        if out.get(name) != "Eviction":
            out[name] = intent
    return out


def _succeeded_by_next(status: Mapping[str, Any], intents: Mapping[str, Intent]) -> bool:
    """Whether the target's Eviction ended without evicting the pod and a requester asked
    again since (the conditions a new Eviction intent resets, in the API's words)."""
    evicted = condition(status, TARGET_EVICTED)
    succeeded = evicted is not None and evicted.get("status") == "True"
    return final(status) and not succeeded and new_intent(status, intents)


def _invalid(eviction: Mapping[str, Any], now: datetime) -> StatusWrite:
    """Refused with the pair, as upstream refuses a duplicate."""
    message = "Active Eviction already exists for the same target."
    conditions = items(mapping(eviction, "status"), "conditions")
    conditions = set_condition(conditions, FAILED, "True", "EvictionInvalid", message, now)
    conditions = set_condition(conditions, TARGET_EVICTED, "False", "EvictionFailed", "", now)
    md = metadata_of(eviction)
    # the server refuses a final condition beside an Active responder
    responders = [
        {**t, "state": "Canceled"} if t.get("state") == "Active" else dict(t)
        for t in items(mapping(eviction, "status"), "targetResponders")
    ]
    status = {
        **mapping(eviction, "status"),
        **({"targetResponders": responders} if responders else {}),
        "conditions": conditions,
        "observedGeneration": generation(eviction) or 1,
    }
    return StatusWrite(_name(eviction), str(md.get("resourceVersion", "")), status)


def _node(target: Target, pod: Mapping[str, Any] | None) -> str | None:
    """The target's node, for the label that lets a node agent watch its node's Evictions."""
    if pod is None or metadata_of(pod).get("uid") != target.uid:
        return None
    node = mapping(pod, "spec").get("nodeName")
    return node if isinstance(node, str) and node else None


def _new_eviction(
    target: Target,
    name: str,
    requests: Sequence[Mapping[str, Any]],
    intents: Mapping[str, Intent],
    pod: _Pod,
) -> Obj:
    """Labelled with the responders its first status will list too (saves a metadata patch
    per Eviction; the patch still adds any that differ by then)."""
    responders = [r.name for r in pod_responders(pod.obj, pod.ours)]
    node = _node(target, pod.obj)
    return {
        "apiVersion": EVICTIONS_API_VERSION,
        "kind": "Eviction",
        "metadata": {
            # purely informative upstream; its number makes a second create of the same
            # Eviction a conflict
            "name": name,
            "namespace": target.namespace,
            "labels": role_labels(intents, responders, node),
            "ownerReferences": owners((), requests),
        },
        "spec": {"target": {"pod": {"name": target.name, "uid": target.uid}}},
    }


def _invalid_target(target: Target, pod: Mapping[str, Any] | None) -> str | None:
    """Why no Eviction is made for the requests of `target`: its pod is not there (before any
    Eviction of it; once one exists, the pod gone is its end: PodDeleted)."""
    if pod is None:
        return "Target pod not found."
    uid = metadata_of(pod).get("uid")
    if uid != target.uid:
        return f"Target pod UID mismatch: expected {target.uid}, got {uid}."
    return None


def _refused_requests(
    requests: Sequence[Mapping[str, Any]], why: str, now: datetime
) -> tuple[RequestStatus, ...]:
    """Each live request refused as upstream refuses it (`Failed=True/EvictionInvalid` with
    `TargetEvicted=False/EvictionFailed`), on the request alone: no Eviction is made."""
    out = []
    for r in requests:
        if deleting(r):
            continue
        status = mapping(r, "status")
        conditions = items(status, "conditions")
        conditions = set_condition(conditions, FAILED, "True", "EvictionInvalid", why, now)
        conditions = set_condition(conditions, TARGET_EVICTED, "False", "EvictionFailed", "", now)
        want = {"conditions": conditions, "observedGeneration": generation(r) or 1}
        if _differs(want, status):
            out.append(RequestStatus(_name(r), want))
    return tuple(out)


def _request_statuses(
    requests: Sequence[Mapping[str, Any]], eviction_status: Mapping[str, Any]
) -> tuple[RequestStatus, ...]:
    """Each live request's status: the Eviction's conditions and the generation seen."""
    copied = [
        c
        for c in items(eviction_status, "conditions")
        if isinstance(c, Mapping) and c.get("type") in (TARGET_EVICTED, FAILED)
    ]
    out = []
    for r in requests:
        if deleting(r):
            continue
        status = mapping(r, "status")
        want = {"conditions": copied, "observedGeneration": generation(r) or 1}
        if _differs(want, status):
            out.append(RequestStatus(_name(r), want))
    return tuple(out)


# -- the Eviction's status ---------------------------------------------------------------------


def _pod_state(
    target: Target,
    pod: Mapping[str, Any] | None,
    ours: Sequence[Responder],
    gone_at: datetime | None,
) -> _Pod:
    if pod is None or metadata_of(pod).get("uid") != target.uid:
        return _Pod(gone="PodDeleted", terminating=False, deleted_at=gone_at)
    if mapping(pod, "status").get("phase") in ("Succeeded", "Failed"):
        deleted_at = parse_time(metadata_of(pod).get("deletionTimestamp"))
        return _Pod(
            gone="PodTerminal", terminating=False, obj=pod, ours=ours, deleted_at=deleted_at
        )
    return _Pod(gone=None, terminating=deleting(pod), obj=pod, ours=ours)


def _next_status(
    status: Mapping[str, Any],
    intents: Mapping[str, Intent],
    pod: _Pod,
    now: datetime,
    deadline: timedelta,
) -> tuple[Obj, float | None]:
    out: Obj = {
        "conditions": [dict(c) for c in items(status, "conditions") if isinstance(c, Mapping)],
        "requesters": _requesters(status, intents),
        "targetResponders": [dict(t) for t in items(status, "targetResponders")],
        "responders": [dict(r) for r in items(status, "responders")],
    }
    if final(status):
        return out, None
    wanted = "Eviction" in intents.values()
    if not out["targetResponders"]:
        # the server wants all Inactive when the first status already ends it
        _first_responders(out, pod, activate=pod.gone is None and wanted, now=now)
    if pod.gone is not None:
        if (wait := _completion_wait(out, pod, now)) is not None:
            _awaiting(out, now)  # the Active responder may still say it is done
            return out, wait
        _end(out, "Interrupted", TARGET_EVICTED, pod.gone, _ENDED[pod.gone], now)
        return out, None
    if not wanted:
        why = "every requester withdrew its eviction request"
        _end(out, "Canceled", FAILED, "CanceledDueToNoRequesters", why, now)
        return out, None
    _awaiting(out, now)
    return _advance(out, pod, now, deadline)


def _awaiting(out: Obj, now: datetime) -> None:
    _set(out, TARGET_EVICTED, "False", "AwaitingEviction", "the pod is running", now)
    _set(out, FAILED, "False", "AwaitingEviction", "a responder is evicting the pod", now)


def _completion_wait(out: Obj, pod: _Pod, now: datetime) -> float | None:
    """Seconds the end of a gone or terminal pod waits for its Active responder's completion
    (upstream's shouldDeferCompletion), or None: there is none, it completed, or time is up."""
    active = next((t for t in out["targetResponders"] if t.get("state") == "Active"), None)
    if active is None or pod.deleted_at is None:
        return None
    if _responder(out, str(active.get("name"))).get("completionTime"):
        return None
    left = (pod.deleted_at + GRACEFUL_COMPLETION_DELAY - now).total_seconds()
    return left if left > 0 else None


def _requesters(status: Mapping[str, Any], intents: Mapping[str, Intent]) -> list[Obj]:
    """Every requester ever seen, each with its current intent (gone means withdrawn)."""
    seen = {
        str(r.get("name")): "Withdrawn"
        for r in items(status, "requesters")
        if isinstance(r, Mapping)
    }
    seen.update(intents)
    return [{"name": name, "intent": seen[name]} for name in sorted(seen)]


def _first_responders(out: Obj, pod: _Pod, *, activate: bool, now: datetime) -> None:
    """The responders the pod names, ours and the imperative evictor, the first one Active."""
    responders = pod_responders(pod.obj, pod.ours)
    out["targetResponders"] = [
        {
            "name": r.name,
            "priority": r.priority,
            "state": "Active" if activate and i == 0 else "Inactive",
        }
        for i, r in enumerate(responders)
    ]
    out["responders"] = [
        {"name": r.name, **({"startTime": format_time(now)} if activate and i == 0 else {})}
        for i, r in enumerate(responders)
    ]


def _advance(out: Obj, pod: _Pod, now: datetime, deadline: timedelta) -> tuple[Obj, float | None]:
    """The active responder handed on when it completed or its heartbeat lapsed; while the
    pod terminates nothing moves (its responder did its part: the pod's end decides)."""
    order = sort_responders(out["targetResponders"])
    active = next((t for t in order if t.get("state") == "Active"), None)
    if active is None:
        _fail_no_responder(out, now)
        return out, None
    progress = _responder(out, str(active.get("name")))
    if pod.terminating:
        return out, None
    if (done := parse_time(progress.get("completionTime"))) is not None:
        if order.index(active) == len(order) - 1 and now < done + COMPLETION_GRACE:
            # the evictor completes as the server accepts the eviction: give the pod's end
            # (another watch than this Eviction's) time to show before no one is left
            return out, (done + COMPLETION_GRACE - now).total_seconds()
        _hand_on(out, order, active, "Completed", now)
        return out, None
    beat = parse_time(progress.get("heartbeatTime")) or parse_time(progress.get("startTime"))
    lapse = (beat or now) + deadline
    if now < lapse:
        return out, (lapse - now).total_seconds()
    _hand_on(out, order, active, "Interrupted", now)
    return out, None


def _hand_on(
    out: Obj,
    order: Sequence[Mapping[str, Any]],
    active: Mapping[str, Any],
    state: str,
    now: datetime,
) -> None:
    nxt = order.index(active) + 1
    _state(out, str(active.get("name")), state)
    if nxt >= len(order):
        _fail_no_responder(out, now)
        return
    name = str(order[nxt].get("name"))
    _state(out, name, "Active")
    _responder(out, name)["startTime"] = format_time(now)


def _fail_no_responder(out: Obj, now: datetime) -> None:
    _set(out, TARGET_EVICTED, "False", "EvictionFailed", "no responder evicted the pod", now)
    _set(out, FAILED, "True", "NoFurtherResponder", "every responder is done; the pod is not", now)


def _end(out: Obj, active_state: str, type_: str, reason: str, message: str, now: datetime) -> None:
    """A final condition, and the active responder stopped with it: Completed if it said it
    was done, else `active_state` (Interrupted: the pod ended before it said so; Canceled: no
    requester wants the pod gone)."""
    for t in out["targetResponders"]:
        if t.get("state") == "Active":
            done = _responder(out, str(t.get("name"))).get("completionTime")
            t["state"] = "Completed" if done else active_state
    if type_ == TARGET_EVICTED:
        _set(out, TARGET_EVICTED, "True", reason, message, now)
        _set(out, FAILED, "False", "Succeeded", "", now)
    else:
        _set(out, FAILED, "True", reason, message, now)
        _set(out, TARGET_EVICTED, "False", "EvictionFailed", "the eviction was canceled", now)


def _responder(out: Obj, name: str) -> Obj:
    for r in out["responders"]:
        if r.get("name") == name:
            return r  # type: ignore[no-any-return]
    entry: Obj = {"name": name}
    out["responders"].append(entry)
    return entry


def _state(out: Obj, name: str, state: str) -> None:
    for t in out["targetResponders"]:
        if t.get("name") == name:
            t["state"] = state


def _set(
    out: Obj, type_: str, status: Literal["True", "False"], reason: str, msg: str, now: datetime
) -> None:
    out["conditions"] = set_condition(out["conditions"], type_, status, reason, msg, now)


# -- reading ------------------------------------------------------------------------------------


def _differs(want: Mapping[str, Any], have: Mapping[str, Any]) -> bool:
    return any(have.get(k) != v for k, v in want.items() if v or k in have)


def _name(obj: Mapping[str, Any]) -> str:
    return str(metadata_of(obj).get("name", ""))
