"""`python -m nodeagent_testbed.controlplane up|down DIR` (what `scripts/cluster` runs)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from nodeagent_testbed.controlplane.build import BuildError, ensure_built
from nodeagent_testbed.controlplane.cluster import ClusterError, ControlPlane


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/cluster", description=__doc__)
    parser.add_argument("action", choices=["build", "up", "down"])
    parser.add_argument("dir", type=Path, nargs="?", help="state directory (up, down)")
    parser.add_argument("--nodes", type=int, default=3, help="kwok nodes node-1..N (up)")
    parser.add_argument(
        "--real-node",
        action="append",
        default=[],
        metavar="NAME",
        help="leave this node name to a real kubelet (scripts/node up) instead of kwok (up)",
    )
    parser.add_argument("--audit", action="store_true", help="log every request to DIR/audit.log")
    args = parser.parse_args(argv)
    try:
        if args.action == "build":
            print(ensure_built().dir)
            return 0
        if args.dir is None:
            parser.error(f"{args.action} needs a DIR")
        plane = ControlPlane(args.dir)
        if args.action == "down":
            plane.down()
            return 0
        bins = ensure_built()
        started = time.monotonic()
        state = plane.up(
            nodes=args.nodes,
            binaries=bins,
            audit=args.audit,
            kubelets=frozenset(args.real_node),
        )
        print(
            f"control plane {state.kubernetes_version} at {state.server} ready in "
            f"{time.monotonic() - started:.1f} s; kubeconfig {plane.kubeconfig}"
        )
        return 0
    except (BuildError, ClusterError, TimeoutError) as e:
        print(f"scripts/cluster: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
