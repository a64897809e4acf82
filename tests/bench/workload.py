"""The drain benchmark's workload: 110 pods on one node, seeded exit times, and the bounds.

Everything here is deterministic for a given seed, so the nodeagent run and the kubectl run
drain identical clusters, and the bounds are computed from the very exit times the simulated
kubelets apply.

Exit times
    Per pod, from a log-normal distribution (median 1.5 s, sigma 0.9, clipped to [0.1, 20] s):
    most pods stop within a second or two of SIGTERM, a few take many seconds. They are drawn
    in the order of ``GROUPS`` and handed to the group's pods in name order, and set on each
    running pod as the annotation ``sim.nodeagent.io/exit-seconds`` (the simulated kubelet
    stops the pod that long after it sees the deletion).

The bound (critical path)
    nodeagent drains one drain-plan entry after the other: the next entry starts only when
    every pod of the current one is gone. No drain in entry order can end before, for every
    entry, its slowest *chain* has exited, so the bound is

        critical path = sum over drain-plan entries of max over the entry's chains of the
                        chain's length

    where a chain is normally one pod (its exit time). PodDisruptionBudgets turn some pods into
    longer chains, and this is where the workload needs care:

    * A Deployment's pods are replaced as soon as they are *terminating* (the ReplicaSet does
      not count terminating pods), and in the simulation the replacement is Running and Ready
      at once. A budget (maxUnavailable 1, minAvailable 80 %) therefore opens again as soon as
      the replacement is Ready, long before the evicted pod has exited. Refused evictions cost
      control-plane round trips, not exit time: each pod is its own chain (length = its exit
      time). Physically nothing stops all of them from terminating together.
    * A StatefulSet's pod is recreated only once the old pod is completely gone (same name).
      Under a budget that allows ``k`` disruptions, its pods on the drained node can only
      terminate ``k`` at a time, each waiting for an earlier one to exit: for ``k = 1`` the
      chain is the *sum* of their exit times (in any order). For ``k > 1`` we use the makespan
      lower bound ``max(max e, sum e / k)``.

    Control-plane latencies (scheduling, the disruption controller, watch delivery) count as
    zero: the bound is physical, not achievable.

    ``kubectl drain`` does not order by priority: it evicts everything at once, so its own
    physical limit is the *flat* bound, the same chains pooled into a single entry. We report
    both; the flat bound is always <= the critical path.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

EXIT_ANNOTATION = "sim.nodeagent.io/exit-seconds"
NAMESPACE = "default"
DRAINED_NODE = "node-1"
PRIORITY_CLASSES: dict[str, int] = {"low": 100, "standard": 1000, "critical": 100_000}

# the NodeMaintenance's drainPlan: one entry per priority in use, lowest first; the controller
# appends KEP-4212's 12 default entries (all empty here)
DRAIN_PLAN: list[dict[str, Any]] = [
    {"podPriority": 0, "podType": "Default"},
    *({"podPriority": v, "podType": "Default"} for v in sorted(PRIORITY_CLASSES.values())),
]


@dataclass(frozen=True)
class Group:
    name: str  # workload name and label app=<name>
    kind: str  # Deployment | StatefulSet | Pod (bare pods: kubectl needs --force)
    count: int
    priority_class: str | None = None
    pdb: dict[str, Any] | None = None  # the PodDisruptionBudget spec, without the selector
    empty_dir: bool = False  # kubectl needs --delete-emptydir-data

    @property
    def priority(self) -> int:
        return PRIORITY_CLASSES[self.priority_class] if self.priority_class else 0

    @property
    def serial_width(self) -> int | None:
        """Disruptions the budget allows at a time when replacements wait for the old pod to be
        gone (StatefulSets), else None (pods independent)."""
        if self.kind != "StatefulSet" or self.pdb is None:
            return None
        max_unavailable = self.pdb.get("maxUnavailable")
        if isinstance(max_unavailable, int):
            return max(1, max_unavailable)
        min_available = self.pdb.get("minAvailable")
        if isinstance(min_available, int):
            return max(1, self.count - min_available)
        return 1


GROUPS: tuple[Group, ...] = (
    Group("tools", "Deployment", 10),
    Group("adhoc", "Pod", 10),
    Group("batch", "Deployment", 15, "low", empty_dir=True),
    Group("job", "Pod", 15, "low"),
    Group("web", "Deployment", 20, "standard", {"maxUnavailable": 2}),
    Group("api", "Deployment", 15, "standard", {"maxUnavailable": 1}),
    Group("cache", "Deployment", 10, "standard", {"minAvailable": "80%"}, empty_dir=True),
    Group("ingress", "Deployment", 10, "critical", {"maxUnavailable": 1}),
    Group("db", "StatefulSet", 5, "critical", {"maxUnavailable": 1}),
)
POD_COUNT = sum(g.count for g in GROUPS)
assert POD_COUNT == 110


@dataclass
class Workload:
    seed: int
    groups: tuple[Group, ...] = GROUPS
    exit_times: dict[str, list[float]] = field(default_factory=dict)  # group -> per pod

    @classmethod
    def generate(cls, seed: int) -> Workload:
        rng = random.Random(seed)
        w = cls(seed)
        for g in w.groups:
            w.exit_times[g.name] = [
                round(min(20.0, max(0.1, rng.lognormvariate(0.405, 0.9))), 2)
                for _ in range(g.count)
            ]
        return w

    # --- the bounds --------------------------------------------------------------------------

    def _chains(self, groups: list[Group]) -> list[float]:
        out: list[float] = []
        for g in groups:
            times = self.exit_times[g.name]
            width = g.serial_width
            if width is None:
                out.extend(times)
            else:
                out.append(max(max(times), sum(times) / width))
        return out

    def entries(self) -> list[tuple[int, list[Group]]]:
        """(podPriority of the drain-plan entry, the groups it covers), in plan order."""
        out: list[tuple[int, list[Group]]] = []
        done: set[str] = set()
        for entry in DRAIN_PLAN:
            covered = [
                g for g in self.groups if g.name not in done and g.priority <= entry["podPriority"]
            ]
            done.update(g.name for g in covered)
            out.append((entry["podPriority"], covered))
        assert done == {g.name for g in self.groups}
        return out

    def critical_path(self) -> float:
        return sum(max(self._chains(gs), default=0.0) for _, gs in self.entries())

    def flat_bound(self) -> float:
        return max(self._chains(list(self.groups)))

    def describe_entries(self) -> list[dict[str, Any]]:
        return [
            {
                "podPriority": p,
                "groups": [g.name for g in gs],
                "pods": sum(g.count for g in gs),
                "slowest_chain_seconds": round(max(self._chains(gs), default=0.0), 2),
            }
            for p, gs in self.entries()
        ]

    # --- manifests ---------------------------------------------------------------------------

    def manifests(self) -> list[dict[str, Any]]:
        """PriorityClasses, workloads and budgets, as `kubectl apply` would send them."""
        docs: list[dict[str, Any]] = [
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": name},
                "value": value,
                "description": "benchmark workload",
            }
            for name, value in PRIORITY_CLASSES.items()
        ]
        for g in self.groups:
            docs.extend(_group_manifests(g))
        return docs


def _pod_spec(g: Group) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [{"name": g.name, "image": f"registry.example/{g.name}:1"}],
        "terminationGracePeriodSeconds": 30,
    }
    if g.priority_class:
        spec["priorityClassName"] = g.priority_class
    if g.empty_dir:
        spec["volumes"] = [{"name": "scratch", "emptyDir": {}}]
        spec["containers"][0]["volumeMounts"] = [{"name": "scratch", "mountPath": "/scratch"}]
    return spec


def _group_manifests(g: Group) -> list[dict[str, Any]]:
    labels = {"app": g.name, "bench": "drain"}
    meta = {"namespace": NAMESPACE}
    docs: list[dict[str, Any]] = []
    if g.kind == "Pod":
        for i in range(g.count):
            docs.append(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {**meta, "name": f"{g.name}-{i}", "labels": labels},
                    "spec": _pod_spec(g),
                }
            )
    else:
        spec: dict[str, Any] = {
            "replicas": g.count,
            "selector": {"matchLabels": {"app": g.name}},
            "template": {"metadata": {"labels": labels}, "spec": _pod_spec(g)},
        }
        if g.kind == "StatefulSet":
            spec["serviceName"] = g.name
        docs.append(
            {
                "apiVersion": "apps/v1",
                "kind": g.kind,
                "metadata": {**meta, "name": g.name, "labels": labels},
                "spec": spec,
            }
        )
    if g.pdb is not None:
        docs.append(
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {**meta, "name": g.name},
                "spec": {**g.pdb, "selector": {"matchLabels": {"app": g.name}}},
            }
        )
    return docs


def group_of(pod: dict[str, Any]) -> str | None:
    return ((pod.get("metadata") or {}).get("labels") or {}).get("app")
