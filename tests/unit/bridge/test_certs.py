"""The eviction bridge's certificates: what is made, when it is renewed, the Secret replicas
share (create or read) and the CA bundle put into the webhook configuration."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any

from cryptography import x509

from nodeagent.bridge.certs import (
    CA_VALIDITY,
    SERVING_VALIDITY,
    Bundle,
    decode_secret,
    encode_secret,
    inspect,
    renew,
    renew_at,
    renewal,
    service_names,
)
from nodeagent.bridge.certstore import (
    TLSPlace,
    ca_bundle_patch,
    ensure_bundle,
    put_ca_bundle,
)
from nodeagent.kube.resources import SECRETS, WEBHOOK_CONFIGURATIONS
from tests.unit.kube.fakeapi import Backend, FakeClient

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
NAMES = service_names("bridge", "nodeagent-system")
PLACE = TLSPlace("nodeagent-system", "bridge-tls", "bridge", NAMES, "nodeagent-eviction-bridge")


@cache
def fresh() -> Bundle:
    return renew(None, NAMES, NOW, "ca")


def test_a_serving_certificate_for_the_service_signed_by_the_ca() -> None:
    b = fresh()
    cert = x509.load_pem_x509_certificate(b.cert)
    ca = x509.load_pem_x509_certificate(b.ca)
    cert.verify_directly_issued_by(ca)
    info = inspect(b.cert)
    assert info.dns_names == set(NAMES)
    assert "bridge.nodeagent-system.svc" in info.dns_names
    assert info.not_after == (NOW + SERVING_VALIDITY).replace(microsecond=0)
    assert inspect(b.ca).not_after == (NOW + CA_VALIDITY).replace(microsecond=0)
    assert b.trusted == b.ca


def test_nothing_is_due_until_a_third_of_the_lifetime_is_left() -> None:
    b = fresh()
    assert renewal(b, NAMES, NOW) is None
    due = renew_at(b)
    assert due == inspect(b.cert).renew_at()
    assert renewal(b, NAMES, due - timedelta(seconds=1)) is None
    assert renewal(b, NAMES, due) == "serving"
    assert renewal(b, (*NAMES, "other.example.com"), NOW) == "serving"
    assert renewal(None, NAMES, NOW) == "ca"
    assert renewal(Bundle(b"x", b.key, b.ca, b.ca_key, b.trusted), NAMES, NOW) == "ca"


def test_a_serving_renewal_keeps_the_ca() -> None:
    b = fresh()
    later = renew_at(b)
    renewed = renew(b, NAMES, later, "serving")
    assert (renewed.ca, renewed.ca_key, renewed.trusted) == (b.ca, b.ca_key, b.trusted)
    assert renewed.cert != b.cert and renewal(renewed, NAMES, later) is None


def test_a_new_ca_is_trusted_beside_the_old_until_that_expires() -> None:
    b = fresh()
    due = inspect(b.ca).renew_at()
    assert renewal(b, NAMES, due) == "ca"
    renewed = renew(b, NAMES, due, "ca")
    assert renewed.ca != b.ca
    assert renewed.trusted == renewed.ca + b.ca
    x509.load_pem_x509_certificate(renewed.cert).verify_directly_issued_by(
        x509.load_pem_x509_certificate(renewed.ca)
    )
    # the serving certificate never outlives its CA
    assert inspect(renewed.cert).not_after <= inspect(renewed.ca).not_after
    again = renew(renewed, NAMES, inspect(b.ca).not_after + timedelta(days=1), "ca")
    assert again.trusted == again.ca + renewed.ca


def test_the_secret_round_trip_and_an_unreadable_one() -> None:
    b = fresh()
    assert decode_secret({"data": encode_secret(b)}) == b
    assert decode_secret({"data": {"tls.crt": "eA=="}}) is None
    assert decode_secret({"data": {**encode_secret(b), "tls.key": "not base64!"}}) is None
    assert decode_secret({}) is None


async def test_replicas_share_one_bundle() -> None:
    backend = Backend()
    first, second = FakeClient(backend, "a"), FakeClient(backend, "b")
    a, b = await asyncio.gather(
        ensure_bundle(first, PLACE, lambda: NOW), ensure_bundle(second, PLACE, lambda: NOW)
    )
    assert a == b
    [secret] = backend.all(SECRETS)
    assert decode_secret(secret) == a
    assert await ensure_bundle(first, PLACE, lambda: NOW) == a


async def test_a_bundle_due_is_renewed_in_the_secret() -> None:
    backend = Backend()
    client = FakeClient(backend)
    old = await ensure_bundle(client, PLACE, lambda: NOW)
    due = renew_at(old)
    new = await ensure_bundle(client, PLACE, lambda: due)
    assert new.cert != old.cert and new.ca == old.ca
    assert decode_secret(backend.all(SECRETS)[0]) == new


def webhook(service: str, ca: str | None = None) -> dict[str, Any]:
    config: dict[str, Any] = {"service": {"name": service, "namespace": "nodeagent-system"}}
    if ca is not None:
        config["caBundle"] = ca
    return {"name": f"{service}.nodeagent.io", "clientConfig": config}


def test_the_ca_goes_into_our_webhooks_only() -> None:
    config = {
        "metadata": {"name": "c", "resourceVersion": "4"},
        "webhooks": [webhook("bridge"), webhook("other", "keep")],
    }
    patch = ca_bundle_patch(config, PLACE, "Q0E=")
    assert patch == {
        "metadata": {"resourceVersion": "4"},
        "webhooks": [webhook("bridge", "Q0E="), webhook("other", "keep")],
    }
    assert ca_bundle_patch({**config, "webhooks": patch["webhooks"]}, PLACE, "Q0E=") is None


async def test_put_ca_bundle_patches_the_configuration() -> None:
    backend = Backend()
    client = FakeClient(backend)
    await client.create(
        WEBHOOK_CONFIGURATIONS,
        {"metadata": {"name": "nodeagent-eviction-bridge"}, "webhooks": [webhook("bridge")]},
    )
    b = fresh()
    await put_ca_bundle(client, PLACE, b)
    [config] = backend.all(WEBHOOK_CONFIGURATIONS)
    assert config["webhooks"][0]["clientConfig"]["caBundle"] == encode_secret(b)["ca.crt"]
    # no configuration: nothing to do, no error
    await put_ca_bundle(FakeClient(Backend()), PLACE, b)
