"""The log of an agent whose API server does not answer (issue 36): it said two warnings every
2 s, urllib3's `Retrying (...)` and the Lease's. Now each warning is said once a minute at most
and the client's retries not at all, while each thing that fails is still named."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

# long enough for some five retries of the Lease (every 2 s) and of each informer's list
RUN_FOR = 12.0


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # nothing listens on it once closed


@pytest.mark.timeout(60)
def test_an_unreachable_api_server_is_said_once_per_thing(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: x\n"
        f"clusters: [{{name: c, cluster: {{server: 'https://127.0.0.1:{closed_port()}'}}}}]\n"
        "users: [{name: u, user: {token: abc}}]\n"
        "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
    )
    config = tmp_path / "config.yaml"
    config.write_text(
        f"nodeName: node-1\nkube: {{kubeconfig: {kubeconfig}}}\n"
        "shutdown: {enabled: false}\nstaticPods: {enabled: false}\n"
        "observability: {listen: '127.0.0.1:0'}\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "nodeagent", "run", "--config", str(config)],
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        _, err = proc.communicate(timeout=RUN_FOR)
    except subprocess.TimeoutExpired:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert "Traceback" not in err, err
    assert "Retrying" not in err, err
    warnings = Counter(
        # what a line is about, without the time and the error's own words
        re.sub(r"^\S+ \S+ WARNING ", "", line).split(": no response")[0]
        for line in err.splitlines()
        if " WARNING " in line and "still in flight" not in line
    )
    assert any(w.startswith("nodeagent.kube.leader: cannot acquire lease") for w in warnings), err
    assert any("list/watch of nodes failed" in w for w in warnings), err
    # each of the two lists fails and is said apart: a template is not a message
    assert any("list/watch of nodemaintenances.nodeagent.io failed" in w for w in warnings), err
    assert all(n == 1 for n in warnings.values()), warnings
