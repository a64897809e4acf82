"""The fleet bed's pod network (nodeagent_testbed.realnode.fleet): a pod on one real node
reaches a pod on another, and the host reaches both, through the routes between the nodes'
pod subnets. Before the pods got a default route (the CNI bridge's gateway set, but no route
through it), a pod's answers to anything outside its own subnet were dropped and every
connection across nodes timed out."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from nodeagent.kube.resources import PODS
from nodeagent_testbed.realnode.images import BUSYBOX
from tests.realnode.conftest import require_real_node
from tests.realnode.fleetenv import Fleet, real_fleet

pytestmark = [pytest.mark.realnode, pytest.mark.fleet, pytest.mark.timeout(600)]

PORT = 8080


def pod(name: str, node: str, script: str, restart: str = "Always") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": node,
            "restartPolicy": restart,
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "c",
                    "image": BUSYBOX,
                    "imagePullPolicy": "Never",
                    # its output in the status when it fails: the assertion says why
                    "terminationMessagePolicy": "FallbackToLogsOnError",
                    "command": ["sh", "-c", script],
                }
            ],
        },
    }


def status(f: Fleet, name: str) -> dict[str, Any]:
    return dict((f.view.get(PODS, name, "default") or {}).get("status") or {})


@pytest.fixture
async def fleet(tmp_path: Path, request: pytest.FixtureRequest) -> Any:
    require_real_node()
    real = request.getfixturevalue("real_plane")
    async with real_fleet(tmp_path, real.binaries, real.etcd_url, None) as f:
        yield f


async def test_pods_reach_each_other_and_the_host_reaches_them_across_nodes(fleet: Fleet) -> None:
    f = fleet
    serve = f"mkdir -p /w && echo from-node-2 > /w/index.html && exec httpd -f -p {PORT} -h /w"
    await f.kube.create(PODS, pod("server", "node-2", serve))
    await f.view.until(lambda: status(f, "server").get("phase") == "Running", timeout=120)
    address = status(f, "server")["podIP"]
    assert address.startswith("10.244.2."), address
    # the client's one attempt, on node-1's pod network: Succeeded only if it got the page
    # (busybox's static wget crashes in this image: a request by hand through nc)
    fetch = f"printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 5 {address} {PORT} | grep from-node-2"
    await f.kube.create(PODS, pod("client", "node-1", fetch, restart="Never"))
    await f.view.until(
        lambda: status(f, "client").get("phase") in ("Succeeded", "Failed"), timeout=120
    )
    client = status(f, "client")
    assert client["phase"] == "Succeeded", client.get("containerStatuses")
    assert client["podIP"].startswith("10.244.1."), client
    # and from the host, through its route to node-2's pods
    proc = await asyncio.create_subprocess_exec(
        "bash", "-c", f"timeout 5 bash -c 'exec 3<>/dev/tcp/{address}/{PORT}'"
    )
    assert await proc.wait() == 0, "the host cannot reach a pod on node-2"
