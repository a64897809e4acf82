"""Certificates and keys of the test control plane: one CA, the API server's serving certificate,
client certificates for the admin and the components, and the ServiceAccount signing key."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALID = datetime.timedelta(days=30)


@dataclass(frozen=True)
class Pair:
    cert: Path
    key: Path


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _name(cn: str, org: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
    if org is not None:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    return x509.Name(attrs)


class Pki:
    """Writes everything under `dir`; `client` makes further client certificates, also from
    another process (`Pki.existing`: the CA's key is kept beside its certificate, 0600)."""

    def __init__(self, dir: Path, extra_ips: tuple[str, ...] = ()) -> None:
        """`extra_ips`: more addresses the API server's serving certificate is valid for (the
        host's address on the real nodes' bridge, realnode.fleet)."""
        self.dir = dir
        dir.mkdir(parents=True, exist_ok=True)
        self._ca_key = ec.generate_private_key(ec.SECP256R1())
        _write_key(dir / "ca.key", self._ca_key)
        now = datetime.datetime.now(datetime.UTC)
        self._ca_cert = (
            x509.CertificateBuilder()
            .subject_name(_name("nodeagent-test-ca"))
            .issuer_name(_name("nodeagent-test-ca"))
            .public_key(self._ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALID)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(False, False, False, False, False, True, True, False, False),
                critical=True,
            )
            .sign(self._ca_key, hashes.SHA256())
        )
        self.ca = dir / "ca.crt"
        self.ca.write_bytes(self._ca_cert.public_bytes(serialization.Encoding.PEM))
        sa = ec.generate_private_key(ec.SECP256R1())
        self.sa_key = dir / "sa.key"
        self.sa_pub = dir / "sa.pub"
        _write_key(self.sa_key, sa)
        self.sa_pub.write_bytes(
            sa.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )
        self.serving = self._issue(
            "serving",
            _name("kube-apiserver"),
            ExtendedKeyUsageOID.SERVER_AUTH,
            x509.SubjectAlternativeName(
                [
                    x509.DNSName("localhost"),
                    x509.DNSName("kubernetes.default.svc"),
                    x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                    x509.IPAddress(ipaddress.ip_address("10.96.0.1")),
                    *(x509.IPAddress(ipaddress.ip_address(a)) for a in extra_ips),
                ]
            ),
        )

    @classmethod
    def existing(cls, dir: Path) -> Pki:
        """The CA a running control plane's `Pki(dir)` made, to issue more certificates."""
        pki = cls.__new__(cls)
        pki.dir = dir
        key = serialization.load_pem_private_key((dir / "ca.key").read_bytes(), None)
        assert isinstance(key, ec.EllipticCurvePrivateKey)
        pki._ca_key = key
        pki.ca = dir / "ca.crt"
        pki._ca_cert = x509.load_pem_x509_certificate(pki.ca.read_bytes())
        pki.sa_key, pki.sa_pub = dir / "sa.key", dir / "sa.pub"
        pki.serving = Pair(dir / "serving.crt", dir / "serving.key")
        return pki

    def client(self, name: str, user: str, group: str | None = None) -> Pair:
        """A client certificate: the API server authenticates it as `user` in `group`."""
        return self._issue(name, _name(user, group), ExtendedKeyUsageOID.CLIENT_AUTH, None)

    def _issue(
        self,
        file: str,
        subject: x509.Name,
        usage: x509.ObjectIdentifier,
        san: x509.SubjectAlternativeName | None,
    ) -> Pair:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(self._ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALID)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
        if san is not None:
            builder = builder.add_extension(san, critical=False)
        cert = builder.sign(self._ca_key, hashes.SHA256())
        pair = Pair(self.dir / f"{file}.crt", self.dir / f"{file}.key")
        pair.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        _write_key(pair.key, key)
        return pair
