"""Command line: argument parsing only; the work is done elsewhere."""

from __future__ import annotations

import argparse
import importlib.metadata
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TypeAlias

from nodeagent import version
from nodeagent.config.checks import DNS_LABEL, LOG_LEVELS
from nodeagent.manifests import LEADER_NAMESPACE, crd_stream, namespace_stream
from nodeagent.node.staticpods.restore import restore_command

# The entry-point group of subcommands that other distributions add to `nodeagent`.
COMMANDS = "nodeagent.commands"
# The testbed's subcommands (testbed/, distribution nodeagent-testbed), named here only to say
# what is missing where it is not installed.
TESTBED_COMMANDS = {
    "demo": "reboot node-1 of a simulated cluster and watch nodeagent drain it",
    "sim": "the simulated cluster",
}

# what `add_subparsers` returns (generic only in the type stubs, hence a string)
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="nodeagent", description="Graceful node shutdown and maintenance for Kubernetes."
    )
    p.add_argument(
        "--log-level",
        type=str.upper,
        choices=LOG_LEVELS,
        help="DEBUG, INFO, WARNING, ERROR or CRITICAL (run: instead of observability.logLevel)",
    )
    p.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    sub = p.add_subparsers(dest="command", required=True)
    _add_run(sub)
    _add_manifests(sub)
    _add_restore_static_pods(sub)
    _add_plan(sub)
    _add_reboot(sub)
    _add_commands_of_other_distributions(sub)
    return p


def _add_run(sub: Subparsers) -> None:
    run = sub.add_parser("run", help="run the agent on this node")
    run.add_argument(
        "--config", type=Path, help="YAML configuration file (see docs/configuration.md)"
    )


def _namespace_name(value: str) -> str:
    """A namespace's name (an RFC 1123 label), or a usage error saying so."""
    if not DNS_LABEL.fullmatch(value):
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a namespace name (lowercase letters, digits and '-', at most 63)"
        )
    return value


def _add_manifests(sub: Subparsers) -> None:
    manifests = sub.add_parser("manifests", help="print manifests shipped with nodeagent")
    which = manifests.add_subparsers(dest="manifests_command", required=True)
    crds = which.add_parser(
        "crds", help="the CustomResourceDefinitions, as one multi-document YAML stream"
    )
    crds.add_argument(
        "--with-namespace",
        nargs="?",
        const=LEADER_NAMESPACE,
        type=_namespace_name,
        metavar="NAME",
        help=f"the leader's Namespace first (default {LEADER_NAMESPACE})",
    )
    namespace = which.add_parser(
        "namespace", help="the Namespace of the leader's Lease (leader.namespace)"
    )
    namespace.add_argument(
        "name", nargs="?", default=LEADER_NAMESPACE, type=_namespace_name, help="its name"
    )


def _add_restore_static_pods(sub: Subparsers) -> None:
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
        help="where manifests were moved (default: <manifest-dir>/.nodeagent-stash)",
    )
    r.add_argument(
        "--after-reboot",
        action="store_true",
        help="restore only what the agent restores at start-up: manifests moved aside by a "
        "shutdown maintenance of an earlier boot",
    )


def _add_plan(sub: Subparsers) -> None:
    plan = sub.add_parser(
        "plan",
        help="the drain plan a NodeMaintenance would follow: pods per entry, pods never "
        "evicted, PodDisruptionBudgets that would refuse; changes nothing",
    )
    plan.add_argument(
        "target",
        metavar="FILE|NAME",
        help="a NodeMaintenance YAML file (- for stdin) or the name of one in the cluster",
    )
    plan.add_argument(
        "--kubeconfig",
        help="kubeconfig to read the cluster with (default: $KUBECONFIG, in-cluster, "
        "~/.kube/config)",
    )
    plan.add_argument(
        "-o", "--output", choices=["text", "json"], default="text", help="text (default) or json"
    )


def _add_reboot(sub: Subparsers) -> None:
    r = sub.add_parser(
        "reboot",
        help="ask this node's agent for a coordinated reboot: a NodeMaintenance that waits for "
        "its drain slot and drains, then the node reboots (reboot.enabled)",
    )
    r.add_argument("--reason", help="why (the maintenance's reason says it)")
    r.add_argument(
        "--cancel", action="store_true", help="call off a reboot asked for with nodeagent reboot"
    )
    r.add_argument(
        "--config",
        type=Path,
        help="the agent's configuration, for reboot.requestFile (default: "
        "/etc/nodeagent/config.yaml where it exists)",
    )
    r.add_argument(
        "--request-file",
        type=Path,
        help="the file the agent watches (default: reboot.requestFile, "
        "/run/nodeagent/reboot-requested)",
    )


def _add_commands_of_other_distributions(sub: Subparsers) -> None:
    """Subcommands that other distributions register (the testbed's `demo` and `sim`), each an
    entry point of group COMMANDS: a function that adds its parser to `sub` and sets `handler`
    (arguments -> exit status). This distribution never imports them; where the testbed is not
    installed (the .deb, the image), its commands say so in one line."""
    found = {ep.name: ep for ep in importlib.metadata.entry_points(group=COMMANDS)}
    for name in sorted(found):
        found[name].load()(sub)
    for name, help_text in TESTBED_COMMANDS.items():
        if name not in found:
            # every argument, --help included, is taken as a plain word: the error is the answer
            stub = sub.add_parser(
                name,
                help=f"{help_text} (needs nodeagent-testbed)",
                add_help=False,
                prefix_chars="\0",
            )
            stub.add_argument("words", nargs="*", help=argparse.SUPPRESS)
            stub.set_defaults(handler=_needs_testbed)


def _needs_testbed(args: argparse.Namespace) -> int:
    print(
        f"nodeagent {args.command} needs the nodeagent-testbed distribution: "
        "scripts/setup installs it",
        file=sys.stderr,
    )
    return 2


def _run(config_path: Path | None, log_level: str | None = None) -> int:
    from nodeagent import app  # the agent's imports are not needed by the other commands
    from nodeagent.config import ConfigError, load
    from nodeagent.kube.errors import KubeConfigError
    from nodeagent.observability import logs
    from nodeagent.observability.http import ListenError

    # where the packaging says how to configure the agent (the .deb's unit sets it)
    doc = os.environ.get("NODEAGENT_SETUP_DOC")
    see = f" (see {doc})" if doc else ""
    try:
        cfg = load(config_path)
    except ConfigError as e:
        print(f"nodeagent: {e}{see}", file=sys.stderr)
        return 2
    logs.setup(log_level or cfg.observability.log_level, cfg.observability.log_format)
    try:
        return app.run(cfg, str(config_path) if config_path else None)
    except KubeConfigError as e:  # a missing or broken kubeconfig: one line, not a traceback
        print(f"nodeagent: kube.kubeconfig: {e}{see}", file=sys.stderr)
        return 2
    except ListenError as e:  # the port is taken (another agent?), or the address not ours
        print(f"nodeagent: {e}", file=sys.stderr)
        return 2


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level or "INFO",
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if args.command == "run":
        return _run(args.config, args.log_level)
    if args.command == "manifests" and args.manifests_command == "crds":
        if args.with_namespace is not None:
            sys.stdout.write(namespace_stream(args.with_namespace))
        sys.stdout.write(crd_stream())
        return 0
    if args.command == "manifests" and args.manifests_command == "namespace":
        sys.stdout.write(namespace_stream(args.name))
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
    if args.command == "plan":
        # the controllers' modules are not needed by the other commands
        from nodeagent.controllers.nodemaintenance.preview import plan_command

        return plan_command(
            args.target, args.kubeconfig, args.output, out=sys.stdout, err=sys.stderr
        )
    if args.command == "reboot":
        from nodeagent.node.reboot_command import reboot_command

        return reboot_command(
            args.config,
            args.request_file,
            args.reason,
            cancel=args.cancel,
            out=sys.stdout,
            err=sys.stderr,
        )
    handler = getattr(args, "handler", None)
    if handler is not None:
        status: int = handler(args)
        return status
    return 2


if __name__ == "__main__":
    sys.exit(main())
