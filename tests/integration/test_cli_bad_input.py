"""Every subcommand, as a process, with what an operator gets wrong: bad files, values, ports
and environments. Each ends with one line saying what is wrong (after argparse's usage for a
usage error) and a non-zero exit, 2 for usage and configuration; never a traceback."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

NOT_A_MAPPING = "/etc/hostname"


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def cases(tmp: Path, port: int) -> dict[str, tuple[list[str], int | None, str]]:
    """name -> (argv, exit status (None: any but 0), what the line says). `ENV=value` words
    before the command are its environment."""
    bad_yaml = tmp / "bad.yaml"
    bad_yaml.write_text("a: [\n")
    config = tmp / "config.yaml"
    config.write_text(f"kube:\n  kubeconfig: {NOT_A_MAPPING}\n")
    unknown = tmp / "unknown.yaml"
    unknown.write_text("shutdown:\n  budgett: 10\n")
    return {
        "run, no such file": (["run", "--config", str(tmp / "none")], 2, "cannot read"),
        "run, not a mapping": (["run", "--config", NOT_A_MAPPING], 2, "must be a mapping"),
        "run, not YAML": (["run", "--config", str(bad_yaml)], 2, str(bad_yaml)),
        "run, unknown key": (["run", "--config", str(unknown)], 2, "shutdown.budgett"),
        # the configuration is good, the kubeconfig it names is not: a line of the agent's own
        # (the static pods' at startup) came before the error
        "run, kubeconfig not a mapping": (
            ["run", "--config", str(config)], 2, f"{NOT_A_MAPPING} is not a kubeconfig",
        ),
        "run, KUBECONFIG missing": (
            [f"KUBECONFIG={tmp / 'none'}", "run"], 2, f"cannot read {tmp / 'none'}",
        ),
        "run, no kubeconfig anywhere": (
            ["KUBECONFIG=", f"HOME={tmp}", "run"], 2, "no kubeconfig given",
        ),
        "plan, KUBECONFIG not YAML": (
            [f"KUBECONFIG={bad_yaml}", "plan", "node-1"], 2, f"{bad_yaml} is not YAML",
        ),
        "run, bad log level": (["--log-level", "loud", "run"], 2, "invalid choice"),
        "manifests, bad name": (["manifests", "namespace", "Bad_Name"], 2, "namespace name"),
        "crds, bad name": (["manifests", "crds", "--with-namespace=a_b"], 2, "namespace name"),
        "plan, no such file": (["plan", str(tmp / "none.yaml")], 2, "cannot read"),
        "plan, not YAML": (["plan", str(bad_yaml)], 2, str(bad_yaml)),
        "plan, bad kubeconfig": (
            ["plan", "--kubeconfig", NOT_A_MAPPING, "node-1"], 2, "is not a kubeconfig",
        ),
        "plan, bad output": (["plan", "-o", "xml", "node-1"], 2, "invalid choice"),
        "reboot, no such config": (["reboot", "--config", str(tmp / "none")], 2, "cannot read"),
        "reboot, unwritable request": (
            ["reboot", "--request-file", "/proc/none/x"], None, "cannot write",
        ),
        "restore, stash is a file": (
            ["restore-static-pods", "--manifest-dir", str(tmp), "--stash-dir", NOT_A_MAPPING],
            2, "",
        ),
        "sim serve, port taken": (
            ["sim", "serve", "--port", str(port), "--kubeconfig", str(tmp / "k")],
            2, f"cannot listen on 127.0.0.1:{port}",
        ),
        "sim serve, kubeconfig unwritable": (
            ["sim", "serve", "--kubeconfig", "/proc/none/k"], 2, "--kubeconfig /proc/none/k",
        ),
        "sim serve, port out of range": (
            ["sim", "serve", "--port", "70000", "--kubeconfig", str(tmp / "k")],
            2, "argument --port: must be from 0 to 65535",
        ),
        "sim serve, no such host": (
            ["sim", "serve", "--host", "no-such-host.invalid", "--kubeconfig", str(tmp / "k")],
            2, "cannot listen on no-such-host.invalid:0",
        ),
        "sim serve, static pod dir a file": (
            ["sim", "serve", "--static-pod-dir", f"node-1={NOT_A_MAPPING}",
             "--kubeconfig", str(tmp / "k")],
            2, f"{NOT_A_MAPPING} is not a directory",
        ),
        "demo, speed not a number": (["demo", "--speed", "nan"], 2, "must be a positive number"),
        "demo, negative width": (["demo", "--width", "-3"], 2, "must be 0 (do not fold) or more"),
        "sim serve, no nodes": (
            ["sim", "serve", "--nodes", "0", "--kubeconfig", str(tmp / "k")], 2, "--nodes",
        ),
        "demo, unknown option": (["demo", "--bogus"], 2, "unrecognized arguments"),
        "no command": ([], 2, "required"),
    }  # fmt: skip


CASES = sorted(cases(Path("/tmp"), 0))


@pytest.mark.parametrize("name", CASES)
def test_bad_input_is_one_line(name: str, tmp_path: Path, taken_port: int) -> None:
    words, status, said = cases(tmp_path, taken_port)[name]
    env = {
        k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")
    }
    argv = list(words)
    while argv and "=" in argv[0] and argv[0].split("=", 1)[0].isupper():
        key, _, value = argv.pop(0).partition("=")
        env[key] = value
    done = subprocess.run(
        [sys.executable, "-m", "nodeagent", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env=env,
    )
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode != 0 if status is None else done.returncode == status, done.stderr
    # argparse prints its usage first; then, as for every other error, one line
    lines = [
        line for line in done.stderr.splitlines()
        if line.strip() and not line.startswith(("usage:", " "))
    ]  # fmt: skip
    assert len(lines) == 1, done.stderr
    assert said in lines[0], lines[0]
