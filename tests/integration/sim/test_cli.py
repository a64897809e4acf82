"""`nodeagent sim serve` as users run it: a process, a kubeconfig, real kubectl."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

from tests.conftest import Kubectl


async def test_sim_serve_writes_a_kubeconfig_kubectl_uses(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "etcd.yaml").write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: etcd, namespace: kube-system}\n"
        "spec: {containers: [{name: etcd, image: etcd}]}\n"
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "nodeagent",
        "sim",
        "serve",
        "--nodes",
        "2",
        "--port",
        "0",
        "--static-pod-dir",
        f"node-2={manifests}",
        "--kubeconfig",
        str(kubeconfig),
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        async with asyncio.timeout(30):
            line = await proc.stdout.readline()
        assert line.startswith(b"serving http://127.0.0.1:"), line
        home = tmp_path / "home"
        home.mkdir()
        kubectl = Kubectl(kubeconfig, home)
        out = await kubectl.ok("get", "nodes", "-o", "name")
        assert out.split() == ["node/node-1", "node/node-2"]
        # nodeagent's CRDs are there: kubectl knows NodeMaintenances at once
        assert (await kubectl.ok("get", "nm")).strip() in ("", "No resources found")
        await kubectl.ok("wait", "--for=create", "-n", "kube-system", "pod/etcd-node-2")
        out = await kubectl.ok(
            "get",
            "pods",
            "-n",
            "kube-system",
            "-o",
            "name",
            "--field-selector",
            "spec.nodeName=node-2",
        )
        assert out.split() == ["pod/etcd-node-2"]
    finally:
        proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(30):
            assert await proc.wait() == 0


async def test_sim_serve_rejects_a_static_pod_dir_for_an_unknown_node(tmp_path: Path) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "nodeagent",
        "sim",
        "serve",
        "--nodes",
        "1",
        "--port",
        "0",
        "--static-pod-dir",
        f"node-7={tmp_path}",
        "--kubeconfig",
        str(tmp_path / "kc"),
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(30):
        _, err = await proc.communicate()
    assert proc.returncode == 2
    assert b"node-7" in err
