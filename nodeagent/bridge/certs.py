"""The webhook's TLS: a self-signed CA and the serving certificate it signs for the webhook
Service's DNS names, what the Secret that shares them between the controllers' replicas holds,
and when they are renewed. No I/O (:mod:`.certstore` reads and writes the Secret); making keys
and certificates is CPU-bound, so the shell runs :func:`renew` in a thread.

The CA outlives the serving certificate many times over, so renewing the serving certificate
leaves the webhook's ``caBundle`` as it is. A renewed CA goes into the bundle beside the one it
replaces, which stays there until it expires: a replica still serving a certificate of the old
CA is trusted until it has loaded the new one.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Literal

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from nodeagent.model.bodies import mapping

__all__ = [
    "CA_CRT",
    "CA_VALIDITY",
    "SERVING_VALIDITY",
    "Bundle",
    "CertInfo",
    "Renewal",
    "decode_provided",
    "decode_secret",
    "encode_secret",
    "inspect",
    "renew",
    "renew_at",
    "renewal",
    "service_names",
]

CA_VALIDITY = timedelta(days=10 * 365)
SERVING_VALIDITY = timedelta(days=365)
RENEW_LEFT = 1 / 3
"""Renew a certificate when less than this share of its lifetime is left (cert-manager's
default), so a renewal that fails has months to succeed."""
_BACKDATE = timedelta(minutes=5)  # a server clock slightly behind ours still accepts it

# the Secret's keys: kubernetes.io/tls's two, the CA bundle the webhook trusts, the CA's key
TLS_CRT, TLS_KEY, CA_CRT, CA_KEY = "tls.crt", "tls.key", "ca.crt", "ca.key"


def service_names(service: str, namespace: str) -> tuple[str, ...]:
    """The DNS names the API server may reach the webhook Service by."""
    return (
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
    )


@dataclass(frozen=True)
class Bundle:
    """PEM texts: the serving certificate and key, the CA that signs it and its key, and the
    CA bundle to trust (the CA first, then a CA it replaced while that is still valid)."""

    cert: bytes
    key: bytes
    ca: bytes
    ca_key: bytes
    trusted: bytes


@dataclass(frozen=True)
class CertInfo:
    not_before: datetime
    not_after: datetime
    dns_names: frozenset[str]

    def renew_at(self) -> datetime:
        """When less than :data:`RENEW_LEFT` of its lifetime is left."""
        return self.not_after - (self.not_after - self.not_before) * RENEW_LEFT


def inspect(pem: bytes) -> CertInfo:
    """The first certificate of ``pem``. Raises ValueError if there is none."""
    cert = x509.load_pem_x509_certificate(pem)
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)
        names = frozenset(san.value.get_values_for_type(x509.DNSName))
    except x509.ExtensionNotFound:
        names = frozenset()
    return CertInfo(cert.not_valid_before_utc, cert.not_valid_after_utc, names)


Renewal = Literal["ca", "serving"]


def renewal(bundle: Bundle | None, names: Sequence[str], now: datetime) -> Renewal | None:
    """What must be made anew: the CA (and so the serving certificate), the serving
    certificate only, or nothing. Unreadable PEM counts as missing."""
    if bundle is None:
        return "ca"
    try:
        ca, serving = inspect(bundle.ca), inspect(bundle.cert)
        _private_key(bundle.ca_key)
        _private_key(bundle.key)
    except ValueError:
        return "ca"
    if now >= ca.renew_at():
        return "ca"
    if now >= serving.renew_at() or not set(names) <= serving.dns_names:
        return "serving"
    return None


def renew_at(bundle: Bundle) -> datetime:
    """When :func:`renewal` will next ask for something (``bundle`` is a current one)."""
    return min(inspect(bundle.ca).renew_at(), inspect(bundle.cert).renew_at())


def renew(
    bundle: Bundle | None,
    names: Sequence[str],
    now: datetime,
    what: Renewal,
    *,
    ca_validity: timedelta = CA_VALIDITY,
    serving_validity: timedelta = SERVING_VALIDITY,
) -> Bundle:
    """A bundle with what :func:`renewal` asked for made anew (CPU-bound: run it in a
    thread)."""
    if what == "ca" or bundle is None:
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca = _ca_certificate(ca_key, now, ca_validity)
        ca_pem = ca.public_bytes(serialization.Encoding.PEM)
        kept = _still_valid(bundle.trusted, now) if bundle is not None else b""
        bundle = Bundle(b"", b"", ca_pem, _pem_key(ca_key), ca_pem + kept)
    ca_key_obj = _private_key(bundle.ca_key)
    ca_cert = x509.load_pem_x509_certificate(bundle.ca)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = _serving_certificate(key, ca_cert, ca_key_obj, names, now, serving_validity)
    return replace(bundle, cert=cert.public_bytes(serialization.Encoding.PEM), key=_pem_key(key))


def _private_key(pem: bytes) -> ec.EllipticCurvePrivateKey:
    key = serialization.load_pem_private_key(pem, password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ValueError("not an EC private key")
    return key


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _still_valid(pem: bytes, now: datetime) -> bytes:
    """The certificates of a PEM bundle that have not expired, in order."""
    try:
        certs = x509.load_pem_x509_certificates(pem)
    except ValueError:
        return b""
    return b"".join(
        c.public_bytes(serialization.Encoding.PEM) for c in certs if c.not_valid_after_utc > now
    )


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _ca_certificate(
    key: ec.EllipticCurvePrivateKey, now: datetime, validity: timedelta
) -> x509.Certificate:
    name = _name(f"nodeagent eviction bridge CA {now:%Y-%m-%d}")
    public = key.public_key()
    return (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + validity)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .sign(key, hashes.SHA256())
    )


def _serving_certificate(
    key: ec.EllipticCurvePrivateKey,
    ca: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    names: Sequence[str],
    now: datetime,
    validity: timedelta,
) -> x509.Certificate:
    not_after = min(now + validity, ca.not_valid_after_utc)
    return (
        x509.CertificateBuilder()
        .subject_name(_name(names[0]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), critical=False
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )


# --- the Secret -----------------------------------------------------------------------------------

_KEYS = (TLS_CRT, TLS_KEY, CA_CRT, CA_KEY)


def encode_secret(bundle: Bundle) -> dict[str, str]:
    """The Secret's ``data`` (base64, as the API wants it)."""
    values = {
        TLS_CRT: bundle.cert,
        TLS_KEY: bundle.key,
        CA_CRT: bundle.trusted,
        CA_KEY: bundle.ca_key,
    }
    return {k: base64.b64encode(v).decode() for k, v in values.items()}


def _decoded(secret: Mapping[str, Any], keys: tuple[str, ...]) -> dict[str, bytes] | None:
    data = mapping(secret, "data")
    try:
        return {k: base64.b64decode(str(data[k]), validate=True) for k in keys}
    except (KeyError, binascii.Error):
        return None


def decode_provided(secret: Mapping[str, Any]) -> Bundle | None:
    """The serving certificate of a Secret someone else keeps (cert-manager's Certificate
    writes ``tls.crt``, ``tls.key`` and, from a CA issuer, ``ca.crt``), or None if it holds
    none yet. No CA key: the bridge renews nothing of it."""
    values = _decoded(secret, (TLS_CRT, TLS_KEY))
    if values is None:
        return None
    ca = (_decoded(secret, (CA_CRT,)) or {}).get(CA_CRT, b"")
    return Bundle(values[TLS_CRT], values[TLS_KEY], ca, b"", ca)


def decode_secret(secret: Mapping[str, Any]) -> Bundle | None:
    """The bundle a Secret of :func:`encode_secret` holds, or None if it holds none."""
    values = _decoded(secret, _KEYS)
    if values is None:
        return None
    trusted = values[CA_CRT]
    # the CA this bundle signs with is the first of the bundle it trusts
    end = trusted.find(b"-----END CERTIFICATE-----")
    ca = trusted[: end + len(b"-----END CERTIFICATE-----")] + b"\n" if end >= 0 else b""
    return Bundle(values[TLS_CRT], values[TLS_KEY], ca, values[CA_KEY], trusted)
