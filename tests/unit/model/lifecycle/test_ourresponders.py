"""nodeagent's interceptors as upstream responders (nodeagent.model.lifecycle.ourresponders,
nodeagent.controllers.interceptors.apis): their names, who goes upstream, and an Eviction read
and written as our interceptors read and write requests of our CRD."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from nodeagent.controllers.interceptors.apis import upstream
from nodeagent.model.interceptors.status import InterceptorStatus
from nodeagent.model.interceptors.targets import SelectorInterceptor
from nodeagent.model.lifecycle.ourresponders import (
    ResponderNames,
    our_responders,
    responder_entry,
    upstream_evicts,
    view_of_eviction,
)
from nodeagent.model.lifecycle.responders import Responder, pod_responders
from nodeagent.model.names import (
    DAEMONSET_INTERCEPTOR,
    DAEMONSET_RESPONDER,
    IMPERATIVE_INTERCEPTOR,
    IMPERATIVE_RESPONDER,
    INTERCEPTORS_ANNOTATION,
    MIRROR_ANNOTATION,
    STATIC_POD_RESPONDER,
)
from nodeagent.model.selectors import label_selector_from_dict

UID = "9d3c2b1a-0000-4000-8000-00000000000a"
MOVER = SelectorInterceptor(
    "mover.acme.io", label_selector_from_dict({"matchLabels": {"app": "db"}})
)
LONG = SelectorInterceptor(
    "x" * 61 + ".io", label_selector_from_dict({"matchLabels": {"app": "db"}})
)
NAMES = ResponderNames([MOVER])
MOVER_RESPONDER = "annotate.nodeagent.io/mover.acme.io"
DAEMON = [{"kind": "DaemonSet", "name": "d", "controller": True}]


def pod(**metadata: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "default", "uid": UID, **metadata}}


def test_names_both_ways_under_our_domain() -> None:
    assert NAMES.responder(MOVER.name) == MOVER_RESPONDER
    assert NAMES.responder(DAEMONSET_INTERCEPTOR) == DAEMONSET_RESPONDER
    assert NAMES.responder(IMPERATIVE_INTERCEPTOR) == IMPERATIVE_RESPONDER
    assert NAMES.responder("kubelet.k8s.io") == STATIC_POD_RESPONDER
    assert NAMES.responder("mover.other.io") is None  # another's interceptor of our CRD
    for interceptor in (MOVER.name, DAEMONSET_INTERCEPTOR, IMPERATIVE_INTERCEPTOR):
        assert NAMES.interceptor(str(NAMES.responder(interceptor))) == interceptor
    assert NAMES.interceptor("acme.io/other") == "acme.io/other"
    # a rule whose name does not fit a responder name's 63 characters has none
    assert ResponderNames([LONG]).responder(LONG.name) is None


def test_pods_whose_interceptors_all_respond_upstream_go_there() -> None:
    assert upstream_evicts(pod(labels={"app": "web"}), NAMES)
    assert upstream_evicts(pod(labels={"app": "db"}), NAMES)  # annotate-and-wait
    assert upstream_evicts(pod(ownerReferences=DAEMON), NAMES)
    assert upstream_evicts(pod(annotations={MIRROR_ANNOTATION: "x"}), NAMES)  # by node agents
    assert not upstream_evicts(pod(annotations={INTERCEPTORS_ANNOTATION: "a.io"}), NAMES)
    assert not upstream_evicts(pod(annotations={INTERCEPTORS_ANNOTATION: "NOT VALID"}), NAMES)
    listed = pod(annotations={INTERCEPTORS_ANNOTATION: MOVER.name})
    assert upstream_evicts(listed, NAMES)
    assert not upstream_evicts(pod(labels={"app": "db"}), ResponderNames([LONG]))


def test_where_kubernetes_runs_the_controller_only_pods_without_our_interceptors_go_upstream() -> (
    None
):
    """Kubernetes' own controller lists the pod's responders and the evictor, none of ours: a
    pod one of ours must take its turn for is asked for on our CRD."""
    names = ResponderNames([MOVER], listed_by_us=False)
    assert upstream_evicts(pod(labels={"app": "web"}), names)
    assert not upstream_evicts(pod(labels={"app": "db"}), names)  # the mover's
    assert not upstream_evicts(pod(ownerReferences=DAEMON), names)
    assert not upstream_evicts(pod(annotations={MIRROR_ANNOTATION: "x"}), names)
    assert names.responder(IMPERATIVE_INTERCEPTOR) == IMPERATIVE_RESPONDER
    assert names.responder(DAEMONSET_INTERCEPTOR) is None


def test_our_responders_keep_their_crd_order_by_priority() -> None:
    both = pod(labels={"app": "db"}, ownerReferences=DAEMON)
    assert our_responders(both, NAMES) == (
        Responder(MOVER_RESPONDER, 10000),
        Responder(DAEMONSET_RESPONDER, 9999),
    )
    assert our_responders(pod(labels={"app": "web"}), NAMES) == ()
    assert our_responders(None, NAMES) == ()
    assert our_responders(pod(annotations={INTERCEPTORS_ANNOTATION: "NOT VALID"}), NAMES) == ()


def test_the_pods_own_responders_come_first_and_the_evictor_always() -> None:
    own = [{"name": f"r{i}.acme.io/x", "priority": 20000 + i} for i in range(10)]
    full = {**pod(), "spec": {"evictionResponders": own}}
    listed = pod_responders(full, [Responder(DAEMONSET_RESPONDER, 10000)])
    assert len(listed) == 11 and listed[-1].name == IMPERATIVE_RESPONDER
    assert DAEMONSET_RESPONDER not in [r.name for r in listed]  # no room left
    # the pod naming one of ours keeps its own priority for it
    named = {**pod(), "spec": {"evictionResponders": [{"name": MOVER_RESPONDER, "priority": 1500}]}}
    assert Responder(MOVER_RESPONDER, 1500) in pod_responders(
        named, [Responder(MOVER_RESPONDER, 10000)]
    )


def eviction(**status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "lifecycle.k8s.io/v1alpha1",
        "kind": "Eviction",
        "metadata": {"name": UID, "namespace": "default", "uid": "ev", "resourceVersion": "7"},
        "spec": {"target": {"pod": {"name": "p", "uid": UID}}},
        "status": status,
    }


STATUS: dict[str, Any] = {
    "requesters": [
        {"name": "nodeagent.io/node-maintenance", "intent": "Eviction"},
        {"name": "acme.io/gone", "intent": "Withdrawn"},
    ],
    "targetResponders": [
        {"name": IMPERATIVE_RESPONDER, "priority": 100, "state": "Inactive"},
        {"name": DAEMONSET_RESPONDER, "priority": 9999, "state": "Active"},
        {"name": MOVER_RESPONDER, "priority": 10000, "state": "Completed"},
    ],
    "responders": [
        {"name": MOVER_RESPONDER, "completionTime": "2026-11-27T10:01:00Z"},
        {
            "name": DAEMONSET_RESPONDER,
            "startTime": "2026-11-27T10:01:00Z",
            "expectedCompletionTime": "2026-11-27T10:05:00Z",
        },
        {"name": IMPERATIVE_RESPONDER},
    ],
}


def test_an_eviction_reads_as_our_requests_do() -> None:
    view = view_of_eviction(eviction(**STATUS), NAMES)
    assert view.target_interceptors == (MOVER.name, DAEMONSET_INTERCEPTOR, IMPERATIVE_INTERCEPTOR)
    assert view.active == DAEMONSET_INTERCEPTOR
    assert view.processed == (MOVER.name,)
    assert view.requesters == ("nodeagent.io/node-maintenance",)
    entry = view.entry(DAEMONSET_INTERCEPTOR)
    assert entry.start_time == datetime(2026, 11, 27, 10, 1, tzinfo=UTC)
    assert entry.expected_finish_time == datetime(2026, 11, 27, 10, 5, tzinfo=UTC)
    assert not view.canceled and not view.evicted
    failed = {**STATUS, "conditions": [{"type": "Failed", "status": "True", "reason": "X"}]}
    assert view_of_eviction(eviction(**failed), NAMES).canceled
    done = {**STATUS, "conditions": [{"type": "TargetEvicted", "status": "True"}]}
    assert view_of_eviction(eviction(**done), NAMES).evicted


def test_an_interceptors_entry_is_written_as_its_responders_alone() -> None:
    now = datetime(2026, 11, 27, 10, 2, tzinfo=UTC)
    view = view_of_eviction(eviction(**STATUS), NAMES)
    entry = view.entry(DAEMONSET_INTERCEPTOR).heartbeat(now, "deleting")
    written = responder_entry(entry, NAMES)
    assert written["name"] == DAEMONSET_RESPONDER
    assert written["expectedCompletionTime"].startswith("2026-11-27T10:05:00")
    assert "expectedFinishTime" not in written
    patch = upstream(NAMES).entries_patch(STATUS, entry)
    assert [r["name"] for r in patch["responders"]] == [r["name"] for r in STATUS["responders"]]
    assert patch["responders"][1] == written
    assert patch["responders"][0] == STATUS["responders"][0]
    assert InterceptorStatus.from_dict({**written, "name": "x"}).message == "deleting"
