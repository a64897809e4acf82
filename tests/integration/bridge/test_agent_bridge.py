"""The bridge as `nodeagent run` wires it (app.py): two controllers-only agents, as the
Deployment's replicas, with `eviction.bridge.enabled`, on the real control plane as the
controllers' ServiceAccount with the RBAC of packaging/kubernetes and its eviction-bridge
component. One leads; both serve the webhook (each is Ready only then), from one certificate in
the shared Secret, and the shipped ValidatingWebhookConfiguration gets its CA."""

from __future__ import annotations

import asyncio
import base64
import socket
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
import yaml

from nodeagent.app import Agent
from nodeagent.bridge.certs import CA_CRT, service_names
from nodeagent.bridge.certstore import SECRET, SERVICE, WEBHOOK_CONFIGURATION
from nodeagent.bridge.webhook import PATH
from nodeagent.config import from_mapping
from nodeagent.kube.errors import NotFound
from nodeagent.kube.resources import SECRETS, WEBHOOK_CONFIGURATIONS, Obj
from tests.clusters import CONTROLLERS_ACCOUNT, NAMESPACE, ClusterView, TestCluster, apply_files
from tests.integration.bridge.realbridge import BRIDGE_DIR, served_certificate
from tests.tasks import cancel_and_wait
from tests.until import until

pytestmark = [pytest.mark.backends("real"), pytest.mark.timeout(120)]


def free_port() -> int:
    """A port nothing listens on now (the agent binds it a moment later)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def config(kubeconfig: Path, port: int) -> dict[str, object]:
    return {
        "runNodeAgent": False,
        "runControllers": True,
        "kube": {"kubeconfig": str(kubeconfig)},
        "leader": {"leaseDuration": 2.0, "renewDeadline": 1.5, "retryPeriod": 0.25},
        "eviction": {"bridge": {"enabled": True, "port": port}},
        "observability": {"listen": "127.0.0.1:0"},
    }


@pytest.fixture
async def agents(backend: TestCluster) -> AsyncIterator[list[tuple[Agent, int]]]:
    await backend.install_crds()
    account = await backend.service_account(CONTROLLERS_ACCOUNT)
    await asyncio.to_thread(apply_files, backend.kubeconfig, [BRIDGE_DIR / "rbac.yaml"])
    admin = backend.client()
    (shipped,) = [d for d in yaml.safe_load_all((BRIDGE_DIR / "webhook.yaml").read_text()) if d]
    await admin.create(WEBHOOK_CONFIGURATIONS, shipped)
    out, tasks = [], []
    for pod in ("controllers-a", "controllers-b"):
        port = free_port()
        agent = Agent(from_mapping(config(account, port)), env={"POD_NAME": pod})
        tasks.append(asyncio.create_task(agent.run()))
        out.append((agent, port))
    try:
        yield out
    finally:
        await cancel_and_wait(tasks)


async def secret_ca(backend: TestCluster) -> str | None:
    try:
        secret: Obj = await backend.client().get(SECRETS, SECRET, NAMESPACE)
    except NotFound:
        return None
    return str(secret["data"][CA_CRT])


async def served_by(port: int, ca_b64: str) -> bytes:
    """The certificate the bridge on ``port`` serves, verified against the Secret's CA for the
    Service's name (DER)."""
    trust = ssl.create_default_context(cadata=base64.b64decode(ca_b64).decode())
    return await served_certificate(port, trust, service_names(SERVICE, NAMESPACE)[-1])


def leading(agent: Agent) -> bool:
    return agent.elector is not None and agent.elector.is_leader


async def test_every_replica_serves_the_webhook_and_the_ca_is_put_in_place(
    backend: TestCluster, agents: list[tuple[Agent, int]]
) -> None:
    (a, a_port), (b, b_port) = agents
    await until(lambda: leading(a) or leading(b), timeout=30)
    assert not (leading(a) and leading(b))
    # each replica is Ready once its bridge serves, leader or not
    await until(lambda: not a.health.failing() and not b.health.failing(), timeout=60)
    ca = await secret_ca(backend)
    assert ca is not None
    # one certificate for both, trusted by the CA in the Secret
    assert await served_by(a_port, ca) == await served_by(b_port, ca)

    # and the shipped webhook configuration trusts it
    view = ClusterView(backend.client(), [WEBHOOK_CONFIGURATIONS])
    await view.start()
    try:

        def ca_bundle() -> str | None:
            cfg = view.get(WEBHOOK_CONFIGURATIONS, WEBHOOK_CONFIGURATION) or {"webhooks": [{}]}
            bundle = (cfg["webhooks"][0].get("clientConfig") or {}).get("caBundle")
            return str(bundle) if bundle else None

        await view.until(lambda: ca_bundle() == ca, timeout=30)
    finally:
        await view.stop()

    # its answers are in the agent's metrics (what /metrics serves)
    trust = ssl.create_default_context(cadata=base64.b64decode(ca).decode())
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"https://127.0.0.1:{a_port}{PATH}",
            json={"kind": "Pod"},
            ssl=trust,
            server_hostname=service_names(SERVICE, NAMESPACE)[-1],
        ) as response,
    ):
        assert response.status == 400
    sample = ("nodeagent_eviction_bridge_answers_total", {"answer": "unreadable"})
    assert a.registry.get_sample_value(*sample) == 1
    assert b.registry.get_sample_value(*sample) is None
