"""The bridge with `eviction.bridge.certificates: provided`: the Secret is someone else's
(cert-manager's Certificate writes `tls.crt`, `tls.key` and `ca.crt`, here the test does as
it would). The bridge serves only once the Secret holds a certificate, serves each new one
as it comes, keeps serving the last good one through a malformed write, and never writes the
Secret itself. cert-manager itself does not run here."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import logging
import ssl
from datetime import UTC, datetime

import pytest

from nodeagent.bridge.certs import Bundle, renew
from nodeagent.bridge.server import BridgeServer, Listen
from nodeagent.kube.errors import NotFound
from nodeagent.kube.resources import SECRETS, Obj
from tests.integration.bridge.realbridge import served_certificate
from tests.integration.bridge.test_webhook import NAMES, PLACE, SETTINGS
from tests.integration.controllers.evictionrequest_harness import Env, env
from tests.until import until

__all__ = ["env"]  # the fixture, re-exported for pytest

PROVIDED = dataclasses.replace(
    PLACE, secret="bridge-provided", webhook_configuration=None, provided=True
)


def issued() -> Bundle:
    """A CA and a serving certificate for the Service's names, as cert-manager's CA issuer
    would make them."""
    return renew(None, NAMES, datetime.now(UTC), "ca")


def tls_secret(data: dict[str, bytes], version: str | None = None) -> Obj:
    md: dict[str, str] = {"name": PROVIDED.secret, "namespace": PROVIDED.namespace}
    if version is not None:
        md["resourceVersion"] = version
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": md,
        "data": {k: base64.b64encode(v).decode() for k, v in data.items()},
    }


def as_cert_manager_writes(bundle: Bundle) -> dict[str, bytes]:
    return {"tls.crt": bundle.cert, "tls.key": bundle.key, "ca.crt": bundle.ca}


async def served(server: BridgeServer, bundle: Bundle) -> bytes:
    assert server.port is not None
    trust = ssl.create_default_context(cadata=bundle.ca.decode())
    return await served_certificate(server.port, trust, NAMES[2])


def der(pem: bytes) -> bytes:
    return ssl.PEM_cert_to_DER_cert(pem.decode())


async def test_a_certificate_someone_else_keeps_is_served_and_never_written(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="nodeagent.bridge.certstore")
    server = BridgeServer(env.kube, SETTINGS, PROVIDED, Listen("127.0.0.1", 0))
    task = asyncio.create_task(server.run())
    try:
        # no Secret yet: the bridge says so, makes none and does not serve
        await until(lambda: "holds no tls.crt and tls.key" in caplog.text)
        assert not server.serving.is_set() and not task.done()
        with pytest.raises(NotFound):
            await env.kube.get(SECRETS, PROVIDED.secret, PROVIDED.namespace)

        first = issued()
        made = await env.kube.create(
            SECRETS, tls_secret(as_cert_manager_writes(first)), PROVIDED.namespace
        )
        async with asyncio.timeout(30):
            await server.serving.wait()
        assert await served(server, first) == der(first.cert)

        # renewed by its keeper: served from the next connection on
        second = issued()
        version = str(made["metadata"]["resourceVersion"])
        renewed = await env.kube.replace(
            SECRETS, tls_secret(as_cert_manager_writes(second), version), PROVIDED.namespace
        )
        await until(
            lambda: server.keeper.bundle is not None and server.keeper.bundle.cert == second.cert
        )
        assert await served(server, second) == der(second.cert)

        # a malformed write: said, and the last good certificate is kept
        broken = {**as_cert_manager_writes(second), "tls.crt": b"not a certificate"}
        version = str(renewed["metadata"]["resourceVersion"])
        last = await env.kube.replace(SECRETS, tls_secret(broken, version), PROVIDED.namespace)
        await until(lambda: "tls.crt is not a PEM certificate" in caplog.text)
        assert not task.done()
        assert await served(server, second) == der(second.cert)

        # a key that does not fit its certificate: said, and the last good one kept
        mismatched = {**as_cert_manager_writes(second), "tls.key": first.key}
        version = str(last["metadata"]["resourceVersion"])
        last = await env.kube.replace(SECRETS, tls_secret(mismatched, version), PROVIDED.namespace)
        await until(lambda: "key values mismatch" in caplog.text.lower())
        assert not task.done()
        assert await served(server, second) == der(second.cert)

        # the bridge wrote nothing into it (a managed bridge adds its CA key)
        secret = await env.kube.get(SECRETS, PROVIDED.secret, PROVIDED.namespace)
        assert secret["metadata"]["resourceVersion"] == last["metadata"]["resourceVersion"]
        assert set(secret["data"]) == {"tls.crt", "tls.key", "ca.crt"}
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        with contextlib.suppress(NotFound):
            await env.kube.delete(SECRETS, PROVIDED.secret, PROVIDED.namespace)
