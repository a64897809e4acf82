"""`scripts/node up DIR --cluster CPDIR [--name node-1] [--gns 30,10]` / `scripts/node down DIR`:
a real node (kubelet and containerd in systemd-nspawn, node.py) joined to a
control plane that `scripts/cluster up CPDIR --real-node NAME` left that node name to.

`up` returns once the node is Ready; the container keeps running (enter it with
`nsenter -t $(cat DIR/init.pid) -a`). `down` powers it off and removes what it left on the host.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from nodeagent_testbed.controlplane.build import BuildError, ensure_built
from nodeagent_testbed.controlplane.cluster import ControlPlane
from nodeagent_testbed.controlplane.nodes import wait_node_ready
from nodeagent_testbed.nspawn import Container, is_init, node_rootfs
from nodeagent_testbed.realnode import images
from nodeagent_testbed.realnode.node import (
    HOST_LOCK,
    NSPAWN_ARGS,
    NodeSpec,
    leftovers,
    prepare,
    prepare_host,
    sweep,
)


def up(dir: Path, cluster: Path, name: str, gns: tuple[int, int]) -> None:
    state = ControlPlane(cluster).state()
    if state is None:
        raise SystemExit(f"scripts/node: no control plane running in {cluster}")
    if (dir / "state.json").exists():
        raise SystemExit(f"scripts/node: {dir} already has a node; run down first")
    dir.mkdir(parents=True, exist_ok=True)
    c = Container.copy_of_base(dir, f"nodeagent-{name}", node_rootfs())
    spec = NodeSpec(name, state.server, cluster / "pki", ensure_built().path("kubelet"), gns)
    prepare_host()
    prepare(c.rootfs, spec, images.ensure_images())
    with (dir / "nspawn.log").open("ab") as log:
        # flock(1) holds the host's real-node lock for as long as nspawn runs (-n: refuse when
        # another node, a test's or another scripts/node's, holds it)
        argv = ["flock", "-n", "-E", "75", str(HOST_LOCK), "systemd-nspawn", "--register=no"]
        argv += ["--keep-unit", "-b", "-D", str(c.rootfs), f"--machine={c.name}"]
        proc = subprocess.Popen(
            [*argv, *NSPAWN_ARGS],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    (dir / "state.json").write_text(json.dumps({"nspawn": proc.pid, "name": name}))
    started = time.monotonic()
    try:
        if proc.wait(timeout=1) == 75:
            raise SystemExit(f"scripts/node: another real node runs on this host ({HOST_LOCK})")
    except subprocess.TimeoutExpired:
        pass  # running: it had the lock
    wait_node_ready(ControlPlane(cluster).kubeconfig, name, timeout=180)
    init = next(p.pid for p in psutil.Process(proc.pid).children(recursive=True) if is_init(p))
    (dir / "init.pid").write_text(str(init))
    print(f"node {name} Ready in {time.monotonic() - started:.1f} s; init pid {init}")


def down(dir: Path) -> int:
    state_file = dir / "state.json"
    if state_file.exists():
        pid = json.loads(state_file.read_text())["nspawn"]  # flock, nspawn's parent
        init_file = dir / "init.pid"
        with contextlib.suppress(psutil.NoSuchProcess, FileNotFoundError, ValueError):
            # at once: a clean poweroff would wait for the delay locks of the agents inside
            # (up to their budget); killing the container's PID 1 ends its PID namespace
            init = psutil.Process(int(init_file.read_text()))
            if is_init(init):
                init.kill()
        with contextlib.suppress(psutil.NoSuchProcess):
            holder = psutil.Process(pid)
            try:
                holder.wait(timeout=60)  # nspawn exits with its container, flock (and the lock)
            except psutil.TimeoutExpired:
                os.killpg(pid, signal.SIGKILL)
        state_file.unlink()
    left = sweep()
    left += [x for x in leftovers() if x not in left]
    for item in left:
        print(f"scripts/node: left behind: {item}", file=sys.stderr)
    return 1 if left else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/node", description=__doc__)
    parser.add_argument("action", choices=["up", "down"])
    parser.add_argument("dir", type=Path, help="the node's state directory")
    parser.add_argument("--cluster", type=Path, help="the control plane's directory (up)")
    parser.add_argument("--name", default="node-1", help="the node's name (up)")
    parser.add_argument(
        "--gns",
        default="0,0",
        help="the kubelet's shutdownGracePeriod,shutdownGracePeriodCriticalPods in seconds "
        "(default 0,0: Graceful Node Shutdown off)",
    )
    args = parser.parse_args(argv)
    if args.action == "down":
        return down(args.dir.resolve())
    if args.cluster is None:
        parser.error("up needs --cluster CPDIR")
    grace, critical = (int(x) for x in args.gns.split(","))
    try:
        up(args.dir.resolve(), args.cluster.resolve(), args.name, (grace, critical))
    except (BuildError, TimeoutError, subprocess.CalledProcessError) as e:
        print(f"scripts/node: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
