"""Least privilege on the real control plane (RBAC and the admission policy of packaging/kubernetes
are enforced by kube-apiserver; the simulated cluster enforces neither): node-1's agent, with the
credentials the DaemonSet gives it (a token bound to its pod on node-1), can touch nothing of
another node nor any workload, and its own shutdown still drains node-1 end to end, the cluster
controllers running with the controllers' credentials only."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s

from nodeagent.app import Agent
from nodeagent.config import ShutdownConfig, from_mapping
from nodeagent.kube.client import KubeClient
from nodeagent.kube.errors import AlreadyExists, Forbidden
from nodeagent.kube.events import EventRecorder, node_object
from nodeagent.kube.resources import (
    EVENTS,
    EVICTIONREQUESTS,
    EVICTIONS,
    NODEMAINTENANCES,
    NODES,
    PODS,
    format_time,
)
from nodeagent.model import names
from nodeagent.model import shutdown as model
from nodeagent.model.interceptors.status import InterceptorStatus
from nodeagent.node.reboot import complete_previous_boots
from nodeagent.node.shutdown import ShutdownFlow
from nodeagent_testbed.controlplane.kubeapi import api_client
from tests.clusters import (
    CONTROLLERS_ACCOUNT,
    NAMESPACE,
    NAMESPACES,
    POLICY,
    ClusterView,
    TestCluster,
    create_pod,
)

pytestmark = pytest.mark.backends("real")

Obj = dict[str, Any]
BOOT = "5d6c7b8a-1111-2222-3333-444455556666"
LATER_BOOT = "5d6c7b8a-9999-8888-7777-666655554444"


@dataclass
class Env:
    backend: TestCluster
    admin: KubeClient
    node1: KubeClient  # node-1's agent: a token bound to its pod on node-1
    node1_account: Path
    view: ClusterView


@pytest.fixture
async def env(backend: TestCluster) -> AsyncIterator[Env]:
    await backend.install_crds()
    admin = backend.client(max_workers=4)
    account = await backend.service_account(node="node-1")
    node1 = backend.client(account, max_workers=4)
    view = ClusterView(admin, [PODS, NODEMAINTENANCES, EVICTIONREQUESTS])
    await view.start()
    try:
        yield Env(backend, admin, node1, account, view)
    finally:
        await view.stop()


def maintenance(name: str, label: str, selects: list[str]) -> Obj:
    return {
        "apiVersion": "nodeagent.io/v1alpha1",
        "kind": "NodeMaintenance",
        "metadata": {"name": name, "labels": {"nodeagent.io/node": label}},
        "spec": {"nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": selects}]}]}},
    }  # fmt: skip


def refused_by_policy(e: Forbidden) -> bool:
    return POLICY in str(e)


async def a_pod(admin: KubeClient, name: str, node: str, exit_seconds: int = 0) -> Obj:
    return await create_pod(
        admin,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": "default",
                "annotations": {"sim.nodeagent.io/exit-seconds": str(exit_seconds)},
            },
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "nginx"}]},
        },
    )


async def test_node_agent_may_not_write_another_nodes_maintenance(env: Env) -> None:
    # for node-2, by label or by selector, or for every node: refused
    for body in (
        maintenance("other-node", "node-2", ["node-2"]),
        maintenance("mislabelled", "node-1", ["node-2"]),
        maintenance("wider", "node-1", ["node-1", "node-2"]),
    ):
        with pytest.raises(Forbidden) as refused:
            await env.node1.create(NODEMAINTENANCES, body)
        assert refused_by_policy(refused.value), refused.value
    # its own shutdown maintenance: allowed, and it may complete and delete it
    own = model.shutdown_maintenance("node-1", BOOT, "reboot")
    await env.node1.create(NODEMAINTENANCES, own)
    name = own["metadata"]["name"]
    # another node's maintenance, as an admin wrote it: node-1 may neither change nor delete it
    theirs = model.shutdown_maintenance("node-2", BOOT, "reboot")
    await env.admin.create(NODEMAINTENANCES, theirs)
    other = theirs["metadata"]["name"]
    with pytest.raises(Forbidden) as refused:
        await env.node1.patch(NODEMAINTENANCES, other, {"spec": {"stage": "Complete"}})
    assert refused_by_policy(refused.value)
    with pytest.raises(Forbidden) as refused:
        await env.node1.delete(NODEMAINTENANCES, other)
    assert refused_by_policy(refused.value)
    # nor relabel its own to another node's, nor mark its own drained (status is the
    # controllers')
    with pytest.raises(Forbidden):
        await env.node1.patch(
            NODEMAINTENANCES, name, {"metadata": {"labels": {"nodeagent.io/node": "node-2"}}}
        )
    with pytest.raises(Forbidden):
        await env.node1.patch_status(NODEMAINTENANCES, name, {"status": {"observedGeneration": 1}})
    await env.node1.patch(NODEMAINTENANCES, name, {"spec": {"stage": "Complete"}})
    await env.node1.delete(NODEMAINTENANCES, name)
    assert (await env.admin.get(NODEMAINTENANCES, other))["spec"]["stage"] == "Drain"


def shutdown_with(**changes: Any) -> Obj:
    """node-1's shutdown maintenance of BOOT as the agent writes it, with `metadata` and
    `spec` fields changed (None: removed)."""
    body = model.shutdown_maintenance("node-1", BOOT, "reboot")
    for part in ("metadata", "spec"):
        for key, value in changes.pop(part, {}).items():
            if value is None:
                body[part].pop(key, None)
            else:
                body[part][key] = value
    assert not changes
    return body


async def test_shutdown_maintenance_carries_only_what_a_shutdown_needs(env: Env) -> None:
    """The agent creates its shutdown maintenance in Drain, named after its node and boot,
    with the shutdown labels and spec fields only; it may then change its stage alone."""
    own = model.shutdown_maintenance("node-1", BOOT, "reboot")
    name = own["metadata"]["name"]
    owner = {"apiVersion": "v1", "kind": "Node", "name": "node-2", "uid": "0000"}
    labels = own["metadata"]["labels"]
    refused_bodies = {
        "DeletePods": shutdown_with(spec={"drainDeadlineEscalation": "DeletePods"}),
        "a drain deadline": shutdown_with(spec={"drainDeadlineSeconds": 1}),
        "an owner": shutdown_with(metadata={"ownerReferences": [owner]}),
        "a finalizer": shutdown_with(metadata={"finalizers": ["example.com/hold"]}),
        "another name": shutdown_with(metadata={"name": name + "-2"}),
        "no boot label": shutdown_with(
            metadata={"labels": {k: v for k, v in labels.items() if k != names.LABEL_BOOT_ID}}
        ),
        "another label": shutdown_with(metadata={"labels": {**labels, "team": "a"}}),
        "another annotation": shutdown_with(metadata={"annotations": {"team": "a"}}),
        "stage Cordon": shutdown_with(spec={"stage": "Cordon"}),
    }
    for what, body in refused_bodies.items():
        with pytest.raises(Forbidden) as refused:
            await env.node1.create(NODEMAINTENANCES, body)
        assert refused_by_policy(refused.value), (what, refused.value)
    # as the agent writes it (a configured drain plan too): allowed; a second one of the same
    # boot is a name conflict, under any other name refused (above)
    planned = shutdown_with(spec={"drainPlan": [{"podPriority": 1000, "podType": "Default"}]})
    await env.node1.create(NODEMAINTENANCES, planned)
    with pytest.raises(AlreadyExists):
        await env.node1.create(NODEMAINTENANCES, own)
    # changes: the controllers' finalizer stays, nothing but the stage moves
    await env.admin.patch(
        NODEMAINTENANCES, name, {"metadata": {"finalizers": ["nodeagent.io/test-hold"]}}
    )
    for patch in (
        {"spec": {"drainDeadlineEscalation": "DeletePods"}},
        {"spec": {"drainDeadlineSeconds": 1}},
        {"spec": {"reason": "something else"}},
        {"metadata": {"finalizers": None}},
        {"metadata": {"ownerReferences": [owner]}},
        {"metadata": {"annotations": {"team": "a"}}},
    ):
        with pytest.raises(Forbidden) as refused:
            await env.node1.patch(NODEMAINTENANCES, name, patch)
        assert refused_by_policy(refused.value), (patch, refused.value)
    await env.node1.patch(NODEMAINTENANCES, name, {"spec": {"stage": "Complete"}})
    got = await env.admin.get(NODEMAINTENANCES, name)
    assert got["spec"]["stage"] == "Complete"
    assert got["metadata"]["finalizers"] == ["nodeagent.io/test-hold"]
    assert "drainDeadlineEscalation" not in got["spec"]
    await env.admin.patch(NODEMAINTENANCES, name, {"metadata": {"finalizers": None}})


async def test_a_node_agent_cannot_take_a_shutdown_name_of_another_node(env: Env) -> None:
    """The attack: node-1's agent makes `nodeagent-shutdown-node-1-a-<boot>`, the name node-1-a's
    agent will need, by labelling it with its own node and a boot id of `a-<boot>`. Boot ids
    have one form (the kernel's, and a hex userspace part), and the name must be built from
    them exactly: refused, whatever the split; node-1-a's agent then creates its own."""
    squat = model.maintenance_name("node-1-a", BOOT)
    own = model.shutdown_maintenance("node-1", BOOT, "reboot")
    labels = own["metadata"]["labels"]
    tries = {
        "a boot id of a-<boot>": {**labels, names.LABEL_BOOT_ID: f"a-{BOOT}"},
        "a userspace part holding the rest": {
            **labels,
            names.LABEL_BOOT_ID: BOOT,
            names.LABEL_USERSPACE_BOOT: "a",
        },
        "the boot id without dashes": {**labels, names.LABEL_BOOT_ID: BOOT.replace("-", "")},
    }
    for what, squat_labels in tries.items():
        body = shutdown_with(metadata={"name": squat, "labels": squat_labels})
        with pytest.raises(Forbidden) as refused:
            await env.node1.create(NODEMAINTENANCES, body)
        assert refused_by_policy(refused.value), (what, refused.value)
    # not in its own name either: a boot id the kubelet could never report
    bad_form = shutdown_with(
        metadata={
            "name": model.maintenance_name("node-1", "a-" + BOOT),
            "labels": {**labels, names.LABEL_BOOT_ID: "a-" + BOOT},
        }
    )
    with pytest.raises(Forbidden):
        await env.node1.create(NODEMAINTENANCES, bad_form)
    # a soft reboot's form is its own: allowed
    soft = model.shutdown_maintenance("node-1", model.boot_id(BOOT, "7431d"), "reboot")
    await env.node1.create(NODEMAINTENANCES, soft)
    # node-1-a's agent gets its name
    with contextlib.suppress(AlreadyExists):
        await env.admin.create(
            NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1-a"}}
        )
    node1a = env.backend.client(await env.backend.service_account(node="node-1-a"), max_workers=2)
    await node1a.create(NODEMAINTENANCES, model.shutdown_maintenance("node-1-a", BOOT, "reboot"))
    assert (await env.admin.get(NODEMAINTENANCES, squat))["metadata"]["labels"][
        names.NODE_LABEL
    ] == "node-1-a"


async def test_a_node_agent_asks_for_its_own_reboot_only(env: Env) -> None:
    """A coordinated reboot's request (trigger reboot, named nodeagent-reboot-<node>-<boot>):
    node-1's own is allowed; a name whose prefix is not its trigger label is refused either
    way; a reboot request asks no final phase; node-2's is refused."""
    own = model.shutdown_maintenance(
        "node-1", BOOT, "reboot", trigger=model.TRIGGER_REBOOT, reason="sentinel"
    )
    name = own["metadata"]["name"]
    assert name == f"nodeagent-reboot-node-1-{BOOT}"
    labels = own["metadata"]["labels"]
    final_phase = {names.FINAL_PHASE_ANNOTATION: "2030-01-01T00:00:00Z", **own["metadata"][
        "annotations"]}  # fmt: skip
    refused_bodies = {
        "a reboot name with trigger shutdown": shutdown_with(
            metadata={"name": name, "labels": {**labels, names.LABEL_TRIGGER: "shutdown"}}
        ),
        "a shutdown name with trigger reboot": shutdown_with(
            metadata={"labels": {**labels, names.LABEL_TRIGGER: "reboot"}}
        ),
        "another trigger": shutdown_with(
            metadata={
                "name": f"nodeagent-drain-node-1-{BOOT}",
                "labels": {**labels, names.LABEL_TRIGGER: "drain"},
            }
        ),
        "a reboot request asking a final phase": {
            **own,
            "metadata": {**own["metadata"], "annotations": final_phase},
        },
        "node-2's reboot request": model.shutdown_maintenance(
            "node-2", BOOT, "reboot", trigger=model.TRIGGER_REBOOT
        ),
    }
    for what, body in refused_bodies.items():
        with pytest.raises(Forbidden) as refused:
            await env.node1.create(NODEMAINTENANCES, body)
        assert refused_by_policy(refused.value), (what, refused.value)
    await env.node1.create(NODEMAINTENANCES, own)
    # beside this boot's shutdown maintenance, with its final phase: both allowed
    shutdown = model.shutdown_maintenance("node-1", BOOT, "reboot")
    shutdown["metadata"]["annotations"][names.FINAL_PHASE_ANNOTATION] = "2030-01-01T00:00:00Z"
    await env.node1.create(NODEMAINTENANCES, shutdown)
    # completed and deleted by the agent when no longer required
    await env.node1.patch(NODEMAINTENANCES, name, {"spec": {"stage": "Complete"}})
    await env.node1.delete(NODEMAINTENANCES, name)


async def test_node_agent_may_not_change_nodes_or_pods(env: Env) -> None:
    pod = await a_pod(env.admin, "web", "node-2")
    for node in ("node-2", "node-1"):  # not even its own: cordons are the controllers'
        with pytest.raises(Forbidden):
            await env.node1.patch(NODES, node, {"spec": {"unschedulable": True}})
    # a pod's image (code execution on any node), its deletion or eviction
    image = {"spec": {"containers": [{"name": "c", "image": "attacker/evil"}]}}
    with pytest.raises(Forbidden):
        await env.node1.patch(PODS, "web", image, "default")
    with pytest.raises(Forbidden):  # RBAC: node agents delete no pods at all
        await env.node1.delete(PODS, "web", "default")
    with pytest.raises(Forbidden):
        await env.node1.evict("default", "web")
    now = await env.admin.get(PODS, "web", "default")
    assert now["spec"]["containers"][0]["image"] == "nginx"
    assert now["metadata"]["uid"] == pod["metadata"]["uid"]
    assert not now["metadata"].get("deletionTimestamp")
    assert not (await env.admin.get(NODES, "node-2"))["spec"].get("unschedulable")


async def test_node_agent_reads_and_deletes_no_pod(env: Env) -> None:
    """Not even its own node's: no read, list, watch or delete of pods, anywhere (the kubelet
    may read its node's pods; RBAC cannot say "its node's", so none; the controllers carry out
    a shutdown's final phase)."""
    mine = await a_pod(env.admin, "mine", "node-1")
    for call in (
        env.node1.get(PODS, "mine", "default"),
        env.node1.list(PODS, field_selector="spec.nodeName=node-1"),
        env.node1.list(PODS),
        env.node1.delete(PODS, "mine", "default", grace_period_seconds=5),
    ):
        with pytest.raises(Forbidden) as refused:
            await call
        assert not refused_by_policy(refused.value), "RBAC refuses, before any policy"
    with pytest.raises(Forbidden):
        async with contextlib.aclosing(
            env.node1.watch(PODS, field_selector="spec.nodeName=node-1")
        ) as events:
            async for _ in events:
                break
    now = await env.admin.get(PODS, "mine", "default")
    assert now["metadata"]["uid"] == mine["metadata"]["uid"]
    assert not now["metadata"].get("deletionTimestamp")


def lifecycle(type_: str, status: str = "True") -> Obj:
    now = format_time(datetime.now(UTC))
    return {
        "type": type_,
        "status": status,
        "reason": "Test",
        "message": "test",
        "lastTransitionTime": now,
        "lastHeartbeatTime": now,
    }


async def test_node_agent_sets_only_the_lifecycle_conditions_of_its_own_node(env: Env) -> None:
    """KEP-5683's conditions on its Node, by strategic merge of the status (as the agent
    writes them): not on another Node, not the kubelet's conditions, not the rest of the
    status, not the Node's labels through the status."""
    draining = {"status": {"conditions": [lifecycle("DrainInProgress")]}}
    with pytest.raises(Forbidden) as refused:
        await env.node1.patch_status(NODES, "node-2", draining, patch_type="strategic")
    assert refused_by_policy(refused.value), refused.value
    forged: list[Obj] = [
        {"status": {"conditions": [lifecycle("Ready", "False")]}},
        {"status": {"conditions": [lifecycle("Drained")], "capacity": {"pods": "0"}}},
    ]
    for patch in forged:
        with pytest.raises(Forbidden) as refused:
            await env.node1.patch_status(NODES, "node-1", patch, patch_type="strategic")
        assert refused_by_policy(refused.value), (patch, refused.value)
    # kube-apiserver takes label changes through nodes/status: the policy must refuse them
    relabel = {
        "metadata": {"labels": {"node-role.kubernetes.io/control-plane": ""}},
        "status": {"conditions": [lifecycle("Drained")]},
    }
    with pytest.raises(Forbidden) as refused:
        await env.node1.patch_status(NODES, "node-1", relabel, patch_type="strategic")
    assert refused_by_policy(refused.value)
    node1 = await env.admin.get(NODES, "node-1")
    assert "node-role.kubernetes.io/control-plane" not in node1["metadata"].get("labels", {})
    await env.node1.patch_status(NODES, "node-1", draining, patch_type="strategic")
    node1, node2 = await env.admin.get(NODES, "node-1"), await env.admin.get(NODES, "node-2")
    said = {c["type"]: c["status"] for c in node1["status"]["conditions"]}
    assert said["DrainInProgress"] == "True" and said["Ready"] == "True"
    assert node1["status"]["capacity"]["pods"] != "0"
    assert "DrainInProgress" not in {c["type"] for c in node2["status"]["conditions"]}


async def eviction_request(admin: KubeClient, pod: Obj, node: str) -> Obj:
    m = pod["metadata"]
    return await admin.create(
        EVICTIONREQUESTS,
        {
            "apiVersion": "nodeagent.io/v1alpha1",
            "kind": "EvictionRequest",
            "metadata": {
                "name": m["uid"],
                "namespace": m["namespace"],
                "labels": {"nodeagent.io/node": node},
            },
            "spec": {
                "target": {"pod": {"name": m["name"], "uid": m["uid"]}},
                "requesters": [{"name": "test.nodeagent.io"}],
            },
        },
    )


def with_entries(evr: Obj, *entries: Obj) -> Obj:
    return {
        "metadata": {"resourceVersion": evr["metadata"]["resourceVersion"]},
        "status": {"interceptors": list(entries)},
    }


async def test_node_agent_writes_only_its_kubelet_entry_of_its_nodes_eviction_requests(
    env: Env,
) -> None:
    mine = await eviction_request(env.admin, await a_pod(env.admin, "on-1", "node-1"), "node-1")
    theirs = await eviction_request(env.admin, await a_pod(env.admin, "on-2", "node-2"), "node-2")
    at = datetime.now(UTC)
    now = format_time(at)
    entry = InterceptorStatus(names.KUBELET_INTERCEPTOR).heartbeat(at, "moving the manifest aside")
    kubelet = entry.to_dict()
    forged = {**kubelet, "name": "imperative-eviction.k8s.io", "completionTime": now}

    def name(evr: Obj) -> str:
        return str(evr["metadata"]["name"])

    # another node's request: refused, even its kubelet.k8s.io entry
    with pytest.raises(Forbidden) as refused:
        await env.node1.patch_status(
            EVICTIONREQUESTS, name(theirs), with_entries(theirs, kubelet), "default"
        )
    assert refused_by_policy(refused.value)
    # its own: another interceptor's entry, or the request's conditions: refused
    with pytest.raises(Forbidden) as refused:
        await env.node1.patch_status(
            EVICTIONREQUESTS, name(mine), with_entries(mine, kubelet, forged), "default"
        )
    assert refused_by_policy(refused.value)
    evicted = {
        "type": "Evicted",
        "status": "True",
        "reason": "Forged",
        "message": "",
        "lastTransitionTime": now,
    }
    with pytest.raises(Forbidden) as refused:
        await env.node1.patch_status(
            EVICTIONREQUESTS,
            name(mine),
            {**with_entries(mine, kubelet), "status": {"conditions": [evicted]}},
            "default",
        )
    assert refused_by_policy(refused.value)
    # creating or deleting requests is not the node agent's at all
    with pytest.raises(Forbidden):
        await env.node1.delete(EVICTIONREQUESTS, name(mine), "default")
    # its kubelet.k8s.io entry of its node's request: allowed
    await env.node1.patch_status(
        EVICTIONREQUESTS, name(mine), with_entries(mine, kubelet), "default"
    )
    got = await env.admin.get(EVICTIONREQUESTS, name(mine), "default")
    assert [i["name"] for i in got["status"]["interceptors"]] == ["kubelet.k8s.io"]
    got = await env.admin.get(EVICTIONREQUESTS, name(theirs), "default")
    assert not (got.get("status") or {}).get("interceptors")


async def upstream_eviction(admin: KubeClient, pod: Obj, node: str, now: str) -> Obj:
    """An upstream Eviction of `pod` as the controllers make it: labelled with its node, the
    static-pod responder Active."""
    m = pod["metadata"]
    body = {
        "apiVersion": "lifecycle.k8s.io/v1alpha1",
        "kind": "Eviction",
        "metadata": {
            "name": f"pod-1-{m['name']}",
            "namespace": "default",
            "labels": {names.NODE_LABEL: node},
        },
        "spec": {"target": {"pod": {"name": m["name"], "uid": m["uid"]}}},
    }
    await admin.create(EVICTIONS, body, "default")
    status = {
        "targetResponders": [
            {"name": names.STATIC_POD_RESPONDER, "priority": 10000, "state": "Active"},
            {"name": names.IMPERATIVE_RESPONDER, "priority": 100, "state": "Inactive"},
        ],
        "responders": [
            {"name": names.STATIC_POD_RESPONDER, "startTime": now},
            {"name": names.IMPERATIVE_RESPONDER},
        ],
    }
    return await admin.patch_status(EVICTIONS, f"pod-1-{m['name']}", {"status": status}, "default")


def with_responders(eviction: Obj, *entries: Obj) -> Obj:
    return {
        "metadata": {"resourceVersion": eviction["metadata"]["resourceVersion"]},
        "status": {"responders": list(entries)},
    }


async def test_node_agent_writes_only_its_static_pod_entry_of_its_nodes_evictions(
    env: Env,
) -> None:
    now = format_time(datetime.now(UTC))
    mine = await upstream_eviction(
        env.admin, await a_pod(env.admin, "on-1", "node-1"), "node-1", now
    )
    theirs = await upstream_eviction(
        env.admin, await a_pod(env.admin, "on-2", "node-2"), "node-2", now
    )
    beat = {"name": names.STATIC_POD_RESPONDER, "startTime": now, "heartbeatTime": now}
    evictor = {"name": names.IMPERATIVE_RESPONDER}

    def name(e: Obj) -> str:
        return str(e["metadata"]["name"])

    # another node's Eviction: refused, even its static-pod entry
    with pytest.raises(Forbidden) as refused:
        await env.node1.patch_status(
            EVICTIONS, name(theirs), with_responders(theirs, beat, evictor), "default"
        )
    assert refused_by_policy(refused.value)
    # its own: the conditions or the requesters: refused (another responder's entry the
    # server refuses itself: only the Active one's may change)
    waiting = {
        "type": "TargetEvicted",
        "status": "False",
        "reason": "Forged",
        "message": "",
        "lastTransitionTime": now,
    }
    for field, value in (
        ("conditions", [waiting]),
        ("requesters", [{"name": "a.io/x", "intent": "Eviction"}]),
    ):
        forge = with_responders(mine, beat, evictor)
        forge["status"][field] = value
        with pytest.raises(Forbidden) as refused:
            await env.node1.patch_status(EVICTIONS, name(mine), forge, "default")
        assert refused_by_policy(refused.value), field
    with pytest.raises(Forbidden):  # nor creating or deleting Evictions
        await env.node1.delete(EVICTIONS, name(mine), "default")
    # its static-pod entry of its node's Eviction: allowed
    await env.node1.patch_status(
        EVICTIONS, name(mine), with_responders(mine, beat, evictor), "default"
    )
    got = await env.admin.get(EVICTIONS, name(mine), "default")
    [entry] = [r for r in got["status"]["responders"] if r["name"] == names.STATIC_POD_RESPONDER]
    assert entry.get("heartbeatTime")
    got = await env.admin.get(EVICTIONS, name(theirs), "default")
    assert all("heartbeatTime" not in r for r in got["status"]["responders"])


def event(
    namespace: str,
    about: Obj,
    reason: str = "Test",
    host: str = "node-1",
    component: str = names.AGENT,
    reporting: str = names.AGENT,
) -> Obj:
    """An Event as nodeagent.kube.events writes it (source and reporting component, host)."""
    now = format_time(datetime.now(UTC))
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": "test.", "namespace": namespace},
        "involvedObject": about,
        "reason": reason,
        "message": "test",
        "type": "Normal",
        "source": {"component": component, "host": host},
        "reportingComponent": reporting,
        "reportingInstance": host,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }


def node_ref(name: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Node", "name": name}


def maintenance_ref(name: str) -> Obj:
    return {"apiVersion": "nodeagent.io/v1alpha1", "kind": "NodeMaintenance", "name": name}


def pod_ref(namespace: str, name: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Pod", "namespace": namespace, "name": name}


async def test_node_agent_writes_events_only_about_what_it_acts_on(env: Env) -> None:
    """Its Node, its shutdown maintenances, its node's mirror pods (named <manifest>-<node>);
    of another maintenance only the static-pod interceptor's
    reports; nothing claiming another node as its source."""
    own_nm = model.maintenance_name("node-1", BOOT)
    their_nm = model.maintenance_name("node-2", BOOT)
    refused_events = {
        "another Node": event("default", node_ref("node-2")),
        "another node's mirror pod": event(
            "kube-system", pod_ref("kube-system", "kube-apiserver-node-2")
        ),
        "another node's shutdown maintenance": event("default", maintenance_ref(their_nm)),
        "another maintenance, not the interceptor's": event(
            "default", maintenance_ref("upgrade"), reason="DrainDeadlineExceeded"
        ),
        "another node as source": event("default", node_ref("node-1"), host="node-2"),
    }
    for what, body in refused_events.items():
        with pytest.raises(Forbidden) as refused:
            await env.node1.create(EVENTS, body)
        assert refused_by_policy(refused.value), (what, refused.value)
    allowed = [
        event("default", node_ref("node-1")),
        event("kube-system", pod_ref("kube-system", "kube-apiserver-node-1")),
        event("default", maintenance_ref(own_nm)),
        event("default", maintenance_ref("upgrade"), reason="StaticPodManifestMovedAside"),
    ]
    for body in allowed:
        created = await env.node1.create(EVENTS, body)
        # the recorder's repeat: a patch of the count
        await env.node1.patch(
            EVENTS, created["metadata"]["name"], {"count": 2}, created["metadata"]["namespace"]
        )
    # an Event about another node (someone else's) it may not patch
    theirs = await env.admin.create(EVENTS, event("default", node_ref("node-2"), host="node-2"))
    with pytest.raises(Forbidden) as refused:
        await env.node1.patch(EVENTS, theirs["metadata"]["name"], {"count": 2}, "default")
    assert refused_by_policy(refused.value)
    with pytest.raises(Forbidden) as refused:
        await env.node1.patch(
            EVENTS,
            theirs["metadata"]["name"],
            {"involvedObject": node_ref("node-1"), "source": {"host": "node-1"}},
            "default",
        )
    assert refused_by_policy(refused.value)


async def test_node_agent_events_name_their_object_exactly_in_its_namespace(env: Env) -> None:
    """Issue 34: node-1's agent wrote an Event about its Node in team-a (a user there saw it),
    about node-1-a's shutdown maintenance (a name prefix of node-1's), and as the kubelet."""
    with contextlib.suppress(AlreadyExists):
        await env.admin.create(NAMESPACES, {"metadata": {"name": "team-a"}})
    # with eventTime (events.k8s.io style) the API server no longer holds an Event to its
    # object's namespace: a cluster-scoped object's may be in kube-system too, a namespaced
    # object's anywhere
    new_style = {
        "eventTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "action": "Test",
    }
    refused_events = {
        "its Node, in team-a": event("team-a", {**node_ref("node-1"), "namespace": "team-a"}),
        "its Node, in kube-system": {**event("kube-system", node_ref("node-1")), **new_style},
        "its mirror pod, in team-a": {
            **event("team-a", pod_ref("kube-system", "kube-apiserver-node-1")),
            **new_style,
        },
        "node-1-a's shutdown maintenance": event(
            "default", maintenance_ref(model.maintenance_name("node-1-a", BOOT))
        ),
        "a shutdown maintenance name that is not a boot's": event(
            "default", maintenance_ref("nodeagent-shutdown-node-1-x")
        ),
        "as the kubelet": event("team-a", pod_ref("team-a", "web-node-1"), component="kubelet"),
        "reported by the kubelet": event("default", node_ref("node-1"), reporting="kubelet"),
        "naming another object": {
            **event("default", node_ref("node-1")),
            "related": pod_ref("team-a", "web-0"),
        },
    }
    for what, body in refused_events.items():
        with pytest.raises(Forbidden) as refused:
            await env.node1.create(EVENTS, body)
        assert refused_by_policy(refused.value), (what, refused.value)


async def test_the_node_agents_own_events_are_recorded(env: Env) -> None:
    """What the node side records (nodeagent.kube.events.EventRecorder, as app.py makes it),
    each twice (a create, then a patch of the count), gets through the policy."""
    recorder = EventRecorder(env.node1, component=names.AGENT, host="node-1")
    own = model.shutdown_maintenance("node-1", BOOT, "reboot")
    own_later = {**own, "metadata": {"name": f"{own['metadata']['name']}-7431d"}}
    other = {"apiVersion": "nodeagent.io/v1alpha1", "kind": "NodeMaintenance",
             "metadata": {"name": "upgrade"}}  # fmt: skip
    mirror = {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "namespace": "kube-system", "name": "kube-apiserver-node-1", "uid": "u-1"}}  # fmt: skip
    recorded = [
        (node_object("node-1"), "Test"),
        (own, "Test"),
        (own_later, "Test"),
        (other, "StaticPodManifestMovedAside"),
        (mirror, "StaticPodStopping"),
    ]
    for _ in range(2):
        for obj, reason in recorded:
            await recorder.normal(obj, reason, "test")
    got = {
        (e["involvedObject"]["kind"], e["involvedObject"]["name"], e["count"])
        for ns in ("default", "kube-system")
        for e in (await env.admin.list(EVENTS, ns))["items"]
    }
    assert got >= {(o["kind"], o["metadata"]["name"], 2) for o, _ in recorded}, got


async def test_credentials_that_name_no_node_may_write_nothing(env: Env) -> None:
    """The node agents' ServiceAccount with a token bound to no pod (or a Node-less one)."""
    unbound = env.backend.client(await env.backend.service_account())
    with pytest.raises(Forbidden) as refused:
        await unbound.create(NODEMAINTENANCES, model.shutdown_maintenance("node-1", BOOT, "reboot"))
    assert refused_by_policy(refused.value)
    assert "must name its node" in str(refused.value)
    with pytest.raises(Forbidden) as refused:
        await unbound.create(EVENTS, event("default", node_ref("node-1")))
    assert refused_by_policy(refused.value)
    assert "must name its node" in str(refused.value)


def impersonating(kubeconfig: Path, user: str, group: str) -> k8s.ApiClient:
    return api_client(kubeconfig, {"Impersonate-User": user, "Impersonate-Group": group})


async def test_certificate_users_are_kept_to_the_node_their_name_names(env: Env) -> None:
    """A .deb agent with a client certificate for system:nodeagent:node-1 in group
    system:nodeagents (client-certificates/ binds the node role to the group): the admin
    impersonates that user, so the server authorizes and admits it as it would the
    certificate's."""
    from tests.clusters import REPO, apply_files

    await asyncio.to_thread(
        apply_files,
        env.backend.kubeconfig,
        [REPO / "packaging" / "kubernetes" / "client-certificates" / "rbac.yaml"],
    )

    def create(user: str, body: Obj) -> int:
        with impersonating(env.backend.kubeconfig, user, "system:nodeagents") as api:
            try:
                k8s.CustomObjectsApi(api).create_cluster_custom_object(
                    "nodeagent.io", "v1alpha1", "nodemaintenances", body, dry_run="All"
                )
            except k8s.ApiException as e:
                assert e.status != 403 or POLICY in str(e.body), e.body
                return int(e.status)
            return 201

    def attempt(user: str, body: Obj) -> Any:
        return asyncio.to_thread(create, user, body)

    own = model.shutdown_maintenance("node-1", BOOT, "reboot")
    other = model.shutdown_maintenance("node-2", BOOT, "reboot")
    # RBAC takes the new binding in at once; the policy was in force before (the fixture)
    assert await attempt("system:nodeagent:node-1", own) == 201
    assert await attempt("system:nodeagent:node-1", other) == 403
    # a group member whose name names no node
    assert await attempt("mallory", own) == 403


async def test_shutdown_drains_node_1_end_to_end_with_split_credentials(env: Env) -> None:
    """node-1's shutdown with node-1's credentials only; the drain by the controllers
    Deployment's agent with the controllers' credentials only."""
    pods = [await a_pod(env.admin, f"work-{i}", "node-1", exit_seconds=1) for i in range(3)]
    controllers_account = await env.backend.service_account(CONTROLLERS_ACCOUNT)
    controllers = Agent(
        from_mapping(
            {
                "runNodeAgent": False,
                "kube": {"kubeconfig": str(controllers_account)},
                "leader": {"leaseDuration": 2.0, "renewDeadline": 1.5, "retryPeriod": 0.25},
                "eviction": {"backoffBase": 0.2, "backoffCap": 1.0},
                "observability": {"listen": "127.0.0.1:0"},
            }
        ),
        env={"POD_NAME": "nodeagent-controllers-0"},
    )
    task = asyncio.create_task(controllers.run())
    try:
        config = ShutdownConfig(budget=120, safety_margin=5, api_unreachable_release_after=10)
        flow = ShutdownFlow(env.node1, "node-1", BOOT, config)
        async with asyncio.timeout(90):
            assert await flow.on_shutdown("reboot") == "the node is drained"
        uids = {p["metadata"]["uid"] for p in pods}
        await env.view.until(
            lambda: not [p for p in env.view.list(PODS, "default") if p["metadata"]["uid"] in uids]
        )
        # the agent's own pod (the token's) is never drained
        assert env.view.get(PODS, "nodeagent-node-1", NAMESPACE) is not None
        # after the reboot: node-1's agent completes and deletes its maintenance
        async with asyncio.timeout(30):
            await complete_previous_boots(env.node1, "node-1", LATER_BOOT)
        await env.view.until(lambda: not env.view.list(NODEMAINTENANCES))
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_a_token_bound_to_the_node_object_is_kept_to_that_node(env: Env) -> None:
    """What README.Debian gives a .deb agent: `kubectl create token nodeagent
    --bound-object-kind Node --bound-object-name node-1` carries the node's name too."""

    def token() -> str:
        with api_client(env.backend.kubeconfig) as api:
            core = k8s.CoreV1Api(api)
            node = core.read_node("node-1")
            assert node.metadata is not None
            ref = {"apiVersion": "v1", "kind": "Node", "name": "node-1", "uid": node.metadata.uid}
            body = {"spec": {"expirationSeconds": 3600, "boundObjectRef": ref}}
            got = core.create_namespaced_service_account_token(
                "nodeagent", NAMESPACE, k8s.AuthenticationV1TokenRequest.model_validate(body)
            )
            assert got.status is not None
            return str(got.status.token)

    doc = yaml.safe_load(env.node1_account.read_text())
    doc["users"][0]["user"] = {"token": await asyncio.to_thread(token)}
    path = env.node1_account.with_name("node-bound.kubeconfig")
    path.write_text(yaml.safe_dump(doc))
    agent = env.backend.client(path)
    with pytest.raises(Forbidden) as refused:
        await agent.create(NODEMAINTENANCES, model.shutdown_maintenance("node-2", BOOT, "reboot"))
    assert refused_by_policy(refused.value)
    await agent.create(NODEMAINTENANCES, model.shutdown_maintenance("node-1", BOOT, "reboot"))


async def test_a_node_agent_bound_to_a_wider_role_still_deletes_no_pod(env: Env) -> None:
    """Should a role granting pod deletes be bound to the node agents' account by mistake, the
    policy still refuses them, on its own node too."""
    account = await env.backend.service_account(node="node-1", also_roles=["nodeagent-controllers"])
    wider = env.backend.client(account)
    await a_pod(env.admin, "mine", "node-1")
    with pytest.raises(Forbidden) as refused:
        await wider.delete(PODS, "mine", "default", grace_period_seconds=5)
    assert refused_by_policy(refused.value), refused.value
    assert "may delete no pods" in str(refused.value)
    assert not (await env.admin.get(PODS, "mine", "default"))["metadata"].get("deletionTimestamp")
