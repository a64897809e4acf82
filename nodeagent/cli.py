"""Command line: argument parsing only; the work is done elsewhere."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from nodeagent.sim.cluster import SimCluster, serve


def _node_dir(value: str) -> tuple[str, Path]:
    node, sep, path = value.partition("=")
    if not sep or not node or not path:
        raise argparse.ArgumentTypeError(f"expected NODE=DIR, got {value!r}")
    return node, Path(path)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="nodeagent", description=__doc__)
    p.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR")
    sub = p.add_subparsers(dest="command", required=True)

    sim = sub.add_parser("sim", help="the simulated cluster").add_subparsers(
        dest="sim_command", required=True
    )
    s = sim.add_parser("serve", help="serve a simulated cluster until interrupted")
    s.add_argument("--nodes", type=int, default=3, help="number of nodes node-1..node-N")
    s.add_argument(
        "--static-pod-dir",
        type=_node_dir,
        action="append",
        default=[],
        metavar="NODE=DIR",
        help="a real directory whose manifests become mirror pods",
    )
    s.add_argument("--port", type=int, default=6443, help="port on 127.0.0.1 (0: any free port)")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument(
        "--kubeconfig",
        type=Path,
        required=True,
        help="where to write a kubeconfig for kubectl and the Python client",
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if args.command == "sim" and args.sim_command == "serve":
        if args.nodes < 1:
            print("nodeagent: --nodes must be at least 1", file=sys.stderr)
            return 2
        try:
            cluster = SimCluster(
                nodes=args.nodes,
                static_pod_dirs=dict(args.static_pod_dir),
                host=args.host,
                port=args.port,
                kubeconfig=args.kubeconfig,
            )
        except ValueError as e:
            print(f"nodeagent: {e}", file=sys.stderr)
            return 2
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(serve(cluster))
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
