"""The simulated server's `lifecycle.k8s.io/v1alpha1` where the contract tests do not reach it
cheaply: the store's writes of status and spec, the decoder's shapes (pruned fields, times as
metav1.Time encodes them), the responders' times and the pods' responder list."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from nodeagent.model.names import IMPERATIVE_RESPONDER
from nodeagent.model.times import format_time
from nodeagent_testbed.sim import admission, lifecycle
from nodeagent_testbed.sim.cluster import SimCluster
from nodeagent_testbed.sim.errors import ApiError
from nodeagent_testbed.sim.store import Obj, Store
from nodeagent_testbed.sim.tables import table

UID = "0f4c3b0e-8a51-4a43-9a4c-7d1b4f1c2d3e"
ACTIVE = [{"name": IMPERATIVE_RESPONDER, "priority": 100, "state": "Active"}]


@pytest.fixture
def store() -> Store:
    s = Store()
    admission.install(s)
    return s


def evictions(store: Store) -> Any:
    return store.resource("lifecycle.k8s.io", "v1alpha1", "evictions")


def created(store: Store, **spec: Any) -> Obj:
    body: Obj = {"metadata": {"name": "e"}}
    body["spec"] = {"target": {"pod": {"name": "p", "uid": UID}}, **spec}
    body["status"] = {"observedGeneration": 3}
    return store.create(evictions(store), "default", body)


def write_status(store: Store, status: Obj) -> Obj:
    return store.update(evictions(store), "default", "e", {"status": status}, "status")


def refused(store: Store, status: Obj) -> ApiError:
    with pytest.raises(ApiError) as e:
        write_status(store, status)
    return e.value


def test_the_group_is_served_with_status_subresources(store: Store) -> None:
    served = {(rt.plural, rt.kind, rt.subresources, rt.short_names) for rt in lifecycle.TYPES}
    assert served == {
        ("evictionrequests", "EvictionRequest", ("status",), ()),
        ("evictions", "Eviction", ("status",), ()),
    }


def test_unknown_fields_go_and_status_starts_empty(store: Store) -> None:
    eviction = created(store, surplus=True)
    assert eviction["spec"] == {"target": {"pod": {"name": "p", "uid": UID}}}
    assert eviction["status"] == {}


def test_the_main_resource_keeps_the_status_and_its_target(store: Store) -> None:
    created(store)
    start = format_time(datetime.now(UTC))
    write_status(store, {"targetResponders": ACTIVE, "responders": [_entry(start)]})
    body: Obj = {"metadata": {"name": "e", "labels": {"a": "b"}}, "status": {}}
    body["spec"] = {"target": {"pod": {"name": "p", "uid": UID}}}
    updated = store.update(evictions(store), "default", "e", body)
    assert updated["status"]["targetResponders"] == ACTIVE
    body["spec"]["target"]["pod"]["name"] = "q"
    with pytest.raises(ApiError) as e:
        store.update(evictions(store), "default", "e", body)
    assert e.value.code == 422
    assert "spec.target: Invalid value: null: field is immutable" in e.value.message


def test_times_are_stored_in_whole_seconds_utc(store: Store) -> None:
    created(store)
    now = datetime.now(UTC)
    written = write_status(
        store,
        {
            "targetResponders": ACTIVE,
            "responders": [_entry(now.astimezone(timezone(timedelta(hours=2))).isoformat())],
        },
    )
    assert written["status"]["responders"][0]["startTime"] == format_time(now)


def test_a_heartbeat_may_not_go_back_nor_lie_about_the_present(store: Store) -> None:
    created(store)
    now = datetime.now(UTC)
    start = format_time(now - timedelta(seconds=10))
    write_status(store, {"targetResponders": ACTIVE, "responders": [_entry(start)]})
    # the start is not the present any more, but it is not written again
    write_status(store, {"targetResponders": ACTIVE, "responders": [_entry(start, now)]})
    back = refused(
        store,
        {"targetResponders": ACTIVE, "responders": [_entry(start, now - timedelta(seconds=5))]},
    )
    assert "status.responders[0].heartbeatTime" in back.message
    assert "cannot be decreased" in back.message
    ahead = refused(
        store,
        {"targetResponders": ACTIVE, "responders": [_entry(start, now + timedelta(hours=1))]},
    )
    assert "must be set to the present time" in ahead.message


def test_priorities_and_entries_keep_their_shape(store: Store) -> None:
    created(store)
    start = format_time(datetime.now(UTC))
    write_status(store, {"targetResponders": ACTIVE, "responders": [_entry(start)]})
    moved = [{**ACTIVE[0], "priority": 2000}]
    e = refused(store, {"targetResponders": moved, "responders": [_entry(start)]})
    assert "status.targetResponders[0].priority" in e.message
    twice = refused(
        store,
        {"targetResponders": ACTIVE * 2, "responders": [_entry(start)] * 2},
    )
    assert "status.targetResponders[1]: Duplicate value" in twice.message
    assert "status.responders[1]: Duplicate value" in twice.message


def test_a_wrong_shape_is_the_decoders_400_or_a_patchs_422(store: Store) -> None:
    eviction = created(store)
    with pytest.raises(ApiError) as e:
        write_status(store, {"responders": [{"name": 7}]})
    assert e.value.code == 400
    assert e.value.message == (
        'Eviction in version "v1alpha1" cannot be handled as a Eviction: json: cannot '
        "unmarshal number into Go struct field ResponderStatus.status.responders.name of type "
        "string"
    )
    with pytest.raises(ApiError) as e:
        lifecycle.check_patch(evictions(store), {**eviction, "status": {"observedGeneration": 1.5}})
    assert (e.value.code, e.value.reason) == (422, "Invalid")
    [cause] = (e.value.details or {})["causes"]
    assert cause["field"] == "patch"
    assert (
        "number 1.5 into Go struct field EvictionStatus.status.observedGeneration"
        in (cause["message"])
    )
    with pytest.raises(ApiError) as e:
        write_status(store, {"responders": [{"name": "a.io/b", "startTime": "yesterday"}]})
    assert "ResponderStatus.status.responders.startTime" in e.value.message


def test_a_pod_names_at_most_ten_responders(store: Store) -> None:
    pods = store.resource("", "v1", "pods")
    spec: Obj = {"containers": [{"name": "c", "image": "i"}]}
    spec["evictionResponders"] = [{"name": f"r{i}.io/x", "priority": 5000} for i in range(11)]
    with pytest.raises(ApiError) as e:
        store.create(pods, "default", {"metadata": {"name": "p"}, "spec": spec})
    assert "spec.evictionResponders: Too many: 11: must have at most 10 items" in e.value.message
    spec["evictionResponders"] = spec["evictionResponders"][:10]
    store.create(pods, "default", {"metadata": {"name": "p"}, "spec": spec})


def _entry(start: str, heartbeat: datetime | None = None) -> Obj:
    entry = {"name": IMPERATIVE_RESPONDER, "startTime": start}
    if heartbeat is not None:
        entry["heartbeatTime"] = format_time(heartbeat)
    return entry


@pytest.mark.parametrize("served", [True, False])
def test_a_cluster_serves_the_group_as_told(served: bool) -> None:
    store = SimCluster(nodes=1, lifecycle_api=served).store
    groups = {g for g, _, _ in store.types}
    assert ("lifecycle.k8s.io" in groups) is served
    if not served:
        with pytest.raises(ApiError) as e:
            store.resource("lifecycle.k8s.io", "v1alpha1", "evictions")
        assert e.value.code == 404


def test_kubectl_get_shows_the_printers_columns(store: Store) -> None:
    eviction = dict(created(store))  # a copy: the stored object is never changed
    begun = datetime.now(UTC).replace(microsecond=0)
    start = format_time(begun)
    targets = [
        {"name": "acme.io/mover", "priority": 10000, "state": "Completed"},
        {"name": IMPERATIVE_RESPONDER, "priority": 100, "state": "Active"},
    ]
    eviction["status"] = {
        "observedGeneration": 1,
        "requesters": [
            {"name": "b.io/x", "intent": "Eviction"},
            {"name": "a.io/y", "intent": "Eviction"},
        ],
        "targetResponders": targets,
        "responders": [
            {"name": "acme.io/mover", "startTime": start, "completionTime": start},
            {"name": IMPERATIVE_RESPONDER, "startTime": start, "message": " waiting "},
        ],
    }
    out = table(evictions(store), [eviction], now=begun.timestamp() + 5)
    assert [c["name"] for c in out["columnDefinitions"] if c["priority"] == 0] == [
        "Name", "Target", "Target Type", "Status", "Active Responder", "Responder Status",
        "Responder Expected Finish", "Requesters", "Age",
    ]  # fmt: skip
    [row] = out["rows"]
    assert row["cells"][1:9] == [
        "p", "Pod", "Progressing", f"{IMPERATIVE_RESPONDER} (2/2)", "Started (5s ago)",
        "<unknown>", "a.io/y + 1 more...", row["cells"][8],
    ]  # fmt: skip
    assert row["cells"][9:] == ["<unset>", "waiting"]
    requests = store.resource("lifecycle.k8s.io", "v1alpha1", "evictionrequests")
    request = {"metadata": {"name": "r"}, "spec": {**eviction["spec"]}}
    request["spec"].update(requester="acme.io/drainer", intent="Eviction")
    made = store.create(requests, "default", request)
    [row] = table(requests, [made])["rows"]
    assert row["cells"][1:6] == ["p", "Pod", "Pending", "acme.io/drainer", "Eviction"]


@pytest.mark.parametrize(
    ("responders", "found"),
    [
        ("all", "cannot unmarshal string into Go struct field PodSpec.spec.evictionResponders"),
        ([{"name": 5, "priority": 5000}], "EvictionResponder.spec.evictionResponders.name"),
        ([{"name": "a.io/b", "priority": "high"}], "of type int32"),
    ],
)
def test_a_pods_responders_of_the_wrong_shape_are_the_decoders_400(
    store: Store, responders: Any, found: str
) -> None:
    spec: Obj = {"containers": [{"name": "c", "image": "i"}], "evictionResponders": responders}
    with pytest.raises(ApiError) as e:
        store.create(
            store.resource("", "v1", "pods"), "default", {"metadata": {"name": "p"}, "spec": spec}
        )
    assert e.value.code == 400 and found in e.value.message, e.value.message
