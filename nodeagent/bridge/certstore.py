"""The webhook's certificates kept in a Secret every controllers replica shares (create or
read: the first replica makes them, the others read them), renewed before they expire, and the
CA bundle put into the ValidatingWebhookConfiguration. The decisions are in :mod:`.certs`."""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from nodeagent.bridge.certs import (
    CA_CRT,
    Bundle,
    decode_provided,
    decode_secret,
    encode_secret,
    inspect,
    renew,
    renew_at,
    renewal,
    service_names,
)
from nodeagent.kube.controller import SharedInformers
from nodeagent.kube.errors import AlreadyExists, Conflict, KubeError, NotFound
from nodeagent.kube.protocols import Creator, Getter, Patcher, Replacer
from nodeagent.kube.resources import SECRETS, WEBHOOK_CONFIGURATIONS, Obj
from nodeagent.model.bodies import items, mapping, metadata_of
from nodeagent.model.times import Clock, utcnow

__all__ = [
    "SECRET",
    "SERVICE",
    "WEBHOOK_CONFIGURATION",
    "CertClient",
    "CertKeeper",
    "TLSPlace",
    "ca_bundle_patch",
    "ensure_bundle",
]

log = logging.getLogger(__name__)

# the names packaging/kubernetes/eviction-bridge gives them
SERVICE = "nodeagent-eviction-bridge"
SECRET = "nodeagent-eviction-bridge-tls"
WEBHOOK_CONFIGURATION = "nodeagent-eviction-bridge"
_ATTEMPTS = 5  # read-decide-write rounds lost to other replicas before giving up for now


class CertClient(Getter, Creator, Replacer, Patcher, Protocol):
    """What keeping the certificates needs."""


@dataclass(frozen=True)
class TLSPlace:
    """Where the certificates live and what they are for."""

    namespace: str
    secret: str
    service: str
    names: tuple[str, ...]
    """The DNS names the serving certificate is for (:func:`.certs.service_names`)."""
    webhook_configuration: str | None
    """The ValidatingWebhookConfiguration whose caBundle to keep (None: someone else, e.g.
    cert-manager's CA injector, does)."""
    provided: bool = False
    """The Secret is someone else's (cert-manager's Certificate keeps it): read, never
    written."""

    @classmethod
    def shipped(cls, namespace: str) -> TLSPlace:
        """The names the manifests give them, in the controllers' namespace."""
        return cls(
            namespace, SECRET, SERVICE, service_names(SERVICE, namespace), WEBHOOK_CONFIGURATION
        )


def _secret(place: TLSPlace, bundle: Bundle, resource_version: str | None) -> Obj:
    md: dict[str, Any] = {"name": place.secret, "namespace": place.namespace}
    if resource_version:
        md["resourceVersion"] = resource_version
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": md,
        "type": "Opaque",
        "data": encode_secret(bundle),
    }


async def ensure_bundle(client: CertClient, place: TLSPlace, clock: Clock = utcnow) -> Bundle:
    """The Secret's bundle, made or renewed first if it is due. Another replica's write that
    comes first wins: its bundle is read again and used. Raises KubeError when the API server
    cannot be asked, and Conflict when other writers won every round."""
    if place.provided:
        return await _read_provided(client, place)
    for _ in range(_ATTEMPTS):
        try:
            secret: Obj | None = await client.get(SECRETS, place.secret, place.namespace)
        except NotFound:
            secret = None
        bundle = decode_secret(secret) if secret is not None else None
        now = clock()
        what = renewal(bundle, place.names, now)
        if what is None:
            assert bundle is not None
            return bundle
        log.info("eviction bridge: making a new %s certificate", what)
        fresh = await asyncio.to_thread(renew, bundle, place.names, now, what)
        try:
            if secret is None:
                await client.create(SECRETS, _secret(place, fresh, None), place.namespace)
            else:
                version = str(metadata_of(secret).get("resourceVersion") or "")
                await client.replace(SECRETS, _secret(place, fresh, version), place.namespace)
        except (AlreadyExists, Conflict):
            continue  # another replica wrote first: read what it made
        return fresh
    raise Conflict(f"secret {place.namespace}/{place.secret} kept changing")


async def _read_provided(client: CertClient, place: TLSPlace) -> Bundle:
    """The Secret someone else keeps, as it is. Raises ValueError while it holds no
    certificate (read again at its next change), KubeError as any read."""
    where = f"secret {place.namespace}/{place.secret}"
    try:
        secret: Obj | None = await client.get(SECRETS, place.secret, place.namespace)
    except NotFound:
        secret = None
    bundle = decode_provided(secret) if secret is not None else None
    if bundle is None:
        raise ValueError(f"{where} holds no tls.crt and tls.key (eviction.bridge.certificates)")
    try:
        inspect(bundle.cert)
    except ValueError as exc:
        raise ValueError(f"{where}: tls.crt is not a PEM certificate ({exc})") from None
    return bundle


def ca_bundle_patch(config: Mapping[str, Any], place: TLSPlace, ca: str) -> Obj | None:
    """A merge patch (at the configuration's resourceVersion) that puts ``ca`` (base64) into
    every webhook of ``config`` that calls ``place``'s Service, or None if they all have it."""
    webhooks = [dict(w) for w in items(config, "webhooks") if isinstance(w, Mapping)]
    changed = False
    for webhook in webhooks:
        client_config = dict(mapping(webhook, "clientConfig"))
        service = mapping(client_config, "service")
        if service.get("name") != place.service or service.get("namespace") != place.namespace:
            continue
        if client_config.get("caBundle") != ca:
            client_config["caBundle"] = ca
            webhook["clientConfig"] = client_config
            changed = True
    if not changed:
        return None
    # a merge patch replaces the whole list: the resourceVersion keeps others' edits
    version = metadata_of(config).get("resourceVersion")
    return {"metadata": {"resourceVersion": version}, "webhooks": webhooks}


async def put_ca_bundle(client: CertClient, place: TLSPlace, bundle: Bundle) -> None:
    """Make the webhook configuration trust ``bundle``'s CAs (a configuration not there yet is
    left alone: it is read again at the next change)."""
    if place.webhook_configuration is None:
        return
    if not bundle.trusted:
        log.warning(
            "eviction bridge: secret %s/%s has no ca.crt to put into %s",
            place.namespace,
            place.secret,
            place.webhook_configuration,
        )
        return
    ca = encode_secret(bundle)[CA_CRT]
    for _ in range(_ATTEMPTS):
        try:
            config = await client.get(WEBHOOK_CONFIGURATIONS, place.webhook_configuration)
        except NotFound:
            log.warning(
                "eviction bridge: no ValidatingWebhookConfiguration %s to put the CA into",
                place.webhook_configuration,
            )
            return
        patch = ca_bundle_patch(config, place, ca)
        if patch is None:
            return
        try:
            await client.patch(WEBHOOK_CONFIGURATIONS, place.webhook_configuration, patch)
        except Conflict:
            continue
        log.info("eviction bridge: CA bundle put into %s", place.webhook_configuration)
        return


class CertKeeper:
    """Keeps the bundle current: at start, whenever the Secret changes (another replica
    renewed it) and when a renewal falls due; hands every new bundle to ``on_bundle``."""

    def __init__(
        self,
        client: CertClient,
        informers: SharedInformers,
        place: TLSPlace,
        on_bundle: Callable[[Bundle], Awaitable[None]],
        *,
        clock: Clock = utcnow,
        retry: Sequence[float] = (1.0, 5.0, 30.0, 60.0),
    ) -> None:
        self._client = client
        self.place = place
        self._on_bundle = on_bundle
        self._clock = clock
        self._retry = retry
        self._changed = asyncio.Event()
        self.bundle: Bundle | None = None
        self._ca_put: Bundle | None = None  # the bundle last put into the caBundle
        secrets = informers.informer(
            SECRETS, namespace=place.namespace, field_selector=f"metadata.name={place.secret}"
        )
        secrets.add_handler(
            lambda _: self._changed.set(),
            lambda _, __: self._changed.set(),
            lambda _: self._changed.set(),
        )

    async def run(self) -> None:
        failures = 0
        while True:
            self._changed.clear()
            wait: float | None
            try:
                bundle = await ensure_bundle(self._client, self.place, self._clock)
                if bundle != self.bundle:
                    await self._on_bundle(bundle)
                    self.bundle = bundle
                if bundle != self._ca_put:  # again after a failed write too
                    await put_ca_bundle(self._client, self.place, bundle)
                    self._ca_put = bundle
                failures = 0
                # a provided Secret changes when its keeper renews it: nothing is due here
                due = None if self.place.provided else renew_at(bundle)
                wait = None if due is None else (due - self._clock()).total_seconds()
            except (KubeError, ValueError, ssl.SSLError) as exc:
                # the API server, a bad Secret (a key that does not fit): again
                wait = self._retry[min(failures, len(self._retry) - 1)]
                failures += 1
                log.warning(
                    "eviction bridge: certificates not current (%s); again in %ss", exc, wait
                )
            try:
                async with asyncio.timeout(None if wait is None else max(wait, 0.0)):
                    await self._changed.wait()
            except TimeoutError:
                pass
