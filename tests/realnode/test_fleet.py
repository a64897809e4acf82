"""Fleet reboots on three real nodes (issue 35): every node asks to reboot at the same moment
(Debian's reboot-required sentinel), and nodeagent reboots them one at a time, each drained
before it goes down, while a three-member etcd under `maxUnavailable: 1` keeps its quorum and
loses no acknowledged write; every node comes back, uncordoned, its static pod running again.
The agents run both parts on the three nodes: the controllers' leader reboots too."""

from __future__ import annotations

import asyncio
import itertools
import time
from pathlib import Path
from typing import Any

import pytest

from nodeagent.kube.resources import NODEMAINTENANCES, NODES, PODS, Resource
from nodeagent.model.names import NODE_LABEL
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


async def test_sentinel_on_every_node_reboots_them_one_at_a_time_drained(fleet: Fleet) -> None:
    f = fleet
    seen = Timeline()
    f.view.listen(seen.record)
    async with quorum.writing(f.endpoints) as writer:
        await asyncio.gather(
            *(n.container.exec("touch", "/var/run/reboot-required") for n in f.nodes)
        )
        await f.view.until(lambda: all(n.reboots() == 1 for n in f.nodes), timeout=600)
        await f.view.until(f.settled, timeout=240)
        await f.view.until(lambda: not f.view.list(NODEMAINTENANCES), timeout=120)
        ended = time.monotonic()
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
