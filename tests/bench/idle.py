"""Figure 4: what `nodeagent run` costs while nothing happens.

Footprint: a real `nodeagent sim serve` process serves a 3-node simulated cluster (CRDs and a
small workload applied with kubectl). On it, one after the other, a real `nodeagent run` as a
node's agent (`runControllers: false`, as the DaemonSet runs it: the shutdown guard holding its
lock on a simulated logind, private dbus-daemon, drop-in managed; the static-pod interceptor
on an empty manifest directory; the health/metrics endpoint) and as the controllers'
(`runNodeAgent: false`, as the Deployment runs it: it leads). After a warm-up, RSS is sampled
every second and CPU time is read from the kernel at the start and end of the window; the
agent's requests are the simulated API server's counts.

API requests of N idle node agents (`requests_at_scale`): N real `nodeagent run` node agents
(static-pod interceptor on, so every watch a node agent can hold is open; no shutdown guard,
which makes no request while idle) against one API server, on each backend: the simulated
cluster and a real control plane (kube-apiserver's audit log), counted by User-Agent as the
drain figure counts them. Once every agent's watches are open (its informers synced), the
requests of all N in the window, per agent and second, times 5,000. A watch ends after 30 to 60
min and is opened again (one request), so a window of minutes mostly sees none: the figure
also gives the rate the watches imply, (watches per agent) / (mean watch duration) x 5,000.
The imports' cost, step by step, is `imports.py`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
import urllib.request
from pathlib import Path
from typing import Any

import psutil

from nodeagent.kube.informer import WATCH_TIMEOUT_SECONDS
from nodeagent_testbed.controlplane.build import Binaries
from nodeagent_testbed.fakelogind import DBusDaemon, FakeLogind, dbus_daemon_path
from tests.bench import common, imports
from tests.bench.backends import Backend, RealBench, open_backend
from tests.clusters import NODE_ACCOUNT, RealBackend

WORKLOAD = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 12
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: registry.example/web:1}]}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: default}
spec:
  maxUnavailable: 1
  selector: {matchLabels: {app: web}}
"""


async def _kubectl(kubeconfig: Path, home: Path, *args: str, stdin: str | None = None) -> str:
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(home)}
    proc = await asyncio.create_subprocess_exec(
        common.kubectl_path(),
        "--cache-dir",
        str(home / "cache"),
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    out, err = await proc.communicate(stdin.encode() if stdin is not None else None)
    if proc.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)}: {err.decode()}")
    return out.decode()


def _stats(url: str) -> dict[tuple[str, str, str], int]:
    with urllib.request.urlopen(f"{url}/sim/stats", timeout=10) as r:
        data = json.load(r)
    return {(x["agent"], x["verb"], x["resource"]): int(x["count"]) for x in data["requests"]}


async def run(
    seconds: float,
    workdir: Path,
    warmup: float = 10.0,
    *,
    backends: tuple[str, ...] = ("sim",),
    binaries: Binaries | None = None,
    agents: int = 20,
) -> dict[str, Any]:
    out: dict[str, Any] = {"imports": await imports.run()}
    if dbus_daemon_path() is None:
        out["footprint"] = {"skipped": "dbus-daemon is not installed"}
    else:
        out["footprint"] = await footprint(seconds, workdir / "footprint", warmup)
    out["requests_at_scale"] = {}
    for backend in backends:
        try:
            out["requests_at_scale"][backend] = await requests_at_scale(
                backend, agents, seconds, workdir / f"agents-{backend}", warmup, binaries
            )
        except Exception as e:  # reported: the other backend stands
            out["requests_at_scale"][backend] = {"error": f"{type(e).__name__}: {e}"[:2000]}
    return out


async def footprint(seconds: float, workdir: Path, warmup: float) -> dict[str, Any]:
    """The node agent's and the controllers agent's footprint, one after the other."""
    workdir.mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240 (a harness, not a server)
    kubeconfig = workdir / "kubeconfig"
    home = workdir / "kubectl-home"
    home.mkdir(exist_ok=True)
    serve = await asyncio.create_subprocess_exec(
        *common.nodeagent_argv(
            "--log-level",
            "WARNING",
            "sim",
            "serve",
            "--nodes",
            "3",
            "--port",
            "0",
            "--kubeconfig",
            str(kubeconfig),
        ),
        stdout=asyncio.subprocess.PIPE,
    )
    daemon = DBusDaemon()
    fake: FakeLogind | None = None
    try:
        assert serve.stdout is not None
        async with asyncio.timeout(60):
            line = (await serve.stdout.readline()).decode()
        if not line.startswith("serving "):
            raise RuntimeError(f"nodeagent sim serve: {line!r}")
        url = line.split()[1]
        crds = await asyncio.create_subprocess_exec(
            *common.nodeagent_argv("manifests", "crds"), stdout=asyncio.subprocess.PIPE
        )
        crd_text, _ = await crds.communicate()
        await _kubectl(kubeconfig, home, "apply", "-f", "-", stdin=crd_text.decode())
        # the leader Lease's namespace, as packaging/kubernetes makes it (without it the agent
        # never leads and measures its retries instead)
        await _kubectl(kubeconfig, home, "create", "namespace", "nodeagent-system")
        await _kubectl(kubeconfig, home, "apply", "-f", "-", stdin=WORKLOAD)

        await daemon.start()
        conf_root = workdir / "root"
        fake = FakeLogind(daemon, conf_root=conf_root)
        await fake.start()
        manifests = workdir / "manifests"
        manifests.mkdir(exist_ok=True)
        node = common.agent_config(
            kubeconfig,
            "node-1",
            controllers=False,
            shutdown={
                "enabled": True,
                "dbusAddress": daemon.address,
                "logindDropin": str(conf_root / "etc/systemd/logind.conf.d/zz-nodeagent.conf"),
                "manageDropin": True,
                "completeAfterReboot": True,
            },
            static_pods={
                "enabled": True,
                "manifestDir": str(manifests),
                "stashDir": str(workdir / "manifests.nodeagent-stash"),
            },
        )
        controllers = common.agent_config(
            kubeconfig, "", controllers=True, extra={"runNodeAgent": False}
        )
        controllers.pop("nodeName")
        return {
            "node": await _measure(workdir, node, "node-agent", url, seconds, warmup),
            "controllers": await _measure(
                workdir, controllers, "controllers-agent", url, seconds, warmup
            ),
        }
    finally:
        if fake is not None:
            await fake.close()
        await daemon.close()
        if serve.returncode is None:
            serve.send_signal(signal.SIGTERM)
            async with asyncio.timeout(30):
                await serve.wait()


async def _measure(
    workdir: Path, cfg: dict[str, Any], name: str, url: str, seconds: float, warmup: float
) -> dict[str, Any]:
    async with common.run_agent(workdir, cfg, name) as agent:
        t_start = time.monotonic()
        await agent.wait_ready()
        ready_seconds = time.monotonic() - t_start
        await asyncio.sleep(warmup)
        before = _stats(url)
        sampler = common.Sampler(agent.ps, interval=1.0).start()
        await asyncio.sleep(seconds)
        await sampler.stop()
        after = _stats(url)
        try:
            full = agent.ps.memory_full_info()
            uss, pss = full.uss, getattr(full, "pss", None)
        except psutil.Error:
            uss = pss = None
        threads = agent.ps.num_threads()
        peak = common.peak_rss(agent.proc.pid)
        fds = agent.ps.num_fds()
        alive = agent.proc.returncode is None
    requests: dict[str, int] = {}
    for key, n in after.items():
        if key[0] == common.AGENT and n - before.get(key, 0):
            requests[f"{key[1]} {key[2]}"] = n - before.get(key, 0)
    rss = sampler.rss
    return {
        "window_seconds": seconds,
        "warmup_seconds": warmup,
        "ready_seconds": round(ready_seconds, 2),
        "alive": alive,
        "rss_mib": {
            "mean": common.mib(sum(rss) / len(rss)),
            "max": common.mib(max(rss)),
            "min": common.mib(min(rss)),
        },
        "uss_mib": common.mib(uss),
        "pss_mib": common.mib(pss),
        "peak_rss_mib": common.mib(peak),
        "cpu_seconds": round(sampler.cpu_seconds, 3),
        "cpu_percent_of_one_core": round(sampler.cpu_percent, 3),
        "threads": threads,
        "open_fds": fds,
        "api_requests": sum(requests.values()),
        "api_requests_per_minute": round(sum(requests.values()) * 60.0 / seconds, 1),
        "api_requests_by": dict(sorted(requests.items(), key=lambda kv: -kv[1])),
    }


# what an idle node agent with the static-pod interceptor watches
NODE_WATCHES = ("evictionrequests", "nodemaintenances", "pods", "nodes", "priorityclasses")
CLUSTER_NODES = 5000


async def requests_at_scale(
    kind: str,
    agents: int,
    seconds: float,
    workdir: Path,
    warmup: float,
    binaries: Binaries | None,
) -> dict[str, Any]:
    async with (
        open_backend(kind, agents, workdir, binaries) as b,
        contextlib.AsyncExitStack() as stack,
    ):
        kubeconfig = await _node_kubeconfig(b)
        start = b.mark()
        t0 = time.monotonic()
        procs = []
        for i, node in enumerate(b.node_names):
            manifests = workdir / f"manifests-{i + 1}"
            manifests.mkdir(parents=True, exist_ok=True)
            cfg = common.agent_config(
                kubeconfig,
                node,
                controllers=False,
                static_pods={
                    "enabled": True,
                    "manifestDir": str(manifests),
                    "stashDir": str(workdir / f"manifests-{i + 1}.nodeagent-stash"),
                },
            )
            procs.append(await stack.enter_async_context(common.run_agent(workdir, cfg, node)))
        for agent in procs:
            await agent.wait_ready()
        synced = await _until_watching(b, start, agents, procs)
        synced_seconds = time.monotonic() - t0
        startup = await b.requests_since(start, common.AGENT)
        await asyncio.sleep(warmup)
        mark = b.mark()
        await asyncio.sleep(seconds)
        window = await b.requests_since(mark, common.AGENT)
        alive = sum(1 for a in procs if a.proc.returncode is None)
    per_agent_per_second = window["total"] / agents / seconds
    mean_watch = 1.5 * WATCH_TIMEOUT_SECONDS  # uniform between 1x and 2x
    implied = len(synced) / mean_watch
    return {
        "agents": agents,
        "alive_at_end": alive,
        "window_seconds": seconds,
        "startup_seconds": round(synced_seconds, 1),
        "startup_requests_per_agent": round(startup["total"] / agents, 1),
        "startup_requests_by": startup["by"],
        "window_requests": window["total"],
        "window_requests_by": window["by"],
        "requests_per_agent_per_second": round(per_agent_per_second, 5),
        f"requests_per_second_at_{CLUSTER_NODES}_nodes": round(
            per_agent_per_second * CLUSTER_NODES, 2
        ),
        "watches_per_agent": len(synced),
        "mean_watch_seconds": mean_watch,
        f"implied_requests_per_second_at_{CLUSTER_NODES}_nodes": round(implied * CLUSTER_NODES, 2),
    }


async def _node_kubeconfig(b: Backend) -> Path:
    """On the real server the node agents' ServiceAccount of packaging/kubernetes (RBAC: what
    the node side reads; a token bound to no pod, so its writes would be refused, and an idle
    agent writes nothing), one token for all."""
    if isinstance(b, RealBench):
        rb = RealBackend(b.kubeconfig, b.node_names, b.plane.dir / "pki")
        return await rb.service_account(NODE_ACCOUNT)
    return await b.agent_kubeconfig()


async def _until_watching(
    b: Backend, start: Any, agents: int, procs: list[common.AgentProcess], timeout: float = 120
) -> list[str]:
    """Until each agent has opened its watches (N watch requests of each resource a node agent
    watches: an informer watches once its list is in). A harness poll, once a second."""
    async with asyncio.timeout(timeout):
        while True:
            by = (await b.requests_since(start, common.AGENT))["by"]
            if all(by.get(f"watch {r}", 0) >= agents for r in NODE_WATCHES):
                return list(NODE_WATCHES)
            dead = [a for a in procs if a.proc.returncode is not None]
            if dead:
                raise RuntimeError(f"a node agent exited: {dead[0].tail()}")
            await asyncio.sleep(1.0)
