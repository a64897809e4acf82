"""Figure 4: what `nodeagent run` costs while nothing happens.

A real `nodeagent sim serve` process serves a 3-node simulated cluster (CRDs and a small
workload applied with kubectl); a real `nodeagent run` process runs every part as on a node
whose agent leads: the shutdown guard holding its lock on a simulated logind (private
dbus-daemon, drop-in managed), the static-pod interceptor on an empty manifest directory, the
cluster controllers (leader), the health/metrics endpoint. After a warm-up, RSS is sampled
every second and CPU time is read from the kernel at the start and end of the window.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
import urllib.request
from pathlib import Path
from typing import Any

import psutil

from nodeagent_testbed.fakelogind import DBusDaemon, FakeLogind, dbus_daemon_path
from tests.bench import common

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


async def run(seconds: float, workdir: Path, warmup: float = 10.0) -> dict[str, Any]:
    if dbus_daemon_path() is None:
        return {"skipped": "dbus-daemon is not installed"}
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
        cfg = common.agent_config(
            kubeconfig,
            "node-1",
            controllers=True,
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
        async with common.run_agent(workdir, cfg, "agent") as agent:
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
    finally:
        if fake is not None:
            await fake.close()
        await daemon.close()
        if serve.returncode is None:
            serve.send_signal(signal.SIGTERM)
            async with asyncio.timeout(30):
                await serve.wait()
    requests: dict[str, int] = {}
    for key, n in after.items():
        if key[0] == common.PYTHON_CLIENT and n - before.get(key, 0):
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
