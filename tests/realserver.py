"""Real means for what the simulated server does by fault injection, on the real control plane
the `backend` fixture starts under `<tmp_path>/controlplane`."""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
import subprocess
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path

import yaml

from nodeagent_testbed.controlplane.cluster import free_port


def apiserver_pid(plane_dir: Path) -> int:
    state = json.loads((plane_dir / "state.json").read_text())
    return int(state["pids"]["kube-apiserver"])


def _argv_on_port(pid: int, port: int) -> list[bytes]:
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1]
    return [
        f"--secure-port={port}".encode() if a.startswith(b"--secure-port=") else a for a in argv
    ]


def _ready(url: str, kubeconfig: Path) -> bool:
    user = yaml.safe_load(kubeconfig.read_text())["users"][0]["user"]
    ca = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["certificate-authority"]
    ctx = ssl.create_default_context(cafile=ca)
    ctx.load_cert_chain(user["client-certificate"], user["client-key"])
    try:
        with urllib.request.urlopen(url + "/readyz", context=ctx, timeout=2) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError):
        return False


@contextlib.asynccontextmanager
async def another_apiserver(plane_dir: Path, kubeconfig: Path) -> AsyncIterator[int]:
    """A second kube-apiserver instance of the same cluster (same etcd prefix, flags and
    certificates, another port), as in a highly available control plane. Its watch cache
    starts at etcd's current revision, so a watch from an older resourceVersion gets 410
    there, as after an API server restart. Yields its port once it is ready."""
    port = free_port()
    argv = _argv_on_port(apiserver_pid(plane_dir), port)
    log = (plane_dir / "logs" / "kube-apiserver-2.log").open("ab")
    proc = await asyncio.create_subprocess_exec(
        *argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=plane_dir
    )
    log.close()
    try:
        url = f"https://127.0.0.1:{port}"
        delay = 0.05
        async with asyncio.timeout(60):
            # nothing to watch before it serves: poll its health endpoint, as cluster.py does
            while not await asyncio.to_thread(_ready, url, kubeconfig):
                assert proc.returncode is None, f"kube-apiserver-2 exited; see {plane_dir}/logs"
                await asyncio.sleep(delay)  # a real process: nothing tells when it serves
                delay = min(delay * 1.5, 0.5)
        yield port
    finally:
        if proc.returncode is None:
            proc.terminate()
            try:
                async with asyncio.timeout(10):
                    await proc.wait()
            except TimeoutError:
                proc.kill()
                await proc.wait()
