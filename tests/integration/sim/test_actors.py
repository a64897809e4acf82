"""The simulated actors driving a Store in-process: scheduling, workloads, garbage collection,
disruption budgets, kubelets and static pods (real files, real watchfiles)."""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from nodeagent_testbed.sim import admission
from nodeagent_testbed.sim.actors import base as actors_base
from nodeagent_testbed.sim.actors import build_actors
from nodeagent_testbed.sim.actors.kubelet import EXIT_SECONDS, Kubelet
from nodeagent_testbed.sim.actors.templates import template_hash
from nodeagent_testbed.sim.eviction import evict
from nodeagent_testbed.sim.resources import ResourceType
from nodeagent_testbed.sim.store import Change, Obj, Store, now_iso
from tests.simutil import store_changes
from tests.until import until

TYPES = {
    "pods": ("", "pods"),
    "nodes": ("", "nodes"),
    "deployments": ("apps", "deployments"),
    "replicasets": ("apps", "replicasets"),
    "statefulsets": ("apps", "statefulsets"),
    "daemonsets": ("apps", "daemonsets"),
    "pdbs": ("policy", "poddisruptionbudgets"),
    "configmaps": ("", "configmaps"),
}


class Sim:
    """A store with admission, the control-plane actors and one kubelet per node."""

    def __init__(self) -> None:
        self.store = Store()
        admission.install(self.store)
        self.tasks: list[asyncio.Task[None]] = []
        self.kubelets: dict[str, Kubelet] = {}
        self.changes: list[Change] = []
        self.store.listeners.append(self.changes.append)

    def rt(self, name: str) -> ResourceType:
        group, plural = TYPES[name]
        return self.store.resource(group, "v1", plural)

    async def start(self, nodes: int = 3, static: dict[str, Path] | None = None) -> None:
        for actor in build_actors(self.store):
            self.tasks.append(asyncio.create_task(actor.run()))
        for i in range(1, nodes + 1):
            name = f"node-{i}"
            kubelet = self.kubelets[name] = Kubelet(self.store, name, (static or {}).get(name))
            await kubelet.ensure_node()
            self.tasks.append(asyncio.create_task(kubelet.run()))

    async def stop(self) -> None:
        for t in self.tasks:
            t.cancel()
        results = await asyncio.gather(*self.tasks, return_exceptions=True)
        for r in results:  # an actor that crashed fails the test
            assert isinstance(r, asyncio.CancelledError), r

    async def until(self, cond: Callable[[], Any], timeout: float = 5) -> None:
        """Wait until `cond()` is truthy, re-checking on each committed change."""
        with store_changes(self.store) as changed:
            await until(cond, changed=changed, timeout=timeout)

    # --- shorthands ---

    def create(self, kind: str, obj: Obj) -> Obj:
        return self.store.create(self.rt(kind), obj["metadata"].get("namespace"), obj)

    def get(self, kind: str, name: str, namespace: str | None = "default") -> Obj | None:
        rt = self.rt(kind)
        return self.store.find(rt, namespace if rt.namespaced else None, name)

    def mutate(
        self, kind: str, name: str, fn: Callable[[Obj], None], sub: str | None = None
    ) -> Obj:
        rt = self.rt(kind)
        return self.store.mutate(rt, "default" if rt.namespaced else None, name, fn, sub)

    def pods(self, **labels: str) -> list[Obj]:
        out = []
        for p in self.store.list(self.rt("pods"), "default"):
            have = p["metadata"].get("labels") or {}
            if all(have.get(k) == v for k, v in labels.items()):
                out.append(p)
        return out

    def running(self, **labels: str) -> list[Obj]:
        return [p for p in self.pods(**labels) if is_running(p)]


def is_running(p: Obj) -> bool:
    return (p.get("status") or {}).get("phase") == "Running" and not p["metadata"].get(
        "deletionTimestamp"
    )


def is_ready(p: Obj) -> bool:
    conds = (p.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conds)


def pod(name: str, **spec: Any) -> Obj:
    return {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}], **spec},
    }


def template(app: str, exit_seconds: float | None = None, **spec: Any) -> Obj:
    meta: dict[str, Any] = {"labels": {"app": app}}
    if exit_seconds is not None:
        meta["annotations"] = {EXIT_SECONDS: str(exit_seconds)}
    return {"metadata": meta, "spec": {"containers": [{"name": app, "image": "nginx"}], **spec}}


def workload(name: str, replicas: int | None = 1, **extra: Any) -> Obj:
    spec: dict[str, Any] = {"selector": {"matchLabels": {"app": name}}, "template": template(name)}
    if replicas is not None:
        spec["replicas"] = replicas
    spec.update(extra)
    return {"metadata": {"name": name, "namespace": "default"}, "spec": spec}


def node_of(p: Obj) -> str | None:
    return (p.get("spec") or {}).get("nodeName")


@pytest.fixture
async def sim() -> AsyncIterator[Sim]:
    s = Sim()
    yield s
    await s.stop()


# --- scheduler ----------------------------------------------------------------------------------


async def test_scheduler_avoids_cordoned_and_tainted_nodes(sim: Sim) -> None:
    await sim.start(nodes=3)
    sim.mutate("nodes", "node-1", lambda n: n["spec"].update(unschedulable=True))
    taint = {"key": "dedicated", "value": "db", "effect": "NoSchedule"}
    sim.mutate("nodes", "node-2", lambda n: n["spec"].update(taints=[taint]))
    for i in range(4):
        sim.create("pods", pod(f"p{i}"))
    await sim.until(lambda: len(sim.running()) == 4)
    assert {node_of(p) for p in sim.pods()} == {"node-3"}
    p = sim.pods()[0]
    assert p["status"]["podIP"].startswith("10.3.")
    assert p["status"]["hostIP"] == "127.0.3.1"
    assert is_ready(p)

    # tolerating the taint: node-2 has the fewest pods
    toleration = {"key": "dedicated", "operator": "Equal", "value": "db", "effect": "NoSchedule"}
    sim.create("pods", pod("db", tolerations=[toleration]))
    await sim.until(lambda: node_of(sim.get("pods", "db") or {}) == "node-2")

    # tolerating the cordon: node-1 is empty
    cordon = {"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}
    sim.create("pods", pod("critical", tolerations=[cordon]))
    await sim.until(lambda: node_of(sim.get("pods", "critical") or {}) == "node-1")


async def test_unschedulable_pod_waits_for_a_fitting_node(sim: Sim) -> None:
    await sim.start(nodes=2)
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}
                ]
            }
        }
    }
    sim.create("pods", pod("picky", nodeSelector={"disk": "ssd"}, affinity=affinity))

    def scheduled_condition() -> Obj | None:
        p = sim.get("pods", "picky") or {}
        conds = (p.get("status") or {}).get("conditions") or []
        return next((c for c in conds if c["type"] == "PodScheduled"), None)

    await sim.until(lambda: scheduled_condition() is not None)
    cond = scheduled_condition()
    assert cond is not None
    assert (cond["status"], cond["reason"]) == ("False", "Unschedulable")
    assert cond["message"] == (
        "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector."
    )
    sim.mutate("nodes", "node-2", lambda n: n["metadata"]["labels"].update(disk="ssd"))
    sim.mutate("nodes", "node-2", lambda n: n["metadata"]["labels"].update(zone="b"))
    await sim.until(lambda: is_running(sim.get("pods", "picky") or {}))
    p = sim.get("pods", "picky")
    assert p is not None and node_of(p) == "node-2"
    cond = scheduled_condition()
    assert cond is not None and cond["status"] == "True"


async def test_not_ready_node_gets_no_pods(sim: Sim) -> None:
    await sim.start(nodes=2)

    def not_ready(n: Obj) -> None:
        for c in n["status"]["conditions"]:
            if c["type"] == "Ready":
                c["status"] = "False"

    sim.mutate("nodes", "node-1", not_ready, "status")
    for i in range(3):
        sim.create("pods", pod(f"p{i}"))
    await sim.until(lambda: len(sim.running()) == 3)
    assert {node_of(p) for p in sim.pods()} == {"node-2"}


# --- deployments and replicasets ---------------------------------------------------------------


async def test_deployment_creates_replicaset_and_scales(sim: Sim) -> None:
    await sim.start(nodes=3)
    sim.create("deployments", workload("web", replicas=3))
    await sim.until(
        lambda: (
            (sim.get("deployments", "web") or {}).get("status", {}).get("availableReplicas") == 3
        )
    )
    [rs] = sim.store.list(sim.rt("replicasets"), "default")
    h = rs["metadata"]["labels"]["pod-template-hash"]
    assert rs["metadata"]["name"] == f"web-{h}"
    assert rs["spec"]["selector"]["matchLabels"] == {"app": "web", "pod-template-hash": h}
    assert rs["metadata"]["ownerReferences"][0]["kind"] == "Deployment"
    pods = sim.running(app="web")
    assert len(pods) == 3
    assert {node_of(p) for p in pods} == {"node-1", "node-2", "node-3"}  # spread by pod count
    for p in pods:
        assert p["metadata"]["name"].startswith(f"web-{h}-")
        assert p["metadata"]["labels"] == {"app": "web", "pod-template-hash": h}
        ref = p["metadata"]["ownerReferences"][0]
        assert ref == {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "name": rs["metadata"]["name"],
            "uid": rs["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    d = sim.get("deployments", "web")
    assert d is not None
    status = d["status"]
    assert status["replicas"] == status["readyReplicas"] == status["updatedReplicas"] == 3
    assert status["observedGeneration"] == d["metadata"]["generation"]
    conds = {c["type"]: c for c in status["conditions"]}
    assert conds["Available"]["status"] == "True"
    assert conds["Progressing"]["reason"] == "NewReplicaSetAvailable"
    assert d["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "1"

    sim.mutate("deployments", "web", lambda o: o["spec"].update(replicas=1))

    def settled(n: int) -> bool:
        d = sim.get("deployments", "web") or {}
        st = d.get("status") or {}
        return (
            len(sim.pods(app="web")) == n
            and st.get("replicas") == st.get("availableReplicas") == n
            and st.get("observedGeneration") == d["metadata"]["generation"]
        )

    await sim.until(lambda: settled(1))
    sim.mutate("deployments", "web", lambda o: o["spec"].update(replicas=4))
    await sim.until(lambda: settled(4))
    rs_now = sim.get("replicasets", rs["metadata"]["name"])
    assert rs_now is not None
    assert rs_now["status"]["replicas"] == rs_now["status"]["readyReplicas"] == 4


async def test_replicaset_does_not_count_terminating_pods(sim: Sim) -> None:
    await sim.start(nodes=1)
    rs = workload("slow", replicas=2)
    rs["spec"]["template"] = template("slow", exit_seconds=30)
    sim.create("replicasets", rs)
    await sim.until(lambda: len(sim.running(app="slow")) == 2)
    victim = sim.running(app="slow")[0]["metadata"]["name"]
    sim.store.delete(sim.rt("pods"), "default", victim)
    # a replacement starts while the old pod is still terminating
    await sim.until(lambda: len(sim.running(app="slow")) == 2)
    assert len(sim.pods(app="slow")) == 3
    terminating = sim.get("pods", victim)
    assert terminating is not None and terminating["metadata"]["deletionTimestamp"]
    rs_now = sim.get("replicasets", "slow")
    assert rs_now is not None and rs_now["status"]["replicas"] == 2


async def test_deployment_template_change_rolls_to_a_new_replicaset(sim: Sim) -> None:
    await sim.start(nodes=2)
    sim.create("deployments", workload("web", replicas=2))
    await sim.until(lambda: len(sim.running(app="web")) == 2)
    [old] = sim.store.list(sim.rt("replicasets"), "default")

    def new_image(d: Obj) -> None:
        d["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:2"

    sim.mutate("deployments", "web", new_image)

    def rolled() -> bool:
        rss = sim.store.list(sim.rt("replicasets"), "default")
        pods = sim.pods(app="web")
        return (
            len(rss) == 2
            and len(pods) == 2
            and all(p["spec"]["containers"][0]["image"] == "nginx:2" for p in pods)
            and all(is_running(p) for p in pods)
        )

    await sim.until(rolled)
    old_now = sim.get("replicasets", old["metadata"]["name"])
    assert old_now is not None and old_now["spec"]["replicas"] == 0
    d = sim.get("deployments", "web")
    assert d is not None
    assert d["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2"
    await sim.until(
        lambda: (sim.get("deployments", "web") or {})["status"].get("updatedReplicas") == 2
    )


async def test_replicaset_name_taken_bumps_collision_count(sim: Sim) -> None:
    await sim.start(nodes=1)
    d = workload("web", replicas=1)
    taken = f"web-{template_hash(d['spec']['template'])}"
    sim.create("replicasets", workload(taken, replicas=0))
    sim.create("deployments", d)

    def status() -> dict[str, Any]:
        return dict((sim.get("deployments", "web") or {}).get("status") or {})

    await sim.until(lambda: status().get("availableReplicas") == 1)
    assert status()["collisionCount"] == 1
    names = {rs["metadata"]["name"] for rs in sim.store.list(sim.rt("replicasets"), "default")}
    assert names == {taken, f"web-{template_hash(d['spec']['template'], 1)}"}


async def test_a_malformed_object_does_not_stop_the_controllers(
    sim: Sim, caplog: pytest.LogCaptureFixture
) -> None:
    await sim.start(nodes=1)
    sim.create("deployments", workload("bad", replicas="many"))  # type: ignore[arg-type]
    sim.create("deployments", workload("good", replicas=1))
    await sim.until(lambda: len(sim.running(app="good")) == 1)
    assert "syncing ('default', 'bad') failed" in caplog.text


async def test_deleting_a_deployment_cascades_to_replicasets_and_pods(sim: Sim) -> None:
    await sim.start(nodes=2)
    sim.create("deployments", workload("web", replicas=2))
    await sim.until(lambda: len(sim.running(app="web")) == 2)
    sim.store.delete(sim.rt("deployments"), "default", "web")
    await sim.until(
        lambda: not sim.pods(app="web") and not sim.store.list(sim.rt("replicasets"), "default")
    )


async def test_gc_drops_references_to_missing_owners_and_honours_orphan(sim: Sim) -> None:
    await sim.start(nodes=1)
    a = sim.create("replicasets", workload("a", replicas=0))
    b = sim.create("replicasets", workload("b", replicas=0))
    refs = []
    for owner in (a, b):
        ref = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"],
        }
        refs.append(ref)
    p = pod("shared")
    p["metadata"]["ownerReferences"] = refs
    sim.create("pods", p)
    sim.store.delete(sim.rt("replicasets"), "default", "a")

    def owners() -> list[str]:
        shared = sim.get("pods", "shared") or {"metadata": {}}
        return [r["name"] for r in shared["metadata"].get("ownerReferences") or []]

    await sim.until(lambda: owners() == ["b"])
    # deleting the last owner with the orphan finalizer leaves the pod alone
    sim.mutate("replicasets", "b", lambda o: o["metadata"].update(finalizers=["orphan"]))
    sim.store.delete(sim.rt("replicasets"), "default", "b")
    await sim.until(lambda: sim.get("replicasets", "b") is None)
    shared = sim.get("pods", "shared")
    assert shared is not None and "ownerReferences" not in shared["metadata"]
    assert not shared["metadata"].get("deletionTimestamp")


async def test_foreground_deletion_waits_for_dependents(sim: Sim) -> None:
    await sim.start(nodes=1)
    rs = workload("fg", replicas=1)
    rs["spec"]["template"] = template("fg", exit_seconds=0.2)
    sim.create("replicasets", rs)
    await sim.until(lambda: len(sim.running(app="fg")) == 1)
    sim.mutate(
        "replicasets", "fg", lambda o: o["metadata"].update(finalizers=["foregroundDeletion"])
    )
    sim.store.delete(sim.rt("replicasets"), "default", "fg")
    await sim.until(lambda: any(p["metadata"].get("deletionTimestamp") for p in sim.pods()))
    assert sim.get("replicasets", "fg") is not None  # waits for its pod
    await sim.until(lambda: sim.get("replicasets", "fg") is None)
    assert not sim.pods(app="fg")


# --- statefulsets ------------------------------------------------------------------------------


async def test_statefulset_pods_in_order_and_recreated_under_the_same_name(sim: Sim) -> None:
    await sim.start(nodes=2)
    sts = workload("db", replicas=3, serviceName="db")
    sts["spec"]["template"] = template("db", exit_seconds=0.2)
    sim.create("statefulsets", sts)
    await sim.until(lambda: len(sim.running(app="db")) == 3)
    added = [
        c[3]["metadata"]["name"] for c in sim.changes if c[0] == "ADDED" and c[1] == ("", "pods")
    ]
    assert added == ["db-0", "db-1", "db-2"]
    db1 = sim.get("pods", "db-1")
    assert db1 is not None
    assert db1["spec"]["hostname"] == "db-1" and db1["spec"]["subdomain"] == "db"
    assert db1["metadata"]["labels"]["statefulset.kubernetes.io/pod-name"] == "db-1"
    await sim.until(
        lambda: (sim.get("statefulsets", "db") or {})["status"].get("readyReplicas") == 3
    )
    status = (sim.get("statefulsets", "db") or {})["status"]
    assert status["replicas"] == status["updatedReplicas"] == status["currentReplicas"] == 3
    assert status["currentRevision"] == status["updateRevision"]

    old_uid = db1["metadata"]["uid"]
    mark = len(sim.changes)
    sim.store.delete(sim.rt("pods"), "default", "db-1")
    await sim.until(
        lambda: (
            is_running(sim.get("pods", "db-1") or {})
            and (sim.get("pods", "db-1") or {})["metadata"]["uid"] != old_uid
        )
    )
    events = [
        (c[0], c[3]["metadata"]["uid"])
        for c in sim.changes[mark:]
        if c[1] == ("", "pods") and c[3]["metadata"]["name"] == "db-1"
    ]
    gone = events.index(("DELETED", old_uid))
    created = next(i for i, (kind, _) in enumerate(events) if kind == "ADDED")
    assert gone < created  # the new pod only once the old object is gone

    sim.mutate("statefulsets", "db", lambda o: o["spec"].update(replicas=1))
    await sim.until(lambda: [p["metadata"]["name"] for p in sim.pods(app="db")] == ["db-0"])
    await sim.until(lambda: (sim.get("statefulsets", "db") or {})["status"]["replicas"] == 1)


# --- daemonsets --------------------------------------------------------------------------------


async def test_daemonset_pod_per_node_recreated_unless_tainted(sim: Sim) -> None:
    await sim.start(nodes=3)
    ds = workload("agent", replicas=None)
    ds["spec"]["template"] = template("agent", exit_seconds=0.1)
    sim.create("daemonsets", ds)
    await sim.until(lambda: len(sim.running(app="agent")) == 3)
    by_node = {node_of(p): p for p in sim.pods(app="agent")}
    assert set(by_node) == {"node-1", "node-2", "node-3"}
    tolerated = {t["key"] for t in by_node["node-1"]["spec"]["tolerations"]}
    assert "node.kubernetes.io/unschedulable" in tolerated
    await sim.until(lambda: (sim.get("daemonsets", "agent") or {})["status"]["numberReady"] == 3)
    status = (sim.get("daemonsets", "agent") or {})["status"]
    assert status["desiredNumberScheduled"] == status["currentNumberScheduled"] == 3
    assert status["updatedNumberScheduled"] == status["numberAvailable"] == 3

    # cordoned: daemon pods tolerate it, so a deleted one comes back on the same node
    sim.mutate("nodes", "node-1", lambda n: n["spec"].update(unschedulable=True))
    old = by_node["node-1"]["metadata"]["uid"]
    sim.store.delete(sim.rt("pods"), "default", by_node["node-1"]["metadata"]["name"])

    def replaced_on_node_1() -> bool:
        return any(
            node_of(p) == "node-1" and p["metadata"]["uid"] != old and is_running(p)
            for p in sim.pods(app="agent")
        )

    await sim.until(replaced_on_node_1)

    # an untolerated NoSchedule taint: the running pod stays, a deleted one is not replaced
    taint = {"key": "maintenance", "effect": "NoSchedule"}
    sim.mutate("nodes", "node-2", lambda n: n["spec"].update(taints=[taint]))
    await sim.until(
        lambda: (sim.get("daemonsets", "agent") or {})["status"]["desiredNumberScheduled"] == 2
    )
    assert is_running(sim.get("pods", by_node["node-2"]["metadata"]["name"]) or {})
    sim.store.delete(sim.rt("pods"), "default", by_node["node-2"]["metadata"]["name"])
    await sim.until(lambda: not any(node_of(p) == "node-2" for p in sim.pods(app="agent")))
    await sim.until(
        lambda: (sim.get("daemonsets", "agent") or {})["status"].get("numberMisscheduled") == 0
    )
    assert len(sim.running(app="agent")) == 2

    # NoExecute: the pod is removed
    sim.mutate(
        "nodes", "node-3", lambda n: n["spec"].update(taints=[{"key": "x", "effect": "NoExecute"}])
    )
    await sim.until(lambda: {node_of(p) for p in sim.pods(app="agent")} == {"node-1"})


# --- disruption budgets ------------------------------------------------------------------------


def pdb(name: str, app: str, **spec: Any) -> Obj:
    return {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": app}}, **spec},
    }


def pdb_status(sim: Sim, name: str) -> dict[str, Any]:
    return dict((sim.get("pdbs", name) or {}).get("status") or {})


def counts(st: dict[str, Any]) -> tuple[int, int, int, int]:
    return (
        st.get("expectedPods", -1),
        st.get("currentHealthy", -1),
        st.get("desiredHealthy", -1),
        st.get("disruptionsAllowed", -1),
    )


@pytest.mark.parametrize(
    ("spec", "want"),
    [
        ({"minAvailable": 2}, (4, 3, 2, 1)),  # expected: the matching pods
        ({"minAvailable": "50%"}, (4, 3, 2, 1)),  # of the deployment's scale, rounded up
        ({"maxUnavailable": 1}, (4, 3, 3, 0)),
        ({"maxUnavailable": "30%"}, (4, 3, 2, 1)),  # 30% of 4 rounds up to 2
        ({"minAvailable": 3}, (4, 3, 3, 0)),
    ],
)
async def test_pdb_status(sim: Sim, spec: dict[str, Any], want: tuple[int, ...]) -> None:
    await sim.start(nodes=2)
    sim.create("deployments", workload("web", replicas=3))
    await sim.until(lambda: len(sim.running(app="web")) == 3)
    # a fourth replica that never gets a node: expected but not healthy
    sim.mutate("nodes", "node-1", lambda n: n["spec"].update(unschedulable=True))
    sim.mutate("nodes", "node-2", lambda n: n["spec"].update(unschedulable=True))
    sim.mutate("deployments", "web", lambda d: d["spec"].update(replicas=4))
    await sim.until(lambda: len(sim.pods(app="web")) == 4)
    sim.create("pdbs", pdb("web", "web", **spec))
    await sim.until(lambda: counts(pdb_status(sim, "web")) == want)
    st = pdb_status(sim, "web")
    assert st["observedGeneration"] == 1
    [cond] = st["conditions"]
    assert cond["type"] == "DisruptionAllowed"
    assert (cond["status"], cond["reason"]) == (
        ("True", "SufficientPods") if want[3] > 0 else ("False", "InsufficientPods")
    )


async def test_pdb_counts_evictions_until_the_pod_terminates(sim: Sim) -> None:
    await sim.start(nodes=2)
    sts = workload("db", replicas=3, podManagementPolicy="Parallel")
    sts["spec"]["template"] = template("db", exit_seconds=0.3)
    sim.create("statefulsets", sts)
    await sim.until(lambda: len(sim.running(app="db")) == 3)
    sim.create("pdbs", pdb("db", "db", maxUnavailable=1))
    await sim.until(lambda: counts(pdb_status(sim, "db")) == (3, 3, 2, 1))

    evict(sim.store, "default", "db-0", {"metadata": {"name": "db-0"}})
    st = pdb_status(sim, "db")
    assert st["disruptionsAllowed"] == 0
    # the pod is terminating now: the entry is pruned, and it is not healthy
    await sim.until(lambda: counts(pdb_status(sim, "db")) == (3, 2, 2, 0))
    assert "disruptedPods" not in pdb_status(sim, "db")
    # the replacement comes back and the budget recovers
    await sim.until(lambda: counts(pdb_status(sim, "db")) == (3, 3, 2, 1), timeout=10)


async def test_pdb_disrupted_pod_entry_expires(sim: Sim) -> None:
    await sim.start(nodes=1)
    sim.create("replicasets", workload("web", replicas=2))
    await sim.until(lambda: len(sim.running(app="web")) == 2)
    sim.create("pdbs", pdb("web", "web", minAvailable=1))
    await sim.until(lambda: counts(pdb_status(sim, "web")) == (2, 2, 1, 1))
    name = sim.running(app="web")[0]["metadata"]["name"]
    # an eviction that was never followed by a deletion, almost two minutes ago
    stamp = now_iso(time.time() - 118.5)
    sim.mutate("pdbs", "web", lambda o: o["status"].update(disruptedPods={name: stamp}), "status")
    await sim.until(lambda: counts(pdb_status(sim, "web")) == (2, 1, 1, 0))
    assert pdb_status(sim, "web")["disruptedPods"] == {name: stamp}
    await sim.until(lambda: counts(pdb_status(sim, "web")) == (2, 2, 1, 1), timeout=4)
    assert "disruptedPods" not in pdb_status(sim, "web")


async def test_pdb_counts_a_deployment_once_during_a_rollout(sim: Sim) -> None:
    await sim.start(nodes=2)
    d = workload("web", replicas=2)
    d["spec"]["template"] = template("web", exit_seconds=30)
    sim.create("deployments", d)
    await sim.until(lambda: len(sim.running(app="web")) == 2)
    sim.create("pdbs", pdb("web", "web", maxUnavailable=1))
    await sim.until(lambda: counts(pdb_status(sim, "web")) == (2, 2, 1, 1))

    def new_image(o: Obj) -> None:
        o["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:2"

    sim.mutate("deployments", "web", new_image)
    # two ReplicaSets, four pods (two terminating): still one controller of scale 2
    await sim.until(lambda: len(sim.running(app="web")) == 2 and len(sim.pods(app="web")) == 4)
    await sim.until(lambda: counts(pdb_status(sim, "web")) == (2, 2, 1, 1))


async def test_pdb_over_pods_of_no_controller_expects_none(sim: Sim) -> None:
    # as kube-controller-manager 1.37: such pods are only warned of, and no pods expected
    # means no disruption allowed
    await sim.start(nodes=1)
    p = pod("lonely")
    p["metadata"]["labels"] = {"app": "lonely"}
    sim.create("pods", p)
    sim.create("pdbs", pdb("lonely", "lonely", maxUnavailable=1))
    await sim.until(lambda: pdb_status(sim, "lonely").get("observedGeneration") == 1)
    st = pdb_status(sim, "lonely")
    assert (st["expectedPods"], st["disruptionsAllowed"]) == (0, 0)
    assert [c["reason"] for c in st["conditions"]] == ["InsufficientPods"]


async def test_pdb_over_a_pod_of_an_unscalable_controller_fails_safe(sim: Sim) -> None:
    await sim.start(nodes=1)
    owner = sim.create("configmaps", {"metadata": {"name": "owner", "namespace": "default"}})
    p = pod("owned")
    p["metadata"]["labels"] = {"app": "owned"}
    p["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "name": "owner",
            "uid": owner["metadata"]["uid"],
            "controller": True,
        }
    ]
    sim.create("pods", p)
    sim.create("pdbs", pdb("owned", "owned", maxUnavailable=1))

    def failed() -> bool:
        conds = pdb_status(sim, "owned").get("conditions") or []
        return any(c["reason"] == "SyncFailed" for c in conds)

    await sim.until(failed)
    assert pdb_status(sim, "owned")["disruptionsAllowed"] == 0


# --- kubelet -----------------------------------------------------------------------------------


def annotated(name: str, exit_seconds: float, **spec: Any) -> Obj:
    p = pod(name, **spec)
    p["metadata"]["annotations"] = {EXIT_SECONDS: str(exit_seconds)}
    return p


async def test_node_registration(sim: Sim) -> None:
    await sim.start(nodes=2)
    node = sim.get("nodes", "node-2", None)
    assert node is not None
    assert node["metadata"]["labels"]["kubernetes.io/hostname"] == "node-2"
    assert node["metadata"]["labels"]["kubernetes.io/os"] == "linux"
    st = node["status"]
    assert {"type": "InternalIP", "address": "127.0.2.1"} in st["addresses"]
    assert {"type": "Hostname", "address": "node-2"} in st["addresses"]
    assert st["allocatable"]["pods"] == "110"
    assert st["nodeInfo"]["kubeletVersion"] == "v1.37.0-sim"
    ready = next(c for c in st["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True" and ready["lastHeartbeatTime"]


async def test_kubelet_finishes_graceful_deletion_after_exit_seconds(sim: Sim) -> None:
    await sim.start(nodes=1)
    sim.create("pods", annotated("quick", 0.3))
    await sim.until(lambda: is_running(sim.get("pods", "quick") or {}))
    loop = asyncio.get_running_loop()
    start = loop.time()
    sim.store.delete(sim.rt("pods"), "default", "quick")
    p = sim.get("pods", "quick")
    assert p is not None and p["metadata"]["deletionGracePeriodSeconds"] == 30
    await sim.until(lambda: sim.get("pods", "quick") is None)
    assert 0.25 <= loop.time() - start < 2
    final = next(c[3] for c in reversed(sim.changes) if c[0] == "DELETED")
    assert final["status"]["phase"] == "Succeeded"
    assert final["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0


async def test_kubelet_kills_at_the_end_of_the_grace_period(sim: Sim) -> None:
    await sim.start(nodes=1)
    sim.create("pods", annotated("stubborn", 60, terminationGracePeriodSeconds=1))
    await sim.until(lambda: is_running(sim.get("pods", "stubborn") or {}))
    loop = asyncio.get_running_loop()
    start = loop.time()
    sim.store.delete(sim.rt("pods"), "default", "stubborn")
    await sim.until(lambda: sim.get("pods", "stubborn") is None)
    assert 0.9 <= loop.time() - start < 3
    final = next(c[3] for c in reversed(sim.changes) if c[0] == "DELETED")
    assert final["status"]["phase"] == "Failed"
    assert final["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 137


async def test_shorter_grace_period_on_a_second_delete(sim: Sim) -> None:
    await sim.start(nodes=1)
    sim.create("pods", annotated("slow", 60))
    await sim.until(lambda: is_running(sim.get("pods", "slow") or {}))
    sim.store.delete(sim.rt("pods"), "default", "slow")
    sim.store.delete(sim.rt("pods"), "default", "slow", grace_period=1)
    await sim.until(lambda: sim.get("pods", "slow") is None, timeout=3)


async def test_pod_with_finalizer_stays_until_released(sim: Sim) -> None:
    await sim.start(nodes=1)
    p = annotated("held", 0.1)
    p["metadata"]["finalizers"] = ["example.com/hold"]
    sim.create("pods", p)
    await sim.until(lambda: is_running(sim.get("pods", "held") or {}))
    sim.store.delete(sim.rt("pods"), "default", "held")
    await sim.until(lambda: (sim.get("pods", "held") or {})["status"]["phase"] == "Succeeded")
    sim.mutate("pods", "held", lambda o: o["metadata"].update(finalizers=[]))
    assert sim.get("pods", "held") is None


# --- static pods -------------------------------------------------------------------------------

MANIFEST = """\
apiVersion: v1
kind: Pod
metadata:
  name: etcd
  namespace: kube-system
  annotations:
    sim.nodeagent.io/exit-seconds: "0.3"
spec:
  priorityClassName: system-node-critical
  containers:
  - name: etcd
    image: registry.k8s.io/etcd:3.6
"""


@pytest.fixture
def static_dir(tmp_path: Path) -> Iterator[Path]:
    d = tmp_path / "manifests"
    d.mkdir()
    yield d


def mirror(sim: Sim, name: str = "etcd-node-1") -> Obj | None:
    return sim.get("pods", name, "kube-system")


async def test_static_pod_manifest_becomes_a_mirror_pod(sim: Sim, static_dir: Path) -> None:
    (static_dir / "etcd.yaml").write_text(MANIFEST)
    (static_dir / ".hidden.yaml").write_text(MANIFEST.replace("etcd", "hidden"))
    (static_dir / "notes.txt").write_text(MANIFEST.replace("etcd", "txt"))
    (static_dir / "broken.yaml").write_text("apiVersion: v1\nkind: Pod\nmetadata: [\n")
    await sim.start(nodes=2, static={"node-1": static_dir})
    await sim.until(lambda: is_running(mirror(sim) or {}))
    p = mirror(sim)
    assert p is not None
    ann = p["metadata"]["annotations"]
    assert ann["kubernetes.io/config.source"] == "file"
    assert ann["kubernetes.io/config.mirror"] == ann["kubernetes.io/config.hash"]
    assert len(ann["kubernetes.io/config.mirror"]) == 32
    node = sim.get("nodes", "node-1", None)
    assert node is not None
    assert p["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "name": "node-1",
            "uid": node["metadata"]["uid"],
            "controller": True,
        }
    ]
    assert p["spec"]["nodeName"] == "node-1"
    assert p["spec"]["priority"] == 2000001000
    assert is_ready(p)
    names = {q["metadata"]["name"] for q in sim.store.list(sim.rt("pods"))}
    assert names == {"etcd-node-1"}

    # a JSON manifest written later is picked up by the watch
    extra = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "proxy"},
        "spec": {"containers": [{"name": "proxy", "image": "proxy"}]},
    }
    (static_dir / "proxy.json").write_text(json.dumps(extra))
    await sim.until(lambda: is_running(sim.get("pods", "proxy-node-1") or {}))


async def test_removed_manifest_terminates_the_mirror_pod(sim: Sim, static_dir: Path) -> None:
    (static_dir / "etcd.yaml").write_text(MANIFEST)
    await sim.start(nodes=1, static={"node-1": static_dir})
    await sim.until(lambda: is_running(mirror(sim) or {}))
    loop = asyncio.get_running_loop()
    (static_dir / "etcd.yaml").rename(static_dir / "etcd.yaml.disabled")
    await sim.until(lambda: (mirror(sim) or {}).get("metadata", {}).get("deletionTimestamp"))
    start = loop.time()
    await sim.until(lambda: mirror(sim) is None)
    assert 0.25 <= loop.time() - start < 2

    # back again: a new mirror pod
    (static_dir / "etcd.yaml.disabled").rename(static_dir / "etcd.yaml")
    await sim.until(lambda: is_running(mirror(sim) or {}))


async def test_changed_manifest_replaces_the_mirror_pod_after_the_old_one_is_gone(
    sim: Sim, static_dir: Path
) -> None:
    (static_dir / "etcd.yaml").write_text(MANIFEST)
    await sim.start(nodes=1, static={"node-1": static_dir})
    await sim.until(lambda: is_running(mirror(sim) or {}))
    old = copy.deepcopy(mirror(sim))
    assert old is not None
    mark = len(sim.changes)
    (static_dir / "etcd.yaml").write_text(MANIFEST.replace("etcd:3.6", "etcd:3.7"))

    def replaced() -> bool:
        p = mirror(sim)
        return p is not None and p["metadata"]["uid"] != old["metadata"]["uid"] and is_running(p)

    await sim.until(replaced)
    p = mirror(sim)
    assert p is not None and p["spec"]["containers"][0]["image"].endswith("etcd:3.7")
    events = [
        (c[0], c[3]["metadata"]["uid"])
        for c in sim.changes[mark:]
        if c[3]["metadata"]["name"] == "etcd-node-1"
    ]
    assert events.index(("DELETED", old["metadata"]["uid"])) < events.index(
        ("ADDED", p["metadata"]["uid"])
    )


async def test_mirror_pod_deleted_through_the_api_is_recreated(sim: Sim, static_dir: Path) -> None:
    (static_dir / "etcd.yaml").write_text(MANIFEST)
    await sim.start(nodes=1, static={"node-1": static_dir})
    await sim.until(lambda: is_running(mirror(sim) or {}))
    old = mirror(sim)
    assert old is not None
    sim.store.delete(sim.rt("pods"), "kube-system", "etcd-node-1")

    def recreated() -> bool:
        p = mirror(sim)
        return p is not None and p["metadata"]["uid"] != old["metadata"]["uid"] and is_running(p)

    await sim.until(recreated, timeout=2)


async def test_mirror_pods_follow_their_node(sim: Sim, static_dir: Path) -> None:
    (static_dir / "etcd.yaml").write_text(MANIFEST)
    await sim.start(nodes=1, static={"node-1": static_dir})
    await sim.until(lambda: is_running(mirror(sim) or {}))
    sim.store.delete(sim.rt("nodes"), None, "node-1")
    # the garbage collector removes the mirror pod; without a node there is no new one
    await sim.until(lambda: mirror(sim) is None)
    node = await sim.kubelets["node-1"].ensure_node()
    await sim.until(lambda: is_running(mirror(sim) or {}))
    p = mirror(sim)
    assert p is not None
    assert p["metadata"]["ownerReferences"][0]["uid"] == node["metadata"]["uid"]


async def test_mirror_pod_creation_is_retried(
    sim: Sim, static_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger=actors_base.__name__)
    (static_dir / "etcd.yaml").write_text(MANIFEST.replace("kube-system", "late"))
    await sim.start(nodes=1, static={"node-1": static_dir})

    def failed_attempts() -> int:
        return sum("Kubelet: syncing" in r.getMessage() for r in caplog.records)

    # the namespace does not exist yet (nothing announces a failed attempt but its log line)
    await until(lambda: failed_attempts() >= 2)
    namespaces = sim.store.resource("", "v1", "namespaces")
    sim.store.create(namespaces, None, {"metadata": {"name": "late"}})
    await sim.until(lambda: is_running(sim.get("pods", "etcd-node-1", "late") or {}))
