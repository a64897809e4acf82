"""The eviction bridge's answer to one eviction (DESIGN 1, "Legacy drains"), pure.

A legacy drain (``kubectl drain``, kured, an autoscaler) calls the Eviction API and retries on
429. For a pod with interceptors the bridge asks for the eviction with an EvictionRequest
instead and answers 429 while an interceptor works, allows the eviction once the request's turn
reaches the imperative eviction, and answers 404 once the pod the drain meant is gone, also when
a pod of the same name replaced it (the drain retries by name only: ``kubectl drain`` sends no
UID precondition).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Literal

from nodeagent.model.bodies import items, mapping, metadata_of, uid_of
from nodeagent.model.bridge.upstream import own_responders
from nodeagent.model.bridge.writes import (
    EvictionRequestCreate,
    RecreateRequest,
    RequesterPatch,
    Write,
)
from nodeagent.model.bridge.writes import request_body as _body
from nodeagent.model.interceptors.requests import EvictionRequestView
from nodeagent.model.interceptors.targets import (
    InvalidInterceptors,
    SelectorInterceptor,
    default_interceptors,
    target_interceptors,
)
from nodeagent.model.lifecycle.ourresponders import ResponderNames
from nodeagent.model.names import (
    BRIDGE_OPT_OUT_LABEL,
    BRIDGE_REQUESTER,
    DAEMONSET_INTERCEPTOR,
    IMPERATIVE_INTERCEPTOR,
    KUBELET_INTERCEPTOR,
)
from nodeagent.model.nodemaintenance.cordon import unschedulable
from nodeagent.model.podstate import pod_terminal, pod_terminating
from nodeagent.model.times import parse_time
from nodeagent.model.tolerations import tolerates

__all__ = [
    "ASKED_AGAIN_WITHIN",
    "DEPARTED_FOR",
    "DRY_RUN",
    "BridgeSettings",
    "Departed",
    "EvictionAttempt",
    "Verdict",
    "bridged_interceptors",
    "decide",
    "departure",
    "held_until_asked_again",
    "node_draining",
    "opted_out",
]

DEPARTED_FOR = timedelta(minutes=5)
"""How long a name-only eviction of a pod whose predecessor the bridge asked to evict is
answered 404. A client retries every few seconds, so it learns within this. A new drain of the
replacement's node within it is told apart by the node (see :func:`node_draining`)."""
ASKED_AGAIN_WITHIN = timedelta(seconds=60)
"""How soon after an eviction the bridge would ask for it must be asked for again before the
bridge writes anything: a caller that never retries (a one-off script, a forged review) leaves
no request behind and sets no interceptor to work. ``kubectl drain`` (and kured) retry every 5 s,
the cluster-autoscaler every 10 s; each replica remembers the attempts it answered, so with two
replicas the third attempt is asked again of one of them at the latest."""
DRY_RUN = (
    "a dry run is allowed whatever the pod: the bridge answers real evictions only (a pod "
    "with interceptors waits with 429 until their turns are done)"
)
"""The bridge's one answer to every dry run (a warning with the allowed answer): a dry run
writes nothing and asks for nothing, and an answer that depended on the pod would tell anyone
who can send a review (or evict with dryRun) which pods have interceptors, their turns and
their messages."""
_DRAIN_EFFECTS = ("NoSchedule", "NoExecute")
_CONDITION_TAINTS = "node.kubernetes.io/"  # and node.kubernetes.io/unschedulable: cordoned


@dataclass(frozen=True)
class EvictionAttempt:
    """What the bridge reads of one admission request for ``pods/eviction`` CREATE."""

    namespace: str
    name: str
    uid: str | None
    """The Eviction's ``deleteOptions.preconditions.uid``, if it names one."""
    dry_run: bool
    """The request's ``dryRun``, or ``deleteOptions.dryRun`` in the Eviction's body (``kubectl
    drain --dry-run=server`` sets only the latter)."""
    user: str


@dataclass(frozen=True)
class BridgeSettings:
    """What the bridge takes from configuration."""

    own_users: frozenset[str]
    """Users whose evictions always pass: the controllers' (the imperative eviction's) own."""
    configured: tuple[SelectorInterceptor, ...] = ()
    daemonset_pods: bool = False
    """Wait for ``daemonset.apps.k8s.io`` too. It acts only within a NodeMaintenance, so by
    default the bridge does not wait for it (nor for ``kubelet.k8s.io``)."""
    static_pods: bool = False
    departed_for: timedelta = DEPARTED_FOR
    asked_again_within: timedelta = ASKED_AGAIN_WITHIN
    responders: ResponderNames | None = None
    """On the upstream API (`upstream`): the pod's own ``spec.evictionResponders`` are waited
    for too, named as the interceptors our responders stand for."""

    @property
    def passes(self) -> frozenset[str]:
        """The interceptors at whose turn an eviction is allowed."""
        out = {IMPERATIVE_INTERCEPTOR}
        if not self.daemonset_pods:
            out.add(DAEMONSET_INTERCEPTOR)
        if not self.static_pods:
            out.add(KUBELET_INTERCEPTOR)
        return frozenset(out)


@dataclass(frozen=True)
class Departed:
    """A pod whose eviction the bridge asked for, seen deleted: the informers' memory of it."""

    uid: str
    requested_at: datetime | None
    """When its EvictionRequest was created."""
    gone_at: datetime


@dataclass(frozen=True)
class Verdict:
    """The answer: allowed, or denied with ``code`` (429 or 404), and what to write first."""

    allowed: bool
    why: Literal[
        "own",
        "dry-run",
        "opted-out",
        "no-interceptors",
        "leaving",
        "unknown",
        "turn",
        "waiting",
        "asked-once",
        "gone",
    ]
    """Briefly, for metrics and logs."""
    message: str = ""
    code: int = 200
    write: Write | None = None

    @property
    def reason(self) -> str:
        """The meta/v1 Status reason that goes with ``code``."""
        return {429: "TooManyRequests", 404: "NotFound"}.get(self.code, "")


def bridged_interceptors(pod: Mapping[str, Any], settings: BridgeSettings) -> tuple[str, ...]:
    """The interceptors the bridge waits for before it lets an eviction of ``pod`` through,
    in order (empty: the pod has none that matter to an eviction). A malformed annotation
    counts as absent, as the EvictionRequest controller treats it."""
    try:
        names = target_interceptors(pod, settings.configured)
    except InvalidInterceptors:
        names = default_interceptors(pod, settings.configured)
    if settings.responders is not None:
        names = (*own_responders(pod, settings.responders), *names)
    return tuple(n for n in dict.fromkeys(names) if n not in settings.passes)


def departure(
    pod: Mapping[str, Any], request: EvictionRequestView | None, now: datetime
) -> Departed | None:
    """What to remember of a deleted ``pod``: its departure, if the bridge asked to evict it
    (``request`` is its EvictionRequest as cached when the pod's delete event came)."""
    if request is None or BRIDGE_REQUESTER not in request.requesters:
        return None
    return Departed(uid_of(pod), request.creation_time, now)


def opted_out(namespace: Mapping[str, Any] | None) -> bool:
    """Whether ``namespace`` keeps the bridge out (label ``nodeagent.io/eviction-bridge:
    disabled``): kube-apiserver sends no review of its evictions (the webhook's
    namespaceSelector), and a review that comes all the same was sent by someone else."""
    labels = mapping(metadata_of(namespace or {}), "labels")
    return labels.get(BRIDGE_OPT_OUT_LABEL) == "disabled"


def node_draining(node: Mapping[str, Any] | None, pod: Mapping[str, Any]) -> bool:
    """Whether ``pod``'s node is being drained: cordoned, or tainted NoSchedule or NoExecute
    where the pod does not tolerate it (the pod was scheduled there, so the taint came after).
    That is how ``kubectl drain`` (and kured), the cluster-autoscaler and Karpenter start. The
    taints the node lifecycle controller sets from the node's conditions (``not-ready``,
    ``memory-pressure``...) say nothing of a drain."""
    if node is None:
        return False
    if unschedulable(node):
        return True
    spec = mapping(node, "spec")
    tolerations = items(mapping(pod, "spec"), "tolerations")
    return any(
        t.get("effect") in _DRAIN_EFFECTS and not tolerates(tolerations, t)
        for t in items(spec, "taints")
        if not str(t.get("key", "")).startswith(_CONDITION_TAINTS)
    )


def decide(
    attempt: EvictionAttempt,
    pod: Mapping[str, Any] | None,
    request: EvictionRequestView | None,
    departed: Departed | None,
    settings: BridgeSettings,
    now: datetime,
    node: Mapping[str, Any] | None = None,
    namespace: Mapping[str, Any] | None = None,
) -> Verdict:
    """The bridge's answer to ``attempt``.

    ``pod``: the pod of that namespace and name as cached, whatever its UID, or None.
    ``request``: the EvictionRequest named after that pod's UID, as cached, or None.
    ``departed``: the last pod of that name whose eviction the bridge asked for and that is gone.
    ``node``: ``pod``'s node as cached, or None.
    ``namespace``: the attempt's namespace as cached, or None: one that opted out
    (:func:`opted_out`) is allowed untouched, as failurePolicy Ignore would.
    A dry run is allowed, the same for every pod (:data:`DRY_RUN`), and writes nothing.
    """
    if attempt.dry_run:
        return Verdict(True, "dry-run", DRY_RUN)
    if opted_out(namespace):
        return Verdict(True, "opted-out")
    meant_departed = _meant_departed(attempt, pod, departed, node, settings, now)
    return _decide(attempt, pod, request, departed if meant_departed else None, settings)


def _decide(
    attempt: EvictionAttempt,
    pod: Mapping[str, Any] | None,
    request: EvictionRequestView | None,
    departed: Departed | None,
    settings: BridgeSettings,
) -> Verdict:
    """``departed``: the pod gone that the attempt means, if it means one."""
    if attempt.user in settings.own_users:
        return Verdict(True, "own")
    ref = f"{attempt.namespace}/{attempt.name}"
    if departed is not None:
        return Verdict(
            False,
            "gone",
            f"pod {ref} with UID {departed.uid}, whose eviction nodeagent asked for, is gone"
            + (f"; a new pod of that name has UID {uid_of(pod)}" if pod is not None else ""),
            code=404,
        )
    if pod is None or (attempt.uid is not None and attempt.uid != uid_of(pod)):
        # Not the pod the cache has: the API server answers (404 or a failed precondition).
        return Verdict(True, "unknown")
    if pod_terminal(pod) or pod_terminating(pod):
        return Verdict(True, "leaving")
    waits_for = bridged_interceptors(pod, settings)
    if not waits_for:
        return Verdict(True, "no-interceptors")
    return _by_request(ref, pod, request, waits_for, settings)


def held_until_asked_again(
    verdict: Verdict,
    attempt: EvictionAttempt,
    pod: Mapping[str, Any],
    asked_at: datetime | None,
    now: datetime,
    settings: BridgeSettings,
) -> Verdict:
    """``verdict`` on ``pod`` as answered to an attempt of which ``asked_at`` is the first the
    bridge answered for the same pod (None: this is the first), by :data:`ASKED_AGAIN_WITHIN`:
    its write is made only when the eviction is asked for again within
    ``settings.asked_again_within`` of the first, and until then nothing is written (a
    request of someone else's the bridge would join goes on without it; its message still
    says whose turn it is)."""
    within = settings.asked_again_within
    if verdict.write is None or (asked_at is not None and asked_at <= now <= asked_at + within):
        return verdict
    if isinstance(verdict.write, RequesterPatch):
        return replace(verdict, write=None)
    ref = f"{attempt.namespace}/{attempt.name}"
    first = (*bridged_interceptors(pod, settings), IMPERATIVE_INTERCEPTOR)[0]
    return _wait(
        f"pod {ref} waits for interceptor {first}: nodeagent asks for its eviction with an "
        f"EvictionRequest once it is asked for again within {within.total_seconds():g}s "
        "(an eviction nobody asks for again leaves nothing behind)",
        why="asked-once",
    )


def _meant_departed(
    attempt: EvictionAttempt,
    pod: Mapping[str, Any] | None,
    departed: Departed | None,
    node: Mapping[str, Any] | None,
    settings: BridgeSettings,
    now: datetime,
) -> bool:
    """Whether the attempt means a pod the bridge saw go: its UID, or by name only (within
    ``departed_for``) while no pod of that name or a newer one than the bridge's request is
    there, on a node not being drained (a drain of the replacement's node means the
    replacement)."""
    if departed is None or (pod is not None and uid_of(pod) == departed.uid):
        return False
    if attempt.uid is not None:
        return attempt.uid == departed.uid
    if now - departed.gone_at > settings.departed_for:
        return False
    if pod is None:
        return True
    if node_draining(node, pod):
        return False
    created = parse_time(metadata_of(pod).get("creationTimestamp"))
    return created is None or departed.requested_at is None or created >= departed.requested_at


def _by_request(
    ref: str,
    pod: Mapping[str, Any],
    request: EvictionRequestView | None,
    waits_for: tuple[str, ...],
    settings: BridgeSettings,
) -> Verdict:
    """The pod has interceptors: its EvictionRequest decides."""
    first = waits_for[0]
    namespace = str(metadata_of(pod).get("namespace") or "")
    if request is None:
        return _wait(
            f"nodeagent asked for the eviction of pod {ref} with an EvictionRequest; "
            f"interceptor {first} goes first",
            EvictionRequestCreate(namespace, _body(pod)),
        )
    if request.deleting:
        return _wait(f"the last EvictionRequest of pod {ref} is being deleted")
    if request.evicted:
        return Verdict(True, "leaving")
    if request.canceled:
        if _nobody_left(request):
            # Every interceptor had its turn and the pod is still here (upstream: Failed,
            # NoFurtherResponder, which no new request starts over): as at the imperative
            # eviction's turn, the eviction goes ahead and the disruption budgets decide.
            return Verdict(True, "turn")
        return _wait(
            f"nodeagent asked again for the eviction of pod {ref} (its last EvictionRequest "
            f"was canceled); interceptor {first} goes first",
            RecreateRequest(
                namespace, request.name, request.uid, request.resource_version, _body(pod)
            ),
        )
    return _by_turn(ref, namespace, request, first, settings)


def _nobody_left(request: EvictionRequestView) -> bool:
    targets = request.target_interceptors
    return targets is not None and set(targets) <= set(request.processed)


def _by_turn(
    ref: str, namespace: str, request: EvictionRequestView, first: str, settings: BridgeSettings
) -> Verdict:
    """A request under way: whose turn it is decides."""
    active = request.active
    if active in settings.passes or (active is None and request.target_interceptors):
        # The imperative eviction's turn (or one the bridge does not wait for, or nobody's
        # left): the eviction goes ahead and the disruption budgets decide as usual.
        return Verdict(True, "turn")
    add = None
    if BRIDGE_REQUESTER not in request.requesters:
        add = RequesterPatch(
            namespace,
            request.name,
            request.resource_version,
            (*request.requesters, BRIDGE_REQUESTER),
        )
    if active is None:
        return _wait(
            f"the EvictionRequest of pod {ref} waits for its first interceptor ({first}) "
            "to be given its turn",
            add,
        )
    said = request.entry(active).message
    return _wait(
        f"interceptor {active} is handling the eviction of pod {ref}"
        + (f": {said}" if said else ""),
        add,
    )


def _wait(
    message: str, write: Write | None = None, why: Literal["waiting", "asked-once"] = "waiting"
) -> Verdict:
    """A 429 without Retry-After: client-go retries a 429 that carries one by itself, up to ten
    times and past ``kubectl drain --timeout``, and prints nothing; without it the caller sees
    each answer (kubectl: "will retry after 5s" and this message) and keeps its own pace."""
    return Verdict(
        False,
        why,
        f"{message}; the eviction is allowed when its turn reaches {IMPERATIVE_INTERCEPTOR}",
        code=429,
        write=write,
    )
