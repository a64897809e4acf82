"""KEP-4212's admission warning on the real control plane, with the real `kubectl`: the bridge's
webhook configuration sends NodeMaintenance creations to every controllers replica, which
allows each and warns of one that selects every node (kubectl prints it). Hostile cases: the
bridge down, or hanging, costs a maintenance at most the webhook's 2 s and never refuses it; a
review forged straight to the port (no credentials) is answered and writes nothing; one that is
not a review gets 400."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator

import aiohttp
import pytest

from nodeagent.bridge.maintenances import PATH
from nodeagent.kube.errors import NotFound
from nodeagent.kube.resources import NODEMAINTENANCES, Obj
from tests.conftest import Kubectl
from tests.integration.bridge.realbridge import EVICTION, RealBridge, hanging, register, served
from tests.integration.upstream.common import pinned_pod
from tests.integration.upstream.drainenv import Env, env

__all__ = ["env"]  # the fixture, re-exported for pytest

pytestmark = [pytest.mark.backends("real"), pytest.mark.timeout(120)]

EVERY_NODE = {"matchExpressions": [{"key": "example.com/absent", "operator": "DoesNotExist"}]}
NODE_1 = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}


def maintenance(name: str, term: Obj) -> Obj:
    return {
        "apiVersion": "nodeagent.io/v1alpha1",
        "kind": "NodeMaintenance",
        "metadata": {"name": name},
        # Idle, and no controllers run here: nothing acts on it
        "spec": {"stage": "Idle", "reason": "test", "nodeSelector": {"nodeSelectorTerms": [term]}},
    }


@pytest.fixture
async def bridge(env: Env, kubectl: Kubectl) -> AsyncIterator[RealBridge]:
    """The bridge alone (no leader: nothing acts on the maintenances), its webhooks called."""
    probe = await pinned_pod(env.admin, "probe", "node-3", app="probe")
    async with served(env.backend, EVICTION) as b:
        await register(env.admin, kubectl, b, ("default", probe["metadata"]["name"]))
        yield b


async def create(kubectl: Kubectl, nm: Obj) -> str:
    """``kubectl create`` of ``nm``; what it printed on stderr (its warnings)."""
    result = await kubectl.run("create", "-f", "-", stdin=json.dumps(nm), timeout=30)
    assert result.code == 0, result.err + result.out
    return result.err


async def test_kubectl_prints_the_warning_for_a_maintenance_of_every_node(
    env: Env, bridge: RealBridge, kubectl: Kubectl
) -> None:
    err = await create(kubectl, maintenance("everything", EVERY_NODE))
    assert "Warning: nodeagent: NodeMaintenance everything: The maintenance selects every node" in (
        err
    ), err
    assert await env.admin.get(NODEMAINTENANCES, "everything")  # allowed
    assert "Warning" not in await create(kubectl, maintenance("one-node", NODE_1))


async def test_the_bridge_down_or_hanging_never_holds_a_maintenance(
    env: Env, bridge: RealBridge, kubectl: Kubectl
) -> None:
    port = bridge.server.port
    assert port is not None
    await bridge.stop()  # its port closed: failurePolicy Ignore
    assert "Warning" not in await create(kubectl, maintenance("while-down", EVERY_NODE))
    async with hanging(port) as hang:
        started = time.monotonic()
        await create(kubectl, maintenance("while-hung", EVERY_NODE))
        took = time.monotonic() - started
    assert hang.calls >= 1  # the API server did call it
    assert took < 15, took  # its timeoutSeconds (2), then Ignore
    assert await env.admin.get(NODEMAINTENANCES, "while-hung")


def forged(name: str) -> Obj:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "forged-1",
            "kind": {"group": "nodeagent.io", "version": "v1alpha1", "kind": "NodeMaintenance"},
            "resource": {
                "group": "nodeagent.io",
                "version": "v1alpha1",
                "resource": "nodemaintenances",
            },
            "name": name,
            "operation": "CREATE",
            "userInfo": {"username": "mallory"},
            "object": maintenance(name, EVERY_NODE),
        },
    }


async def test_a_forged_review_is_answered_and_writes_nothing(env: Env, bridge: RealBridge) -> None:
    url = f"https://127.0.0.1:{bridge.server.port}{PATH}"
    async with aiohttp.ClientSession() as session:
        async with session.post(url, json=forged("forged"), ssl=False) as response:
            assert response.status == 200
            answer = (await response.json())["response"]
        async with session.post(url, data=b"{not json", ssl=False) as response:
            assert response.status == 400  # the API server would apply failurePolicy Ignore
    assert answer["uid"] == "forged-1" and answer["allowed"] is True
    assert "selects every node" in answer["warnings"][0]
    with pytest.raises(NotFound):  # an answer only: nothing was made of it
        await env.admin.get(NODEMAINTENANCES, "forged")
