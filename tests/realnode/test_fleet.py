"""Fleet reboots on three real nodes (issue 35): every node asks to reboot at the same moment
(Debian's reboot-required sentinel), and nodeagent reboots them one at a time, each drained
before it goes down, while a three-member etcd under `maxUnavailable: 1` keeps its quorum and
loses no acknowledged write; every node comes back, uncordoned, its static pod running again.
The agents run both parts on the three nodes: the controllers' leader reboots too."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from nodeagent.kube.resources import NODEMAINTENANCES, NODES, PODS, Resource
from nodeagent.model.names import NODE_LABEL
from nodeagent_testbed.realnode.fleet import HOST
from tests.prometheusserver import prometheus_server
from tests.realnode import quorum
from tests.realnode.conftest import require_real_node
from tests.realnode.fleetenv import NAMES, Fleet, real_fleet
from tests.realnode.workloads import evicted

pytestmark = [pytest.mark.realnode, pytest.mark.fleet, pytest.mark.timeout(900)]

QUORUM_GATE = {"namespace": "default", "selector": {"matchLabels": {"app": quorum.APP}}}
SETTINGS: dict[str, Any] = {
    "shutdown": {"budget": 120, "safetyMargin": 5},
    "reboot": {"enabled": True},
    "nodeMaintenance": {"maxDrainingNodes": 1, "gates": {"podsReady": [QUORUM_GATE]}},
}


class Timeline:
    """What the test's watch saw, stamped as it arrived: when each node was first cordoned
    and its maintenance first Drained, and each member pod's leaving (evicted or not)."""

    def __init__(self) -> None:
        self.cordoned: dict[str, float] = {}
        self.drained: dict[str, float] = {}
        self.members_left: dict[str, tuple[float, bool]] = {}  # node -> (when, by eviction)

    def record(self, event: str, resource: Resource, new: dict[str, Any]) -> None:
        now = time.monotonic()
        if resource == NODES and (new.get("spec") or {}).get("unschedulable"):
            self.cordoned.setdefault(new["metadata"]["name"], now)
        if resource == NODEMAINTENANCES:
            node = (new["metadata"].get("labels") or {}).get(NODE_LABEL)
            conditions = (new.get("status") or {}).get("conditions") or []
            if node and any(c["type"] == "Drained" and c["status"] == "True" for c in conditions):
                self.drained.setdefault(node, now)
        if resource == PODS and (new["metadata"].get("labels") or {}).get("app") == quorum.APP:
            node = new["spec"].get("nodeName")
            if node and (event == "DELETED" or new["metadata"].get("deletionTimestamp")):
                self.members_left.setdefault(node, (now, evicted(new)))


@pytest.fixture
async def fleet(tmp_path: Path, request: pytest.FixtureRequest, deb: Path) -> Any:
    require_real_node()
    real = request.getfixturevalue("real_plane")
    async with real_fleet(tmp_path, real.binaries, real.etcd_url, deb, SETTINGS) as f:
        yield f


async def require_reboot_everywhere(f: Fleet) -> None:
    """Debian's reboot-required sentinel written on the three nodes at the same moment."""
    await asyncio.gather(*(n.container.exec("touch", "/var/run/reboot-required") for n in f.nodes))


async def all_back(f: Fleet) -> float:
    """Until every node rebooted once and the fleet settled, its maintenances gone."""
    await f.view.until(lambda: all(n.reboots() == 1 for n in f.nodes), timeout=600)
    await f.view.until(f.settled, timeout=240)
    await f.view.until(lambda: not f.view.list(NODEMAINTENANCES), timeout=120)
    return time.monotonic()


async def test_sentinel_on_every_node_reboots_them_one_at_a_time_drained(fleet: Fleet) -> None:
    f = fleet
    seen = Timeline()
    f.view.listen(seen.record)
    async with quorum.writing(f.endpoints) as writer:
        await require_reboot_everywhere(f)
        ended = await all_back(f)
    await rolled_one_at_a_time_drained(f, seen, writer, ended)


async def test_a_gate_that_errors_holds_the_fleet_and_an_agent_killed_mid_drain(
    fleet: Fleet,
) -> None:
    """Prometheus (on the host) answers garbage: nobody is admitted, the maintenances say why;
    once it answers, the first node admitted has its agent SIGKILLed at its cordon, mid-drain
    (systemd starts it again): the fleet still rolls one node at a time, drained."""
    f = fleet
    seen = Timeline()
    f.view.listen(seen.record)
    async with prometheus_server(HOST) as prometheus:
        prometheus.body = b"<html>not Prometheus</html>"
        gates = {"podsReady": [QUORUM_GATE], "prometheus": {"url": prometheus.url,
                 "interval": 1, "timeout": 1}}  # fmt: skip
        await reconfigure(f, {"nodeMaintenance": {"maxDrainingNodes": 1, "gates": gates}})
        async with quorum.writing(f.endpoints) as writer:
            await require_reboot_everywhere(f)
            # the controllers' leader reads the garbage, again and again, and says so
            await prometheus.until_requests(3, timeout=120)
            await f.view.until(
                lambda: any(prometheus.url in json.dumps(m.get("status") or {})
                            for m in f.view.list(NODEMAINTENANCES)),
                timeout=60,
            )  # fmt: skip
            assert not seen.cordoned, seen.cordoned  # held: no node admitted
            prometheus.body = None  # a Prometheus with no alerts
            await f.view.until(lambda: bool(seen.cordoned), timeout=120)
            (first,) = seen.cordoned
            await f.node(first).container.exec("systemctl", "kill", "--signal=SIGKILL", "nodeagent")
            assert first not in seen.drained, "killed after its drain, not during it"
            ended = await all_back(f)
    await rolled_one_at_a_time_drained(f, seen, writer, ended)


async def reconfigure(f: Fleet, settings: dict[str, Any]) -> None:
    """Every agent restarted with `settings` over the fleet's."""
    for n in f.nodes:
        config = n.container.path("/etc/nodeagent/config.yaml")
        doc = yaml.safe_load(config.read_text())
        for section, values in settings.items():
            doc[section] = {**doc.get(section, {}), **values}
        config.write_text(yaml.safe_dump(doc))
    await asyncio.gather(*(n.container.exec("systemctl", "restart", "nodeagent") for n in f.nodes))


async def rolled_one_at_a_time_drained(
    f: Fleet, seen: Timeline, writer: quorum.Writer, ended: float
) -> None:
    read = await quorum.read_back(f.endpoints)
    # each node rebooted once, and only once the drain was done: its member evicted (the
    # budget decided) and its maintenance Drained before its container went down
    for n in f.nodes:
        assert n.reboots() == 1, (n.name, n.exits)
        down = n.exits[0][0]
        assert seen.drained.get(n.name, down + 1) < down, (n.name, seen.drained, down)
        left_at, by_eviction = seen.members_left[n.name]
        assert by_eviction and left_at < down, (n.name, seen.members_left)
    # one at a time: no node cordoned before the one before it was back up
    order = sorted(f.nodes, key=lambda n: n.exits[0][0])
    for before, after in itertools.pairwise(order):
        assert seen.cordoned[after.name] > before.boots[1], (before.name, after.name)
    # etcd kept its quorum all along and lost nothing it acknowledged
    assert writer.quorum_lost_s(ended) == 0, writer.longest_gap(ended)
    missing = set(writer.acknowledged) - read
    assert not missing, f"{len(missing)} acknowledged writes lost"
    assert sorted(n.name for n in order) == sorted(NAMES)
