from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodeagent.kube.store import Delta, Store, key_of, namespace_index, split_key

Obj = dict[str, Any]


def pod(name: str, ns: str = "default", rv: str = "1", node: str = "", uid: str = "") -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": ns,
            "resourceVersion": rv,
            "uid": uid or "uid-" + ns + "-" + name,
        },
        "spec": {"nodeName": node} if node else {},
    }


def by_node(obj: Obj) -> list[str]:
    node = (obj.get("spec") or {}).get("nodeName")
    return [node] if node else []


def test_keys() -> None:
    assert key_of(pod("a", "ns")) == "ns/a"
    assert key_of({"metadata": {"name": "node-1"}}) == "node-1"
    assert split_key("ns/a") == ("ns", "a")
    assert split_key("node-1") == (None, "node-1")
    with pytest.raises(ValueError):
        key_of({"metadata": {}})


def test_get_list_delete() -> None:
    store = Store()
    assert store.upsert(pod("a")) is None
    old = store.upsert(pod("a", rv="2"))
    assert old is not None and old["metadata"]["resourceVersion"] == "1"
    assert store.get("default/a")["metadata"]["resourceVersion"] == "2"  # type: ignore[index]
    assert "default/a" in store and len(store) == 1
    assert [key_of(o) for o in store.list()] == ["default/a"]
    assert store.delete("default/a") is not None
    assert store.delete("default/a") is None
    assert store.get("default/a") is None and len(store) == 0


def test_indexes_follow_changes() -> None:
    store = Store({"node": by_node, "namespace": namespace_index})
    store.upsert(pod("a", node="n1"))
    store.upsert(pod("b", node="n1"))
    store.upsert(pod("c", ns="kube-system", node="n2"))
    assert [key_of(o) for o in store.by_index("node", "n1")] == ["default/a", "default/b"]
    assert store.index_keys("namespace", "kube-system") == ["kube-system/c"]
    # Moving an object between index values removes it from the old one.
    store.upsert(pod("a", node="n2", rv="2"))
    assert store.index_keys("node", "n1") == ["default/b"]
    assert store.index_keys("node", "n2") == ["default/a", "kube-system/c"]
    store.delete("default/b")
    assert store.by_index("node", "n1") == ()
    assert store.index_values("node") == ["n2"]
    with pytest.raises(KeyError):
        store.by_index("nope", "x")


def test_a_bucket_is_the_same_tuple_until_one_of_its_objects_changes() -> None:
    store = Store({"node": by_node})
    store.upsert(pod("a", node="n1"))
    store.upsert(pod("b", node="n2"))
    first = store.by_index("node", "n1")
    store.upsert(pod("b", node="n2", rv="2"))  # another bucket
    assert store.by_index("node", "n1") is first
    store.upsert(pod("a", node="n1", rv="2"))  # replaced in place
    second = store.by_index("node", "n1")
    assert second is not first
    assert [o["metadata"]["resourceVersion"] for o in second] == ["2"]
    store.upsert(pod("b", node="n1", rv="3"))  # moved in
    assert [key_of(o) for o in store.by_index("node", "n1")] == ["default/a", "default/b"]
    n2 = store.by_index("node", "n2")
    assert n2 == ()
    store.delete("default/a")
    assert [key_of(o) for o in store.by_index("node", "n1")] == ["default/b"]
    store.replace([pod("c", node="n1")])  # a relist
    assert [key_of(o) for o in store.by_index("node", "n1")] == ["default/c"]


def test_multi_value_index_dedupes() -> None:
    store = Store({"labels": lambda o: ["x", "x", "y"]})
    store.upsert(pod("a"))
    assert store.index_keys("labels", "x") == ["default/a"]
    store.delete("default/a")
    assert store.index_values("labels") == []


def test_failing_indexer_leaves_store_intact() -> None:
    def picky(obj: Obj) -> list[str]:
        if obj["metadata"]["resourceVersion"] == "bad":
            raise RuntimeError("boom")
        return ["v"]

    store = Store({"picky": picky})
    store.upsert(pod("a"))
    with pytest.raises(RuntimeError):
        store.upsert(pod("a", rv="bad"))
    assert store.get("default/a")["metadata"]["resourceVersion"] == "1"  # type: ignore[index]
    assert store.index_keys("picky", "v") == ["default/a"]


def test_replace_reports_only_real_changes() -> None:
    store = Store({"node": by_node})
    store.replace([pod("a"), pod("b"), pod("c")])
    deltas = store.replace([pod("a"), pod("b", rv="2"), pod("d", node="n1")])
    assert [(d.type, d.key) for d in deltas] == [
        ("Updated", "default/b"),
        ("Added", "default/d"),
        ("Deleted", "default/c"),
    ]
    updated = deltas[0]
    assert updated.old is not None and updated.old["metadata"]["resourceVersion"] == "1"
    assert updated.new is not None and updated.new["metadata"]["resourceVersion"] == "2"
    assert deltas[2].obj["metadata"]["name"] == "c"
    assert store.index_keys("node", "n1") == ["default/d"]
    assert sorted(store.keys()) == ["default/a", "default/b", "default/d"]


def test_replace_splits_recreation_into_delete_and_add() -> None:
    store = Store()
    store.replace([pod("a", uid="one")])
    deltas = store.replace([pod("a", rv="9", uid="two")])
    assert [(d.type, d.obj["metadata"]["uid"]) for d in deltas] == [
        ("Deleted", "one"),
        ("Added", "two"),
    ]


names = st.sampled_from(["a", "b", "c", "d", "e"])
versions = st.sampled_from(["1", "2", "3"])
snapshots = st.dictionaries(names, versions)


def apply(state: dict[str, Obj], deltas: list[Delta]) -> dict[str, Obj]:
    out = dict(state)
    for d in deltas:
        if d.type == "Deleted":
            assert d.key in out
            del out[d.key]
        elif d.type == "Added":
            assert d.key not in out
            out[d.key] = d.obj
        else:
            assert d.key in out
            assert out[d.key]["metadata"]["resourceVersion"] != d.obj["metadata"]["resourceVersion"]
            out[d.key] = d.obj
    return out


@given(st.lists(snapshots, min_size=1, max_size=6))
def test_replace_deltas_replay_to_the_new_state(history: list[dict[str, str]]) -> None:
    """Applying the deltas of each replace to the previous contents gives the new contents."""
    store = Store({"ns": namespace_index})
    seen: dict[str, Obj] = {}
    for snap in history:
        objs = [pod(name, rv=rv) for name, rv in snap.items()]
        seen = apply(seen, store.replace(objs))
        assert seen == {key_of(o): o for o in objs}
        assert sorted(store.keys()) == sorted(seen)
        assert store.index_keys("ns", "default") == sorted(seen)


def test_indexes_are_added_to_an_empty_store_only() -> None:
    store = Store()
    store.add_indexers({"ns": namespace_index})
    store.upsert({"metadata": {"name": "p", "namespace": "a"}})
    assert [o["metadata"]["name"] for o in store.by_index("ns", "a")] == ["p"]
    with pytest.raises(RuntimeError, match="empty store"):
        store.add_indexers({"other": namespace_index})
    with pytest.raises(ValueError, match="already defined"):
        Store({"ns": namespace_index}).add_indexers({"ns": namespace_index})
