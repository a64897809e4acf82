"""eviction.bridge.clientCaFile on the real control plane: kube-apiserver started with an
AdmissionConfiguration whose WebhookAdmissionConfiguration names a kubeConfigFile with a client
certificate for the webhook's host (``localhost:<port>``, as the webhook's URL names it). The
bridge asks for a certificate of that CA: kube-apiserver's evictions get the bridge's answers,
while a forged review from a client without the certificate (the attacker of issue 34) is
refused in the TLS handshake and asks for nothing.

This control plane is the test's own (its backend fixture): the admission configuration is a
flag of kube-apiserver, read when it starts."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest
import yaml

from nodeagent.bridge.server import Listen
from nodeagent.bridge.webhook import PATH
from nodeagent.kube.errors import TooManyRequests
from nodeagent_testbed.controlplane.cluster import (
    ClusterError,
    ControlPlane,
    etcd_prefix,
    free_port,
)
from tests.clusters import RealBackend, TestCluster
from tests.conftest import Kubectl, RealPlane
from tests.integration.bridge.clientcerts import ClientCA
from tests.integration.bridge.realbridge import EVICTION, HOST, register, served
from tests.integration.bridge.test_forged_reviews import forged
from tests.integration.upstream.common import pinned_pod
from tests.integration.upstream.drainenv import Env, env

__all__ = ["env"]  # the fixture, re-exported for pytest

pytestmark = [pytest.mark.backends("real"), pytest.mark.timeout(180)]


@dataclass(frozen=True)
class WebhookClient:
    """The CA the bridge trusts, and the port the bridge will listen on (the kubeconfig
    names the webhook's host with its port, before kube-apiserver starts)."""

    ca: ClientCA
    port: int


@pytest.fixture
def webhook_client(tmp_path: Path) -> WebhookClient:
    d = tmp_path / "webhook-client"
    d.mkdir()
    return WebhookClient(ClientCA(d), free_port())


def admission_configuration(tmp_path: Path, client: WebhookClient) -> Path:
    """The AdmissionConfiguration and the kubeConfigFile it names: kube-apiserver's client
    certificate for the webhook at ``localhost:<port>``."""
    pair = client.ca.client("kube-apiserver")
    kubeconfig = tmp_path / "webhook-kubeconfig.yaml"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "users": [
                    {
                        "name": f"{HOST}:{client.port}",
                        "user": {
                            "client-certificate": str(pair.cert),
                            "client-key": str(pair.key),
                        },
                    }
                ],
            }
        )
    )
    config = tmp_path / "admission-configuration.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "apiserver.config.k8s.io/v1",
                "kind": "AdmissionConfiguration",
                "plugins": [
                    {
                        "name": "ValidatingAdmissionWebhook",
                        "configuration": {
                            "apiVersion": "apiserver.config.k8s.io/v1",
                            "kind": "WebhookAdmissionConfiguration",
                            "kubeConfigFile": str(kubeconfig),
                        },
                    }
                ],
            }
        )
    )
    return config


@pytest.fixture
async def backend(
    request: pytest.FixtureRequest, tmp_path: Path, webhook_client: WebhookClient
) -> AsyncIterator[TestCluster]:
    """The conftest's real backend, its kube-apiserver with the admission configuration."""
    assert request.param == "real"
    real: RealPlane = request.getfixturevalue("real_plane")
    config = admission_configuration(tmp_path, webhook_client)
    plane = ControlPlane(tmp_path / "controlplane")
    flags = (f"--admission-control-config-file={config}",)
    try:
        await asyncio.to_thread(
            lambda: plane.up(3, real.binaries, real.etcd_url, etcd_prefix(), apiserver_args=flags)
        )
    except (ClusterError, TimeoutError) as e:
        await asyncio.to_thread(plane.down)
        pytest.fail(f"the real control plane did not start: {e}", pytrace=False)
    b = RealBackend(plane.kubeconfig, ["node-1", "node-2", "node-3"], plane.dir / "pki")
    try:
        yield b
    finally:
        await b.close_clients()
        await asyncio.to_thread(plane.down)


async def test_only_kube_apiserver_with_its_client_certificate_is_answered(
    env: Env, kubectl: Kubectl, webhook_client: WebhookClient
) -> None:
    await env.lead("nodeagent", annotate=EVICTION.annotate_interceptors)
    probe = await pinned_pod(env.admin, "probe", "node-3", app="probe")
    db = await pinned_pod(env.admin, "db-0", "node-1", app="db")  # the mover's: it waits
    listen = Listen("127.0.0.1", webhook_client.port)
    async with served(env.backend, EVICTION, listen, webhook_client.ca.pem) as bridge:
        # kube-apiserver's calls are answered (register waits for one: a dry run)
        await register(env.admin, kubectl, bridge, ("default", probe["metadata"]["name"]))
        md = db["metadata"]
        await env.until(lambda: bridge.cached("default", md["name"], md["uid"]))
        with pytest.raises(TooManyRequests) as refused:
            await env.admin.evict("default", "db-0")
        assert "pod default/db-0 waits for interceptor mover.example.com" in str(refused.value)
        answered = bridge.answered
        # the attacker, without the certificate: refused in the handshake
        url = f"https://127.0.0.1:{webhook_client.port}{PATH}"
        async with aiohttp.ClientSession() as session:
            with pytest.raises(aiohttp.ClientError):
                async with asyncio.timeout(10):
                    async with session.post(url, json=forged("default", "db-0"), ssl=False) as r:
                        await r.read()
        # no review read, so nothing decided or asked for
        assert bridge.answered == answered
