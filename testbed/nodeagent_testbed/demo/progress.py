"""Watching the simulated cluster's store during the demo: what left node-1 and when, how the
drain targets moved, which evictions were refused; and printing it for people.

Everything here is driven by the store's listeners (called synchronously on every committed
change): nothing polls. Status lines are rate-limited; event lines are printed as they happen.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TextIO

from nodeagent.model.budgets import WAITING_PREFIX
from nodeagent.model.drainplan import (
    DrainPlanEntry,
    InvalidPlan,
    PodClass,
    classify,
    effective_plan,
    entries_from_dicts,
    entry_covers,
    pod_labels,
)
from nodeagent.model.interceptors.imperative import parse_retries
from nodeagent.model.names import IMPERATIVE_INTERCEPTOR
from nodeagent.model.shutdown import is_drained, is_ours
from nodeagent_testbed.sim.store import Change, Obj, Store

log = logging.getLogger(__name__)

_TERMINAL = ("Succeeded", "Failed")
# Events of nodeagent's components worth a line of their own (the rest is in the summary)
_EVENT_REASONS = frozenset(
    {
        "StaticPodStopping",
        "StaticPodManifestRestored",
        "StaticPodNotStopped",
        "StaticPodManifestNotMoved",
        "StaticPodStashProblem",
        "StaticPodManifestConflict",
    }
)


def _phase(pod: Obj) -> str:
    return str((pod.get("status") or {}).get("phase") or "")


def _node_of(pod: Obj) -> str:
    return str((pod.get("spec") or {}).get("nodeName") or "")


def _key(obj: Obj) -> str:
    m = obj["metadata"]
    return f"{m['namespace']}/{m['name']}" if m.get("namespace") else str(m["name"])


def _group(pod: Obj) -> str:
    """What to count a pod under in "pods left": its app label, else its name."""
    labels = pod["metadata"].get("labels") or {}
    return str(labels.get("app") or pod["metadata"]["name"])


@dataclass
class Removal:
    pod: str  # namespace/name
    entry: str  # the first drain-plan entry covering the pod, e.g. "Default<=1000000000"
    pod_type: str
    priority: int
    at: float  # seconds since the reboot request
    refusals: int = 0  # evictions of this pod refused with 429 before it went


@dataclass
class EntryTiming:
    entry: str
    started: float
    ended: float | None = None
    pods: int = 0

    @property
    def took(self) -> float | None:
        return None if self.ended is None else self.ended - self.started


@dataclass
class Tracker:
    """Follows node `node` and its shutdown maintenance; `start(t0)` arms the recording."""

    store: Store
    node: str
    clock: Callable[[], float]
    out: TextIO
    min_interval: float = 0.3  # at most ~3 status lines a second
    short: Callable[[str], str] = str  # shortens paths in event lines
    t0: float | None = None
    maintenance: str | None = None
    plan: list[DrainPlanEntry] = field(default_factory=lambda: effective_plan(None))
    targets: list[EntryTiming] = field(default_factory=list)
    removals: list[Removal] = field(default_factory=list)
    refusals: Counter[str] = field(default_factory=Counter)  # pod key -> 429s (from EVRs)
    held: set[str] = field(default_factory=set)  # pods whose eviction waited for a budget
    drained_at: float | None = None
    lock_released_at: float | None = None
    cordoned_at: float | None = None
    leader: str = ""
    notes: list[tuple[float, str]] = field(default_factory=list)
    dirty: asyncio.Event = field(default_factory=asyncio.Event)
    _seen: dict[str, Obj] = field(default_factory=dict)  # uid -> last pod object on the node
    _gone: set[str] = field(default_factory=set)
    _last_status: str = ""

    def __post_init__(self) -> None:
        self.pods_key = self.store.resource("", "v1", "pods").key
        self.nodes_key = self.store.resource("", "v1", "nodes").key
        self.events_key = self.store.resource("", "v1", "events").key
        self.leases_key = self.store.resource("coordination.k8s.io", "v1", "leases").key
        self.nm_key = ("nodeagent.io", "nodemaintenances")
        self.evr_key = ("nodeagent.io", "evictionrequests")

    # --- time and output ---------------------------------------------------------------------

    def now(self) -> float:
        return 0.0 if self.t0 is None else self.clock() - self.t0

    def stamp(self, at: float | None = None) -> str:
        return f"[{self.now() if at is None else at:5.1f}s]"

    def say(self, text: str) -> None:
        """An event line, printed at once (and kept for the JSON summary)."""
        at = self.now()
        text = self.short(text)
        self.notes.append((at, text))
        print(f"{self.stamp(at)} {text}", file=self.out, flush=True)

    def start(self, t0: float) -> None:
        """Record from now on (`t0` is the clock's time of the reboot request)."""
        for pod in self.store.iter_kind(self.store.resource("", "v1", "pods")):
            if _node_of(pod) == self.node and _phase(pod) not in _TERMINAL:
                self._seen[pod["metadata"]["uid"]] = pod
        self.t0 = t0
        self.dirty.set()

    # --- the listener ------------------------------------------------------------------------

    def on_change(self, change: Change) -> None:
        try:
            self._on_change(change)
        except Exception:  # a listener must never break the store's commit
            log.exception("demo progress: could not follow a change")

    def _on_change(self, change: Change) -> None:
        kind, rkey, old, new = change
        if rkey == self.pods_key:
            self._on_pod(kind, new)
        elif rkey == self.nm_key:
            self._on_maintenance(kind, old, new)
        elif rkey == self.evr_key:
            self._on_eviction_request(new)
        elif rkey == self.nodes_key and new["metadata"]["name"] == self.node:
            self._on_node(old, new)
        elif rkey == self.leases_key and new["metadata"]["name"] == "nodeagent-controllers":
            holder = str((new.get("spec") or {}).get("holderIdentity") or "")
            if holder and holder != self.leader:
                self.leader = holder
                if self.t0 is not None:
                    self.say(f"leader: {holder} now runs the cluster controllers")
        elif rkey == self.events_key and kind == "ADDED" and self.t0 is not None:
            self._on_event(new)
        else:
            return
        self.dirty.set()

    def _on_pod(self, kind: str, pod: Obj) -> None:
        if _node_of(pod) != self.node:
            return
        uid = pod["metadata"]["uid"]
        if uid in self._gone:
            return
        if kind != "DELETED" and _phase(pod) not in _TERMINAL:
            self._seen[uid] = pod
            return
        last = self._seen.pop(uid, pod)
        self._gone.add(uid)
        if self.t0 is None:
            return
        cls = classify(last)
        entry = self._entry_for(cls, last)
        key = _key(last)
        removal = Removal(
            key, entry, cls.pod_type.value, cls.priority, self.now(), self.refusals.get(key, 0)
        )
        self.removals.append(removal)
        for t in self.targets:
            if t.entry == entry:
                t.pods += 1
        how = f", {_n(removal.refusals, 'eviction')} refused first" if removal.refusals else ""
        self.say(f"  gone: {key:<38} {entry} (priority {cls.priority}{how})")

    def _entry_for(self, cls: PodClass, pod: Obj) -> str:
        labels = pod_labels(pod)
        for e in self.plan:
            if entry_covers(e, cls, labels):
                return e.describe()
        return "(no entry)"

    def _on_maintenance(self, kind: str, old: Obj | None, nm: Obj) -> None:
        if not is_ours(nm, self.node):
            return
        name = str(nm["metadata"]["name"])
        if self.maintenance is None and kind != "DELETED":
            self.maintenance = name
            with contextlib.suppress(InvalidPlan):
                self.plan = effective_plan((nm.get("spec") or {}).get("drainPlan"))
            stage = (nm.get("spec") or {}).get("stage")
            self.say(f"{self.node}'s agent created NodeMaintenance {name} (stage {stage})")
        if name != self.maintenance:
            return
        if kind == "DELETED":
            self.say(f"NodeMaintenance {name} deleted")
            return
        old_stage = ((old or {}).get("spec") or {}).get("stage")
        stage = (nm.get("spec") or {}).get("stage")
        if old is not None and stage != old_stage:
            self.say(f"NodeMaintenance {name}: stage {old_stage} -> {stage}")
        for entry in self._targets_of(nm):
            if all(t.entry != entry for t in self.targets):
                now = self.now()
                if self.targets and self.targets[-1].ended is None:
                    self.targets[-1].ended = now
                self.targets.append(EntryTiming(entry, now))
                self.say(f"drain targets of {self.node} now reach {entry}")
        if self.drained_at is None and is_drained(nm):
            self.drained_at = self.now()
            if self.targets and self.targets[-1].ended is None:
                self.targets[-1].ended = self.drained_at
            self.say(f"NodeMaintenance {name}: Drained=True")

    def _targets_of(self, nm: Obj) -> list[str]:
        for ns in (nm.get("status") or {}).get("nodeStatuses") or []:
            if (ns.get("nodeRef") or {}).get("name") == self.node:
                try:
                    entries = entries_from_dicts(ns.get("drainTargets"), "drainTargets")
                except InvalidPlan:
                    return []
                return [e.describe() for e in entries]
        return []

    def _on_eviction_request(self, evr: Obj) -> None:
        pod = ((evr.get("spec") or {}).get("target") or {}).get("pod") or {}
        key = f"{evr['metadata'].get('namespace')}/{pod.get('name')}"
        for entry in (evr.get("status") or {}).get("interceptors") or []:
            if entry.get("name") != IMPERATIVE_INTERCEPTOR:
                continue
            message = str(entry.get("message") or "")
            if message.startswith(WAITING_PREFIX) and key not in self.held:
                self.held.add(key)
                if self.t0 is not None:
                    self.say(f"  eviction of {key} waits: {message.split(';')[0]}")
            retries = parse_retries(message)
            if retries > self.refusals[key]:
                first = self.refusals[key] == 0
                self.refusals[key] = retries
                if first and self.t0 is not None:
                    self.say(f"  eviction of {key} refused (429, PodDisruptionBudget); retrying")

    def _on_node(self, old: Obj | None, node: Obj) -> None:
        was = bool(((old or {}).get("spec") or {}).get("unschedulable"))
        now = bool((node.get("spec") or {}).get("unschedulable"))
        if self.t0 is not None and was != now:
            if now:
                self.cordoned_at = self.now()
            self.say(f"{self.node} {'cordoned' if now else 'uncordoned'}")
        taints = {t.get("key") for t in (node.get("spec") or {}).get("taints") or []}
        old_taints = {t.get("key") for t in ((old or {}).get("spec") or {}).get("taints") or []}
        if self.t0 is not None:
            for key in sorted(taints - old_taints):
                self.say(f"{self.node} tainted {key} (the DaemonSet controller keeps away)")
            for key in sorted(old_taints - taints):
                self.say(f"{self.node} taint {key} removed")

    def _on_event(self, event: Obj) -> None:
        reason = str(event.get("reason") or "")
        if reason in _EVENT_REASONS:
            obj = event.get("involvedObject") or {}
            self.say(
                f"event {reason} on {obj.get('kind')} {obj.get('name')}: {event.get('message')}"
            )

    # --- status lines ------------------------------------------------------------------------

    def status(self) -> str:
        stage = "no maintenance yet"
        targets = "-"
        if self.maintenance is not None:
            nm = self.store.find(self.store.resource(*self._nm_rt()), None, self.maintenance)
            if nm is None:
                stage = "maintenance deleted"
            else:
                stage = str((nm.get("spec") or {}).get("stage") or "Idle")
                if is_drained(nm):
                    stage += " (Drained)"
                current = self._targets_of(nm)
                if current:
                    targets = current[-1]
        left: dict[str, list[Obj]] = {}
        for pod in self.store.iter_kind(self.store.resource("", "v1", "pods")):
            node = _node_of(pod)
            if node and _phase(pod) not in _TERMINAL:
                left.setdefault(node, []).append(pod)
        mine = left.get(self.node, [])
        groups = Counter(_group(p) for p in mine)
        stopping = sum(1 for p in mine if p["metadata"].get("deletionTimestamp"))
        detail = ", ".join(f"{g} {n}" if n > 1 else g for g, n in sorted(groups.items()))
        parts = [f"{self.node} {len(mine)}"]
        if mine:
            parts[0] += f" ({detail}{f'; {stopping} stopping' if stopping else ''})"
        for node in sorted(left):
            if node != self.node:
                parts.append(f"{node} {len(left[node])}")
        return f"{self.node} {stage:<18} targets: {targets:<22} pods left: {'  '.join(parts)}"

    def _nm_rt(self) -> tuple[str, str, str]:
        return ("nodeagent.io", "v1alpha1", "nodemaintenances")

    async def render(self) -> None:
        """Print a status line whenever something changed, at most every `min_interval`."""
        while True:
            await self.dirty.wait()
            self.dirty.clear()
            if self.t0 is None:
                continue
            line = self.status()
            if line != self._last_status:
                self._last_status = line
                print(f"{self.stamp()} {line}", file=self.out, flush=True)
                await asyncio.sleep(self.min_interval)  # pacing the output, not waiting

    # --- the summary -------------------------------------------------------------------------

    def summary(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "maintenance": self.maintenance,
            "removals": [
                {
                    "pod": r.pod,
                    "entry": r.entry,
                    "podType": r.pod_type,
                    "priority": r.priority,
                    "seconds": round(r.at, 2),
                    "evictionsRefused": r.refusals,
                }
                for r in self.removals
            ],
            "planEntries": [
                {
                    "entry": t.entry,
                    "started": round(t.started, 2),
                    "ended": None if t.ended is None else round(t.ended, 2),
                    "seconds": None if t.took is None else round(t.took, 2),
                    "pods": t.pods,
                }
                for t in self.targets
            ],
            "drainedAt": None if self.drained_at is None else round(self.drained_at, 2),
            "lockReleasedAt": (
                None if self.lock_released_at is None else round(self.lock_released_at, 2)
            ),
        }


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def plan_overview(pods: list[Obj], plan: list[DrainPlanEntry]) -> list[str]:
    """The pods of a node by the drain-plan entry that covers them, in plan order."""
    by_entry: dict[str, Counter[tuple[str, int]]] = {}
    for pod in pods:
        cls = classify(pod)
        labels = pod_labels(pod)
        entry = next((e.describe() for e in plan if entry_covers(e, cls, labels)), "(none)")
        by_entry.setdefault(entry, Counter())[(_group(pod), cls.priority)] += 1
    lines = []
    for e in [*(e.describe() for e in plan), "(none)"]:
        groups = by_entry.get(e)
        if groups:
            what = ", ".join(
                f"{g}{f' x{n}' if n > 1 else ''} ({prio})"
                for (g, prio), n in sorted(groups.items(), key=lambda kv: (kv[0][1], kv[0][0]))
            )
            lines.append(f"  {e:<24} {what}")
    return lines


def removal_order_ok(removals: list[Removal], plan: list[DrainPlanEntry]) -> bool:
    """Whether pods left in plan order (an entry's pods never after a later entry's)."""
    rank = {e.describe(): i for i, e in enumerate(plan)}
    seen = [rank.get(r.entry, len(plan)) for r in removals]
    return seen == sorted(seen)


def format_summary(
    tracker: Tracker, evictions: Mapping[str, int], after_reboot: list[str]
) -> list[str]:
    lines = [
        "",
        "Summary (seconds since the reboot was requested)",
        "",
        f"Order of removal from {tracker.node}:",
    ]
    lines.append(f"  {'#':>3}  {'time':>6}  {'pod':<38} {'drain-plan entry':<24} priority")
    for i, r in enumerate(tracker.removals, 1):
        refused = f"  ({_n(r.refusals, 'eviction')} refused first)" if r.refusals else ""
        lines.append(f"  {i:>3}  {r.at:5.1f}s  {r.pod:<38} {r.entry:<24} {r.priority}{refused}")
    lines.append(
        "  (one entry's pods go together, as their disruption budgets allow; the next entry "
        "starts only when all are gone)"
    )
    lines += ["", f"Time per drain-plan entry (as drainTargets of {tracker.node} advanced):"]
    for t in tracker.targets:
        took = "running" if t.took is None else f"{t.took:5.1f}s"
        pods = _n(t.pods, "pod")
        end = "" if t.ended is None else f"{t.ended:5.1f}s"
        lines.append(f"  {t.entry:<24} {t.started:5.1f}s -> {end:<6}  {took}  {pods}")
    lines += [
        "",
        f"Evictions (policy/v1 eviction subresource): {evictions.get('requests', 0)} requests, "
        f"{evictions.get('allowed', 0)} allowed, {evictions.get('refused', 0)} refused with 429 "
        "and retried",
        f"  {_n(len(tracker.held), 'pod')} waited for a disruption budget that allowed nothing "
        "(no request until it did)",
    ]
    for pod, n in sorted(tracker.refusals.items()):
        lines.append(f"  {pod}: refused {_n(n, 'time')}, then evicted")
    lines.append("")
    if tracker.drained_at is not None:
        lines.append(f"Drained=True at {tracker.drained_at:.1f}s")
    if tracker.lock_released_at is not None:
        after = ""
        if tracker.drained_at is not None:
            after = f", {tracker.lock_released_at - tracker.drained_at:.2f}s after Drained"
        lines.append(
            f"Shutdown lock released at {tracker.lock_released_at:.1f}s{after}: "
            "logind may reboot the machine"
        )
    lines += after_reboot
    return lines
