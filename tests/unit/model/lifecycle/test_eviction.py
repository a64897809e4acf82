"""The upstream Eviction decision (nodeagent.model.lifecycle.eviction): examples of each step,
and a property: along any course of responders, requesters and the pod, every status the
decision writes is one the server accepts (nodeagent_testbed.sim.lifecycle_rules, kept true to
the real server by tests/integration/upstream), one responder at a time, in the server's order,
none moved on before its heartbeat lapsed."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from nodeagent.model.bodies import condition
from nodeagent.model.lifecycle.eviction import (
    COMPLETION_GRACE,
    GRACEFUL_COMPLETION_DELAY,
    SERVER_HEARTBEAT_DEADLINE,
    EvictionPlan,
    Target,
    decide,
)
from nodeagent.model.lifecycle.responders import Responder, order_key, sort_responders
from nodeagent.model.lifecycle.succession import next_name, pod_name_index
from nodeagent.model.names import DAEMONSET_RESPONDER, IMPERATIVE_RESPONDER, NODE_LABEL
from nodeagent.model.times import format_time
from nodeagent_testbed.sim.lifecycle_rules import refusals

Obj = dict[str, Any]
T0 = datetime(2026, 11, 27, 10, 0, tzinfo=UTC)
UID = "0b4f3b4e-5d6c-4e8f-9a0b-1c2d3e4f5a6b"
TARGET = Target("default", "web-0", UID)


def pod(*responders: tuple[str, int], **status: Any) -> Obj:
    return {
        "metadata": {"name": "web-0", "namespace": "default", "uid": UID},
        "spec": {"evictionResponders": [{"name": n, "priority": p} for n, p in responders]},
        "status": {"phase": "Running", **status},
    }


def request(name: str, requester: str, intent: str = "Eviction", uid: str = "") -> Obj:
    return {
        "metadata": {"name": name, "namespace": "default", "uid": uid or f"uid-{name}"},
        "spec": {
            "target": {"pod": {"name": "web-0", "uid": UID}},
            "requester": requester,
            "intent": intent,
        },
    }


@dataclass
class World:
    """One target: its requests, its Eviction as the server holds it, its pod, the clock."""

    pod: Obj | None
    requests: list[Obj] = field(default_factory=list)
    eviction: Obj | None = None
    now: datetime = T0
    version: int = 1
    refused: list[str] = field(default_factory=list)
    ours: tuple[Responder, ...] = ()
    gone_at: datetime | None = None
    ended: list[Obj] = field(default_factory=list)  # Evictions the current one succeeded

    def step(self) -> EvictionPlan:
        evictions = [*self.ended, *([self.eviction] if self.eviction is not None else [])]
        plan = decide(
            TARGET,
            self.requests,
            evictions,
            self.pod,
            self.now,
            responders=self.ours,
            gone_at=self.gone_at,
        )
        if plan.create is not None:
            if self.eviction is not None:
                self.ended.append(self.eviction)
            self.eviction = {**copy.deepcopy(plan.create), "status": {}}
            uid = f"ev-uid-{len(self.ended)}"
            self.eviction["metadata"].update(uid=uid, creationTimestamp=format_time(self.now))
            self._bump()
        if plan.status is not None:
            assert self.eviction is not None
            assert plan.status.name == self.eviction["metadata"]["name"]
            old = self.eviction.get("status") or {}
            self.refused += refusals(old, plan.status.status, self.now)
            self.eviction["status"] = copy.deepcopy(plan.status.status)
            self._bump()
        if plan.metadata is not None:
            assert self.eviction is not None
            md, patch = self.eviction["metadata"], plan.metadata[1]["metadata"]
            md["labels"] = {**md.get("labels", {}), **patch.get("labels", {})}
            md["ownerReferences"] = patch.get("ownerReferences", md.get("ownerReferences"))
        for r in plan.requests:
            for req in self.requests:
                if req["metadata"]["name"] == r.name:
                    req["status"] = r.status
        return plan

    def _bump(self) -> None:
        assert self.eviction is not None
        self.version += 1
        self.eviction["metadata"]["resourceVersion"] = str(self.version)

    @property
    def status(self) -> Obj:
        return (self.eviction or {}).get("status") or {}

    def states(self) -> dict[str, str]:
        return {t["name"]: t["state"] for t in self.status.get("targetResponders", [])}

    def active(self) -> str | None:
        return next((n for n, s in self.states().items() if s == "Active"), None)

    def responder(self, name: str) -> Obj:
        return next(r for r in self.status["responders"] if r["name"] == name)

    def respond(self, **fields: datetime) -> None:
        """The active responder writes its own entry (heartbeatTime, completionTime)."""
        name = self.active()
        assert name is not None
        old = copy.deepcopy(self.status)
        self.responder(name).update({k: format_time(v) for k, v in fields.items()})
        assert refusals(old, self.status, self.now) == []

    def reason(self, type_: str) -> str | None:
        c = condition(self.status, type_)
        return f"{c['status']}/{c['reason']}" if c else None


def started() -> World:
    w = World(pod(("acme.io/mover", 10000), ("zeta.io/keeper", 20000)))
    w.requests.append(request("drain", "nodeagent.io/node-maintenance"))
    w.step()  # creates the Eviction
    w.step()  # its first status
    return w


# -- examples ------------------------------------------------------------------------------------


def test_a_request_gets_one_eviction_owned_by_it_and_labelled_by_role() -> None:
    w = World(pod(("acme.io/mover", 10000)))
    w.requests.append(request("drain", "nodeagent.io/node-maintenance"))
    plan = w.step()
    assert plan.create is not None
    md = plan.create["metadata"]
    assert md["name"] == "pod-1-web-0" and md["namespace"] == "default"
    # labelled with the responders its first status lists: no metadata patch for them later
    assert md["labels"] == {
        "nodeagent.io/node-maintenance": "requester",
        "acme.io/mover": "responder",
        IMPERATIVE_RESPONDER: "responder",
    }
    assert [o["name"] for o in md["ownerReferences"]] == ["drain"]
    assert plan.create["spec"] == {"target": {"pod": {"name": "web-0", "uid": UID}}}
    plan = w.step()
    assert plan.status is not None and plan.metadata is None
    # a second requester is labelled by a patch
    w.requests.append(request("other", "acme.io/drainer"))
    plan = w.step()
    assert plan.metadata is not None
    assert plan.metadata[1]["metadata"]["labels"] == {"acme.io/drainer": "requester"}


def test_the_eviction_names_the_pods_node_for_its_node_agent() -> None:
    on_node = pod()
    on_node["spec"]["nodeName"] = "node-1"
    w = World(on_node)
    w.requests.append(request("drain", "nodeagent.io/node-maintenance"))
    plan = w.step()
    assert plan.create is not None
    assert plan.create["metadata"]["labels"][NODE_LABEL] == "node-1"
    # an Eviction made before it was scheduled, or by someone else, gets it afterwards
    del w.eviction["metadata"]["labels"][NODE_LABEL]  # type: ignore[index]
    plan = w.step()
    assert plan.metadata is not None
    assert plan.metadata[1]["metadata"]["labels"][NODE_LABEL] == "node-1"


def test_responders_go_highest_priority_first_the_evictor_last() -> None:
    w = started()
    assert list(w.states()) == ["zeta.io/keeper", "acme.io/mover", IMPERATIVE_RESPONDER]
    assert w.states() == {
        "zeta.io/keeper": "Active",
        "acme.io/mover": "Inactive",
        IMPERATIVE_RESPONDER: "Inactive",
    }
    assert w.responder("zeta.io/keeper")["startTime"] == format_time(T0)
    assert w.reason("TargetEvicted") == "False/AwaitingEviction"
    assert w.reason("Failed") == "False/AwaitingEviction"
    assert w.requests[0]["status"]["conditions"] == w.status["conditions"]
    assert w.refused == []


def test_our_responders_join_the_pods_own_in_the_servers_order() -> None:
    w = World(
        pod(("acme.io/mover", 10000), ("zeta.io/keeper", 20000)),
        ours=(
            Responder("annotate.nodeagent.io/mover.acme.io", 10000),
            Responder(DAEMONSET_RESPONDER, 9999),
        ),
    )
    w.requests.append(request("drain", "nodeagent.io/node-maintenance"))
    w.step()
    w.step()
    assert list(w.states()) == [
        "zeta.io/keeper",
        "acme.io/mover",  # a tie at 10000: io.acme before io.nodeagent.annotate
        "annotate.nodeagent.io/mover.acme.io",
        DAEMONSET_RESPONDER,
        IMPERATIVE_RESPONDER,
    ]
    assert w.refused == []


def test_ties_go_by_domain_from_its_top_label_down() -> None:
    names = ["b.example.io/x", "a.zeta.com/x", "example.io/y", "example.io/x"]
    ordered = [e["name"] for e in sort_responders([{"name": n, "priority": 5} for n in names])]
    assert ordered == ["a.zeta.com/x", "example.io/x", "example.io/y", "b.example.io/x"]
    assert order_key("a.io/x", 2) < order_key("a.io/x", 1)


def test_a_completed_responder_hands_on_to_the_next() -> None:
    w = started()
    w.now += timedelta(minutes=1)
    w.respond(heartbeatTime=w.now, completionTime=w.now)
    w.step()
    assert w.states()["zeta.io/keeper"] == "Completed"
    assert w.active() == "acme.io/mover"
    assert w.responder("acme.io/mover")["startTime"] == format_time(w.now)
    assert w.refused == []


def test_a_lapsed_heartbeat_interrupts_only_after_the_deadline() -> None:
    w = started()
    w.now += timedelta(minutes=5)
    w.respond(heartbeatTime=w.now)
    w.now += SERVER_HEARTBEAT_DEADLINE - timedelta(seconds=1)
    plan = w.step()
    assert w.active() == "zeta.io/keeper"
    assert plan.requeue_after == 1.0
    w.now += timedelta(seconds=1)
    w.step()
    assert w.states()["zeta.io/keeper"] == "Interrupted"
    assert w.active() == "acme.io/mover"
    assert w.refused == []


def test_a_shorter_configured_deadline_still_waits_for_the_servers() -> None:
    w = started()
    w.now += timedelta(minutes=2)
    plan = decide(TARGET, w.requests, [w.eviction or {}], w.pod, w.now, timedelta(minutes=1))
    assert plan.status is None
    assert plan.requeue_after == (SERVER_HEARTBEAT_DEADLINE - timedelta(minutes=2)).total_seconds()


def test_nothing_moves_while_the_pod_terminates() -> None:
    w = started()
    assert w.pod is not None
    w.pod["metadata"]["deletionTimestamp"] = format_time(w.now)
    w.now += SERVER_HEARTBEAT_DEADLINE * 2
    plan = w.step()
    assert w.active() == "zeta.io/keeper" and plan.requeue_after is None


def test_the_pod_gone_ends_it_evicted() -> None:
    w = started()
    w.pod = None
    w.step()
    assert w.reason("TargetEvicted") == "True/PodDeleted"
    assert w.reason("Failed") == "False/Succeeded"
    assert w.states()["zeta.io/keeper"] == "Interrupted"  # it never said it was done
    assert w.requests[0]["status"]["conditions"] == w.status["conditions"]
    assert w.refused == []


def test_the_pod_gone_waits_for_the_active_responder_to_report_then_interrupts_it() -> None:
    """Upstream's GracefulCompletionDelay: 5 s after the pod was seen gone."""
    w = started()
    w.pod, w.gone_at = None, w.now
    plan = w.step()
    assert plan.requeue_after == GRACEFUL_COMPLETION_DELAY.total_seconds()
    assert w.active() == "zeta.io/keeper" and w.reason("TargetEvicted") == "False/AwaitingEviction"
    w.now += GRACEFUL_COMPLETION_DELAY
    plan = w.step()
    assert plan.requeue_after is None and w.states()["zeta.io/keeper"] == "Interrupted"
    assert w.reason("TargetEvicted") == "True/PodDeleted"
    assert w.refused == []


def test_the_pod_gone_completes_a_responder_that_reports_within_the_delay() -> None:
    w = started()
    w.pod, w.gone_at = None, w.now
    w.step()
    w.now += timedelta(seconds=2)
    w.respond(completionTime=w.now)
    w.step()
    assert w.states()["zeta.io/keeper"] == "Completed"
    assert w.reason("TargetEvicted") == "True/PodDeleted"
    assert w.refused == []


def test_a_terminal_pod_being_deleted_waits_from_its_deletion_timestamp() -> None:
    w = started()
    assert w.pod is not None
    w.pod["metadata"]["deletionTimestamp"] = format_time(w.now + timedelta(seconds=30))
    w.pod["status"]["phase"] = "Failed"
    plan = w.step()
    assert plan.requeue_after == 35 and w.active() == "zeta.io/keeper"
    w.now += timedelta(seconds=35)
    w.step()
    assert w.states()["zeta.io/keeper"] == "Interrupted"
    assert w.reason("TargetEvicted") == "True/PodTerminal"
    assert w.refused == []


def owned_by_the_pod(r: Obj) -> Obj:
    r["metadata"]["ownerReferences"] = [{"kind": "Pod", "name": "web-0", "uid": UID}]
    return r


def test_requests_the_pod_owned_are_left_to_the_garbage_collector() -> None:
    w = started()
    owned_by_the_pod(w.requests[0])
    w.pod = None
    assert w.step() == EvictionPlan()  # nothing written: the requests and Eviction go with it
    w.requests.append(request("second", "acme.io/drainer"))  # one that outlives the pod
    w.step()
    assert w.reason("TargetEvicted") == "True/PodDeleted"
    assert w.refused == []


def test_an_eviction_whose_every_request_went_with_the_pod_is_left_to_the_collector() -> None:
    w = started()
    assert w.eviction is not None and w.eviction["metadata"]["ownerReferences"]
    w.requests.clear()  # deleted while the pod is there: it is told nobody wants it
    w.step()
    assert w.reason("Failed") == "True/CanceledDueToNoRequesters"
    w = started()
    w.requests.clear()
    w.pod = None  # collected with the pod: the Eviction, owned by them only, goes next
    assert w.step() == EvictionPlan()
    assert w.eviction is not None
    w.eviction["metadata"]["ownerReferences"].append({"kind": "Job", "name": "j", "uid": "u"})
    w.step()  # another owner keeps it: ended as the pod is gone
    assert w.reason("TargetEvicted") == "True/PodDeleted"


def test_no_eviction_is_made_for_a_deleted_pod_that_owns_the_request() -> None:
    w = World(pod=None, requests=[owned_by_the_pod(request("drain", "acme.io/drainer"))])
    assert w.step() == EvictionPlan() and w.eviction is None


def test_a_terminal_pod_that_owns_the_requests_still_ends_it_evicted() -> None:
    w = started()
    owned_by_the_pod(w.requests[0])
    assert w.pod is not None
    w.pod["status"]["phase"] = "Failed"  # still there: nothing is collected
    w.step()
    assert w.reason("TargetEvicted") == "True/PodTerminal"


def test_a_pod_of_the_same_name_with_another_uid_is_not_the_target() -> None:
    w = started()
    assert w.pod is not None
    w.pod["metadata"]["uid"] = "another"
    w.step()
    assert w.reason("TargetEvicted") == "True/PodDeleted"


def request_reasons(r: Obj) -> dict[str, str]:
    return {c["type"]: f"{c['status']}/{c['reason']}" for c in r["status"]["conditions"]}


def test_a_request_for_a_pod_that_is_not_there_is_refused_with_no_eviction() -> None:
    w = World(pod=None, requests=[request("drain", "acme.io/drainer")])
    plan = w.step()
    assert plan.create is None and w.eviction is None
    assert request_reasons(w.requests[0]) == {
        "Failed": "True/EvictionInvalid",
        "TargetEvicted": "False/EvictionFailed",
    }
    assert w.requests[0]["status"]["conditions"][0]["message"] == "Target pod not found."
    w.now += timedelta(minutes=1)
    assert w.step() == EvictionPlan()  # said once


def test_a_request_for_another_uid_of_the_name_is_refused() -> None:
    other = pod()
    other["metadata"]["uid"] = "another"
    w = World(pod=other, requests=[request("drain", "acme.io/drainer")])
    w.step()
    assert w.eviction is None
    assert request_reasons(w.requests[0])["Failed"] == "True/EvictionInvalid"
    message = w.requests[0]["status"]["conditions"][0]["message"]
    assert message == f"Target pod UID mismatch: expected {UID}, got another."


def test_a_terminal_pod_ends_it_evicted() -> None:
    w = started()
    assert w.pod is not None
    w.pod["status"]["phase"] = "Succeeded"
    w.step()
    assert w.reason("TargetEvicted") == "True/PodTerminal"


def test_every_requester_withdrawn_cancels_and_a_new_intent_starts_over() -> None:
    w = started()
    w.requests.append(request("second", "acme.io/drainer"))
    w.step()
    w.requests[0]["spec"]["intent"] = "Withdrawn"
    w.step()
    assert w.active() == "zeta.io/keeper"  # acme.io/drainer still wants it
    w.requests[1]["metadata"]["deletionTimestamp"] = format_time(w.now)  # deleting: withdrawn
    w.step()
    assert w.reason("Failed") == "True/CanceledDueToNoRequesters"
    assert w.states()["zeta.io/keeper"] == "Canceled"
    assert w.status["requesters"] == [
        {"name": "acme.io/drainer", "intent": "Withdrawn"},
        {"name": "nodeagent.io/node-maintenance", "intent": "Withdrawn"},
    ]
    w.requests[0]["spec"]["intent"] = "Eviction"
    plan = w.step()
    # the next one, the canceled one kept beside it as upstream keeps it
    assert plan.create is not None and plan.create["metadata"]["name"] == "pod-2-web-0"
    w.step()
    assert w.active() == "zeta.io/keeper" and w.reason("Failed") == "False/AwaitingEviction"
    [canceled] = w.ended
    assert (condition(canceled["status"], "Failed") or {}).get(
        "reason"
    ) == "CanceledDueToNoRequesters"
    # the requests mirror the one under way
    assert w.requests[0]["status"]["conditions"] == w.status["conditions"]
    assert w.refused == []


def test_no_responder_left_fails_it() -> None:
    w = started()
    for _ in range(3):
        w.now += timedelta(minutes=1)
        w.respond(heartbeatTime=w.now, completionTime=w.now)
        plan = w.step()
    # the last one's completion waits a little for the pod's end to show
    assert w.reason("Failed") == "False/AwaitingEviction"
    assert plan.requeue_after == COMPLETION_GRACE.total_seconds()
    w.now += COMPLETION_GRACE
    w.step()
    assert w.reason("Failed") == "True/NoFurtherResponder"
    assert w.reason("TargetEvicted") == "False/EvictionFailed"
    assert set(w.states().values()) == {"Completed"}
    assert w.refused == []


def no_responder_left() -> World:
    w = started()
    for _ in range(3):
        w.now += timedelta(minutes=1)
        w.respond(heartbeatTime=w.now, completionTime=w.now)
        w.step()
    w.now += COMPLETION_GRACE
    w.step()
    assert w.reason("Failed") == "True/NoFurtherResponder"
    return w


def test_after_no_responder_left_a_new_intent_makes_the_next_eviction() -> None:
    """As upstream: the failed Eviction stands while its requester still wants the pod gone
    (no new Eviction each turn); withdrawing and asking again makes the next one."""
    w = no_responder_left()
    assert w.step().create is None
    w.now += timedelta(minutes=30)
    assert w.step().create is None and w.reason("Failed") == "True/NoFurtherResponder"
    w.requests[0]["spec"]["intent"] = "Withdrawn"
    w.step()  # the ended Eviction records the withdrawal
    assert w.status["requesters"][0]["intent"] == "Withdrawn"
    w.requests[0]["spec"]["intent"] = "Eviction"
    plan = w.step()
    assert plan.create is not None and plan.create["metadata"]["name"] == "pod-2-web-0"
    w.step()
    assert w.active() == "zeta.io/keeper" and w.reason("Failed") == "False/AwaitingEviction"
    assert w.requests[0]["status"]["conditions"] == w.status["conditions"]
    assert len(w.ended) == 1 and w.refused == []


def test_after_no_responder_left_a_new_requester_makes_the_next_eviction() -> None:
    w = no_responder_left()
    w.requests.append(request("other", "acme.io/drainer"))
    plan = w.step()
    assert plan.create is not None and plan.create["metadata"]["name"] == "pod-2-web-0"
    assert {o["name"] for o in plan.create["metadata"]["ownerReferences"]} == {"drain", "other"}


def test_an_evicted_target_gets_no_next_eviction() -> None:
    w = started()
    w.pod = None
    w.gone_at = w.now
    w.now += GRACEFUL_COMPLETION_DELAY
    w.step()
    assert w.reason("TargetEvicted") == "True/PodDeleted"
    w.requests.append(request("other", "acme.io/drainer"))
    assert w.step().create is None


def test_the_next_name_counts_on_from_the_pod_names_evictions() -> None:
    def named(name: str, target: str = "web-0") -> Obj:
        return {
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"target": {"pod": {"name": target, "uid": "x"}}},
        }

    assert next_name("web-0", []) == "pod-1-web-0"
    # of another UID of the name (a StatefulSet's pod made again), and made by hand
    assert next_name("web-0", [named("pod-3-web-0"), named("pod-7-web-0", "other")]) == (
        "pod-8-web-0"
    )
    # names of another pod or of no such form count nothing
    assert next_name("web-0", [named("pod-9-web-00"), named(UID), named("pod-x-web-0")]) == (
        "pod-1-web-0"
    )
    assert pod_name_index(named("pod-7-web-0", "other")) == ["default/other", "default/web-0"]
    long = "a" * 253
    first = next_name(long, [])
    assert len(first) == 253 and next_name(long, [named(first, long)]) == f"pod-2-{long}"[:253]


def test_a_second_eviction_of_the_target_is_refused_the_first_adopted() -> None:
    w = started()
    assert w.eviction is not None
    other: Obj = {
        "metadata": {
            "name": "by-hand",
            "namespace": "default",
            "uid": "other",
            "resourceVersion": "7",
            "creationTimestamp": format_time(T0 + timedelta(minutes=1)),
        },
        "spec": {"target": {"pod": {"name": "web-0", "uid": UID}}},
    }
    plan = decide(TARGET, w.requests, [other, w.eviction], w.pod, w.now)
    assert [s.name for s in plan.invalid] == ["by-hand"]
    refused = plan.invalid[0].status
    pair = {c["type"]: (c["status"], c["reason"]) for c in refused["conditions"]}
    # the pair and the generation seen, as upstream writes them
    assert pair == {
        "Failed": ("True", "EvictionInvalid"),
        "TargetEvicted": ("False", "EvictionFailed"),
    }
    assert refused["observedGeneration"] == 1
    assert plan.create is None and plan.status is None


def test_a_deleted_request_stays_an_owner() -> None:
    w = started()
    w.requests.append(request("second", "acme.io/drainer"))
    w.step()
    assert w.eviction is not None
    owners = w.eviction["metadata"]["ownerReferences"]
    assert [o["name"] for o in owners] == ["drain", "second"]
    assert w.eviction["metadata"]["labels"]["acme.io/drainer"] == "requester"
    del w.requests[1]
    plan = w.step()
    assert plan.metadata is None  # nothing dropped: the collector removes it with the last


def test_nothing_is_made_for_requests_that_do_not_want_it() -> None:
    w = World(pod())
    w.requests.append(request("drain", "nodeagent.io/node-maintenance", intent="Withdrawn"))
    assert w.step() == EvictionPlan()


# -- the property --------------------------------------------------------------------------------

EVENTS = st.sampled_from(
    [
        *("minutes", "deadline", "heartbeat", "complete", "terminating", "gone", "terminal"),
        *("withdraw", "request", "new-requester"),
    ]
)
RESPONDERS = st.lists(
    st.tuples(
        st.sampled_from(["a.io/x", "b.io/x", "zeta.com/y", "a.b.io/z"]), st.integers(1000, 3000)
    ),
    max_size=4,
    unique_by=lambda r: r[0],
)


OURS = st.lists(
    st.sampled_from([DAEMONSET_RESPONDER, "annotate.nodeagent.io/mover.acme.io"]), unique=True
).map(lambda names: tuple(Responder(n, 10000 - i) for i, n in enumerate(names)))


@given(RESPONDERS, OURS, st.lists(EVENTS, max_size=25))
def test_every_write_is_one_the_server_accepts(
    responders: list[tuple[str, int]], ours: tuple[Responder, ...], events: list[str]
) -> None:
    w = World(pod(*responders), ours=ours)
    w.requests.append(request("drain", "nodeagent.io/node-maintenance"))
    w.step()
    w.step()
    every = [*responders, *((r.name, r.priority) for r in ours)]
    expected = [n for n, _ in sorted(every, key=lambda r: order_key(*r))] + [IMPERATIVE_RESPONDER]
    for event in events:
        before = w.states()
        active = w.active()
        beat = None
        if active is not None:
            entry = w.responder(active)
            beat = entry.get("heartbeatTime") or entry.get("startTime")
        _happen(w, event)
        for _ in range(3):  # create, first status, and a look that changes nothing
            plan = w.step()
        assert plan.status is None and plan.create is None
        assert w.refused == []
        if w.eviction is None:
            continue
        # all of them, or only the evictor when the pod was gone before the first status
        assert list(w.states()) in ([], expected, [IMPERATIVE_RESPONDER])
        assert sum(s == "Active" for s in w.states().values()) <= 1
        interrupted = [
            n for n, s in w.states().items() if s == "Interrupted" and before.get(n) == "Active"
        ]
        ended = w.pod is None or w.pod["status"]["phase"] == "Failed"
        waited = w.gone_at is None or w.now >= w.gone_at + GRACEFUL_COMPLETION_DELAY
        if interrupted:  # only the one that was active, once its heartbeat lapsed or the pod
            # ended and it did not report within upstream's delay
            assert interrupted == [active]
            assert beat is not None
            lapsed = w.now >= datetime.fromisoformat(beat) + SERVER_HEARTBEAT_DEADLINE
            assert lapsed or (ended and waited)
        if w.pod is None and waited and not (w.reason("Failed") or "").startswith("True"):
            assert (w.reason("TargetEvicted") or "").startswith("True/")


def _happen(w: World, event: str) -> None:
    active = w.active()
    if event == "minutes":
        w.now += timedelta(minutes=3)
    elif event == "deadline":
        w.now += SERVER_HEARTBEAT_DEADLINE
    elif event in ("heartbeat", "complete") and active is not None and w.pod is not None:
        done = {"completionTime": w.now} if event == "complete" else {}
        if not w.responder(active).get("completionTime"):
            w.respond(heartbeatTime=w.now, **done)
    elif event == "terminating" and w.pod is not None:
        w.pod["metadata"]["deletionTimestamp"] = format_time(w.now)
    elif event == "gone":
        w.pod = None
        w.gone_at = w.gone_at or w.now
    elif event == "terminal" and w.pod is not None:
        w.pod["status"]["phase"] = "Failed"
    elif event == "withdraw" and w.requests:
        w.requests[0]["spec"]["intent"] = "Withdrawn"
    elif event == "request" and w.requests:
        w.requests[0]["spec"]["intent"] = "Eviction"
    elif event == "new-requester":
        n = len(w.requests)
        w.requests.append(request(f"r{n}", f"acme.io/r{n}"))


def test_within_one_second_the_eviction_under_way_is_kept() -> None:
    w = started()
    assert w.eviction is not None
    other: Obj = {
        "metadata": {
            "name": "0-by-hand",  # sorts first by name
            "namespace": "default",
            "uid": "other",
            "resourceVersion": "7",
            "creationTimestamp": w.eviction["metadata"]["creationTimestamp"],
        },
        "spec": {"target": {"pod": {"name": "web-0", "uid": UID}}},
    }
    plan = decide(TARGET, w.requests, [other, w.eviction], w.pod, w.now)
    assert [s.name for s in plan.invalid] == ["0-by-hand"]
