"""The eviction bridge as every controllers replica runs it, leader or not: informers of its
own, its certificates kept current (:class:`.certstore.CertKeeper`), and the webhook served
over HTTPS once both the caches and a certificate are there, with KEP-4212's NodeMaintenance
warning beside it (:mod:`.maintenances`). Until then the port is closed and
the API server applies the webhook's failurePolicy (Ignore): an eviction is never answered from
an empty cache."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import ssl
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import Protocol

from aiohttp import web

from nodeagent.bridge.certs import Bundle
from nodeagent.bridge.certstore import CertClient, CertKeeper, TLSPlace
from nodeagent.bridge.listener import IDLE_TIMEOUT, LimitedListener
from nodeagent.bridge.maintenances import PATH as MAINTENANCES_PATH
from nodeagent.bridge.maintenances import MaintenanceAdmission
from nodeagent.bridge.webhook import WRITE_TIMEOUT, BridgeClient, EvictionBridge
from nodeagent.config import Config
from nodeagent.config.eviction_settings import eviction_settings
from nodeagent.kube.controller import SharedInformers
from nodeagent.kube.discovery import ask_served, runs_lifecycle_here
from nodeagent.kube.informer import ListWatcher
from nodeagent.kube.resources import UPSTREAM_EVICTIONREQUESTS
from nodeagent.model.bridge.decision import ASKED_AGAIN_WITHIN, BridgeSettings
from nodeagent.model.interceptors.settings import EvictionSettings
from nodeagent.model.lifecycle.ourresponders import ResponderNames
from nodeagent.model.times import Clock, utcnow
from nodeagent.observability.metrics import BridgeMetrics

__all__ = [
    "CONTROLLERS_ACCOUNT",
    "BridgeServer",
    "BridgeServerClient",
    "Listen",
    "bridge_from_config",
    "bridge_settings",
    "service_account_user",
]

log = logging.getLogger(__name__)

# the controllers' ServiceAccount in packaging/kubernetes (rbac.yaml), in leader.namespace
CONTROLLERS_ACCOUNT = "nodeagent-controllers"


class BridgeServerClient(BridgeClient, CertClient, ListWatcher, Protocol):
    """Everything the bridge asks of the API server."""


@dataclass(frozen=True)
class Listen:
    host: str = "0.0.0.0"  # the webhook Service reaches the pod on its address
    port: int = 8443
    idle_timeout: float = IDLE_TIMEOUT
    """Seconds a new connection has for its TLS handshake, then for its first request."""


def service_account_user(namespace: str, name: str) -> str:
    """The username the API server gives a ServiceAccount's tokens (what an AdmissionReview's
    ``userInfo.username`` says of the controllers' own evictions)."""
    return f"system:serviceaccount:{namespace}:{name}"


def bridge_settings(
    eviction: EvictionSettings,
    own_users: Iterable[str],
    *,
    daemonset_pods: bool = False,
    static_pods: bool = False,
    asked_again_within: timedelta = ASKED_AGAIN_WITHIN,
) -> BridgeSettings:
    """The bridge's settings: the annotate-and-wait interceptors it waits for are the ones the
    EvictionRequest controller runs."""
    return BridgeSettings(
        own_users=frozenset(own_users),
        configured=eviction.configured,
        daemonset_pods=daemonset_pods,
        static_pods=static_pods,
        asked_again_within=asked_again_within,
    )


class BridgeServer:
    """Run with :meth:`run` until cancelled; :attr:`serving` is set once the webhook listens
    (:attr:`port` then says where, also when asked for port 0)."""

    def __init__(
        self,
        client: BridgeServerClient,
        settings: BridgeSettings,
        place: TLSPlace,
        listen: Listen = Listen(),
        *,
        clock: Clock = utcnow,
        write_timeout: float = WRITE_TIMEOUT,
        informers: SharedInformers | None = None,
        eviction_api: str = "nodeagent",
        lifecycle_controller: str = "auto",
        metrics: BridgeMetrics | None = None,
        client_ca: bytes | None = None,
    ) -> None:
        """`eviction_api`: `eviction.api` (auto: ask on the upstream API where the server
        serves it, as the leader does). `client_ca`: PEM of the CA(s) a client's certificate
        must be signed by (`eviction.bridge.clientCaFile`); None: no client certificate asked
        for. Raises ValueError when it holds no certificate."""
        self._client = client
        self._eviction_api = eviction_api
        self._lifecycle_controller = lifecycle_controller
        self.informers = informers if informers is not None else SharedInformers(client)
        self.bridge = EvictionBridge(
            client,
            self.informers,
            settings,
            clock=clock,
            write_timeout=write_timeout,
            metrics=metrics,
        )
        self.admission = MaintenanceAdmission(self.bridge.nodes)
        self.keeper = CertKeeper(client, self.informers, place, self._load, clock=clock)
        self.listen = listen
        self._context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._context.minimum_version = ssl.TLSVersion.TLSv1_2
        if client_ca is not None:
            # kube-apiserver's client certificate (its AdmissionConfiguration's kubeConfigFile):
            # anything else is refused in the handshake, before a byte of a review is read
            self._context.verify_mode = ssl.CERT_REQUIRED
            try:
                self._context.load_verify_locations(cadata=client_ca.decode("ascii"))
            except (ssl.SSLError, UnicodeDecodeError) as exc:
                raise ValueError(f"not a PEM certificate: {exc}") from None
        self._loaded = asyncio.Event()
        self._dir: Path | None = None
        self.serving = asyncio.Event()
        self.port: int | None = None
        self.listener: LimitedListener | None = None

    async def _load(self, bundle: Bundle) -> None:
        """Serve ``bundle``'s certificate from the next handshake on (the context is shared by
        every connection; a loaded chain replaces the last)."""
        await asyncio.to_thread(self._load_files, bundle)
        self._loaded.set()
        log.info("eviction bridge: serving certificate loaded")

    def _load_files(self, bundle: Bundle) -> None:
        # load_cert_chain reads files only: a private directory, files readable by us alone
        if self._dir is None:
            self._dir = Path(tempfile.mkdtemp(prefix="nodeagent-bridge-"))
        cert, key = self._dir / "tls.crt", self._dir / "tls.key"
        for path, data in ((cert, bundle.cert), (key, bundle.key)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        self._context.load_cert_chain(cert, key)

    async def run(self) -> None:
        if self._eviction_api != "nodeagent":
            required = "eviction.api is upstream; the eviction bridge waits for lifecycle.k8s.io"
            insist = self._eviction_api == "upstream"
            if await ask_served(
                self._client, UPSTREAM_EVICTIONREQUESTS, required=required if insist else None
            ):
                ours = await runs_lifecycle_here(self._client, self._lifecycle_controller)
                self.bridge.use_upstream(
                    ResponderNames(self.bridge.settings.configured, listed_by_us=ours)
                )
                log.info("eviction bridge: asking for evictions on lifecycle.k8s.io/v1alpha1")
        app = self.bridge.app()
        app.router.add_post(MAINTENANCES_PATH, self.admission.handle)
        runner = web.AppRunner(app, access_log=None)
        try:
            async with asyncio.TaskGroup() as tg:
                tg.create_task(self.informers.run(), name="bridge informers")
                tg.create_task(self.keeper.run(), name="bridge certificates")
                await self._loaded.wait()
                await self.bridge.wait_synced()
                await runner.setup()
                assert runner.server is not None
                listener = LimitedListener(
                    runner.server, self._context, idle_timeout=self.listen.idle_timeout
                )
                listener.bind(self.listen.host, self.listen.port)
                self.listener = listener
                self.port = listener.port
                tg.create_task(listener.serve(), name="bridge listener")
                self.serving.set()
                log.info("eviction bridge: serving on port %s", self.port)
        finally:
            await runner.cleanup()
            if self._dir is not None:
                with contextlib.suppress(OSError):
                    await asyncio.to_thread(shutil.rmtree, self._dir)


def bridge_from_config(
    client: BridgeServerClient, cfg: Config, metrics: BridgeMetrics | None = None
) -> BridgeServer:
    """The bridge as configured (``eviction.bridge``), in the controllers' namespace
    (``leader.namespace``, where their Lease, Secret and Service are). Raises ValueError naming
    a bad ``eviction.annotateInterceptors`` entry, or an ``eviction.bridge.clientCaFile`` that
    cannot be read or holds no certificate."""
    bridge = cfg.eviction.bridge
    namespace = cfg.leader.namespace
    own = (service_account_user(namespace, CONTROLLERS_ACCOUNT), *bridge.own_users)
    settings = bridge_settings(
        eviction_settings(cfg.eviction),
        own,
        daemonset_pods=bridge.daemon_set_pods,
        static_pods=bridge.static_pods,
        asked_again_within=timedelta(seconds=bridge.asked_again_within),
    )
    place = replace(
        TLSPlace.shipped(namespace),
        webhook_configuration=bridge.webhook_configuration,
        provided=bridge.certificates == "provided",
    )
    return BridgeServer(
        client,
        settings,
        place,
        Listen(port=bridge.port),
        eviction_api=cfg.eviction.api,
        lifecycle_controller=cfg.eviction.lifecycle_controller,
        metrics=metrics,
        client_ca=_client_ca(bridge.client_ca_file),
    )


def _client_ca(path: Path | None) -> bytes | None:
    """``eviction.bridge.clientCaFile``'s PEM, checked; ValueError naming the setting."""
    if path is None:
        return None
    try:
        pem = path.read_bytes()
        if not pem.strip():
            raise ValueError("the file is empty")
        ssl.create_default_context(cadata=pem.decode("ascii"))
    except (ssl.SSLError, UnicodeDecodeError, ValueError) as exc:  # SSLError before OSError
        raise ValueError(
            f"eviction.bridge.clientCaFile: {path}: not a PEM certificate ({exc})"
        ) from None
    except OSError as exc:
        raise ValueError(f"eviction.bridge.clientCaFile: {path}: {exc.strerror or exc}") from None
    return pem
