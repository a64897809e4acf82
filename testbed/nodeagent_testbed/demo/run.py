"""`nodeagent demo`: a reboot of node-1 on a simulated cluster, end to end, in under a minute.

Set-up: a simulated cluster with three nodes (node-1's kubelet runs a real static-pod directory
in a temporary directory), workloads with disruption budgets, a simulated logind on a private
dbus-daemon, and one agent per node in this process (nodeagent.app.Agent, as `nodeagent run`
builds it; node-1's with the shutdown guard and the static pods, all three in the leader
election for the cluster controllers).

Then logind announces a reboot of node-1 (`PrepareForShutdown(true)`, type reboot), and the
demo shows the drain as it happens, until the agent lets go of its shutdown lock. It then plays
the machine coming back with a new boot id, doing what the agent does after a reboot (restore
the manifests moved aside by the earlier boot's shutdown, complete that boot's maintenance once
the node is Ready), and checks node-1 is schedulable again with its static pod back.

Every wait is bounded; a step that does not happen in time ends the demo with a message and a
non-zero exit status.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import shutil
import sys
import tempfile
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO, TypeVar, cast

from nodeagent.app import Agent
from nodeagent.config import LeaderConfig, from_mapping
from nodeagent.kube.client import KubeClient
from nodeagent.kube.connection import load_api_client
from nodeagent.model.shutdown import is_ours
from nodeagent.node.reboot import complete_previous_boots
from nodeagent.node.staticpods.restore import restore_after_reboot
from nodeagent.observability.sdnotify import Notifier
from nodeagent_testbed.demo import scene
from nodeagent_testbed.demo.progress import Tracker, format_summary, plan_overview, removal_order_ok
from nodeagent_testbed.demo.readiness import ReadinessDelay
from nodeagent_testbed.demo.wrap import Folded
from nodeagent_testbed.fakelogind import DBusDaemon, FakeInhibitor, FakeLogind, dbus_daemon_path
from nodeagent_testbed.sim.cluster import SimCluster
from nodeagent_testbed.sim.store import Obj

log = logging.getLogger(__name__)

T = TypeVar("T")
NODE = scene.NODE
LOGIND_DELAY_MAX = 120.0  # InhibitDelayMaxSec, as the agent's logind drop-in would set it
MAINTENANCE_TAINT = "nodeagent.io/maintenance"


def _ready(pod: Obj) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


class DemoFailed(Exception):
    """Something did not happen (in time); the message says what."""


@dataclass
class Options:
    speed: float = 1.0  # divides the pods' exit times
    json: bool = False  # the summary as JSON on stdout; progress goes to stderr
    setup_timeout: float = 15.0
    drain_timeout: float = 40.0
    return_timeout: float = 15.0
    total_timeout: float = 55.0  # the whole story, set-up included (not the clean-up)


@dataclass
class _Agent:
    name: str
    agent: Agent
    task: asyncio.Task[None]


@dataclass
class Demo:
    options: Options
    out: TextIO
    root: Path
    sim: SimCluster = field(init=False)
    clock: Callable[[], float] = field(init=False)
    failed: asyncio.Future[str] = field(init=False)
    agents: dict[str, _Agent] = field(default_factory=dict)
    step: str = "starting"

    def __post_init__(self) -> None:
        self.manifest_dir = self.root / NODE / "manifests"
        self.stash_dir = self.root / NODE / "manifests.nodeagent-stash"
        self.manifest_dir.mkdir(parents=True)
        self.manifest = self.manifest_dir / scene.STATIC_MANIFEST_NAME
        self.manifest.write_text(scene.static_manifest(self.options.speed))
        self.original = self.manifest.read_bytes()
        self.sim = SimCluster(
            nodes=3,
            static_pod_dirs={NODE: self.manifest_dir},
            kubeconfig=self.root / "kubeconfig",
            bookmark_interval=1.0,
        )
        loop = asyncio.get_running_loop()
        self.clock = loop.time
        self.failed = loop.create_future()
        self.tracker = Tracker(self.sim.store, NODE, self.clock, self.out, short=self.short)
        self.readiness = ReadinessDelay(self.sim.store)

    # --- output ------------------------------------------------------------------------------

    def line(self, text: str = "") -> None:
        print(self.short(text), file=self.out, flush=True)

    def short(self, text: str) -> str:
        """Paths in the demo's temporary directory, as $DEMO/..."""
        return text.replace(str(self.root), "$DEMO")

    # --- waiting -----------------------------------------------------------------------------

    async def wait(self, aw: Awaitable[T], timeout: float, what: str) -> T:
        """Await `aw` for at most `timeout` seconds; DemoFailed when it does not finish in time
        ("`what` did not happen within ...") or when an agent stops unexpectedly meanwhile."""
        self.step = what
        task = asyncio.ensure_future(aw)
        racing: set[asyncio.Future[Any]] = {task, self.failed}
        try:
            async with asyncio.timeout(timeout):
                done, _ = await asyncio.wait(racing, return_when=asyncio.FIRST_COMPLETED)
        except TimeoutError:
            raise DemoFailed(f"{what} did not happen within {timeout:.0f}s") from None
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if task not in done:
            raise DemoFailed(f"{what} did not happen: {self.failed.result()}")
        try:
            return task.result()
        except TimeoutError:
            raise DemoFailed(f"{what} did not happen in time") from None

    async def until(self, cond: Callable[[], bool], timeout: float, what: str) -> None:
        """Wait until `cond()` holds, re-checked on every change the store commits."""
        await self.wait(self._store_until(cond), timeout, what)

    async def _store_until(self, cond: Callable[[], bool]) -> None:
        changed = asyncio.Event()

        def wake(_: object) -> None:
            changed.set()

        self.sim.store.listeners.append(wake)
        try:
            while not cond():
                changed.clear()
                await changed.wait()
        finally:
            self.sim.store.listeners.remove(wake)

    # --- the cluster -------------------------------------------------------------------------

    def pods(self, node: str | None = None, *, ready: bool = False) -> list[Obj]:
        """Running pods (on `node`), not being deleted (and Ready)."""
        rt = self.sim.store.resource("", "v1", "pods")
        return [
            p
            for p in self.sim.store.iter_kind(rt)
            if (node is None or (p.get("spec") or {}).get("nodeName") == node)
            and (p.get("status") or {}).get("phase") == "Running"
            and not p["metadata"].get("deletionTimestamp")
            and (not ready or _ready(p))
        ]

    def node(self, name: str = NODE) -> Obj:
        return self.sim.store.get(self.sim.store.resource("", "v1", "nodes"), None, name)

    def maintenances(self) -> list[Obj]:
        rt = self.sim.store.resource("nodeagent.io", "v1alpha1", "nodemaintenances")
        return [nm for nm in self.sim.store.list(rt) if is_ours(nm, NODE)]

    def lease_holder(self) -> str:
        rt = self.sim.store.resource("coordination.k8s.io", "v1", "leases")
        leader = LeaderConfig()
        lease = self.sim.store.find(rt, leader.namespace, leader.lease_name)
        return "" if lease is None else str((lease.get("spec") or {}).get("holderIdentity") or "")

    def daemonset_pods(self) -> int:
        return sum(
            1
            for p in self.pods(NODE)
            if any(r.get("kind") == "DaemonSet" for r in p["metadata"].get("ownerReferences") or [])
        )

    def mirror_pod(self) -> Obj | None:
        for p in self.pods(NODE):
            if "kubernetes.io/config.mirror" in (p["metadata"].get("annotations") or {}):
                return p
        return None

    def budgets_settled(self) -> bool:
        """Every PodDisruptionBudget allows a disruption (all its pods are Ready)."""
        rt = self.sim.store.resource("policy", "v1", "poddisruptionbudgets")
        return all(
            int((pdb.get("status") or {}).get("disruptionsAllowed") or 0) > 0
            for pdb in self.sim.store.list(rt)
        )

    async def set_up(self) -> None:
        sim = self.sim
        sim.store.listeners.append(self.readiness.on_change)
        await sim.start()
        self.line("nodeagent demo: a reboot of node-1, drained gracefully by nodeagent")
        self.line("")
        print(f"demo directory        $DEMO = {self.root}", file=self.out, flush=True)
        self.line(f"simulated API server  {sim.url}  (kubeconfig {sim.kubeconfig})")
        scene.install_crds(sim)
        # most pods should start on node-1, so the drain has something to do: the scheduler
        # puts them on the least loaded node, so keep the others cordoned while they start
        for other in sim.node_names[1:]:
            scene.set_unschedulable(sim, other, True)
        scene.create(sim, scene.PRIORITY_CLASSES)
        scene.create(sim, scene.workloads(self.options.speed))
        want = scene.expectation()
        await self.until(
            lambda: (
                len(self.pods(NODE, ready=True)) == want.on_node
                and all(len(self.pods(n, ready=True)) == want.elsewhere for n in sim.node_names[1:])
                and self.budgets_settled()
            ),
            self.options.setup_timeout,
            f"{want.on_node} pods running and Ready on {NODE}",
        )
        for other in sim.node_names[1:]:
            scene.set_unschedulable(sim, other, False)
        for text in scene.describe():
            self.line(f"workload              {text}")
        self.line(
            f"static pod            {scene.manifest_summary(self.original.decode())} from "
            f"{self.manifest}"
        )

    def agent_config(self, name: str, bus: str) -> dict[str, Any]:
        guarded = name == NODE
        return {
            "nodeName": name,
            "runControllers": True,
            "kube": {"kubeconfig": str(self.sim.kubeconfig), "requestTimeout": 10.0},
            "shutdown": {
                "enabled": guarded,
                "dbusAddress": bus,
                # the demo's logind already grants LOGIND_DELAY_MAX, as after the drop-in
                "manageDropin": False,
                "budget": LOGIND_DELAY_MAX,
                "safetyMargin": 10.0,
                # the demo plays the return from the reboot itself (with a new boot id)
                "completeAfterReboot": False,
            },
            "staticPods": {
                "enabled": guarded,
                "manifestDir": str(self.manifest_dir),
                "stashDir": str(self.stash_dir),
            },
            "leader": {"leaseDuration": 4.0, "renewDeadline": 3.0, "retryPeriod": 0.5},
            "eviction": {"backoffBase": 0.2, "backoffCap": 1.0},
            "observability": {"listen": "127.0.0.1:0"},
        }

    def start_agent(self, name: str, bus: str) -> None:
        agent = Agent(from_mapping(self.agent_config(name, bus)), env={}, notifier=Notifier({}))
        task = asyncio.create_task(agent.run(), name=f"agent-{name}")

        def crashed(t: asyncio.Task[None]) -> None:
            if t.cancelled() or self.failed.done():
                return
            exc = t.exception()
            why = f"{exc.__class__.__name__}: {exc}" if exc else "it returned"
            self.failed.set_result(f"the agent of {name} stopped unexpectedly ({why})")

        task.add_done_callback(crashed)
        self.agents[name] = _Agent(name, agent, task)

    async def stop_agent(self, name: str) -> None:
        a = self.agents.pop(name, None)
        if a is None:
            return
        a.task.cancel()
        # a graceful stop: the guard lets go of its lock, the leader of its Lease
        done, _ = await asyncio.wait({a.task}, timeout=10)
        if not done:
            log.error("the agent of %s did not stop within 10s", name)

    # --- the story ---------------------------------------------------------------------------

    async def run(self, logind: FakeLogind, bus: str) -> dict[str, Any]:
        opts = self.options
        await self.set_up()
        logind.delay_max_usec = int(LOGIND_DELAY_MAX * 1_000_000)
        self.line(f"simulated logind      on a private dbus-daemon ({bus})")
        for name in self.sim.node_names:
            self.start_agent(name, bus)
        inhibitor = await self.wait(
            logind.lock_taken(timeout=opts.setup_timeout + 1),
            opts.setup_timeout,
            f"{NODE}'s agent taking its shutdown lock",
        )
        await self.until(lambda: self.lease_holder() != "", opts.setup_timeout, "leader election")
        self.tracker.leader = self.lease_holder()
        self.line(
            f"agents                node-1 (shutdown guard, static pods), node-2, node-3; "
            f"leader {self.tracker.leader}"
        )
        self.line(
            f"shutdown lock         node-1's agent holds a delay lock ({inhibitor.why!r}); "
            f"logind waits up to {LOGIND_DELAY_MAX:.0f}s"
        )
        self.line("")
        self.line(f"pods on {NODE}, by the drain-plan entry that covers them (priority):")
        for text in plan_overview(self.pods(NODE), self.tracker.plan):
            self.line(text)
        self.line("")

        store = self.sim.store
        store.listeners.append(self.tracker.on_change)
        render = asyncio.create_task(self.tracker.render(), name="demo-progress")
        lock_watch: asyncio.Task[None] | None = None
        try:
            t0 = self.clock()
            self.tracker.start(t0)
            self.tracker.say(
                f"logind: PrepareForShutdown(true), type reboot: `systemctl reboot` on {NODE}"
            )
            logind.emit_shutdown(True, "reboot")
            lock_watch = asyncio.create_task(self._watch_lock(inhibitor))

            await self.until(
                lambda: self.tracker.drained_at is not None,
                opts.drain_timeout,
                f"{NODE} drained (its NodeMaintenance Drained=True)",
            )
            await self.wait(lock_watch, 10.0, "the release of the shutdown lock")
            await self.reboot(opts.return_timeout)
        finally:
            if lock_watch is not None and not lock_watch.done():
                lock_watch.cancel()
            render.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await render
            with contextlib.suppress(ValueError):
                store.listeners.remove(self.tracker.on_change)
        return self.report()

    async def _watch_lock(self, inhibitor: FakeInhibitor) -> None:
        await inhibitor.released.wait()
        self.tracker.lock_released_at = self.tracker.now()
        self.tracker.say("logind: node-1's agent released its shutdown lock; the machine reboots")

    async def reboot(self, timeout: float) -> None:
        tr = self.tracker
        leader_before = self.lease_holder()
        await self.stop_agent(NODE)  # the machine goes down, the agent with it
        tr.say(f"{NODE} is down: its agent stopped (the kubelet's pods are all gone already)")
        if leader_before.startswith(f"{NODE}-"):
            await self.until(
                lambda: self.lease_holder() not in ("", leader_before),
                timeout,
                "another agent taking over the cluster controllers",
            )
        boot_id = str(uuid.uuid4())
        tr.say(
            f"{NODE} boots again (boot id {boot_id[:8]}...): before the kubelet starts, the "
            "agent restores what the last boot's shutdown moved aside"
        )
        report = await asyncio.to_thread(
            restore_after_reboot, self.manifest_dir, self.stash_dir, boot_id=boot_id
        )
        for text in report.lines():
            tr.say(f"  {text}")
        if not report.ok:
            raise DemoFailed("the static pod manifest could not be restored: " + report.lines()[0])
        tr.say(
            f"once {NODE} is Ready, the agent completes and deletes the last boot's shutdown "
            "maintenance"
        )
        api = load_api_client(str(self.sim.kubeconfig))
        async with KubeClient(api, max_workers=2, request_timeout=10.0) as client:
            await self.wait(
                complete_previous_boots(client, NODE, boot_id),
                timeout,
                "completing the last boot's shutdown maintenance",
            )

        def back() -> bool:
            node = self.node()
            spec = node.get("spec") or {}
            taints = {t.get("key") for t in spec.get("taints") or []}
            return (
                not self.maintenances()
                and not spec.get("unschedulable")
                and MAINTENANCE_TAINT not in taints
                and self.mirror_pod() is not None
                and self.daemonset_pods() == scene.DAEMONSET_COUNT
            )

        await self.until(back, timeout, f"{NODE} schedulable again with its static pod back")
        mirror = self.mirror_pod()
        assert mirror is not None
        tr.say(
            f"mirror pod {mirror['metadata']['namespace']}/{mirror['metadata']['name']} is "
            "Running again"
        )

    # --- the report --------------------------------------------------------------------------

    def evictions(self) -> dict[str, int]:
        stats = self.sim.stats
        return {
            "requests": stats.responded("evict", "pods"),
            "allowed": stats.responded("evict", "pods", 201),
            "refused": stats.responded("evict", "pods", 429),
        }

    def report(self) -> dict[str, Any]:
        tr = self.tracker
        node = self.node()
        mirror = self.mirror_pod()
        identical = self.manifest.exists() and self.manifest.read_bytes() == self.original
        after = {
            "uncordoned": not (node.get("spec") or {}).get("unschedulable"),
            "manifestIdentical": identical,
            "mirrorPod": None if mirror is None else mirror["metadata"]["name"],
            "daemonSetPods": self.daemonset_pods(),
        }
        summary = tr.summary()
        summary["evictions"] = self.evictions()
        summary["refusalsByPod"] = dict(sorted(tr.refusals.items()))
        summary["afterReboot"] = after
        summary["planOrderKept"] = removal_order_ok(tr.removals, tr.plan)
        return summary

    def after_lines(self, summary: dict[str, Any]) -> list[str]:
        a = summary["afterReboot"]
        return [
            "",
            f"After the reboot: {NODE} {'uncordoned' if a['uncordoned'] else 'STILL CORDONED'}; "
            f"{self.manifest.name} back "
            f"{'byte-identical' if a['manifestIdentical'] else 'BUT CHANGED'}; mirror pod "
            f"{a['mirrorPod'] or 'MISSING'}; {a['daemonSetPods']} DaemonSet pods back on {NODE}",
        ]


def check(summary: dict[str, Any]) -> list[str]:
    """What went wrong, if anything (empty: the demo showed what it should)."""
    problems = []
    if not summary["planOrderKept"]:
        problems.append("pods did not leave in drain-plan order")
    drained, released = summary["drainedAt"], summary["lockReleasedAt"]
    if drained is None or released is None or released < drained:
        problems.append("the shutdown lock was not released after Drained=True")
    a = summary["afterReboot"]
    if not a["uncordoned"]:
        problems.append(f"{NODE} is still cordoned")
    if not a["manifestIdentical"]:
        problems.append("the static pod manifest did not come back byte-identical")
    if a["mirrorPod"] is None:
        problems.append("the mirror pod did not come back")
    return problems


async def _main(options: Options, out: TextIO, err: TextIO) -> int:
    loop = asyncio.get_running_loop()
    started = loop.time()
    with tempfile.TemporaryDirectory(prefix="nodeagent-demo-") as tmp:
        demo = Demo(options, out, Path(tmp))
        daemon = DBusDaemon()
        logind: FakeLogind | None = None
        try:
            await daemon.start()
            logind = FakeLogind(daemon)
            await logind.start()
            async with asyncio.timeout(options.total_timeout):
                summary = await demo.run(logind, daemon.address)
        except (DemoFailed, TimeoutError) as e:
            why = (
                str(e)
                if isinstance(e, DemoFailed)
                else f"the demo did not finish within {options.total_timeout:.0f}s "
                f"(it was waiting for: {demo.step})"
            )
            print(f"\nnodeagent demo: FAILED: {why}", file=err, flush=True)
            print("(run `nodeagent demo --verbose` to see the agents' logs)", file=err, flush=True)
            return 1
        finally:
            await asyncio.gather(*(demo.stop_agent(name) for name in list(demo.agents)))
            if logind is not None:
                await logind.close()
            await daemon.close()
            demo.readiness.close()
            await demo.sim.stop()
        lines = format_summary(demo.tracker, summary["evictions"], demo.after_lines(summary))
        elapsed = loop.time() - started
        problems = check(summary)
        if options.json:
            summary["elapsedSeconds"] = round(elapsed, 2)
            summary["problems"] = problems
            print(json.dumps(summary, indent=2), file=sys.stdout, flush=True)
        else:
            for text in lines:
                print(text, file=out)
            print(f"\nThe demo took {elapsed:.1f}s.", file=out, flush=True)
        if problems:
            print(f"nodeagent demo: FAILED: {'; '.join(problems)}", file=err, flush=True)
            return 1
        return 0


def main(
    speed: float = 1.0,
    *,
    json_output: bool = False,
    verbose: bool = False,
    width: int | None = None,
) -> int:
    """Run the demo; returns the exit status. Its lines are folded to `width` columns (None: the
    terminal's width when the output is one; 0: not folded)."""
    if dbus_daemon_path() is None:
        print(
            "nodeagent demo: needs dbus-daemon for its simulated logind "
            "(Debian/Ubuntu: apt install dbus-daemon)",
            file=sys.stderr,
        )
        return 2
    if speed <= 0:
        print("nodeagent demo: --speed must be positive", file=sys.stderr)
        return 2
    if not verbose:
        # the agents log to stderr; the demo's own lines tell the story
        logging.getLogger().setLevel(logging.ERROR)
    options = Options(speed=speed, json=json_output)
    out = sys.stderr if json_output else sys.stdout
    if width is None:
        width = shutil.get_terminal_size().columns if out.isatty() else 0
    if width > 0:
        out = cast(TextIO, Folded(out, width))  # print() only writes and flushes
    return asyncio.run(_main(options, out, sys.stderr))
