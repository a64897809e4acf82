"""Composition root: builds the adapters and runs the agent's parts as named tasks.

Node-local parts run in every agent: the shutdown guard (logind) with its NodeMaintenance flow,
the static-pod interceptor, the after-reboot completion. The cluster controllers run only in
the agent that holds the leader Lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Mapping
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry

from nodeagent.config import Config
from nodeagent.controllers.cluster import ClusterControllers
from nodeagent.kube.client import KubeClient, load_api_client
from nodeagent.kube.events import EventRecorder
from nodeagent.kube.leader import LeaderElector
from nodeagent.logind.guard import ShutdownGuard
from nodeagent.node.boot import read_boot_id
from nodeagent.node.identity import resolve_node_name
from nodeagent.node.reboot import complete_previous_boots
from nodeagent.node.shutdown import ShutdownFlow
from nodeagent.node.staticpods.interceptor import StaticPodInterceptor
from nodeagent.node.staticpods.locate import StaticPodPaths, static_pod_paths
from nodeagent.node.staticpods.restore import restore_after_reboot
from nodeagent.node.staticpods.stash import Stash
from nodeagent.observability.http import Health, serve
from nodeagent.observability.sdnotify import Notifier

log = logging.getLogger(__name__)


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

    async def run(self) -> None:
        cfg = self.config
        boot_id = read_boot_id()
        # before anything that needs the API server: the kubelet starts after us and must
        # find the manifests an earlier boot's shutdown moved aside (its API server, maybe)
        static = await asyncio.to_thread(self._static_pods_at_startup, boot_id)
        api = load_api_client(cfg.kube.kubeconfig)
        async with KubeClient(
            api,
            max_workers=cfg.kube.max_concurrent_requests,
            request_timeout=cfg.kube.request_timeout,
            field_manager="nodeagent",
        ) as client:
            self.node_name, how = await resolve_node_name(cfg.node_name, self.env, client)
            log.info("running on node %s (from the %s)", self.node_name, how)
            runner = await serve(cfg.observability.listen, self.health, self.registry)
            try:
                async with asyncio.TaskGroup() as tg:
                    self._start_parts(tg, client, boot_id, static)
                    tg.create_task(self._announce(), name="sd-notify")
            finally:
                self.health.alive = False
                await runner.cleanup()

    def _static_pods_at_startup(self, boot_id: str) -> StaticPodPaths | None:
        sp = self.config.static_pods
        if not sp.enabled:
            return None
        paths = static_pod_paths(sp.manifest_dir, sp.stash_dir)
        if paths is None or not paths.manifest_dir.is_dir():
            log.info("no static pod directory here: the kubelet.k8s.io interceptor is off")
            return None
        restore_after_reboot(paths.manifest_dir, paths.stash_dir, boot_id=boot_id)
        return paths

    def _start_parts(
        self,
        tg: asyncio.TaskGroup,
        client: KubeClient,
        boot_id: str,
        static: StaticPodPaths | None,
    ) -> None:
        cfg = self.config
        assert self.node_name is not None
        if cfg.shutdown.enabled:
            flow = ShutdownFlow(
                client,
                self.node_name,
                boot_id,
                cfg.shutdown,
                delay_max=lambda: (
                    (self.guard.inhibit_delay_max if self.guard else None) or cfg.shutdown.budget
                ),
            )
            self.guard = ShutdownGuard(cfg.shutdown, flow)
            guard = self.guard
            self.health.add("shutdown lock", lambda: guard.lock_held)
            tg.create_task(guard.run(), name="shutdown-guard")
        if cfg.shutdown.complete_after_reboot:
            tg.create_task(
                complete_previous_boots(client, self.node_name, boot_id),
                name="complete-previous-boots",
            )
        if static is not None:
            interceptor = StaticPodInterceptor(
                client,
                Stash(static.manifest_dir, static.stash_dir, boot_id=boot_id),
                EventRecorder(client, component="nodeagent", host=self.node_name),
                node_name=self.node_name,
                boot_id=boot_id,
            )
            tg.create_task(interceptor.run(), name="static-pod-interceptor")
        if cfg.run_controllers:
            controllers = ClusterControllers(client, cfg, self.registry)
            ld = cfg.leader
            identity = f"{self.node_name}-{boot_id[:8]}-{os.getpid()}"
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

    async def _announce(self) -> None:
        """READY once the lock is held (or at once without a guard); then the watchdog."""
        if self.guard is not None:
            guard = self.guard
            manage = self.config.shutdown.manage_dropin
            # ready once the lock is held and logind's delay limit is settled (raised, or
            # reported as overridden): only then does the guard protect a shutdown fully
            await guard.wait_until(
                lambda: guard.lock_held and (not manage or guard.dropin_result is not None)
            )
            delay = guard.inhibit_delay_max
            self.notifier.ready(
                f"node {self.node_name}: shutdown lock held, logind waits up to {delay:.0f}s"
                if delay is not None
                else f"node {self.node_name}: shutdown lock held"
            )
        else:
            self.notifier.ready(f"node {self.node_name}: running without a shutdown guard")
        interval = self.notifier.watchdog_interval
        if interval is None:
            return
        while True:
            # the event loop answering is what the watchdog asks about
            self.notifier.watchdog()
            await asyncio.sleep(interval)


def run(config: Config) -> int:
    """Run until SIGTERM/SIGINT; returns the exit code."""
    agent = Agent(config)

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
    return 0
