"""Test PKI for the e2e cluster: a CA, serving and client certificates, a service-account key.

Everything is made in memory with `cryptography` and written out as PEM files on demand.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = datetime.timedelta(days=2)
_CLOCK_SKEW = datetime.timedelta(minutes=5)

PrivateKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey


@dataclass(frozen=True)
class CertKey:
    """A certificate and its private key."""

    cert: x509.Certificate
    key: PrivateKey

    @property
    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    @property
    def key_pem(self) -> bytes:
        return private_key_pem(self.key)

    def write(self, directory: Path, stem: str) -> tuple[Path, Path]:
        """Write `<stem>.crt` and `<stem>.key` into `directory`; return both paths."""
        cert_path = directory / f"{stem}.crt"
        key_path = directory / f"{stem}.key"
        cert_path.write_bytes(self.cert_pem)
        key_path.write_bytes(self.key_pem)
        key_path.chmod(0o600)
        return cert_path, key_path


def private_key_pem(key: PrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def public_key_pem(key: PrivateKey) -> bytes:
    return key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def _name(common_name: str, organizations: tuple[str, ...] = ()) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in organizations]
    attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attributes)


def _builder(subject: x509.Name, issuer: x509.Name, key: PrivateKey) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _CLOCK_SKEW)
        .not_valid_after(now + _VALIDITY)
    )


def make_ca(common_name: str = "dragate-e2e-ca") -> CertKey:
    key = ec.generate_private_key(ec.SECP256R1())
    name = _name(common_name)
    cert = (
        _builder(name, name, key)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
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
        .sign(key, hashes.SHA256())
    )
    return CertKey(cert, key)


def _leaf(
    ca: CertKey, subject: x509.Name, usage: x509.ObjectIdentifier
) -> tuple[x509.CertificateBuilder, ec.EllipticCurvePrivateKey]:
    """A builder for an end-entity certificate signed by `ca`, and its new key."""
    key = ec.generate_private_key(ec.SECP256R1())
    builder = (
        _builder(subject, ca.cert.subject, key)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    )
    return builder, key


def make_serving_cert(ca: CertKey, hosts: tuple[str, ...]) -> CertKey:
    """A TLS server certificate for `hosts` (DNS names and IP addresses), signed by `ca`."""
    builder, key = _leaf(ca, _name(hosts[0]), ExtendedKeyUsageOID.SERVER_AUTH)
    cert = builder.add_extension(
        x509.SubjectAlternativeName([_general_name(host) for host in hosts]), critical=False
    ).sign(ca.key, hashes.SHA256())
    return CertKey(cert, key)


def make_client_cert(ca: CertKey, user: str, groups: tuple[str, ...] = ()) -> CertKey:
    """A client certificate; Kubernetes reads CN as the user name and O as the groups."""
    builder, key = _leaf(ca, _name(user, groups), ExtendedKeyUsageOID.CLIENT_AUTH)
    return CertKey(builder.sign(ca.key, hashes.SHA256()), key)


def make_service_account_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _general_name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)
