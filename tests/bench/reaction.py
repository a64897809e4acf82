"""Figure 3: how fast the shutdown guard reacts.

* `PrepareForShutdown` -> NodeMaintenance created: from the moment the simulated logind emits
  the signal to the moment the simulated API server commits the agent's NodeMaintenance.
* `Drained=True` -> lock released: from the moment the Drained condition is committed to the
  moment the simulated logind sees the last copy of the inhibitor fd closed (EOF on its pipe):
  the agent's own and the one it keeps in the service manager's fd store (the harness plays
  systemd's end of $NOTIFY_SOCKET, common.NotifySocket).

The agent is a real `nodeagent run` subprocess with the shutdown guard on a private
dbus-daemon (nodeagent_testbed.fakelogind) and `runControllers: false`: the node-local agent as
it runs on every node but the leader's; the benchmark sets Drained itself, so the second figure is
the node side's reaction alone. Between runs the shutdown is called off
(`PrepareForShutdown(false)`), the agent completes its maintenance and takes a new lock, and the
next run starts.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from nodeagent_testbed.fakelogind import DBusDaemon, FakeInhibitor, FakeLogind, dbus_daemon_path
from nodeagent_testbed.sim.cluster import SimCluster
from nodeagent_testbed.sim.store import Change, Obj
from tests.bench import common
from tests.simutil import install_crds

NODE = "node-1"


def _drained(nm: Obj) -> None:
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    status = nm.setdefault("status", {})
    status["conditions"] = [
        c for c in status.get("conditions") or [] if c.get("type") != "Drained"
    ] + [
        {
            "type": "Drained",
            "status": "True",
            "reason": "Drained",
            "message": "benchmark",
            "lastTransitionTime": now,
        }
    ]


def _stage(sim: SimCluster, name: str) -> str | None:
    nms = sim.store.resource("nodeagent.io", "v1alpha1", "nodemaintenances")
    nm = sim.store.find(nms, None, name)
    return None if nm is None else (nm.get("spec") or {}).get("stage")


async def _one(
    sim: SimCluster, fake: FakeLogind, lock: FakeInhibitor
) -> tuple[float, float, FakeInhibitor]:
    """One shutdown: (signal -> maintenance, Drained -> lock released, the next lock)."""
    nms = sim.store.resource("nodeagent.io", "v1alpha1", "nodemaintenances")
    added: dict[str, float] = {}

    def on(t: float, change: Change) -> None:
        kind, rkey, _, new = change
        if rkey == nms.key and kind == "ADDED":
            added.setdefault(new["metadata"]["name"], t)

    with common.Recorder(sim, on):
        t0 = time.monotonic()
        fake.emit_shutdown(True, "reboot")
        await common.until(sim, lambda: bool(added), timeout=30)
    ((name, t_created),) = added.items()
    # the flow now lists and watches its maintenance: wait for the watch
    await common.until(sim, lambda: any(w.rt.key == nms.key for w in sim.store.watches), timeout=30)
    await asyncio.sleep(0.2)
    t1 = time.monotonic()
    sim.store.mutate(nms, None, name, _drained, "status")
    async with asyncio.timeout(60):
        await lock.released.wait()
    t_released = time.monotonic()
    # the shutdown is called off: the agent completes its maintenance and locks again
    fake.emit_shutdown(False, "reboot")
    lock = await fake.lock_taken(after=lock.id, timeout=30)
    await common.until(sim, lambda: _stage(sim, name) == "Complete", timeout=30)
    return t_created - t0, t_released - t1, lock


async def run(runs: int, workdir: Path) -> dict[str, Any]:
    if dbus_daemon_path() is None:
        return {"skipped": "dbus-daemon is not installed"}
    workdir.mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240 (a harness, not a server)
    conf_root = workdir / "root"
    dropin = conf_root / "etc/systemd/logind.conf.d/zz-nodeagent.conf"
    daemon = DBusDaemon()
    await daemon.start()
    fake = FakeLogind(daemon, conf_root=conf_root)
    await fake.start()
    created: list[float] = []
    released: list[float] = []
    try:
        async with SimCluster(nodes=2, kubeconfig=workdir / "kubeconfig") as sim:
            install_crds(sim)
            assert sim.kubeconfig is not None
            cfg = common.agent_config(
                sim.kubeconfig,
                NODE,
                controllers=False,
                shutdown={
                    "enabled": True,
                    "dbusAddress": daemon.address,
                    "logindDropin": str(dropin),
                    "manageDropin": True,
                    "completeAfterReboot": False,
                    "budget": 600,
                },
            )
            async with common.run_agent(workdir, cfg, "agent") as agent:
                await agent.wait_ready()
                lock = await fake.lock_taken()
                for _ in range(runs):
                    a, b, lock = await _one(sim, fake, lock)
                    created.append(a)
                    released.append(b)
    finally:
        await fake.close()
        await daemon.close()
    ms = 1000.0
    return {
        "runs": runs,
        "prepare_to_maintenance_ms": common.summary(created, scale=ms),
        "drained_to_lock_released_ms": common.summary(released, scale=ms),
        "samples_ms": {
            "prepare_to_maintenance": [round(x * ms, 1) for x in created],
            "drained_to_lock_released": [round(x * ms, 1) for x in released],
        },
    }
