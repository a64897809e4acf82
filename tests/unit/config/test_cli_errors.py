"""`nodeagent run` with a configuration that cannot work: one line naming the setting, exit 2."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import yaml


def run(config: dict[str, object], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    f = tmp_path / "config.yaml"
    f.write_text(yaml.safe_dump(config))
    return subprocess.run(
        [sys.executable, "-m", "nodeagent", "run", "--config", str(f)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_missing_kubeconfig_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = run(
        {
            "nodeName": "node-1",
            "kube": {"kubeconfig": str(tmp_path / "nowhere")},
            "shutdown": {"enabled": False, "completeAfterReboot": False},
            "staticPods": {"enabled": False},
            "runControllers": False,
            "observability": {"listen": "127.0.0.1:0"},
        },
        tmp_path,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("nodeagent: kube.kubeconfig: "), done.stderr
    assert "Traceback" not in done.stderr


def test_a_port_in_use_is_one_line_and_exit_2(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:9"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run(
            {
                "nodeName": "node-1",
                "kube": {"kubeconfig": str(kubeconfig)},
                "shutdown": {"enabled": False, "completeAfterReboot": False},
                "staticPods": {"enabled": False},
                "runControllers": False,
                "observability": {"listen": f"127.0.0.1:{port}"},
            },
            tmp_path,
        )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines == [
        f"nodeagent: observability.listen: cannot listen on 127.0.0.1:{port}: "
        "Address already in use"
    ], done.stderr
