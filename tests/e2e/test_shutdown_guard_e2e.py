"""End to end against real systemd-logind: `systemctl reboot` in a container waits for the
node's NodeMaintenance to be drained, well past logind's default 5 s, then reboots promptly."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import yaml

from nodeagent.kube.resources import NODEMAINTENANCES
from nodeagent_testbed.nspawn import REBOOT_EXIT, Container
from tests.clusters import ClusterView, TestCluster
from tests.e2e.container import agent_kubeconfig, require_tools, wheelhouse

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
BUDGET = 120


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require_tools()
    return wheelhouse(tmp_path_factory.mktemp("wheels"))


def install_agent_from_wheels(c: Container, wheels: Path, kubeconfig: Path) -> None:
    c.run_offline(
        "/bin/sh",
        "-ec",
        "python3 -m venv /opt/nodeagent && "
        "/opt/nodeagent/bin/pip install -q --no-index --find-links /wheels nodeagent",
        binds=(f"{wheels}:/wheels",),
    )
    etc = c.path("/etc/nodeagent")
    etc.mkdir(parents=True)
    (etc / "kubeconfig").write_text(yaml.safe_dump(agent_kubeconfig(kubeconfig)))
    (etc / "config.yaml").write_text(
        yaml.safe_dump(
            {
                "nodeName": "node-1",
                "runControllers": False,
                "kube": {"kubeconfig": "/etc/nodeagent/kubeconfig"},
                "shutdown": {"budget": BUDGET, "safetyMargin": 5},
                "observability": {"listen": "127.0.0.1:0"},
            }
        )
    )
    unit = c.path("/etc/systemd/system/nodeagent.service")
    unit.write_text((ROOT / "systemd" / "nodeagent.service").read_text())
    wants = c.path("/etc/systemd/system/multi-user.target.wants")
    wants.mkdir(parents=True, exist_ok=True)
    (wants / "nodeagent.service").symlink_to("/etc/systemd/system/nodeagent.service")


@pytest.fixture
async def container(tmp_path: Path, wheels: Path, backend: TestCluster) -> AsyncIterator[Container]:
    await backend.install_crds()
    kubeconfig = await backend.service_account(node="node-1")
    c = await asyncio.to_thread(Container.copy_of_base, tmp_path, "nodeagent-e2e")
    await asyncio.to_thread(install_agent_from_wheels, c, wheels, kubeconfig)
    try:
        yield c
    finally:
        await c.stop()


async def test_reboot_waits_for_drained(backend: TestCluster, container: Container) -> None:
    kube = backend.client()
    view = ClusterView(kube, [NODEMAINTENANCES])
    await view.start()
    await container.boot()
    state = await container.exec("systemctl", "is-active", "nodeagent")
    assert state.strip() == "active", await container.exec(
        "journalctl", "-u", "nodeagent", "--no-pager", check=False
    )

    # logind itself reports our delay lock, and the raised delay from our drop-in
    inhibitors = await container.exec(
        "busctl",
        "call",
        "org.freedesktop.login1",
        "/org/freedesktop/login1",
        "org.freedesktop.login1.Manager",
        "ListInhibitors",
    )
    assert '"shutdown" "nodeagent"' in inhibitors and '"delay"' in inhibitors, inhibitors
    assert await container.inhibit_delay_max_usec() == BUDGET * 1_000_000, await container.exec(
        "journalctl", "-u", "nodeagent", "--no-pager", check=False
    )

    await container.exec("systemctl", "reboot")
    await view.until(lambda: len(view.list(NODEMAINTENANCES)) == 1, timeout=30)
    (nm,) = view.list(NODEMAINTENANCES)
    assert nm["spec"]["stage"] == "Drain"

    # well past logind's default 5 s delay, the container is still up, waiting for us
    with pytest.raises(TimeoutError):
        await container.wait_exit(timeout=8)
    assert container.running()

    # no controllers run here: the test reports the drain done itself
    loop = asyncio.get_running_loop()
    drained = {
        "conditions": [
            {
                "type": "Drained",
                "status": "True",
                "reason": "Test",
                "message": "",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ]
    }
    t0 = loop.time()
    await kube.patch_status(NODEMAINTENANCES, nm["metadata"]["name"], {"status": drained})
    assert await container.wait_exit(timeout=30) == REBOOT_EXIT
    assert loop.time() - t0 < 15
    await view.stop()
