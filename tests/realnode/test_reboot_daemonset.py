"""The mission on a real node, DaemonSet install: `kubectl apply -k` of packaging/kubernetes (with
an overlay for this test bed only, below), the agent's image built from the Dockerfile and run
by the real kubelet and containerd; the agent's pod holds the node's logind lock through the
mounted D-Bus socket, and `systemctl reboot` drains node-1 in plan order before it goes down;
after the reboot the pod puts the static pods' manifests back and the kubelet runs them again.

The overlay changes only what this test bed needs: the pods reach the API server on the host's
loopback (there is no kube-proxy, and the test CNI gives pods no route out), so both workloads
take the host's network and the server's address; the agent's pod takes the node's PID
namespace, to tell the container's reboot (a userspace restart on one kernel, as `systemctl
soft-reboot` is) from a running boot; and the controllers run as one replica on
node-1, the only node that runs containers, not drained (the drain of the node they run on
would stop them here, where a cluster has other nodes to move them to)."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from nodeagent.kube.resources import NODEMAINTENANCES, NODES, PODS, Resource
from nodeagent_testbed.nspawn import REBOOT_EXIT
from nodeagent_testbed.realnode.images import NODEAGENT
from nodeagent_testbed.realnode.node import MANIFEST_DIR
from tests.conftest import Kubectl
from tests.e2e.node import kind_of, running
from tests.realnode.conftest import NODE, RealNode
from tests.realnode.workloads import (
    ETCD,
    SCHEDULER,
    WORKLOADS,
    create_on_node,
    node_pods,
    static_pods_running,
)

pytestmark = [pytest.mark.realnode, pytest.mark.timeout(600)]

PACKAGING = Path(__file__).resolve().parents[2] / "packaging" / "kubernetes"
AGENT = "nodeagent"
CONTROLLERS = "nodeagent-controllers"
CONTROLLERS_PORT = 9875  # and its probe port; the agent's are 9873 and 9874
CONTROLLERS_PROBE_PORT = 9876


@pytest.fixture
def agent_image() -> bool:
    return True


def overlay(dir: Path, server: str, image: str) -> Path:
    """A kustomization over packaging/kubernetes with this test bed's changes (module doc)."""
    host, port = server.removeprefix("https://").rsplit(":", 1)
    env = [
        {"name": "KUBERNETES_SERVICE_HOST", "value": host},
        {"name": "KUBERNETES_SERVICE_PORT", "value": port},
    ]

    def patch(kind: str, name: str, container: str, extra: dict[str, Any]) -> dict[str, Any]:
        """`hostNetwork`, the server's address and the local image for one workload."""
        spec: dict[str, Any] = {
            "hostNetwork": True,
            "containers": [
                {"name": container, "image": image, "imagePullPolicy": "Never", "env": env}
            ],
            **extra,
        }
        body = {
            "apiVersion": "apps/v1",
            "kind": kind,
            "metadata": {"name": name, "namespace": "nodeagent-system"},
            "spec": {"template": {"spec": spec}},
        }
        return {"patch": yaml.safe_dump(body)}

    controllers = patch(
        "Deployment", CONTROLLERS, "controllers", {"nodeSelector": {"kubernetes.io/hostname": NODE}}
    )
    skip = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": CONTROLLERS, "namespace": "nodeagent-system"},
        "spec": {
            "replicas": 1,
            "template": {"metadata": {"annotations": {"nodeagent.io/drain": "skip"}}},
        },
    }
    # both on the host's network: the controllers' metrics and probe ports move off the agent's
    config: dict[str, Any]
    (config,) = (
        d
        for d in yaml.safe_load_all((PACKAGING / "configmap.yaml").read_text())
        if d["metadata"]["name"] == f"{CONTROLLERS}-config"
    )
    settings: dict[str, Any] = yaml.safe_load(config["data"]["config.yaml"])
    settings["observability"]["listen"] = f"0.0.0.0:{CONTROLLERS_PORT}"
    settings["observability"]["probeListen"] = f"0.0.0.0:{CONTROLLERS_PROBE_PORT}"
    config["data"]["config.yaml"] = yaml.safe_dump(settings)
    metrics_port = {
        "target": {"kind": "Deployment", "name": CONTROLLERS},
        "patch": yaml.safe_dump(
            [
                {
                    "op": "replace",
                    "path": f"/spec/template/spec/containers/0/ports/{i}/containerPort",
                    "value": value,
                }
                for i, value in enumerate((CONTROLLERS_PORT, CONTROLLERS_PROBE_PORT))
            ]
        ),
    }
    doc = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [os.path.relpath(PACKAGING, dir)],
        "patches": [
            # the node's "reboot" restarts its systemd on the same kernel (a boot id of its
            # own), which a pod tells from a running boot only with the node's PID namespace
            patch("DaemonSet", AGENT, "nodeagent", {"hostPID": True}),
            controllers,
            {"patch": yaml.safe_dump(skip)},
            {"patch": yaml.safe_dump(config)},
            metrics_port,
        ],
    }
    dir.mkdir(parents=True, exist_ok=True)
    (dir / "kustomization.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return dir


def app(pod: dict[str, Any]) -> str | None:
    return (pod["metadata"].get("labels") or {}).get("app.kubernetes.io/name")


async def installed(n: RealNode, tmp_path: Path) -> Path:
    """The node booted with both static pods, packaging/kubernetes applied, the agent's pod
    holding the node's shutdown lock through the mounted D-Bus socket, the workloads running."""
    c = n.container
    manifests = c.path(MANIFEST_DIR)
    (manifests / "etcd.yaml").write_bytes(ETCD)
    (manifests / "kube-scheduler.yaml").write_bytes(SCHEDULER)
    server = yaml.safe_load(n.backend.kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    home = tmp_path / "kubectl-home"
    home.mkdir()
    kubectl = Kubectl(n.backend.kubeconfig, home)
    await c.boot()
    await kubectl.ok("apply", "-k", str(overlay(tmp_path / "overlay", server, NODEAGENT)))

    def agents_running() -> bool:
        pods = [p for p in node_pods(n.view, NODE) if running(p)]
        return sorted(a for p in pods if (a := app(p)) in (AGENT, CONTROLLERS)) == [
            AGENT,
            CONTROLLERS,
        ]

    await n.view.until(agents_running, timeout=180)
    async with asyncio.timeout(60):
        while not any(lock[1] == "nodeagent" for lock in await c.inhibitors()):  # noqa: ASYNC110
            await asyncio.sleep(0.2)  # logind signals no new lock: ask again
    await create_on_node(n, WORKLOADS)
    await n.view.until(
        lambda: (
            sorted(kind_of(p) for p in node_pods(n.view, NODE) if running(p) and app(p) is None)
            == ["daemonset", "high", "high", "low", "low", "static", "static"]
        ),
        timeout=120,
    )
    return manifests


# run inside the agent's container: what creating a file beside the host's bus socket gives
PROBE = (
    "import errno, os\n"
    "try:\n"
    "    os.close(os.open('/run/dbus/nodeagent-probe', os.O_CREAT | os.O_WRONLY, 0o600))\n"
    "except OSError as e:\n"
    "    print(errno.errorcode[e.errno])\n"
    "else:\n"
    "    print('created')\n"
)


async def agent_cannot_write_dbus_dir(n: RealNode) -> None:
    """The host's /run/dbus is mounted read-only into the agent's container: the agent holds
    logind's lock through the socket there (a connect needs no write access), yet cannot put
    a file of its own there (nor replace the bus socket). Run as the container's own process
    is (`ctr tasks exec`: its user, capabilities and mounts), not as root in the node."""
    (pod,) = [p for p in node_pods(n.view, NODE) if app(p) == AGENT and running(p)]
    (status,) = pod["status"]["containerStatuses"]
    container = status["containerID"].removeprefix("containerd://")
    out = await n.container.exec(
        "ctr", "-n", "k8s.io", "tasks", "exec", "--exec-id", "dbus-probe",
        container, "/opt/nodeagent/bin/python", "-c", PROBE,
    )  # fmt: skip
    assert out.strip() == "EROFS", out
    # and the node's /run (a tmpfs, not the root fs) has no such file
    await n.container.exec("test", "!", "-e", "/run/dbus/nodeagent-probe")


async def static_pods_back(n: RealNode, manifests: Path) -> None:
    """After the reboot: the agent's pod comes back (the kubelet first: a DaemonSet install
    cannot go before it), puts the manifests back and completes the maintenance."""
    await static_pods_running(n)
    assert (manifests / "etcd.yaml").read_bytes() == ETCD
    assert (manifests / "kube-scheduler.yaml").read_bytes() == SCHEDULER
    await n.view.until(
        lambda: not (n.view.get(NODES, NODE) or {})["spec"].get("unschedulable"), timeout=120
    )
    await n.view.until(lambda: not n.view.list(NODEMAINTENANCES), timeout=60)


async def test_daemonset_install_drains_a_real_node_and_brings_it_back(
    real_node: RealNode, tmp_path: Path
) -> None:
    n, c = real_node, real_node.container
    manifests = await installed(n, tmp_path)
    await agent_cannot_write_dbus_dir(n)

    leaving: list[str] = []
    drained_at: list[float] = []
    seen: set[str] = set()

    def record(event: str, resource: Resource, new: dict[str, Any]) -> None:
        if resource == PODS and new["spec"].get("nodeName") == NODE and app(new) is None:
            uid = new["metadata"]["uid"]
            if (event == "DELETED" or new["metadata"].get("deletionTimestamp")) and uid not in seen:
                seen.add(uid)
                leaving.append(kind_of(new))
        if resource == NODEMAINTENANCES and not drained_at:
            conds = (new.get("status") or {}).get("conditions") or []
            if any(x["type"] == "Drained" and x["status"] == "True" for x in conds):
                drained_at.append(time.monotonic())

    n.view.listen(record)
    await c.exec("systemctl", "reboot")
    assert await c.wait_exit(timeout=240) == REBOOT_EXIT
    rebooted_at = time.monotonic()
    assert drained_at and drained_at[0] <= rebooted_at, "rebooted before Drained=True"
    assert leaving[:5] == ["low", "low", "high", "high", "daemonset"], leaving
    assert sorted(leaving[5:]) == ["static", "static"], leaving
    assert not (manifests / "etcd.yaml").exists()

    await c.boot()
    await static_pods_back(n, manifests)


async def test_agent_pod_killed_mid_drain(real_node: RealNode, tmp_path: Path) -> None:
    """What a DaemonSet install can promise: its container killed during the drain releases
    the lock (nothing outlives the container to hold it), so the node goes down before the
    drain is done, but nothing is lost, and the next boot's pod finishes the job."""
    n, c = real_node, real_node.container
    manifests = await installed(n, tmp_path)
    first = asyncio.Event()

    def record(event: str, resource: Resource, new: dict[str, Any]) -> None:
        on_node = resource == PODS and new["spec"].get("nodeName") == NODE and app(new) is None
        if on_node and (event == "DELETED" or new["metadata"].get("deletionTimestamp")):
            first.set()

    n.view.listen(record)
    await c.exec("systemctl", "reboot")
    await first.wait()
    await c.exec("pkill", "-KILL", "-f", "nodeagent run")
    assert await c.wait_exit(timeout=60) == REBOOT_EXIT
    maintenance = next(iter(n.view.list(NODEMAINTENANCES)))
    conds = (maintenance.get("status") or {}).get("conditions") or []
    assert not any(x["type"] == "Drained" and x["status"] == "True" for x in conds), (
        "the node went down before the drain was done (the lock died with the container)"
    )
    # never lost: the next boot's pod puts every manifest back, byte-identical
    await c.boot()
    await static_pods_back(n, manifests)
