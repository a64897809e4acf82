"""What the shared informers keep of a pod."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from nodeagent.kube.cache_transforms import POD_SPEC_READ, POD_STATUS_READ, lean_pod
from nodeagent.kube.controller import SharedInformers
from nodeagent.kube.resources import NODES, PODS
from nodeagent.model.names import LAST_APPLIED
from tests.bench.cache import realistic_pod


def test_keeps_what_the_controllers_read_and_drops_the_bulk() -> None:
    pod = realistic_pod(7)
    lean = lean_pod(pod)
    md, spec, status = lean["metadata"], lean["spec"], lean["status"]
    for kept in ("name", "namespace", "uid", "labels", "ownerReferences", "resourceVersion"):
        assert md[kept] == pod["metadata"][kept]
    assert LAST_APPLIED not in md["annotations"]
    assert md["annotations"]["nodeagent.io/eviction-interceptors"] == "mover.example.com"
    for kept in ("nodeName", "priority", "priorityClassName", "tolerations"):
        assert spec[kept] == pod["spec"][kept]
    assert spec["terminationGracePeriodSeconds"] == 30
    assert status == {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    assert "containers" not in spec and "managedFields" not in md
    assert len(json.dumps(lean)) * 4 < len(json.dumps(pod))  # a fraction of a real pod


fields = st.dictionaries(
    st.sampled_from(["nodeName", "priority", "phase", "containers", "managedFields", "labels"]),
    st.integers() | st.text(max_size=80),
)


@given(st.fixed_dictionaries({"metadata": fields, "spec": fields, "status": fields, "x": fields}))
def test_keeps_the_metadata_and_the_read_fields_and_changes_nothing_it_gets(
    pod: dict[str, Any],
) -> None:
    before = copy.deepcopy(pod)
    lean = lean_pod(pod)
    assert pod == before
    assert lean["x"] == pod["x"]
    assert lean["metadata"] == {k: v for k, v in pod["metadata"].items() if k != "managedFields"}
    assert lean["spec"] == {k: v for k, v in pod["spec"].items() if k in POD_SPEC_READ}
    assert lean["status"] == {k: v for k, v in pod["status"].items() if k in POD_STATUS_READ}
    assert lean_pod(lean) == lean


def test_shared_informers_keep_lean_pods_only() -> None:
    informers = SharedInformers(client=None)  # type: ignore[arg-type]  # never run
    pods, nodes = informers.informer(PODS), informers.informer(NODES)
    assert pods._transform is lean_pod and nodes._transform is None


def test_parts_pods_have_alike_are_kept_once() -> None:
    a, b = lean_pod(realistic_pod(1)), lean_pod(realistic_pod(2))
    for section, key in (
        ("metadata", "labels"),
        ("metadata", "ownerReferences"),
        ("spec", "tolerations"),
        ("status", "conditions"),
    ):
        assert a[section][key] == b[section][key]
        assert a[section][key] is b[section][key], key
    other = realistic_pod(3)
    other["metadata"]["labels"] = {"app": "db"}
    lean = lean_pod(other)
    assert lean["metadata"]["labels"] == {"app": "db"}
    assert a["metadata"]["labels"]["app"] == "web"  # the shared one is untouched
