"""The eviction bridge's decision: who passes, who waits on which interceptor, what is written,
and the 404 for a pod that is gone (also when replaced under the same name)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from nodeagent.model.bodies import set_condition
from nodeagent.model.bridge.decision import (
    DRY_RUN,
    BridgeSettings,
    Departed,
    EvictionAttempt,
    Verdict,
    bridged_interceptors,
    decide,
    departure,
    held_until_asked_again,
)
from nodeagent.model.bridge.writes import EvictionRequestCreate, RecreateRequest, RequesterPatch
from nodeagent.model.interceptors.requests import EvictionRequestView
from nodeagent.model.interceptors.targets import SelectorInterceptor
from nodeagent.model.names import (
    BRIDGE_OPT_OUT_LABEL,
    BRIDGE_REQUESTER,
    DAEMONSET_INTERCEPTOR,
    IMPERATIVE_INTERCEPTOR,
    INTERCEPTORS_ANNOTATION,
    NODE_LABEL,
    REQUESTER,
)
from nodeagent.model.selectors import label_selector_from_dict
from nodeagent.model.times import format_time

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
MOVER = SelectorInterceptor(
    "mover.example.com", label_selector_from_dict({"matchLabels": {"app": "db"}})
)
OWN = "system:serviceaccount:nodeagent-system:nodeagent-controllers"
SETTINGS = BridgeSettings(own_users=frozenset({OWN}), configured=(MOVER,))


def pod(
    uid: str = "u1",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    created: datetime = NOW - timedelta(hours=1),
    **extra_md: Any,
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "db-0",
            "namespace": "ns",
            "uid": uid,
            "labels": {"app": "db"} if labels is None else labels,
            "annotations": annotations or {},
            "creationTimestamp": format_time(created),
            **extra_md,
        },
        "spec": {"nodeName": "node-1"},
        "status": {"phase": "Running"},
    }


def attempt(uid: str | None = None, dry_run: bool = False, user: str = "admin") -> EvictionAttempt:
    return EvictionAttempt("ns", "db-0", uid, dry_run, user)


def request(
    uid: str = "u1",
    requesters: tuple[str, ...] = (BRIDGE_REQUESTER,),
    targets: tuple[str, ...] | None = ("mover.example.com", IMPERATIVE_INTERCEPTOR),
    active: str | None = "mover.example.com",
    message: str = "",
    condition: str | None = None,
    **extra_md: Any,
) -> EvictionRequestView:
    status: dict[str, Any] = {}
    if targets is not None:
        status["targetInterceptors"] = [{"name": n} for n in targets]
        status["activeInterceptors"] = [active] if active else []
        status["interceptors"] = [{"name": n, "message": message} for n in targets]
    obj = {
        "metadata": {
            "name": uid,
            "namespace": "ns",
            "uid": "req-" + uid,
            "resourceVersion": "7",
            "creationTimestamp": format_time(NOW - timedelta(minutes=10)),
            **extra_md,
        },
        "spec": {
            "target": {"pod": {"name": "db-0", "uid": uid}},
            "requesters": [{"name": r} for r in requesters],
        },
        "status": status,
    }
    if condition is not None:
        status["conditions"] = set_condition([], condition, "True", "Test", "", NOW)
    return EvictionRequestView.from_obj(obj)


def run(
    a: EvictionAttempt,
    p: dict[str, Any] | None,
    r: EvictionRequestView | None = None,
    departed: Departed | None = None,
    settings: BridgeSettings = SETTINGS,
) -> Verdict:
    return decide(a, p, r, departed, settings, NOW)


# --- who passes untouched -------------------------------------------------------------------


def test_a_pod_without_interceptors_is_allowed_without_a_write() -> None:
    v = run(attempt(), pod(labels={"app": "web"}))
    assert (v.allowed, v.why, v.write) == (True, "no-interceptors", None)


def test_the_controllers_own_evictions_pass_whatever_the_turn() -> None:
    v = run(attempt(user=OWN), pod(), None)
    assert (v.allowed, v.why, v.write) == (True, "own", None)


def test_daemonset_pods_pass_unless_configured() -> None:
    ds = pod(
        labels={"app": "agent"},
        ownerReferences=[{"kind": "DaemonSet", "controller": True, "name": "a", "uid": "d"}],
    )
    assert bridged_interceptors(ds, SETTINGS) == ()
    assert run(attempt(), ds).allowed
    wide = BridgeSettings(own_users=frozenset(), daemonset_pods=True)
    assert bridged_interceptors(ds, wide) == (DAEMONSET_INTERCEPTOR,)
    assert not run(attempt(), ds, settings=wide).allowed


def test_the_pods_own_annotation_counts_and_a_malformed_one_falls_back_to_defaults() -> None:
    own = pod(labels={}, annotations={INTERCEPTORS_ANNOTATION: "saver.example.com"})
    assert bridged_interceptors(own, SETTINGS) == ("saver.example.com",)
    bad = pod(annotations={INTERCEPTORS_ANNOTATION: "Not A Name"})
    assert bridged_interceptors(bad, SETTINGS) == ("mover.example.com",)


def test_terminating_and_terminal_pods_pass() -> None:
    assert run(attempt(), pod(deletionTimestamp=format_time(NOW))).why == "leaving"
    done = pod()
    done["status"]["phase"] = "Succeeded"
    assert run(attempt(), done).why == "leaving"


# --- the request decides ------------------------------------------------------------------------


def test_no_request_yet_creates_one_and_answers_429() -> None:
    v = run(attempt(), pod())
    assert (v.allowed, v.code, v.reason) == (False, 429, "TooManyRequests")
    assert isinstance(v.write, EvictionRequestCreate)
    body = v.write.body
    assert body["metadata"]["name"] == "u1" and v.write.namespace == "ns"
    assert body["spec"] == {
        "target": {"pod": {"name": "db-0", "uid": "u1"}},
        "requesters": [{"name": BRIDGE_REQUESTER}],
    }
    assert body["metadata"]["labels"] == {"app": "db", NODE_LABEL: "node-1"}
    assert body["metadata"]["ownerReferences"][0]["uid"] == "u1"
    assert "mover.example.com goes first" in v.message


def test_the_active_interceptor_and_its_message_are_named() -> None:
    v = run(attempt(), pod(), request(message="moving to node-2"))
    assert (v.allowed, v.code, v.write) == (False, 429, None)
    assert "interceptor mover.example.com is handling" in v.message
    assert "moving to node-2" in v.message
    assert IMPERATIVE_INTERCEPTOR in v.message


def test_someone_elses_request_gets_the_bridge_as_requester() -> None:
    v = run(attempt(), pod(), request(requesters=(REQUESTER,)))
    assert v.code == 429
    assert v.write == RequesterPatch("ns", "u1", "7", (REQUESTER, BRIDGE_REQUESTER))
    assert v.write.to_patch() == {
        "metadata": {"resourceVersion": "7"},
        "spec": {"requesters": [{"name": REQUESTER}, {"name": BRIDGE_REQUESTER}]},
    }


def test_a_request_not_started_yet_waits_for_its_first_interceptor() -> None:
    v = run(attempt(), pod(), request(targets=None))
    assert v.code == 429 and "first interceptor (mover.example.com)" in v.message


def test_the_imperative_turn_allows_without_a_write() -> None:
    v = run(attempt(), pod(), request(requesters=(REQUESTER,), active=IMPERATIVE_INTERCEPTOR))
    assert (v.allowed, v.why, v.write) == (True, "turn", None)


def test_a_canceled_request_is_made_anew_and_an_evicted_one_lets_through() -> None:
    v = run(attempt(), pod(), request(condition="Canceled"))
    assert v.code == 429 and isinstance(v.write, RecreateRequest)
    assert (v.write.name, v.write.uid, v.write.resource_version) == ("u1", "req-u1", "7")
    assert run(attempt(), pod(), request(condition="Evicted")).allowed


def test_a_request_being_deleted_waits_without_a_write() -> None:
    v = run(attempt(), pod(), request(deletionTimestamp=format_time(NOW)))
    assert (v.code, v.write) == (429, None)


# --- gone -----------------------------------------------------------------------------------------

GONE = Departed("u0", NOW - timedelta(minutes=2), NOW - timedelta(seconds=30))


def test_a_pod_replaced_under_its_name_is_gone_for_the_drain_that_asked() -> None:
    replacement = pod(uid="u1", created=NOW - timedelta(seconds=40))
    v = run(attempt(), replacement, None, GONE)
    assert (v.allowed, v.code, v.reason, v.write) == (False, 404, "NotFound", None)
    assert "UID u0" in v.message and "UID u1" in v.message


def test_gone_by_uid_precondition_at_any_age() -> None:
    old = Departed("u0", NOW - timedelta(days=2), NOW - timedelta(days=1))
    assert run(attempt(uid="u0"), pod(), None, old).code == 404
    assert run(attempt(uid="u0"), None, None, old).code == 404


def test_a_pod_deleted_outright_is_gone() -> None:
    assert run(attempt(), None, None, GONE).code == 404


def test_an_old_departure_or_an_older_pod_is_not_gone() -> None:
    stale = Departed("u0", NOW - timedelta(hours=1), NOW - timedelta(minutes=6))
    assert run(attempt(), pod(), None, stale).write is not None  # a new request for u1
    older = pod(created=NOW - timedelta(hours=1))  # there before the bridge asked for u0
    assert run(attempt(), older, None, GONE).code == 429
    same = Departed("u1", None, NOW)  # a stale memory of the pod that is still there
    assert run(attempt(), pod(), None, same).code == 429


def test_an_unknown_pod_or_uid_is_left_to_the_api_server() -> None:
    assert run(attempt(), None).why == "unknown"
    assert run(attempt(uid="other"), pod()).why == "unknown"


def test_departure_is_remembered_only_for_the_bridges_requests() -> None:
    p = pod()
    assert departure(p, request(), NOW) == Departed("u1", NOW - timedelta(minutes=10), NOW)
    assert departure(p, request(requesters=(REQUESTER,)), NOW) is None
    assert departure(p, None, NOW) is None


# --- properties -----------------------------------------------------------------------------------

NAMES = st.sampled_from(["mover.example.com", "saver.example.com", DAEMONSET_INTERCEPTOR])
LABELS = st.sampled_from([{"app": "db"}, {"app": "web"}, {}])


@st.composite
def situations(
    draw: st.DrawFn,
) -> tuple[EvictionAttempt, dict[str, Any], EvictionRequestView | None]:
    annotations = {}
    if draw(st.booleans()):
        annotations[INTERCEPTORS_ANNOTATION] = ",".join(
            draw(st.lists(NAMES, unique=True, max_size=3))
        )
    p = pod(labels=draw(LABELS), annotations=annotations)
    r = None
    if draw(st.booleans()):
        targets = (*draw(st.lists(NAMES, unique=True, max_size=3)), IMPERATIVE_INTERCEPTOR)
        r = request(
            requesters=draw(st.sampled_from([(BRIDGE_REQUESTER,), (REQUESTER,), ()])),
            targets=draw(st.sampled_from([None, targets])),
            active=draw(st.sampled_from([None, *targets])),
            condition=draw(st.sampled_from([None, "Canceled", "Evicted"])),
        )
    a = attempt(dry_run=draw(st.booleans()), user=draw(st.sampled_from(["admin", OWN])))
    return a, p, r


@given(situations())
def test_a_pod_with_interceptors_is_never_allowed_before_the_imperative_turn(
    s: tuple[EvictionAttempt, dict[str, Any], EvictionRequestView | None],
) -> None:
    a, p, r = s
    v = run(a, p, r)
    if v.allowed and a.user != OWN and not a.dry_run and bridged_interceptors(p, SETTINGS):
        assert r is not None
        assert (
            r.evicted
            or r.active in (IMPERATIVE_INTERCEPTOR, DAEMONSET_INTERCEPTOR)
            or (r.active is None and r.target_interceptors)
        )


@given(situations())
def test_without_interceptors_always_allowed_and_nothing_written(
    s: tuple[EvictionAttempt, dict[str, Any], EvictionRequestView | None],
) -> None:
    a, p, r = s
    v = run(a, p, r)
    if not bridged_interceptors(p, SETTINGS):
        assert v.allowed and v.write is None


@given(situations())
def test_a_dry_run_writes_nothing_and_reveals_nothing_of_the_pod(
    s: tuple[EvictionAttempt, dict[str, Any], EvictionRequestView | None],
) -> None:
    # the same answer for every pod, request and departure: nothing of which pods have
    # interceptors, their turns or their messages goes to whoever sends a dry run
    a, p, r = s
    dry = run(EvictionAttempt(a.namespace, a.name, a.uid, True, a.user), p, r)
    assert dry == Verdict(True, "dry-run", DRY_RUN)
    assert run(EvictionAttempt(a.namespace, a.name, a.uid, True, a.user), None, None, GONE) == dry


def test_a_namespace_that_opted_out_is_left_alone() -> None:
    # kube-apiserver sends no review from there (the webhook's namespaceSelector): one that
    # comes anyway is allowed, nothing asked for
    quiet = {"metadata": {"name": "ns", "labels": {BRIDGE_OPT_OUT_LABEL: "disabled"}}}
    v = decide(attempt(), pod(), None, None, SETTINGS, NOW, None, quiet)
    assert (v.allowed, v.why, v.write) == (True, "opted-out", None)
    other = {"metadata": {"name": "ns", "labels": {BRIDGE_OPT_OUT_LABEL: "enabled"}}}
    assert decide(attempt(), pod(), None, None, SETTINGS, NOW, None, other).code == 429


@given(situations())
def test_every_denial_is_a_429_that_says_why(
    s: tuple[EvictionAttempt, dict[str, Any], EvictionRequestView | None],
) -> None:
    v = run(*s)
    if not v.allowed:
        assert v.code == 429 and v.message


def test_a_drain_of_the_replacements_node_means_the_replacement() -> None:
    # kubectl drain, kured, the autoscalers cordon or taint a node before they evict: a
    # name-only eviction of the replacement on such a node is a new drain, not the old one's
    replacement = pod(uid="u1", created=NOW - timedelta(seconds=40))
    replacement["spec"]["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]

    def on(spec: dict[str, Any]) -> Verdict:
        return decide(attempt(), replacement, None, GONE, SETTINGS, NOW, {"spec": spec})

    assert on({}).code == 404  # the old drain retrying
    assert on({"unschedulable": True}).code == 429  # cordoned: a drain of its node
    autoscaler = {"key": "ToBeDeletedByClusterAutoscaler", "effect": "NoSchedule"}
    assert on({"taints": [autoscaler]}).code == 429
    assert on({"taints": [{"key": "karpenter.sh/disrupted", "effect": "NoExecute"}]}).code == 429
    # taints it tolerates, or that only prefer, say nothing of a drain
    assert on({"taints": [{"key": "dedicated", "effect": "NoSchedule"}]}).code == 404
    assert on({"taints": [{"key": "spot", "effect": "PreferNoSchedule"}]}).code == 404
    not_ready = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
    assert on({"taints": [not_ready]}).code == 404  # the node's condition, not a drain
    # a UID precondition for the pod gone is answered 404 whatever the node
    gone = decide(
        attempt(uid="u0"), replacement, None, GONE, SETTINGS, NOW, {"spec": {"unschedulable": True}}
    )
    assert gone.code == 404


WITHIN = SETTINGS.asked_again_within


def held(verdict: Verdict, asked_at: datetime | None) -> Verdict:
    return held_until_asked_again(verdict, attempt(), pod(), asked_at, NOW, SETTINGS)


def test_a_request_is_asked_for_only_when_the_eviction_is_asked_for_again() -> None:
    first = decide(attempt(), pod(), None, None, SETTINGS, NOW)
    assert isinstance(first.write, EvictionRequestCreate)
    once = held(first, None)
    assert (once.allowed, once.code, once.why, once.write) == (False, 429, "asked-once", None)
    assert "once it is asked for again within 60s" in once.message
    assert "waits for interceptor mover.example.com" in once.message
    assert IMPERATIVE_INTERCEPTOR in once.message  # still says when it is allowed
    # asked again within the bound (at its very end, too): the write goes ahead as decided
    assert held(first, NOW - timedelta(seconds=5)) == first
    assert held(first, NOW - WITHIN) == first
    # a first attempt older than the bound, or one the clock says is still to come, is no
    # confirmation: the caller of then gave up
    assert held(first, NOW - WITHIN - timedelta(microseconds=1)) == once
    assert held(first, NOW + timedelta(seconds=1)) == once


def test_a_request_of_someone_elses_goes_on_and_the_bridge_joins_only_when_asked_again() -> None:
    theirs = request(requesters=(REQUESTER,), message="moving it")
    first = decide(attempt(), pod(), theirs, None, SETTINGS, NOW)
    assert isinstance(first.write, RequesterPatch)
    once = held(first, None)
    assert once == Verdict(False, "waiting", first.message, 429)  # whose turn it is, still
    assert held(first, NOW - timedelta(seconds=5)) == first


@given(situations(), st.one_of(st.none(), st.timedeltas(timedelta(0), timedelta(minutes=3))))
def test_nothing_is_written_for_an_eviction_asked_for_once(
    s: tuple[EvictionAttempt, dict[str, Any], EvictionRequestView | None],
    ago: timedelta | None,
) -> None:
    # whatever the situation, the hold changes no answer but the writing: an answer that
    # writes nothing is kept as it is, and a write goes only with an attempt asked again in time
    v = run(*s)
    h = held_until_asked_again(v, s[0], s[1], None if ago is None else NOW - ago, NOW, SETTINGS)
    if v.write is None or (ago is not None and ago <= WITHIN):
        assert h == v
    else:
        assert h.write is None and not h.allowed and h.code == 429
