"""Certificates for serving the webhook: a CA, a serving certificate, renewal and CA rotation.

Files follow the Kubernetes TLS Secret names so a mounted Secret and a generated directory
look the same to `dragate serve`: `tls.crt`, `tls.key`, `ca.crt` (and `ca.key` when dragate
made the CA). Rotating the CA writes `ca-bundle.crt` with the new CA first and the still
valid old ones after it: the apiserver trusts every CA in `caBundle`, so publishing the bundle
before the new serving certificate is used means no request fails during the change.
Keys are ECDSA P-256 (fast to make, accepted by the apiserver's Go TLS) and written 0600.
"""

from __future__ import annotations

import ipaddress
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from webhook.types import DragateError

CA_CERT, CA_KEY, TLS_CERT, TLS_KEY = "ca.crt", "ca.key", "tls.crt", "tls.key"
BUNDLE = "ca-bundle.crt"
DEV_NAMES = ("localhost", "127.0.0.1", "::1")
Key = ec.EllipticCurvePrivateKey
_BACKDATE = timedelta(minutes=5)  # tolerate clocks a little behind ours


class CertError(DragateError):
    """A certificate directory that cannot be read or written as asked."""


@dataclass(frozen=True)
class CertDir:
    """A directory holding the files named above."""

    path: Path

    def file(self, name: str) -> Path:
        return self.path / name

    @property
    def ca_bundle(self) -> Path:
        """What `caBundle` should hold: the rotation bundle when there is one, else the CA."""
        bundle = self.file(BUNDLE)
        return bundle if bundle.exists() else self.file(CA_CERT)

    def has_serving_pair(self) -> bool:
        return self.file(TLS_CERT).is_file() and self.file(TLS_KEY).is_file()


@dataclass(frozen=True)
class CertInfo:
    """What `certs show` prints for one certificate."""

    file: str
    subject: str
    issuer: str
    serial: int
    not_before: datetime
    not_after: datetime
    names: tuple[str, ...]
    is_ca: bool


# --------------------------------------------------------------------------- making


def service_names(service: str, namespace: str) -> list[str]:
    """The names the apiserver may use for a Service: `<svc>.<ns>.svc` is the one it uses."""
    base = f"{service}.{namespace}"
    return [service, base, f"{base}.svc", f"{base}.svc.cluster.local"]


def make_ca(common_name: str = "dragate-ca", days: int = 3650) -> tuple[x509.Certificate, Key]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.now(UTC)
    builder = (
        _base(name, name, key, now, days)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_usage(ca=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    )
    return builder.sign(key, hashes.SHA256()), key


def make_serving(
    ca: x509.Certificate, ca_key: Key, names: Sequence[str], days: int = 365
) -> tuple[x509.Certificate, Key]:
    """A server certificate for `names` (DNS names and IP addresses), signed by `ca`."""
    if not names:
        raise CertError("a serving certificate needs at least one DNS name or IP address")
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0][:64])])
    now = datetime.now(UTC)
    ca_ski = ca.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    builder = (
        _base(subject, ca.subject, key, now, days)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_usage(ca=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(_general_names(names)), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False
        )
    )
    return builder.sign(ca_key, hashes.SHA256()), key


def make_client(
    ca: x509.Certificate, ca_key: Key, common_name: str = "kube-apiserver", days: int = 365
) -> tuple[x509.Certificate, Key]:
    """A client certificate, e.g. for the apiserver when `serve --client-ca` requires mTLS."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    builder = (
        _base(subject, ca.subject, key, datetime.now(UTC), days)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_usage(ca=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
    )
    return builder.sign(ca_key, hashes.SHA256()), key


def _base(
    subject: x509.Name, issuer: x509.Name, key: Key, now: datetime, days: int
) -> x509.CertificateBuilder:
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + timedelta(days=days))
    )


def _usage(*, ca: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True, content_commitment=False, key_encipherment=not ca,
        data_encipherment=False, key_agreement=False, key_cert_sign=ca, crl_sign=ca,
        encipher_only=False, decipher_only=False,
    )  # fmt: skip


def _general_names(names: Sequence[str]) -> list[x509.GeneralName]:
    result: list[x509.GeneralName] = []
    for name in dict.fromkeys(names):
        try:
            result.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            result.append(x509.DNSName(name))
    return result


# --------------------------------------------------------------------------- files


def create(directory: Path, names: Sequence[str], days: int = 365, ca_days: int = 3650) -> CertDir:
    """A new CA and a serving certificate for `names`, written to `directory`."""
    certs = CertDir(directory)
    ca, ca_key = make_ca(days=ca_days)
    _write_ca(certs, ca, ca_key)
    _write_serving(certs, *make_serving(ca, ca_key, names, days))
    certs.file(BUNDLE).unlink(missing_ok=True)
    return certs


def renew(
    directory: Path, *, days: int = 365, rotate_ca: bool = False, ca_days: int = 3650
) -> CertDir:
    """A fresh serving certificate with the same names; with `rotate_ca`, from a new CA too."""
    certs = CertDir(directory)
    names = certificate_names(read_certs(certs.file(TLS_CERT))[0])
    ca, ca_key = read_ca(certs)
    if rotate_ca:
        old = _valid_cas(certs)
        ca, ca_key = make_ca(days=ca_days)
        _write_ca(certs, ca, ca_key)
        write_file(certs.file(BUNDLE), pem_certs([ca, *old]), private=False)
    _write_serving(certs, *make_serving(ca, ca_key, names, days))
    return certs


def ensure_dev(
    directory: Path, extra_names: Sequence[str] = (), renew_within_days: int = 30
) -> CertDir:
    """The dev path of `serve`: make (or re-issue) a localhost certificate when it is missing,
    near expiry, or lacks a requested name; reuse the CA whenever it is still good."""
    certs = CertDir(directory)
    names = [*DEV_NAMES, *extra_names]
    if certs.has_serving_pair() and not _needs_reissue(certs, names, renew_within_days):
        return certs
    if certs.file(CA_CERT).is_file() and certs.file(CA_KEY).is_file():
        ca, ca_key = read_ca(certs)
        if ca.not_valid_after_utc - datetime.now(UTC) > timedelta(days=renew_within_days):
            _write_serving(certs, *make_serving(ca, ca_key, names))
            return certs
    return create(directory, names)


def _needs_reissue(certs: CertDir, names: Sequence[str], within_days: int) -> bool:
    cert = read_certs(certs.file(TLS_CERT))[0]
    expiring = cert.not_valid_after_utc - datetime.now(UTC) < timedelta(days=within_days)
    return expiring or not set(names) <= set(certificate_names(cert))


def _write_ca(certs: CertDir, ca: x509.Certificate, key: Key) -> None:
    write_file(certs.file(CA_KEY), pem_key(key), private=True)
    write_file(certs.file(CA_CERT), pem_certs([ca]), private=False)


def _write_serving(certs: CertDir, cert: x509.Certificate, key: Key) -> None:
    """Key first, then certificate: a reader seeing a mismatched pair retries (see tls.py)."""
    write_file(certs.file(TLS_KEY), pem_key(key), private=True)
    write_file(certs.file(TLS_CERT), pem_certs([cert]), private=False)


def read_ca(certs: CertDir) -> tuple[x509.Certificate, Key]:
    ca = read_certs(certs.file(CA_CERT))[0]
    try:
        key = serialization.load_pem_private_key(certs.file(CA_KEY).read_bytes(), password=None)
    except (OSError, ValueError) as err:
        raise CertError(f"cannot read {certs.file(CA_KEY)}: {err}") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise CertError(f"{certs.file(CA_KEY)}: only ECDSA CA keys made by dragate are supported")
    return ca, key


def _valid_cas(certs: CertDir) -> list[x509.Certificate]:
    """CAs already trusted (bundle or ca.crt) that have not expired, without duplicates."""
    now = datetime.now(UTC)
    found = read_certs(certs.ca_bundle)
    unique = {c.fingerprint(hashes.SHA256()): c for c in found if c.not_valid_after_utc > now}
    return list(unique.values())


def read_certs(path: Path) -> list[x509.Certificate]:
    try:
        certs = x509.load_pem_x509_certificates(path.read_bytes())
    except (OSError, ValueError) as err:
        raise CertError(f"cannot read certificates from {path}: {err}") from None
    return certs


def pem_key(key: Key) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def pem_certs(certs: Sequence[x509.Certificate]) -> bytes:
    return b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certs)


def write_file(path: Path, data: bytes, *, private: bool) -> None:
    """Atomic replace (readers see old or new, never half), 0600 for keys, 0644 otherwise."""
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, 0o600 if private else 0o644)
        os.replace(tmp, path)
    except OSError as err:
        raise CertError(f"cannot write {path}: {err.strerror or err}") from None


# --------------------------------------------------------------------------- reading


def certificate_names(cert: x509.Certificate) -> list[str]:
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    dns = san.get_values_for_type(x509.DNSName)
    ips = [str(ip) for ip in san.get_values_for_type(x509.IPAddress)]
    return [*dns, *ips]


def describe(directory: Path) -> list[CertInfo]:
    """Every certificate in the directory's known files, for `certs show`."""
    infos: list[CertInfo] = []
    for name in (TLS_CERT, CA_CERT, BUNDLE):
        path = directory / name
        if path.is_file():
            infos.extend(_info(name, cert) for cert in read_certs(path))
    return infos


def _info(file: str, cert: x509.Certificate) -> CertInfo:
    try:
        is_ca = cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    except x509.ExtensionNotFound:
        is_ca = False
    return CertInfo(
        file=file,
        subject=cert.subject.rfc4514_string(),
        issuer=cert.issuer.rfc4514_string(),
        serial=cert.serial_number,
        not_before=cert.not_valid_before_utc,
        not_after=cert.not_valid_after_utc,
        names=tuple(certificate_names(cert)),
        is_ca=is_ca,
    )
