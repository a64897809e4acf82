"""The testbed's `nodeagent` subcommands, `demo` and `sim`.

The product's command line finds them through the entry-point group `nodeagent.commands` that
this distribution registers (testbed/pyproject.toml); it never imports this package. Each entry
point adds its parser and a `handler`; the handlers import the demo and the simulated cluster only
when they run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import math
import socket
import sys
from pathlib import Path


def add_demo(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    demo = sub.add_parser(
        "demo",
        help="reboot node-1 of a simulated cluster and watch nodeagent drain it (under a minute)",
    )
    demo.add_argument(
        "--speed", type=_speed, default=1.0, help="divide the pods' exit times by this factor"
    )
    demo.add_argument(
        "--json", action="store_true", help="print the summary as JSON (progress goes to stderr)"
    )
    demo.add_argument("--verbose", action="store_true", help="also show the agents' logs")
    demo.add_argument(
        "--width",
        type=_width,
        default=None,
        help="fold lines to this many columns (default: the terminal's width; 0: do not fold)",
    )
    demo.set_defaults(handler=_demo)


def _demo(args: argparse.Namespace) -> int:
    from nodeagent_testbed import demo  # runs agents: their imports are not needed elsewhere

    return demo.main(args.speed, json_output=args.json, verbose=args.verbose, width=args.width)


def _speed(value: str) -> float:
    try:
        speed = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {value!r}") from None
    if not math.isfinite(speed) or speed <= 0:  # nan passed a "<= 0" check and ran the demo
        raise argparse.ArgumentTypeError(f"must be a positive number, got {value!r}")
    return speed


def _width(value: str) -> int:
    try:
        width = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {value!r}") from None
    if width < 0:
        raise argparse.ArgumentTypeError(f"must be 0 (do not fold) or more, got {value!r}")
    return width


def _port(value: str) -> int:
    try:
        port = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {value!r}") from None
    if not 0 <= port <= 65535:  # the socket's bind raised OverflowError, a traceback
        raise argparse.ArgumentTypeError(f"must be from 0 to 65535, got {value!r}")
    return port


def _node_dir(value: str) -> tuple[str, Path]:
    node, sep, path = value.partition("=")
    if not sep or not node or not path:
        raise argparse.ArgumentTypeError(f"expected NODE=DIR, got {value!r}")
    if not Path(path).is_dir():  # the sim served anyway, warning of it in its log
        raise argparse.ArgumentTypeError(f"{path} is not a directory")
    return node, Path(path)


def add_sim(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
    s.add_argument(
        "--port",
        type=_port,
        default=0,
        help="port to listen on (default 0: any free port, said on the first line; not 6443, "
        "a real API server's)",
    )
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument(
        "--no-crds",
        dest="crds",
        action="store_false",
        help="serve without nodeagent's CRDs (installed by default, as on a cluster set up)",
    )
    s.add_argument(
        "--kubeconfig",
        type=Path,
        required=True,
        help="where to write a kubeconfig for kubectl and the Python client",
    )
    s.set_defaults(handler=_sim_serve)


def _sim_serve(args: argparse.Namespace) -> int:
    # the simulated cluster is ~6 MiB of modules that the other commands must not carry
    from nodeagent_testbed.sim.cluster import SimCluster, serve

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
    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(serve(cluster, crds=args.crds))
    except OSError as e:
        # the port is taken, the address not this machine's, or the host name not one at all
        if isinstance(e, socket.gaierror) or e.errno in (
            errno.EADDRINUSE,
            errno.EADDRNOTAVAIL,
            errno.EACCES,
        ):
            what = f"cannot listen on {args.host}:{args.port}"
            hint = " (--port 0, the default, takes a free port)"
        else:  # the kubeconfig it writes, say
            what, hint = f"cannot serve (--kubeconfig {args.kubeconfig})", ""
        print(f"nodeagent sim serve: {what}: {e.strerror or e}{hint}", file=sys.stderr)
        return 2
    return 0
