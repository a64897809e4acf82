"""The eviction bridge served to a real kube-apiserver on this host: the bridge runs as the
controllers' ServiceAccount (RBAC of packaging/kubernetes and its eviction-bridge component), on
loopback, and the webhook of eviction-bridge/webhook.yaml is registered with a URL to it and
the CA the bridge keeps in its Secret (the shipped one names the Service, which a control plane
without pods cannot reach). Shared by the real drain tests and the benchmark."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import yaml

from nodeagent.bridge.certs import CA_CRT, encode_secret, service_names
from nodeagent.bridge.certstore import SECRET, SERVICE, TLSPlace
from nodeagent.bridge.server import (
    CONTROLLERS_ACCOUNT,
    BridgeServer,
    Listen,
    bridge_settings,
    service_account_user,
)
from nodeagent.config import AnnotateInterceptor, EvictionConfig
from nodeagent.config.eviction_settings import eviction_settings
from nodeagent.kube.client import KubeClient
from nodeagent.kube.errors import NotFound
from nodeagent.kube.resources import WEBHOOK_CONFIGURATIONS, Obj
from tests.clusters import NAMESPACE, TestCluster, apply_files
from tests.conftest import Kubectl

__all__ = [
    "BRIDGE_DIR",
    "EVICTION",
    "HOST",
    "LOOPBACK",
    "MOVER",
    "ROLLER",
    "RealBridge",
    "hanging",
    "register",
    "served",
    "served_certificate",
    "unregister",
    "until_serving",
]

BRIDGE_DIR = Path(__file__).resolve().parents[3] / "packaging" / "kubernetes" / "eviction-bridge"
# the URL's host: the serving certificate names it besides the Service's names
HOST = "localhost"
# an annotate-and-wait interceptor for the pods of app=db (the Eviction Reschedule Hook)
MOVER = AnnotateInterceptor(
    name="mover.example.com",
    pod_selector={"matchLabels": {"app": "db"}},
    annotation_key="example.com/reschedule",
)
# Strimzi's Drain Cleaner asks its operator for a rolling update of a Kafka broker's pod, which
# the operator deletes and its StatefulSet makes again, under the same name, elsewhere
ROLLER = AnnotateInterceptor(
    name="drain-cleaner.strimzi.io",
    pod_selector={"matchLabels": {"app": "kafka"}},
    annotation_key="strimzi.io/manual-rolling-update",
)
EVICTION = EvictionConfig(api="nodeagent", annotate_interceptors=(MOVER, ROLLER))
LOOPBACK = Listen("127.0.0.1", 0)


@dataclass
class RealBridge:
    server: BridgeServer
    task: asyncio.Task[None]

    @property
    def answered(self) -> int:
        return int(sum(self.server.bridge.metrics.answered().values()))

    def cached(self, namespace: str, name: str, uid: str) -> bool:
        pod = self.server.bridge.pods.store.get(f"{namespace}/{name}")
        return pod is not None and pod["metadata"]["uid"] == uid

    async def stop(self) -> None:
        """The bridge's process gone: its port closed."""
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


@contextlib.asynccontextmanager
async def served(
    backend: TestCluster,
    eviction: EvictionConfig,
    listen: Listen = LOOPBACK,
    client_ca: bytes | None = None,
) -> AsyncIterator[RealBridge]:
    """The bridge as the controllers' ServiceAccount, serving once its caches and certificate
    are there (call after the CRDs are installed); with ``client_ca``, to clients with a
    certificate that CA signed only (``eviction.bridge.clientCaFile``)."""
    account = await backend.service_account(CONTROLLERS_ACCOUNT)
    await asyncio.to_thread(apply_files, backend.kubeconfig, [BRIDGE_DIR / "rbac.yaml"])
    client = backend.client(account, max_workers=8)
    own = [service_account_user(NAMESPACE, CONTROLLERS_ACCOUNT)]
    settings = bridge_settings(eviction_settings(eviction), own)
    names = (*service_names(SERVICE, NAMESPACE), HOST)
    place = TLSPlace(NAMESPACE, SECRET, SERVICE, names, None)
    server = BridgeServer(
        client, settings, place, listen, eviction_api=eviction.api, client_ca=client_ca
    )
    task = asyncio.create_task(server.run(), name="eviction-bridge")
    bridge = RealBridge(server, task)
    try:
        await until_serving(server, task)
        yield bridge
    finally:
        await bridge.stop()


async def until_serving(server: BridgeServer, task: asyncio.Task[None]) -> None:
    """Until ``server`` (run by ``task``) serves; what stopped it if it did not."""
    async with asyncio.timeout(30):
        serving = asyncio.create_task(server.serving.wait())
        await asyncio.wait({task, serving}, return_when=asyncio.FIRST_COMPLETED)
        serving.cancel()
    if task.done():
        task.result()  # raises what stopped it


async def served_certificate(port: int, trust: ssl.SSLContext, name: str) -> bytes:
    """The certificate (DER) a new TLS connection to ``port`` on loopback is served, verified
    with ``trust`` for host ``name``."""
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=trust, server_hostname=name)
    try:
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    finally:
        writer.close()
        with contextlib.suppress(ssl.SSLError, ConnectionError):
            await writer.wait_closed()
    assert isinstance(der, bytes)
    return der


class Hang:
    """Connections taken on a port and never answered (nor TLS): a peer that hangs."""

    def __init__(self) -> None:
        self.calls = 0

    async def take(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.calls += 1
        try:
            await reader.read()  # until the caller gives up and closes
        finally:
            writer.close()


@contextlib.asynccontextmanager
async def hanging(port: int) -> AsyncIterator[Hang]:
    """A peer that hangs on loopback ``port`` (the bridge's, once it stopped)."""
    hang = Hang()
    server = await asyncio.start_server(hang.take, "127.0.0.1", port)
    try:
        yield hang
    finally:
        server.close()


def webhook_configuration(bridge: RealBridge) -> Obj:
    """The shipped configuration, calling the bridge on loopback and trusting its CA."""
    (shipped,) = [d for d in yaml.safe_load_all((BRIDGE_DIR / "webhook.yaml").read_text()) if d]
    config: Obj = copy.deepcopy(shipped)
    bundle = bridge.server.keeper.bundle
    assert bundle is not None and bridge.server.port is not None
    for webhook in config["webhooks"]:
        path = webhook["clientConfig"]["service"]["path"]
        url = f"https://{HOST}:{bridge.server.port}{path}"
        webhook["clientConfig"] = {"url": url, "caBundle": encode_secret(bundle)[CA_CRT]}
    return config


async def register(
    admin: KubeClient, kubectl: Kubectl, bridge: RealBridge, probe: tuple[str, str]
) -> None:
    """Register the webhook and return once kube-apiserver calls it: a dry-run eviction of
    ``probe`` (namespace, name: a pod without interceptors, which the dry run leaves) reaches
    the bridge. The API server reads webhook configurations from its own informer: nothing of
    it to wait on but its calls."""
    await admin.create(WEBHOOK_CONFIGURATIONS, webhook_configuration(bridge))
    namespace, name = probe
    body = json.dumps({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}})
    url = f"/api/v1/namespaces/{namespace}/pods/{name}/eviction?dryRun=All"
    before = bridge.answered
    async with asyncio.timeout(30):
        while bridge.answered == before:
            await kubectl.ok("create", "--raw", url, "-f", "-", stdin=body)


async def unregister(admin: KubeClient, name: str) -> None:
    with contextlib.suppress(NotFound):
        await admin.delete(WEBHOOK_CONFIGURATIONS, name)
