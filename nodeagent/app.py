"""Composition root: builds the adapters and runs the agent's parts as named tasks.

Node-local parts run in every node's agent: the shutdown guard (logind) with its NodeMaintenance
flow, the static-pod interceptor, the after-reboot completion, and (`reboot.enabled`) the
coordinated reboot. The cluster controllers run only
in the agent that holds the leader Lease, among those with `runControllers`; a controllers-only
agent (`runNodeAgent: false`, the controllers Deployment) has no node and runs nothing else.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry

from nodeagent import version
from nodeagent.config import Config, NotificationsConfig
from nodeagent.controllers.cluster import ClusterControllers
from nodeagent.kube.client import KubeClient
from nodeagent.kube.connection import load_api_client
from nodeagent.kube.controller import SharedInformers
from nodeagent.kube.events import EventRecorder
from nodeagent.kube.leader import LeaderElector
from nodeagent.kube.tokenfile import installed
from nodeagent.logind.fdstore import FdStore, inherited_fds
from nodeagent.logind.guard import ShutdownGuard
from nodeagent.model.kubelet_shutdown import GnsState, Verdict
from nodeagent.model.names import AGENT
from nodeagent.node.boot import read_boot_id
from nodeagent.node.coordinated_reboot import RebootCoordinator
from nodeagent.node.identity import resolve_node_name
from nodeagent.node.kubelet_shutdown import KubeletShutdownWatch
from nodeagent.node.nodeconditions import NodeConditions
from nodeagent.node.reboot import complete_previous_boots
from nodeagent.node.shutdown import ShutdownFlow
from nodeagent.node.staticpods.interceptor import StaticPodInterceptor
from nodeagent.node.staticpods.locate import StaticPodPaths, static_pod_paths
from nodeagent.node.staticpods.restore import restore_after_reboot
from nodeagent.node.staticpods.stash import Stash
from nodeagent.node.token_renewal import FileStore, TokenRenewer
from nodeagent.observability.http import Health, serve
from nodeagent.observability.metrics import BridgeMetrics, OperatorMetrics, kubelet_gns_state
from nodeagent.observability.sdnotify import Notifier

if TYPE_CHECKING:
    from nodeagent.notify import Webhooks

log = logging.getLogger(__name__)

WATCH_CONNECTIONS = 12

# How long READY waits for the guard's logind drop-in (a SIGHUP to logind and a read-back:
# milliseconds, unless systemd is stuck)
DROPIN_READY_WAIT = 10.0


@dataclass
class Agent:
    config: Config
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    notifier: Notifier = field(default_factory=Notifier)
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)
    health: Health = field(default_factory=Health)
    node_name: str | None = None
    guard: ShutdownGuard | None = None
    elector: LeaderElector | None = None
    # the service manager's fd store, and the locks an earlier run of the agent left in it
    fdstore: FdStore | None = None
    inherited_locks: list[tuple[int, str]] = field(default_factory=list)
    # where the configuration came from, for the start line
    source: str = "defaults and environment"
    metrics: OperatorMetrics = field(init=False)
    # the kubelet's Graceful Node Shutdown as last found (None: not looked yet)
    kubelet_gns: Verdict | None = None
    _status_shown: str = ""
    # the static pod directory was missing at startup (said once the agent runs)
    _static_off: bool = False
    # None without webhooks: the sender's HTTP client (aiohttp, some 10 MiB resident) is
    # imported only where notifications are configured
    webhooks: Webhooks | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.metrics = OperatorMetrics(self.registry, version())
        counter = self.metrics.notifications
        notifications = (
            self.config.notifications if self.config.run_node_agent else NotificationsConfig()
        )
        if notifications.webhooks:
            from nodeagent.notify import Webhooks

            self.webhooks = Webhooks(
                notifications, count=lambda event, result: counter.labels(event, result).inc()
            )

    def _log_start(self, server: str, boot_id: str) -> None:
        """One line once the agent runs: what, from which configuration, where."""
        cfg = self.config
        parts = [
            p
            for p, on in (("node", cfg.run_node_agent), ("controllers", cfg.run_controllers))
            if on
        ]
        listen = cfg.observability.listen
        if cfg.observability.probe_listen:
            listen += f" (probes {cfg.observability.probe_listen})"
        log.info(
            "nodeagent %s started: %s, configuration %s, API server %s, metrics on %s, boot %s",
            version(),
            " and ".join(parts),
            self.source,
            server,
            listen,
            boot_id,
        )
        log.debug("configuration: %r", cfg)

    async def run(self) -> None:
        cfg = self.config
        boot_id = read_boot_id()
        # before anything that needs the API server: the kubelet starts after us and must
        # find the manifests an earlier boot's shutdown moved aside (its API server, maybe)
        static = await asyncio.to_thread(self._static_pods_at_startup, boot_id)
        # a connection per request thread and per watch (the informers of both roles open
        # fewer than WATCH_CONNECTIONS); the client's default, 5 per core, made urllib3 discard
        # and reopen connections under load ("Connection pool is full")
        api = load_api_client(
            cfg.kube.kubeconfig,
            connection_pool_maxsize=cfg.kube.max_concurrent_requests + WATCH_CONNECTIONS,
        )
        async with KubeClient(
            api,
            max_workers=cfg.kube.max_concurrent_requests,
            request_timeout=cfg.kube.request_timeout,
            field_manager=AGENT,
        ) as client:
            listeners = await serve(cfg.observability, self.health, self.registry)
            self._log_start(api.configuration.host, boot_id)
            if self._static_off:
                log.info("no static pod directory here: the kubelet.k8s.io interceptor is off")
            try:
                async with asyncio.TaskGroup() as tg:
                    # the guard first: a shutdown under way (an agent restarted during one)
                    # must not wait for the API server to tell us our node's name
                    flow = self._start_guard(tg, client, boot_id)
                    token_file = installed(api.configuration)
                    if token_file is not None and cfg.run_node_agent and cfg.kube.token_renewal:
                        renewer = TokenRenewer(
                            client,
                            FileStore(token_file),
                            expiration=cfg.kube.token_expiration,
                            renew_after=cfg.kube.token_renew_after,
                            request_timeout=cfg.kube.request_timeout,
                        )
                        tg.create_task(renewer.run(), name="token-renewal")
                    if self.webhooks is not None:
                        tg.create_task(self.webhooks.run(), name="notifications")
                    tg.create_task(self._announce(), name="sd-notify")
                    if cfg.run_node_agent:
                        self.node_name, how = await resolve_node_name(
                            cfg.node_name, self.env, client
                        )
                        log.info("running on node %s (from the %s)", self.node_name, how)
                        if flow is not None:
                            flow.set_node_name(self.node_name)
                        self._start_node_parts(tg, client, boot_id, static)
                    else:
                        log.info("running the cluster controllers only (runNodeAgent: false)")
                    if cfg.run_controllers:
                        self._start_controllers(tg, client, boot_id)
            finally:
                self.health.alive = False
                await listeners.close()

    def _notify(self, event: str, node: str, maintenance: str, reason: str) -> None:
        if self.webhooks is not None:
            self.webhooks.notify(event, node, maintenance, reason)

    def _static_pods_at_startup(self, boot_id: str) -> StaticPodPaths | None:
        sp = self.config.static_pods
        if not sp.enabled or not self.config.run_node_agent:
            return None
        paths = static_pod_paths(sp.manifest_dir, sp.stash_dir)
        if paths is None or not paths.manifest_dir.is_dir():
            # said after the start line: a kubeconfig loaded next may be wrong, and bad input
            # gets one line (it came before the kubeconfig's error)
            self._static_off = True
            return None
        restore_after_reboot(paths.manifest_dir, paths.stash_dir, boot_id=boot_id)
        return paths

    def _start_guard(
        self, tg: asyncio.TaskGroup, client: KubeClient, boot_id: str
    ) -> ShutdownFlow | None:
        cfg = self.config
        if not cfg.shutdown.enabled or not cfg.run_node_agent:
            return None
        flow = ShutdownFlow(
            client,
            self.config.node_name or self.env.get("NODE_NAME") or None,
            boot_id,
            cfg.shutdown,
            delay_max=lambda: (
                (self.guard.inhibit_delay_max if self.guard else None) or cfg.shutdown.budget
            ),
            record_file=cfg.shutdown.record_file or _runtime_file(self.env, "shutdown.json"),
            notify=self._notify,
        )
        self.guard = ShutdownGuard(
            cfg.shutdown, flow, fdstore=self.fdstore, inherited=self.inherited_locks
        )
        guard = self.guard
        self.health.add("shutdown lock", lambda: guard.lock_held)
        self.metrics.lock_held.set_function(lambda: guard.lock_held)
        tg.create_task(guard.run(), name="shutdown-guard")
        return flow

    def _start_node_parts(
        self,
        tg: asyncio.TaskGroup,
        client: KubeClient,
        boot_id: str,
        static: StaticPodPaths | None,
    ) -> None:
        cfg = self.config
        assert self.node_name is not None
        if cfg.shutdown.complete_after_reboot:
            tg.create_task(
                complete_previous_boots(client, self.node_name, boot_id, self._notify),
                name="complete-previous-boots",
            )
        if cfg.reboot.enabled:
            coordinator = RebootCoordinator(
                client, self.node_name, boot_id, cfg.reboot, cfg.shutdown
            )
            tg.create_task(coordinator.run(), name="coordinated-reboot")
        # the node's informers (its EvictionRequests, pods, Node, the maintenances), apart
        # from the leader's, shared by the node's controllers
        informers = SharedInformers(client)
        events = EventRecorder(client, component=AGENT, host=self.node_name)
        if static is not None:
            interceptor = StaticPodInterceptor(
                client,
                informers,
                Stash(static.manifest_dir, static.stash_dir, boot_id=boot_id),
                events,
                node_name=self.node_name,
                boot_id=boot_id,
                eviction_api=cfg.eviction.api,
            )
            tg.create_task(interceptor.run(), name="static-pod-interceptor")
        if cfg.node_conditions:
            conditions = NodeConditions(
                client, informers, events, node_name=self.node_name, shutdown=self.guard
            )
            tg.create_task(conditions.run(), name="node-conditions")
        gns = KubeletShutdownWatch(
            self.guard, events, self.node_name, report=self._kubelet_gns_changed
        )
        tg.create_task(gns.run(), name="kubelet-graceful-shutdown")
        if informers.informers:
            tg.create_task(informers.run(), name="node-informers")

    def _kubelet_gns_changed(self, verdict: Verdict) -> None:
        self.kubelet_gns = verdict
        state = {GnsState.ON: "on", GnsState.OFF: "off", GnsState.UNKNOWN: "unknown"}
        kubelet_gns_state(self.metrics.kubelet_graceful_shutdown, state[verdict.state])
        if self.guard is not None and self._status_shown:
            self._status_shown = self._guard_status(self.guard)
            self.notifier.status(self._status_shown)

    def _start_controllers(self, tg: asyncio.TaskGroup, client: KubeClient, boot_id: str) -> None:
        cfg = self.config
        controllers = ClusterControllers(client, cfg, self.registry, self.metrics)
        ld = cfg.leader
        # a node's agent is known by its node; a controllers-only agent (a Deployment's pod)
        # by its pod, else its host
        where = self.node_name or self.env.get("POD_NAME") or socket.gethostname()
        identity = f"{where}-{boot_id[:8]}-{os.getpid()}"
        self.elector = LeaderElector(
            client,
            ld.namespace,
            ld.lease_name,
            identity,
            lease_duration=ld.lease_duration,
            renew_deadline=ld.renew_deadline,
            retry_period=ld.retry_period,
        )
        tg.create_task(self.elector.run(controllers.run), name="leader-election")
        if cfg.eviction.bridge.enabled:
            # on every replica, leader or not: the webhook Service may pick any of them
            # (imported here: aiohttp and cryptography only where the bridge runs)
            from nodeagent.bridge.server import bridge_from_config

            bridge = bridge_from_config(client, cfg, BridgeMetrics(self.registry))
            self.health.add("eviction bridge", bridge.serving.is_set)
            tg.create_task(bridge.run(), name="eviction-bridge")

    async def _announce(self) -> None:
        """READY once the guard is connected to logind and has seen to its drop-in (for at
        most DROPIN_READY_WAIT), whatever it found (a shutdown under way, a lock logind
        refuses, a drop-in that does not take): `systemctl is-active` then means that logind
        waits for the drain as long as configured, not its 5 s default. The status line
        follows the guard. Without a guard, READY at once. Then the watchdog."""
        guard = self.guard
        if guard is None:
            self.notifier.ready("running without a shutdown guard")
        else:
            await guard.wait_until(lambda: guard.connected)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(DROPIN_READY_WAIT):
                    await guard.wait_until(lambda: guard.dropin_settled)
            self.notifier.ready(self._guard_status(guard))
        async with asyncio.TaskGroup() as tg:
            if guard is not None:
                tg.create_task(self._follow(guard), name="sd-notify-status")
            tg.create_task(self._watchdog(), name="sd-notify-watchdog")

    async def _watchdog(self) -> None:
        interval = self.notifier.watchdog_interval
        while interval is not None:
            # the event loop answering is what the watchdog asks about
            self.notifier.watchdog()
            await asyncio.sleep(interval)

    async def _follow(self, guard: ShutdownGuard) -> None:
        self._status_shown = self._guard_status(guard)

        def changed() -> bool:
            return self._guard_status(guard) != self._status_shown

        while True:
            await guard.wait_until(changed)
            self._status_shown = self._guard_status(guard)
            self.notifier.status(self._status_shown)

    def _guard_status(self, guard: ShutdownGuard) -> str:
        status = self._lock_status(guard)
        if self.kubelet_gns is not None and self.kubelet_gns.state is GnsState.ON:
            # not a readiness failure: the lock holds, but the kubelet empties the node first
            status += "; kubelet Graceful Node Shutdown is ON (set shutdownGracePeriod: 0)"
        return status

    def _lock_status(self, guard: ShutdownGuard) -> str:
        node = f"node {self.node_name}: " if self.node_name else ""
        held = "held" if guard.lock_held else "NOT held"
        if not guard.connected:
            return f"{node}reconnecting to logind (lock {held})"
        if guard.preparing_for_shutdown:
            return f"{node}shutdown under way: draining before it may proceed"
        if not guard.lock_held:
            return f"{node}connected to logind, but the shutdown lock is NOT held"
        delay = guard.inhibit_delay_max
        limit = f", logind waits up to {delay:.0f}s" if delay is not None else ""
        return f"{node}shutdown lock held{limit}"


def run(config: Config, source: str | None = None) -> int:
    """Run until SIGTERM/SIGINT; returns the exit code. `source`: the configuration file."""
    # locks a crashed or restarted agent left with systemd (and the LISTEN_* variables off
    # the environment, so no child takes them for its own)
    agent = Agent(config, fdstore=FdStore(), inherited_locks=inherited_fds(os.environ))
    if source is not None:
        agent.source = source

    async def main() -> None:
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, task.cancel)
        with contextlib.suppress(asyncio.CancelledError):
            await agent.run()
        agent.notifier.stopping()

    asyncio.run(main())
    return _exit_without_waiting(0)


def _runtime_file(env: Mapping[str, str], name: str) -> Path | None:
    """A file in systemd's RuntimeDirectory= ($RUNTIME_DIRECTORY), when there is one."""
    directory = (env.get("RUNTIME_DIRECTORY") or "").split(":")[0]
    return Path(directory) / name if directory else None


def _exit_without_waiting(code: int) -> int:
    """Stopping never waits on API requests in flight: their threads would hold the process
    until their timeout (the interpreter joins them at exit), past systemd's stop timeout."""
    stuck = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon]
    if not stuck:
        return code
    log.warning("exiting with %d requests still in flight", len(stuck))
    logging.shutdown()
    os._exit(code)
