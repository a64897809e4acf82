"""The GNS figure: `systemctl reboot` of a real node (kubelet v1.37 and containerd in
systemd-nspawn, tests/realnode) running the same 31 pods under PodDisruptionBudgets, once under
each of two set-ups, side by side in one run:

- **nodeagent** (the recommended set-up): the kubelet's Graceful Node Shutdown off
  (`shutdownGracePeriod: 0`), the agent installed from the .deb with the controllers' account
  (as tests/realnode/test_reboot_deb.py), its production defaults but a 180 s budget;
- **kubelet GNS** alone: `shutdownGracePeriod: 30s`, `shutdownGracePeriodCriticalPods: 10s`,
  no nodeagent at all.

Each set-up gets a fresh control plane (node-1 left for the kubelet, node-2 and node-3 kwok's)
and a fresh node. Everything is read from one watch of the pods (tests.clusters.ClusterView),
stamped as it arrives; after the container's exit a marker pod is created and awaited, so
every change made before the reboot has been seen (one pods watch delivers in order):

- seconds from `systemctl reboot` to the container's reboot (systemd-nspawn exits 133);
- how each pod on node-1 left before the reboot: through the Eviction API (DisruptionTarget
  `EvictionByEvictionAPI`), terminated by the kubelet (`TerminationByKubelet`), otherwise
  (deleted without such a condition: static pods' mirror pods, the DaemonSet pod), or not at
  all (still running when the node went down);
- per budget, the most of its pods unavailable at once (expected pods minus those Running,
  Ready, not terminating and not marked DisruptionTarget), against what it allows;
- the Deployments' pods whose replacement was Running on another node before the reboot.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import random
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from nodeagent.kube.resources import NODES, PDBS, PODS, Resource
from nodeagent_testbed.controlplane.build import Binaries
from nodeagent_testbed.controlplane.cluster import ControlPlane
from nodeagent_testbed.nspawn import REBOOT_EXIT
from nodeagent_testbed.realnode.container import prepared_node
from nodeagent_testbed.realnode.images import BUSYBOX
from nodeagent_testbed.realnode.node import NO_GNS
from tests.clusters import CONTROLLERS_ACCOUNT, PRIORITY_CLASSES, ClusterView, RealBackend
from tests.e2e.node import install_package, kind_of, running
from tests.realnode.workloads import (
    create_on_node,
    daemonset,
    deployment,
    node_pods,
    serve_exiting_after,
    static_pod,
)

ROOT = Path(__file__).resolve().parents[2]
NODE = "node-1"
SETUPS: dict[str, tuple[int, int]] = {"nodeagent": NO_GNS, "kubelet_gns": (30, 10)}
BUDGET = 180  # the agent's shutdown budget, seconds
STANDARD = 1000  # the PriorityClass `standard`
# name, namespace, replicas, PriorityClass, budget (None: no PodDisruptionBudget)
DEPLOYMENTS: list[tuple[str, str, int, str | None, dict[str, Any] | None]] = [
    ("web", "default", 8, None, {"maxUnavailable": 1}),
    ("batch", "default", 6, None, None),
    ("api", "default", 6, "standard", {"maxUnavailable": 1}),
    ("cache", "default", 5, "standard", {"minAvailable": "80%"}),
    ("ingress", "kube-system", 3, "system-cluster-critical", {"maxUnavailable": 1}),
]
STATIC = ("etcd", "kube-scheduler")


def exit_delays(seed: int) -> dict[str, float]:
    """Seconds each group's containers take to exit after SIGTERM (0.2-2.0 s, seeded)."""
    rng = random.Random(seed)
    groups = [d[0] for d in DEPLOYMENTS] + ["logs", *STATIC]
    return {g: round(rng.uniform(0.2, 2.0), 1) for g in groups}


def workload(seed: int) -> tuple[list[dict[str, Any]], dict[str, bytes]]:
    """The Deployments, budgets and DaemonSet (created through the API), and the static pods'
    manifests (file name -> bytes)."""
    delays = exit_delays(seed)
    docs: list[dict[str, Any]] = []
    for name, ns, replicas, priority, budget in DEPLOYMENTS:
        docs.append(deployment(name, ns, replicas, priority, serve_exiting_after(delays[name])))
        if budget is not None:
            docs.append(
                {
                    "apiVersion": "policy/v1",
                    "kind": "PodDisruptionBudget",
                    "metadata": {"name": name, "namespace": ns},
                    "spec": {**budget, "selector": {"matchLabels": {"app": name}}},
                }
            )
    docs.append(daemonset(serve_exiting_after(delays["logs"])))
    statics = {f"{s}.yaml": static_pod(s, serve_exiting_after(delays[s])) for s in STATIC}
    return docs, statics


def pod_count() -> int:
    return sum(d[2] for d in DEPLOYMENTS) + 1 + len(STATIC)


def allowed(budget: dict[str, Any], expected: int) -> int:
    """Pods a budget lets be unavailable at once, out of `expected` (the disruption
    controller's arithmetic: minAvailable rounds up, maxUnavailable as given)."""
    if "maxUnavailable" in budget:
        return int(budget["maxUnavailable"])
    m = budget["minAvailable"]
    need = math.ceil(int(m[:-1]) * expected / 100) if isinstance(m, str) else int(m)
    return expected - need


def ready(p: dict[str, Any]) -> bool:
    conds = (p.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds)


def healthy(p: dict[str, Any]) -> bool:
    """Available to its budget: Running, Ready, and neither terminating nor marked for a
    disruption (a pod the kubelet is shutting down keeps Running and Ready in the API until its
    containers have exited; from the DisruptionTarget condition on it is going)."""
    return running(p) and ready(p) and disruption(p) is None


def disruption(p: dict[str, Any]) -> str | None:
    conds = (p.get("status") or {}).get("conditions") or []
    return next((c.get("reason") for c in conds if c.get("type") == "DisruptionTarget"), None)


def gone(p: dict[str, Any], deleted: bool) -> bool:
    phase = (p.get("status") or {}).get("phase")
    return (
        deleted
        or bool(p["metadata"].get("deletionTimestamp"))
        or phase in ("Failed", "Succeeded")
        or disruption(p) is not None
    )


def owner(p: dict[str, Any]) -> str | None:
    refs = p["metadata"].get("ownerReferences") or []
    return next((o["uid"] for o in refs if o["kind"] == "ReplicaSet"), None)


def analyse(
    snapshot: dict[str, dict[str, Any]],
    log: list[tuple[float, str, dict[str, Any]]],
    t0: float,
    t1: float,
    sigterm_at: dict[str, float] | None = None,
) -> dict[str, Any]:
    """The figure's numbers for one reboot, from the pods at `t0` (systemctl reboot) and every
    change seen after it (`log`: stamp, event, pod), the container having exited at `t1`;
    `sigterm_at`: pod uid -> when the kubelet sent its container SIGTERM (same clock)."""
    on_node = {u: p for u, p in snapshot.items() if p["spec"].get("nodeName") == NODE}
    state = dict(snapshot)
    deleted: set[str] = set()
    left_at: dict[str, float] = {}
    replaced_at: dict[str, float] = {}  # pods made after t0, Running elsewhere: first stamp
    budgets: dict[str, dict[str, Any]] = {
        name: {
            "namespace": ns,
            "expected": replicas,
            "spec": budget,
            "max_unavailable": 0,
            "max_down_from_sigterm": 0,
        }
        for name, ns, replicas, _, budget in DEPLOYMENTS
        if budget is not None
    }
    sigtermed: set[str] = set()

    def unavailable(name: str, b: dict[str, Any], also: set[str]) -> int:
        up = sum(
            1
            for u, p in state.items()
            if u not in deleted
            and u not in also
            and p["metadata"].get("namespace") == b["namespace"]
            and (p["metadata"].get("labels") or {}).get("app") == name
            and healthy(p)
        )
        return int(b["expected"]) - up

    # the watch's changes and the kubelet's SIGTERMs, in time order (a SIGTERM carries no pod)
    timeline: list[tuple[float, str, dict[str, Any] | None, str]] = [
        (stamp, event, pod, pod["metadata"]["uid"]) for stamp, event, pod in log
    ]
    deleted_seen = _deletions_seen(log, t1)
    timeline += [
        (max(at, deleted_seen.get(uid, at)), "SIGTERM", None, uid)
        for uid, at in (sigterm_at or {}).items()
    ]
    # how far the watch showed deletions behind the kubelet's SIGTERMs (what was reordered)
    lags = [deleted_seen[u] - at for u, at in (sigterm_at or {}).items() if u in deleted_seen]
    timeline.sort(key=lambda e: e[0])
    for stamp, event, maybe_pod, uid in timeline:
        if maybe_pod is None:
            sigtermed.add(uid)
            for name, b in budgets.items():
                down = unavailable(name, b, sigtermed)
                b["max_down_from_sigterm"] = max(b["max_down_from_sigterm"], down)
            continue
        pod = maybe_pod
        state[uid] = pod
        if event == "DELETED":
            deleted.add(uid)
        if uid in on_node and uid not in left_at and gone(pod, event == "DELETED"):
            left_at[uid] = stamp - t0
        if (
            uid not in snapshot
            and uid not in replaced_at
            and pod["spec"].get("nodeName") not in (None, NODE)
            and (pod.get("status") or {}).get("phase") == "Running"
        ):
            replaced_at[uid] = stamp
        for name, b in budgets.items():
            b["max_unavailable"] = max(b["max_unavailable"], unavailable(name, b, set()))
            down = unavailable(name, b, sigtermed)
            b["max_down_from_sigterm"] = max(b["max_down_from_sigterm"], down)

    how = {"evicted": 0, "terminated_by_kubelet": 0, "other": 0, "not_left": 0}
    by_kind: dict[str, dict[str, int]] = {}
    for uid, first in on_node.items():
        last = state[uid]
        if uid not in left_at or left_at[uid] > t1 - t0:
            key = "not_left"
        else:
            key = {
                "EvictionByEvictionAPI": "evicted",
                "TerminationByKubelet": "terminated_by_kubelet",
            }.get(disruption(last) or "", "other")
        how[key] += 1
        kinds = by_kind.setdefault(kind_of(first), {})
        kinds[key] = kinds.get(key, 0) + 1
    replaced = 0
    owners: dict[str, int] = {}
    for uid, p in on_node.items():
        if (o := owner(p)) is not None and uid in left_at:
            owners[o] = owners.get(o, 0) + 1
    for o, n in owners.items():
        made = sum(1 for u, at in replaced_at.items() if owner(state[u]) == o and at <= t1)
        replaced += min(n, made)
    return {
        "pods_on_node": len(on_node),
        "reboot_seconds": round(t1 - t0, 2),
        "last_pod_left_seconds": round(max(left_at.values()), 2) if left_at else None,
        "left": how,
        "left_by_kind": by_kind,
        "budgets": {
            name: {
                "expected": b["expected"],
                "allowed": allowed(b["spec"], b["expected"]),
                "max_unavailable": b["max_unavailable"],
                "violated": b["max_unavailable"] > allowed(b["spec"], b["expected"]),
                "max_down_from_sigterm": b["max_down_from_sigterm"],
            }
            for name, b in budgets.items()
        },
        "budgets_violated": sum(
            b["max_unavailable"] > allowed(b["spec"], b["expected"]) for b in budgets.values()
        ),
        "budgets_violated_from_sigterm": sum(
            b["max_down_from_sigterm"] > allowed(b["spec"], b["expected"]) for b in budgets.values()
        )
        if sigterm_at
        else None,
        "sigterms_seen": len(sigterm_at or {}),
        "sigterms_before_their_deletion_was_seen": sum(1 for lag in lags if lag > 0),
        "watch_lag_behind_sigterm_max_seconds": round(max(lags), 3) if lags else None,
        "deployment_pods": sum(1 for p in on_node.values() if owner(p) is not None),
        "replaced_elsewhere_before_reboot": replaced,
    }


def _deletions_seen(log: list[tuple[float, str, dict[str, Any]]], t1: float) -> dict[str, float]:
    """Deployment pod uid -> when the watch first showed it deleted through the API (evicted or
    deleted: a DisruptionTarget other than the kubelet's own termination, a deletionTimestamp),
    before the node went down at `t1`.

    The kubelet sends SIGTERM to such a pod only after the deletion, but the watch shows the
    deletion later than the kubelet's log shows the SIGTERM (the watch's lag). So a SIGTERM is
    put no earlier than the deletion's sighting, and keeps the server's order against the other
    changes the watch shows: on the kubelet's clock, the eviction the budget allowed once the
    replacement of the pod before was Ready came out as a SIGTERM before that replacement was
    seen, two pods down at once where the server had let one go. Static and DaemonSet pods are
    not counted by the budgets and the kubelet terminates them before their mirror or API
    object goes: left as they are."""
    out: dict[str, float] = {}
    for stamp, event, pod in log:
        uid = pod["metadata"]["uid"]
        if uid in out or stamp > t1 or owner(pod) is None:
            continue
        reason = disruption(pod)
        if reason == "TerminationByKubelet":
            out[uid] = math.inf  # the kubelet's own: never moved
        elif event == "DELETED" or pod["metadata"].get("deletionTimestamp") or reason is not None:
            out[uid] = stamp
    return {uid: at for uid, at in out.items() if at != math.inf}


KILLING = re.compile(r'"Killing container with a grace period" pod="[^"]+" podUID="([^"]+)"')


def sigterms(journal: Path, wall_minus_monotonic: float) -> dict[str, float]:
    """Pod uid -> when the kubelet first sent one of its containers SIGTERM (its log line
    "Killing container with a grace period", as journald received it), on the monotonic clock
    (the node shares the host's clock)."""
    done = subprocess.run(
        ["journalctl", "-D", str(journal), "-u", "kubelet", "-o", "json", "--no-pager"],
        capture_output=True,
        text=True,
        check=True,
    )
    out: dict[str, float] = {}
    for line in done.stdout.splitlines():
        entry = json.loads(line)
        message = entry.get("MESSAGE")
        if not isinstance(message, str) or (m := KILLING.search(message)) is None:
            continue
        at = int(entry["__REALTIME_TIMESTAMP"]) / 1e6 - wall_minus_monotonic
        out[m.group(1)] = min(at, out.get(m.group(1), at))
    return out


def build_deb(out: Path) -> Path:
    """The .deb of this working tree (packaging/debian/build-deb), as the `deb` fixture makes it."""
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run([str(ROOT / "packaging/debian/build-deb"), str(out)], check=True)
    (package,) = out.glob("nodeagent_*.deb")
    return package


async def reboot_once(
    setup: str, gns: tuple[int, int], seed: int, workdir: Path, binaries: Binaries, deb: Path
) -> dict[str, Any]:
    workdir.mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240 (a harness, not a server)
    plane = ControlPlane(workdir / "controlplane")
    try:
        await asyncio.to_thread(plane.up, 3, binaries, kubelets=frozenset({NODE}))
        backend = RealBackend(plane.kubeconfig, [NODE, "node-2", "node-3"], plane.dir / "pki")
        try:
            return await _on_node(setup, gns, seed, workdir, backend, deb)
        finally:
            await backend.close_clients()
    finally:
        await asyncio.to_thread(plane.down)  # its logs stay in workdir


class _Node:
    """What tests.realnode.workloads.create_on_node needs: a client and a view."""

    def __init__(self, kube: Any, view: ClusterView) -> None:
        self.kube, self.view = kube, view


async def _on_node(
    setup: str,
    gns: tuple[int, int],
    seed: int,
    workdir: Path,
    backend: RealBackend,
    deb: Path,
) -> dict[str, Any]:
    docs, statics = workload(seed)
    kube = backend.client()
    async with prepared_node(workdir, NODE, backend.kubeconfig, backend.pki_dir, gns) as c:
        manifests = c.path("/etc/kubernetes/manifests")
        for name, body in statics.items():
            (manifests / name).write_bytes(body)
        if setup == "nodeagent":
            await backend.install_crds()
            account = await backend.service_account(
                CONTROLLERS_ACCOUNT, also_roles=["nodeagent-node"]
            )
            production = {
                "leader": {"leaseDuration": 15, "renewDeadline": 10, "retryPeriod": 2},
                "eviction": {"backoffBase": 1, "backoffCap": 900},
                "shutdown": {"budget": BUDGET, "safetyMargin": 5},
            }
            await asyncio.to_thread(install_package, c, deb, account, production)
        view = ClusterView(kube, [NODES, PODS, PDBS])
        await view.start()
        try:
            await c.boot()
            if setup == "nodeagent":
                active = (await c.exec("systemctl", "is-active", "nodeagent")).strip()
                if active != "active":
                    raise RuntimeError(f"the agent is {active!r} after boot")
            await view.until(
                lambda: (
                    sum(kind_of(p) == "static" and running(p) for p in node_pods(view, NODE))
                    == len(STATIC)
                ),
                timeout=180,
            )
            await kube.create(
                PRIORITY_CLASSES,
                {
                    "apiVersion": "scheduling.k8s.io/v1",
                    "kind": "PriorityClass",
                    "metadata": {"name": "standard"},
                    "value": STANDARD,
                },
            )
            await create_on_node(_Node(kube, view), docs, NODE, timeout=120)
            wanted = pod_count()
            await view.until(
                lambda: sum(healthy(p) for p in node_pods(view, NODE)) == wanted, timeout=240
            )

            def settled() -> bool:
                pdbs = view.list(PDBS)
                return len(pdbs) == sum(d[4] is not None for d in DEPLOYMENTS) and all(
                    (b.get("status") or {}).get("observedGeneration")
                    == b["metadata"].get("generation")
                    and (b.get("status") or {}).get("currentHealthy")
                    == (b.get("status") or {}).get("expectedPods")
                    and (b.get("status") or {}).get("disruptionsAllowed", 0) >= 1
                    for b in pdbs
                )

            await view.until(settled, timeout=60)
            log: list[tuple[float, str, dict[str, Any]]] = []

            def record(event: str, resource: Resource, new: dict[str, Any]) -> None:
                if resource == PODS:
                    log.append((time.monotonic(), event, new))

            # the snapshot and the listener in one step of the loop: no change falls between
            snapshot = {p["metadata"]["uid"]: p for p in view.list(PODS)}
            view.listen(record)
            t0 = time.monotonic()
            wall_minus_monotonic = time.time() - t0
            await c.exec("systemctl", "reboot")
            rc = await c.wait_exit(timeout=BUDGET + 60)
            t1 = time.monotonic()
            if rc != REBOOT_EXIT:
                raise RuntimeError(f"systemd-nspawn exited {rc}, not {REBOOT_EXIT} (a reboot)")
            # a barrier: once the watch shows a pod created now, it has shown every change
            # made before it (one pods watch, in resourceVersion order)
            marker = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "gns-bench-barrier", "namespace": "default"},
                "spec": {
                    "nodeName": "node-2",
                    "containers": [{"name": "c", "image": BUSYBOX}],
                },
            }
            await kube.create(PODS, marker)
            await view.until(
                lambda: view.get(PODS, "gns-bench-barrier", "default") is not None, timeout=30
            )
            log = [e for e in log if e[2]["metadata"]["name"] != "gns-bench-barrier"]
            killed = await asyncio.to_thread(
                sigterms, c.path("/var/log/journal"), wall_minus_monotonic
            )
            # only what the reboot did: the pods there at the start, SIGTERMed after it began
            killed = {u: at for u, at in killed.items() if u in snapshot and at >= t0}
            result = analyse(snapshot, log, t0, t1, killed)
            result["kubelet_gns_seconds"] = list(gns)
            result["nodeagent_installed"] = setup == "nodeagent"
            result["watch_events"] = len(log)
            return result
        finally:
            await view.stop()


async def run(seed: int, workdir: Path, binaries: Binaries) -> dict[str, Any]:
    if os.geteuid() != 0:
        return {"skipped": "boots a real node with systemd-nspawn: needs root"}
    for tool in ("systemd-nspawn", "debootstrap", "nsenter", "dpkg-deb"):
        if shutil.which(tool) is None:
            return {"skipped": f"{tool} is not installed (scripts/setup installs it)"}
    deb = await asyncio.to_thread(build_deb, workdir / "deb")
    delays = exit_delays(seed)
    out: dict[str, Any] = {
        "seed": seed,
        "pods": pod_count(),
        "deployments": [
            {
                "name": name,
                "namespace": ns,
                "replicas": replicas,
                "priority_class": priority,
                "budget": budget,
                "exit_seconds": delays[name],
            }
            for name, ns, replicas, priority, budget in DEPLOYMENTS
        ],
        "daemonset_exit_seconds": delays["logs"],
        "static_exit_seconds": {s: delays[s] for s in STATIC},
        "agent_budget_seconds": BUDGET,
    }
    for setup, gns in SETUPS.items():
        try:
            out[setup] = await reboot_once(setup, gns, seed, workdir / setup, binaries, deb)
        except Exception as e:  # reported: the other set-up stands
            out[setup] = {"error": f"{type(e).__name__}: {e}"[:2000]}
    a, g = out["nodeagent"], out["kubelet_gns"]
    if "error" not in a and "error" not in g:
        out["ratios"] = {
            "reboot_nodeagent_vs_kubelet_gns": round(a["reboot_seconds"] / g["reboot_seconds"], 2)
        }
    return out
