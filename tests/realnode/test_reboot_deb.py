"""The mission on a real node, `.deb` install: a real kubelet with containerd runs node-1's pods
and static pods; `systemctl reboot` in the node drains it through the real control plane in plan
order (Default pods by priority, through the Eviction API so their budgets hold, then DaemonSet
pods without the DaemonSet controller putting them back, then the static pods, which the real
kubelet stops once their manifests are moved aside); the machine goes down only after
Drained=True; after the reboot the manifests are back byte-identical and the kubelet runs them.
Under a limit on nodes draining at once: the shutdown maintenance's boot is compared with the
real kubelet's report (status.nodeInfo.bootID), and must be found the same boot."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from nodeagent.kube.resources import EVICTIONS, NODEMAINTENANCES, NODES, PODS, Resource
from nodeagent.model.names import (
    DAEMONSET_RESPONDER,
    IMPERATIVE_RESPONDER,
    LABEL_BOOT_ID,
    STATIC_POD_RESPONDER,
)
from nodeagent_testbed.nspawn import REBOOT_EXIT
from tests.e2e.node import kind_of
from tests.realnode.conftest import NODE, RealNode
from tests.realnode.workloads import (
    ETCD,
    SCHEDULER,
    deb_node_with_pods,
    evicted,
    static_pods_running,
)

pytestmark = [pytest.mark.realnode, pytest.mark.timeout(600)]


async def test_reboot_drains_a_real_node_in_plan_order(real_node: RealNode, deb: Path) -> None:
    n, c = real_node, real_node.container
    limit = {"nodeMaintenance": {"maxDrainingNodes": 1}}
    manifests = await deb_node_with_pods(n, deb, budget=180, more=limit)
    assert (await c.exec("systemctl", "is-active", "nodeagent")).strip() == "active"
    reported = (n.view.get(NODES, NODE) or {})["status"]["nodeInfo"]["bootID"]

    leaving: list[tuple[float, str, dict[str, Any]]] = []
    drained_at: list[float] = []
    daemonset_pods_made: list[str] = []
    seen: set[str] = set()
    watching = [False]
    active: dict[str, set[str]] = {}  # pod name -> the responders seen Active on its Eviction
    boots: set[str | None] = set()  # the boot-id labels of the shutdown maintenance

    def record(event: str, resource: Resource, new: dict[str, Any]) -> None:
        if resource == EVICTIONS:
            pod = new["spec"]["target"]["pod"]["name"]
            for t in (new.get("status") or {}).get("targetResponders") or []:
                if t["state"] == "Active":
                    active.setdefault(pod, set()).add(t["name"])
        if resource == PODS and new["spec"].get("nodeName") == NODE:
            uid = new["metadata"]["uid"]
            if event == "ADDED" and watching[0] and kind_of(new) == "daemonset":
                daemonset_pods_made.append(new["metadata"]["name"])
            if (event == "DELETED" or new["metadata"].get("deletionTimestamp")) and uid not in seen:
                seen.add(uid)
                leaving.append((time.monotonic(), kind_of(new), new))
        if resource == NODEMAINTENANCES:
            boots.add((new["metadata"].get("labels") or {}).get(LABEL_BOOT_ID))
        if resource == NODEMAINTENANCES and not drained_at:
            conds = (new.get("status") or {}).get("conditions") or []
            if any(x["type"] == "Drained" and x["status"] == "True" for x in conds):
                drained_at.append(time.monotonic())

    n.view.listen(record)
    # logind waits as long as the drain may take: our drop-in wins over the kubelet's
    assert await c.inhibit_delay_max_usec() == 180_000_000
    watching[0] = True
    await c.exec("systemctl", "reboot")
    assert await c.wait_exit(timeout=240) == REBOOT_EXIT
    rebooted_at = time.monotonic()
    watching[0] = False

    assert drained_at and drained_at[0] <= rebooted_at, "rebooted before Drained=True"
    # the kubelet's form and the agent's label agree: the same boot (else, under the limit, it
    # would drain nothing and the final phase would delete the pods)
    assert boots == {reported}, (boots, reported)
    order = [k for _, k, _ in leaving]
    assert order[:5] == ["low", "low", "high", "high", "daemonset"], order
    assert sorted(order[5:]) == ["static", "static"], order
    # Default pods left through the Eviction API (their budget decided), not a plain delete
    assert all(evicted(p) for _, k, p in leaving if k in ("low", "high")), leaving
    assert not daemonset_pods_made, f"DaemonSet pods made during the drain: {daemonset_pods_made}"
    # all through the upstream API, which the control plane serves: the static pods' turns
    # taken by the node agent, the DaemonSet pod's by the controllers' DaemonSet responder
    for _, kind, pod in leaving:
        name = pod["metadata"]["name"]
        if kind == "static":
            assert active.get(name) == {STATIC_POD_RESPONDER}, (name, active)
        elif kind == "daemonset":
            assert active.get(name) == {DAEMONSET_RESPONDER}, (name, active)
        else:
            assert active.get(name) == {IMPERATIVE_RESPONDER}, (name, active)
    assert not (manifests / "etcd.yaml").exists()
    assert not (manifests / "kube-scheduler.yaml").exists()

    # after the reboot: manifests back before the kubelet starts, which runs them again
    await c.boot()
    assert (manifests / "etcd.yaml").read_bytes() == ETCD
    assert (manifests / "kube-scheduler.yaml").read_bytes() == SCHEDULER
    await n.view.until(
        lambda: not (n.view.get(NODES, NODE) or {})["spec"].get("unschedulable"), timeout=120
    )
    await static_pods_running(n)
    await n.view.until(lambda: not n.view.list(NODEMAINTENANCES), timeout=60)
