"""The simulated eviction subresource where the contract tests cannot reach it: a negative
status.disruptionsAllowed, which kube-apiserver 1.37 refuses to store through policy/v1 (only a
policy/v1beta1 client once could), is a 403 as eviction.go answers it."""

from __future__ import annotations

import copy

import pytest

from nodeagent_testbed.sim import admission
from nodeagent_testbed.sim.errors import ApiError
from nodeagent_testbed.sim.eviction import evict
from nodeagent_testbed.sim.store import Obj, Store


def test_a_negative_budget_forbids_the_eviction() -> None:
    store = Store()
    admission.install(store)
    pods = store.resource("", "v1", "pods")
    pdbs = store.resource("policy", "v1", "poddisruptionbudgets")
    containers = [{"name": "c", "image": "busybox"}]
    pod: Obj = {"metadata": {"name": "p", "labels": {"app": "a"}}}
    pod["spec"] = {"nodeName": "n", "containers": containers}
    store.create(pods, "default", pod)

    def running(p: Obj) -> None:
        p["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}

    store.mutate(pods, "default", "p", running, "status")
    budget = {"metadata": {"name": "b"}, "spec": {"selector": {"matchLabels": {"app": "a"}}}}
    created = store.create(pdbs, "default", budget)
    forged = copy.deepcopy(created)
    forged["status"] = {"observedGeneration": 1, "disruptionsAllowed": -1}
    store.objects[pdbs.key][("default", "b")] = forged  # past admission, as v1beta1 was
    with pytest.raises(ApiError) as e:
        evict(store, "default", "p", {"metadata": {"name": "p"}})
    assert (e.value.code, e.value.reason) == (403, "Forbidden")
    assert e.value.message == (
        'poddisruptionbudget.policy "b" is forbidden: pdb disruptions allowed is negative'
    )
    assert e.value.details is not None
    assert e.value.details["causes"] == [
        {
            "reason": "DisruptionBudget",
            "message": "The disruption budget b does not allow evicting pods currently: pdb "
            "disruptions allowed is negative",
        }
    ]
    assert store.get(pods, "default", "p")["metadata"].get("deletionTimestamp") is None
