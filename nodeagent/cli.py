"""Command line: argument parsing only; the work is done elsewhere."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from nodeagent.manifests import crd_stream
from nodeagent.node.staticpods.restore import restore_command


def _node_dir(value: str) -> tuple[str, Path]:
    node, sep, path = value.partition("=")
    if not sep or not node or not path:
        raise argparse.ArgumentTypeError(f"expected NODE=DIR, got {value!r}")
    return node, Path(path)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="nodeagent", description="Graceful node shutdown and maintenance for Kubernetes."
    )
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

    run = sub.add_parser("run", help="run the agent on this node")
    run.add_argument("--config", type=Path, help="YAML configuration file (see the README)")

    demo = sub.add_parser(
        "demo",
        help="reboot node-1 of a simulated cluster and watch nodeagent drain it (under a minute)",
    )
    demo.add_argument(
        "--speed", type=float, default=1.0, help="divide the pods' exit times by this factor"
    )
    demo.add_argument(
        "--json", action="store_true", help="print the summary as JSON (progress goes to stderr)"
    )
    demo.add_argument("--verbose", action="store_true", help="also show the agents' logs")

    manifests = sub.add_parser("manifests", help="print manifests shipped with nodeagent")
    manifests.add_subparsers(dest="manifests_command", required=True).add_parser(
        "crds", help="the CustomResourceDefinitions, as one multi-document YAML stream"
    )

    r = sub.add_parser(
        "restore-static-pods",
        help="put static pod manifests moved aside by nodeagent back, and list what was done",
    )
    r.add_argument("--dry-run", action="store_true", help="change nothing; say what would be done")
    r.add_argument(
        "--manifest-dir",
        type=Path,
        help="the kubelet's static pod directory (default: from the running kubelet, else "
        "/etc/kubernetes/manifests)",
    )
    r.add_argument(
        "--stash-dir",
        type=Path,
        help="where manifests were moved (default: <manifest-dir>.nodeagent-stash)",
    )
    r.add_argument(
        "--after-reboot",
        action="store_true",
        help="restore only what the agent restores at start-up: manifests moved aside by a "
        "shutdown maintenance of an earlier boot",
    )
    return p


def _run(config_path: Path | None) -> int:
    from nodeagent import app  # the agent's imports are not needed by the other commands
    from nodeagent.config import ConfigError, load
    from nodeagent.kube.errors import ConfigError as KubeConfigError
    from nodeagent.observability import logs

    try:
        cfg = load(config_path)
    except ConfigError as e:
        print(f"nodeagent: {e}", file=sys.stderr)
        return 2
    logs.setup(cfg.observability.log_level, cfg.observability.log_format)
    try:
        return app.run(cfg)
    except KubeConfigError as e:  # a missing or broken kubeconfig: one line, not a traceback
        print(f"nodeagent: kube.kubeconfig: {e}", file=sys.stderr)
        return 2


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if args.command == "run":
        return _run(args.config)
    if args.command == "demo":
        from nodeagent import demo  # runs agents: their imports are not needed elsewhere

        return demo.main(args.speed, json_output=args.json, verbose=args.verbose)
    if args.command == "manifests" and args.manifests_command == "crds":
        sys.stdout.write(crd_stream())
        return 0
    if args.command == "restore-static-pods":
        return restore_command(
            args.manifest_dir,
            args.stash_dir,
            dry_run=args.dry_run,
            after_reboot=args.after_reboot,
            out=sys.stdout,
            err=sys.stderr,
        )
    if args.command == "sim" and args.sim_command == "serve":
        # the simulated cluster is ~6 MiB of modules that `nodeagent run` must not carry
        from nodeagent.sim.cluster import SimCluster, serve

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
