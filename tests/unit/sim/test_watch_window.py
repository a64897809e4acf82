"""The simulated store's watch window: per resource, sized as kube-apiserver's watch cache."""

from __future__ import annotations

import pytest

from nodeagent_testbed.sim import admission
from nodeagent_testbed.sim.errors import ApiError
from nodeagent_testbed.sim.store import FRESH_SECONDS, HISTORY_MIN, Store


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(clock: Clock) -> Store:
    s = Store(clock=clock)
    admission.install(s)
    return s


def churn(store: Store, n: int, prefix: str) -> list[str]:
    cms = store.resource("", "v1", "configmaps")
    return [
        store.create(cms, "default", {"metadata": {"name": f"{prefix}-{i}"}})["metadata"][
            "resourceVersion"
        ]
        for i in range(n)
    ]


def replayed(store: Store, rv: str) -> list[str]:
    w = store.open_watch(store.resource("", "v1", "configmaps"), None, None, None, rv)
    out = []
    while not w.queue.empty():
        ev = w.queue.get_nowait()
        assert ev is not None
        out.append(ev[1]["metadata"]["name"])
    return out


def test_fresh_events_are_all_kept(store: Store) -> None:
    rvs = churn(store, 5 * HISTORY_MIN, "a")
    assert len(replayed(store, "1")) == 5 * HISTORY_MIN  # grown: every event is fresh
    assert replayed(store, rvs[-2]) == [f"a-{5 * HISTORY_MIN - 1}"]


def test_old_events_go_once_the_window_is_full(store: Store, clock: Clock) -> None:
    first = churn(store, HISTORY_MIN, "a")
    clock.now += FRESH_SECONDS + 1
    churn(store, 1, "b")  # full, and the oldest is stale: it goes instead of growing
    # the first event went: a watch must start at it or later
    before_first = str(int(first[0]) - 1)
    with pytest.raises(ApiError) as e:
        replayed(store, before_first)
    assert (e.value.code, e.value.reason) == (410, "Expired")
    assert e.value.message == f"too old resource version: {before_first} ({first[0]})"
    assert replayed(store, first[0]) == [f"a-{i}" for i in range(1, HISTORY_MIN)] + ["b-0"]
    # a resource of its own: other resources' churn does not expire it
    nodes = store.resource("", "v1", "nodes")
    assert store.histories[nodes.key].floor == 1


def test_a_long_quiet_window_shrinks_back(store: Store, clock: Clock) -> None:
    churn(store, 4 * HISTORY_MIN, "a")  # grown to 4 * HISTORY_MIN
    cms = store.resource("", "v1", "configmaps")
    assert store.histories[cms.key].capacity == 4 * HISTORY_MIN
    clock.now += FRESH_SECONDS + 1
    churn(store, 1, "b")
    assert store.histories[cms.key].capacity == 2 * HISTORY_MIN
    assert len(store.histories[cms.key].events) == 2 * HISTORY_MIN


def test_a_custom_resource_window_starts_with_its_definition(store: Store) -> None:
    before = churn(store, 1, "a")[0]
    crds = store.resource("apiextensions.k8s.io", "v1", "customresourcedefinitions")
    crd = store.create(
        crds,
        None,
        {
            "metadata": {"name": "things.example.com"},
            "spec": {
                "group": "example.com",
                "scope": "Namespaced",
                "names": {"plural": "things", "kind": "Thing"},
                "versions": [{"name": "v1", "served": True, "storage": True}],
            },
        },
    )
    things = store.resource("example.com", "v1", "things")
    store.create(things, "default", {"metadata": {"name": "t"}})
    w = store.open_watch(things, None, None, None, crd["metadata"]["resourceVersion"])
    assert w.queue.get_nowait() is not None
    with pytest.raises(ApiError) as e:
        store.open_watch(things, None, None, None, before)
    assert e.value.code == 410
