"""EvictionRequest interceptors (KEP-4563, DESIGN 2.2 and 2.3): which interceptors a pod has,
whose turn it is, and the EvictionRequest status they write.

Pure: plain JSON-shaped dicts in, frozen dataclasses out; time comes in as ``now``. The
controllers in :mod:`nodeagent.controllers.evictionrequest` and
:mod:`nodeagent.controllers.interceptors` read and apply what these functions decide.

The pod-side stand-in for the KEP's ``pod.spec.evictionInterceptors`` is the annotation
``nodeagent.io/eviction-interceptors`` (a comma-separated, ordered list). Without it, defaults
apply: mirror pods get ``kubelet.k8s.io``, DaemonSet pods ``daemonset.apps.k8s.io``, and pods
matched by a configured annotate-and-wait interceptor that interceptor (configured ones first, in
configuration order). ``imperative-eviction.k8s.io`` always comes last.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Literal

from nodeagent.model.backoff import capped_exponential
from nodeagent.model.bodies import (
    annotations_of,
    find_condition,
    is_true,
    metadata_of,
    set_condition,
)
from nodeagent.model.budgets import WAITING_PREFIX
from nodeagent.model.drainplan import PodType, classify, pod_labels
from nodeagent.model.names import (
    DAEMONSET_INTERCEPTOR,
    IMPERATIVE_INTERCEPTOR,
    INTERCEPTORS_ANNOTATION,
    KUBELET_INTERCEPTOR,
    NODE_LABEL,
)
from nodeagent.model.selectors import DNS_SUBDOMAIN, DNS_SUBDOMAIN_MAX, LabelSelector
from nodeagent.model.times import format_micro_time, parse_time

__all__ = [
    "CANCELED",
    "DEFAULT_HEARTBEAT_DEADLINE",
    "EVICTED",
    "EVICTION_BACKOFF_BASE",
    "EVICTION_BACKOFF_CAP",
    "MAX_INTERCEPTORS",
    "MIN_HEARTBEAT_INTERVAL",
    "RESERVED_INTERCEPTORS",
    "EvictionRequestView",
    "Handover",
    "InterceptorStatus",
    "InvalidInterceptors",
    "Selection",
    "SelectorInterceptor",
    "default_interceptors",
    "eviction_backoff",
    "heartbeat_due",
    "heartbeat_interval",
    "imperative_refusal_cause",
    "imperative_refusal_message",
    "next_heartbeat_in",
    "parse_interceptor_list",
    "parse_retries",
    "parse_time",
    "pod_phase",
    "pod_terminal",
    "pod_terminating",
    "report_progress",
    "select_active",
    "set_condition",
    "target_interceptors",
    "validate_interceptor_name",
    "with_interceptor_status",
]


RESERVED_INTERCEPTORS = frozenset(
    {KUBELET_INTERCEPTOR, DAEMONSET_INTERCEPTOR, IMPERATIVE_INTERCEPTOR}
)
"""The only ``*.k8s.io`` names a pod may list (KEP: an allow-list of k8s.io interceptors)."""
MAX_INTERCEPTORS = 15
"""At most this many target interceptors, ``imperative-eviction.k8s.io`` included."""
DEFAULT_HEARTBEAT_DEADLINE = timedelta(minutes=20)
EVICTION_BACKOFF_BASE = 1.0
"""Seconds after the first refused eviction (`eviction.backoffBase`'s default)."""
EVICTION_BACKOFF_CAP = 15 * 60.0
"""The KEP's "maximum approx. 15 minutes" between evictions (`eviction.backoffCap`'s default)."""

EVICTED = "Evicted"
CANCELED = "Canceled"

_RETRIES = re.compile(r"number of retries: (\d+)")
# KEP: heartbeats "every 3 minutes may be sufficient"; never less often than this.
_MAX_HEARTBEAT_INTERVAL = timedelta(minutes=3)
# KEP: the API server "only allow[s] periodic updates that are 60+ seconds" apart (our CRD's CEL
# rule); never more often than this.
MIN_HEARTBEAT_INTERVAL = timedelta(seconds=60)


class InvalidInterceptors(ValueError):
    """A pod's interceptor list is malformed; the message says what and where."""


# --- interceptor names and the target list ------------------------------------------------------


def validate_interceptor_name(name: str) -> str | None:
    """Why ``name`` is not a usable interceptor name (a lowercase DNS subdomain, at most 253
    characters, ``*.k8s.io`` only from :data:`RESERVED_INTERCEPTORS`), or None if it is."""
    if not name:
        return "must not be empty"
    if len(name) > DNS_SUBDOMAIN_MAX:
        return f"must be no more than {DNS_SUBDOMAIN_MAX} characters"
    if not DNS_SUBDOMAIN.fullmatch(name):
        return "must be a lowercase DNS subdomain such as mover.example.com"
    if (name == "k8s.io" or name.endswith(".k8s.io")) and name not in RESERVED_INTERCEPTORS:
        allowed = ", ".join(sorted(RESERVED_INTERCEPTORS))
        return f"k8s.io names are reserved; the allowed ones are {allowed}"
    return None


def parse_interceptor_list(value: str) -> tuple[str, ...]:
    """The names of an ``nodeagent.io/eviction-interceptors`` value, in order, without
    ``imperative-eviction.k8s.io`` (which :func:`target_interceptors` appends).

    An empty value means "no interceptors" (only the imperative eviction). Whitespace around
    names is ignored. ``imperative-eviction.k8s.io`` may be written, but only last. Raises
    :class:`InvalidInterceptors` for empty items, invalid or repeated names, and lists longer than
    :data:`MAX_INTERCEPTORS` with the imperative interceptor counted.
    """
    if not value.strip():
        return ()
    items = [item.strip() for item in value.split(",")]
    names: list[str] = []
    seen: dict[str, int] = {}
    for i, name in enumerate(items):
        where = f"item {i + 1} ({name!r})" if name else f"item {i + 1}"
        if (why := validate_interceptor_name(name)) is not None:
            raise InvalidInterceptors(f"{where}: {why}")
        if name in seen:
            raise InvalidInterceptors(f"{where}: repeats item {seen[name] + 1}")
        seen[name] = i
        if name == IMPERATIVE_INTERCEPTOR:
            if i != len(items) - 1:
                raise InvalidInterceptors(f"{where}: {IMPERATIVE_INTERCEPTOR} can only be last")
            continue
        names.append(name)
    if len(names) + 1 > MAX_INTERCEPTORS:
        raise InvalidInterceptors(
            f"{len(names)} interceptors; at most {MAX_INTERCEPTORS - 1} besides "
            f"{IMPERATIVE_INTERCEPTOR}, which always comes last"
        )
    return tuple(names)


@dataclass(frozen=True)
class SelectorInterceptor:
    """A configured interceptor that is a default for the pods its selector matches."""

    name: str
    selector: LabelSelector


def target_interceptors(
    pod: Mapping[str, Any], configured: Sequence[SelectorInterceptor] = ()
) -> tuple[str, ...]:
    """The pod's interceptors in order, ``imperative-eviction.k8s.io`` last (KEP "Interceptor
    Selection"). Raises :class:`InvalidInterceptors` naming the annotation when it is malformed."""
    raw = annotations_of(pod).get(INTERCEPTORS_ANNOTATION)
    if raw is not None:
        if not isinstance(raw, str):
            raise InvalidInterceptors(f"annotation {INTERCEPTORS_ANNOTATION}: must be a string")
        try:
            names = list(parse_interceptor_list(raw))
        except InvalidInterceptors as exc:
            raise InvalidInterceptors(f"annotation {INTERCEPTORS_ANNOTATION}: {exc}") from None
        return (*names, IMPERATIVE_INTERCEPTOR)
    return default_interceptors(pod, configured)


def default_interceptors(
    pod: Mapping[str, Any], configured: Sequence[SelectorInterceptor] = ()
) -> tuple[str, ...]:
    """The interceptors a pod gets without (or despite) its annotation, imperative last."""
    labels = pod_labels(pod)
    defaults: list[str] = []
    for interceptor in configured:
        if interceptor.selector.matches(labels) and interceptor.name not in defaults:
            defaults.append(interceptor.name)
    pod_type = classify(pod).pod_type
    if pod_type is PodType.STATIC:
        defaults.append(KUBELET_INTERCEPTOR)
    elif pod_type is PodType.DAEMONSET:
        defaults.append(DAEMONSET_INTERCEPTOR)
    defaults = [n for n in dict.fromkeys(defaults) if n != IMPERATIVE_INTERCEPTOR]
    # Configuration could list more matching interceptors than fit; keep the first ones.
    return (*defaults[: MAX_INTERCEPTORS - 1], IMPERATIVE_INTERCEPTOR)


# --- pods ---------------------------------------------------------------------------------------


def pod_phase(pod: Mapping[str, Any]) -> str:
    status = pod.get("status")
    phase = status.get("phase") if isinstance(status, Mapping) else None
    return phase if isinstance(phase, str) else ""


def pod_terminal(pod: Mapping[str, Any]) -> bool:
    """Succeeded or Failed: counts as evicted."""
    return pod_phase(pod) in ("Succeeded", "Failed")


def pod_terminating(pod: Mapping[str, Any]) -> bool:
    return metadata_of(pod).get("deletionTimestamp") is not None


# --- EvictionRequest status ---------------------------------------------------------------------


@dataclass(frozen=True)
class InterceptorStatus:
    """One ``status.interceptors[]`` entry."""

    name: str
    heartbeat_time: datetime | None = None
    start_time: datetime | None = None
    expected_finish_time: datetime | None = None
    completion_time: datetime | None = None
    message: str = ""

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> InterceptorStatus:
        message = d.get("message")
        return cls(
            name=str(d.get("name") or ""),
            heartbeat_time=parse_time(d.get("heartbeatTime")),
            start_time=parse_time(d.get("startTime")),
            expected_finish_time=parse_time(d.get("expectedFinishTime")),
            completion_time=parse_time(d.get("completionTime")),
            message=message if isinstance(message, str) else "",
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        for key, value in (
            ("heartbeatTime", self.heartbeat_time),
            ("expectedFinishTime", self.expected_finish_time),
            ("startTime", self.start_time),
            ("completionTime", self.completion_time),
        ):
            if value is not None:
                out[key] = format_micro_time(value)
        if self.message:
            out["message"] = self.message
        return out

    @property
    def last_report(self) -> datetime | None:
        """The latest of startTime and heartbeatTime: the last sign of life."""
        times = [t for t in (self.start_time, self.heartbeat_time) if t is not None]
        return max(times) if times else None

    def heartbeat(self, now: datetime, message: str | None = None) -> InterceptorStatus:
        """This entry with heartbeatTime ``now`` (and startTime, the first time)."""
        return replace(
            self,
            heartbeat_time=now,
            start_time=self.start_time or now,
            message=self.message if message is None else message,
        )

    def complete(self, now: datetime, message: str | None = None) -> InterceptorStatus:
        """This entry completed (completionTime ``now`` unless set). A heartbeat already there
        stays: the CRD (KEP-4563) refuses one moved less than 60 s forward, and a completed turn
        has no deadline left to keep off."""
        done = self if self.heartbeat_time is not None else self.heartbeat(now)
        return replace(
            done,
            completion_time=self.completion_time or now,
            message=self.message if message is None else message,
        )


def _names(raw: object) -> tuple[str, ...]:
    if not isinstance(raw, list):
        return ()
    out: list[str] = []
    for item in raw:
        name = item.get("name") if isinstance(item, Mapping) else item
        if isinstance(name, str) and name and name not in out:
            out.append(name)
    return tuple(out)


@dataclass(frozen=True)
class EvictionRequestView:
    """What the controllers need of one EvictionRequest object."""

    namespace: str
    name: str
    uid: str
    generation: int
    creation_time: datetime | None
    target_name: str
    target_uid: str
    requesters: tuple[str, ...]
    target_interceptors: tuple[str, ...] | None
    active: str | None
    processed: tuple[str, ...]
    interceptors: Mapping[str, InterceptorStatus] = field(default_factory=dict)
    conditions: tuple[Mapping[str, Any], ...] = ()
    owned_by_target: bool = False
    """The target pod is an owner: the garbage collector deletes the request with the pod."""
    resource_version: str = ""
    deleting: bool = False
    node: str | None = None
    """The node its requester labelled it with (``nodeagent.io/node``)."""

    @classmethod
    def from_obj(cls, obj: Mapping[str, Any]) -> EvictionRequestView:
        md = metadata_of(obj)
        spec = obj.get("spec")
        spec = spec if isinstance(spec, Mapping) else {}
        status = obj.get("status")
        status = status if isinstance(status, Mapping) else {}
        target = spec.get("target")
        pod = target.get("pod") if isinstance(target, Mapping) else None
        pod = pod if isinstance(pod, Mapping) else {}
        generation = md.get("generation")
        targets = status.get("targetInterceptors")
        entries: dict[str, InterceptorStatus] = {}
        for raw in status.get("interceptors") or ():
            if isinstance(raw, Mapping):
                entry = InterceptorStatus.from_dict(raw)
                if entry.name:
                    entries.setdefault(entry.name, entry)
        active = _names(status.get("activeInterceptors"))
        conditions = tuple(c for c in status.get("conditions") or () if isinstance(c, Mapping))
        labels = md.get("labels")
        node = labels.get(NODE_LABEL) if isinstance(labels, Mapping) else None
        return cls(
            namespace=str(md.get("namespace") or ""),
            name=str(md.get("name") or ""),
            uid=str(md.get("uid") or ""),
            generation=generation if isinstance(generation, int) else 0,
            creation_time=parse_time(md.get("creationTimestamp")),
            target_name=str(pod.get("name") or ""),
            target_uid=str(pod.get("uid") or ""),
            requesters=_names(spec.get("requesters")),
            target_interceptors=_names(targets) if isinstance(targets, list) and targets else None,
            active=active[0] if active else None,
            processed=_names(status.get("processedInterceptors")),
            interceptors=entries,
            conditions=conditions,
            owned_by_target=bool(pod.get("uid"))
            and any(
                isinstance(ref, Mapping) and ref.get("uid") == pod.get("uid")
                for ref in md.get("ownerReferences") or ()
            ),
            resource_version=str(md.get("resourceVersion") or ""),
            deleting=bool(md.get("deletionTimestamp")),
            node=node if isinstance(node, str) and node else None,
        )

    def condition(self, type_: str) -> Mapping[str, Any] | None:
        return find_condition(self.conditions, type_)

    def is_true(self, type_: str) -> bool:
        return is_true(self.condition(type_))

    @property
    def evicted(self) -> bool:
        return self.is_true(EVICTED)

    @property
    def canceled(self) -> bool:
        return self.is_true(CANCELED)

    @property
    def finished(self) -> bool:
        """Evicted or Canceled: the controller takes no further action."""
        return self.evicted or self.canceled

    def entry(self, name: str) -> InterceptorStatus:
        return self.interceptors.get(name) or InterceptorStatus(name)

    def activated_at(self) -> datetime | None:
        """When the active interceptor got its turn: its entry's startTime, which the
        controller records when the turn starts; for the first interceptor the request's
        creation (the KEP's fallback) when nothing was recorded."""
        if self.active is None:
            return None
        recorded = self.entry(self.active).start_time
        if recorded is not None:
            return recorded
        if (
            not self.processed
            and self.target_interceptors
            and self.active == (self.target_interceptors[0])
        ):
            return self.creation_time
        return None


def with_interceptor_status(
    entries: Iterable[Mapping[str, Any]], entry: InterceptorStatus
) -> list[dict[str, Any]]:
    """``status.interceptors`` with ``entry`` replacing the one of the same name (or appended)."""
    out: list[dict[str, Any]] = []
    placed = False
    for raw in entries:
        if isinstance(raw, Mapping) and raw.get("name") == entry.name:
            if not placed:
                out.append(entry.to_dict())
                placed = True
        else:
            out.append(dict(raw))
    if not placed:
        out.append(entry.to_dict())
    return out


# --- whose turn it is ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Handover:
    """The turn passed from ``previous`` to ``next`` (None: nobody left)."""

    previous: str
    next: str | None
    reason: Literal["Completed", "HeartbeatDeadline"]

    def describe(self, deadline: timedelta) -> str:
        why = (
            "set completionTime"
            if self.reason == "Completed"
            else f"did not report within {_duration(deadline)}"
        )
        to = self.next if self.next is not None else "no further interceptor"
        return f"{self.previous} {why}; passed to {to}"


@dataclass(frozen=True)
class Selection:
    """The outcome of :func:`select_active`."""

    active: str | None
    processed: tuple[str, ...]
    handovers: tuple[Handover, ...] = ()
    activated: bool = False
    """True when ``active`` got its turn in this call (its activation time is ``now``)."""
    deadline: datetime | None = None
    """When ``active`` will be passed over unless it reports; None when it cannot be (nobody
    follows it) or when its activation time is unknown."""


def _next_after(
    targets: Sequence[str], current: str | None, processed: Sequence[str]
) -> str | None:
    start = targets.index(current) + 1 if current in targets else 0
    for name in targets[start:]:
        if name not in processed and name != current:
            return name
    return None


def select_active(
    targets: Sequence[str],
    active: str | None,
    processed: Sequence[str],
    statuses: Mapping[str, InterceptorStatus],
    now: datetime,
    deadline: timedelta = DEFAULT_HEARTBEAT_DEADLINE,
    activated_at: datetime | None = None,
) -> Selection:
    """KEP "Interceptor Selection": pick index 0 first; pass to the next one at a higher index
    when the active one has set ``completionTime`` or has not reported for ``deadline``.

    The deadline runs from the active interceptor's last sign of life: the latest of its
    ``startTime``, ``heartbeatTime`` and ``activated_at`` (when it got its turn). With none of
    them known there is no deadline yet (the caller records the activation time and asks again).
    The last interceptor is never passed over for a missed deadline (there is nobody to pass to);
    when it completes, nobody is active any more. Each interceptor that loses its turn is appended
    to ``processed``.
    """
    done = list(dict.fromkeys(processed))
    handovers: list[Handover] = []
    activated = False
    since = activated_at
    if active is None:
        active = _first_unprocessed(targets, done)
        activated = active is not None
        since = now
    while active is not None:
        status = statuses.get(active) or InterceptorStatus(active)
        following = _next_after(targets, active, done)
        reason: Literal["Completed", "HeartbeatDeadline"] | None = None
        if status.completion_time is not None:
            # Also when it completed before its turn came: its turn is over at once.
            reason = "Completed"
        elif following is not None:
            last = _latest(_trusted(status.last_report, now), since)
            if last is not None and now - last >= deadline:
                reason = "HeartbeatDeadline"
        if reason is None:
            break
        done.append(active)
        handovers.append(Handover(active, following, reason))
        active = following
        activated = active is not None
        since = now
    expiry: datetime | None = None
    if active is not None and _next_after(targets, active, done) is not None:
        status = statuses.get(active) or InterceptorStatus(active)
        last = _latest(_trusted(status.last_report, now), since)
        if last is not None:
            expiry = last + deadline
    return Selection(active, tuple(done), tuple(handovers), activated, expiry)


def _first_unprocessed(targets: Sequence[str], processed: Sequence[str]) -> str | None:
    # Nobody active but some processed: resume after the last processed one in target order.
    indexes = [targets.index(p) for p in processed if p in targets]
    start = max(indexes) + 1 if indexes else 0
    for name in targets[start:]:
        if name not in processed:
            return name
    return None


# how far ahead of our clock an interceptor's report may be and still count (clock skew)
MAX_CLOCK_SKEW = timedelta(seconds=60)


def _trusted(report: datetime | None, now: datetime) -> datetime | None:
    """A report time from the future (beyond clock skew) is no sign of life: it would keep an
    interceptor active past its deadline for as long as it likes."""
    if report is not None and report > now + MAX_CLOCK_SKEW:
        return None
    return report


def _latest(*times: datetime | None) -> datetime | None:
    known = [t for t in times if t is not None]
    return max(known) if known else None


def _duration(delta: timedelta) -> str:
    seconds = delta.total_seconds()
    if seconds >= 60 and seconds % 60 == 0:
        return f"{int(seconds // 60)}m"
    return f"{seconds:g}s"


# --- heartbeats and the imperative eviction's backoff -------------------------------------------


def heartbeat_interval(
    deadline: timedelta = DEFAULT_HEARTBEAT_DEADLINE, minimum: timedelta = MIN_HEARTBEAT_INTERVAL
) -> timedelta:
    """How often our own interceptors report: a quarter of the deadline, at most 3 minutes and
    at least ``minimum`` (the KEP's 60 s; tests with second-long deadlines lower it)."""
    return max(minimum, min(_MAX_HEARTBEAT_INTERVAL, deadline / 4))


def heartbeat_due(
    status: InterceptorStatus,
    now: datetime,
    deadline: timedelta = DEFAULT_HEARTBEAT_DEADLINE,
    minimum: timedelta = MIN_HEARTBEAT_INTERVAL,
) -> bool:
    last = status.heartbeat_time
    return last is None or now - last >= heartbeat_interval(deadline, minimum)


def report_progress(
    entry: InterceptorStatus,
    message: str,
    now: datetime,
    deadline: timedelta = DEFAULT_HEARTBEAT_DEADLINE,
    minimum: timedelta = MIN_HEARTBEAT_INTERVAL,
) -> InterceptorStatus | None:
    """The entry an interceptor writes to report ``message``, or None when nothing needs writing.
    The first report sets startTime and heartbeatTime; later ones heartbeat when
    :func:`heartbeat_due`, and otherwise only change the message (the KEP wants heartbeats
    spaced out, not one per status write)."""
    if entry.start_time is None or heartbeat_due(entry, now, deadline, minimum):
        return entry.heartbeat(now, message)
    if entry.message != message:
        return replace(entry, message=message)
    return None


def next_heartbeat_in(
    entry: InterceptorStatus,
    now: datetime,
    deadline: timedelta = DEFAULT_HEARTBEAT_DEADLINE,
    minimum: timedelta = MIN_HEARTBEAT_INTERVAL,
) -> float:
    """Seconds until ``entry`` is due for its next heartbeat."""
    last = entry.heartbeat_time or now
    return max(0.0, (last + heartbeat_interval(deadline, minimum) - now).total_seconds())


def eviction_backoff(retries: int, base: float, cap: float) -> float:
    """Seconds to wait after ``retries`` refused evictions: base, 2*base, 4*base, ... up to
    ``cap``, without jitter (the retry count is in the request's message for all to see).
    0 before the first refusal."""
    if retries <= 0:
        return 0.0
    return capped_exponential(base, 2.0, retries - 1, cap)


def parse_retries(message: str) -> int:
    """The retry count in an ``imperative-eviction.k8s.io`` message (0 when there is none), so a
    new leader continues counting where the last one stopped."""
    match = _RETRIES.search(message)
    return int(match.group(1)) if match else 0


_REFUSAL_PREFIX = "Could not evict the pod due to failing eviction requests, number of retries: "
_REFUSAL = re.compile(re.escape(_REFUSAL_PREFIX) + r"\d+(?: \(last: (.*)\))?\Z", re.DOTALL)
_BUDGET = re.compile(r"disruption budget ([a-z0-9][-a-z0-9.]*[a-z0-9]|[a-z0-9])")


def imperative_refusal_message(retries: int, cause: str) -> str:
    """As the KEP's example: "Could not evict a pod due to failing eviction requests, number of
    retries: 7", plus the last refusal."""
    text = f"{_REFUSAL_PREFIX}{retries}"
    return text + (f" (last: {cause})" if cause else "")


def imperative_refusal_cause(message: str) -> str | None:
    """What refused the eviction, briefly and without the retry count, from an
    ``imperative-eviction.k8s.io`` message of :func:`imperative_refusal_message`; None when the
    message is no refusal. A PodDisruptionBudget is named (``PodDisruptionBudget web``), since
    its message also carries pod counts that change while nothing else does."""
    if message.startswith(WAITING_PREFIX):  # held back before asking: the budget is named
        cause = message
    elif (match := _REFUSAL.match(message)) is not None:
        cause = " ".join((match.group(1) or "").split())
    else:
        return None
    if (budget := _BUDGET.search(cause)) is not None:
        return f"PodDisruptionBudget {budget.group(1)}"
    return cause or "refused"
