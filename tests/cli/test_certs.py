"""`dragate certs create|renew|show` and the certificate maker behind them."""

from __future__ import annotations

import contextlib
import ssl
from pathlib import Path

import pytest
from click.testing import CliRunner
from cryptography import x509

from webhook import certificates
from webhook.cli import main


def _create(out: Path, *extra: str) -> None:
    args = [
        "certs",
        "create",
        "--out",
        str(out),
        "--service",
        "dragate",
        "--namespace",
        "gpu-system",
        *extra,
    ]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output


def test_create_writes_the_four_files_with_private_keys_0600(tmp_path: Path) -> None:
    _create(tmp_path, "--dns-name", "10.0.0.7", "--days", "30")
    modes = {p.name: p.stat().st_mode & 0o777 for p in tmp_path.iterdir()}
    assert modes == {"ca.crt": 0o644, "ca.key": 0o600, "tls.crt": 0o644, "tls.key": 0o600}
    leaf = certificates.read_certs(tmp_path / "tls.crt")[0]
    names = certificates.certificate_names(leaf)
    assert {"dragate.gpu-system.svc", "dragate.gpu-system.svc.cluster.local", "10.0.0.7"} <= set(
        names
    )
    assert 29 <= (leaf.not_valid_after_utc - leaf.not_valid_before_utc).days <= 30
    usage = leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert x509.oid.ExtendedKeyUsageOID.SERVER_AUTH in usage


def test_the_leaf_verifies_against_the_ca_for_the_service_name(tmp_path: Path) -> None:
    _create(tmp_path)
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    client = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
    c_in, c_out, s_in, s_out = (ssl.MemoryBIO() for _ in range(4))
    cli = client.wrap_bio(c_in, c_out, server_hostname="dragate.gpu-system.svc")
    srv = server.wrap_bio(s_in, s_out, server_side=True)
    for _ in range(10):
        for side in (cli, srv):
            with contextlib.suppress(ssl.SSLWantReadError):
                side.do_handshake()
        s_in.write(c_out.read())
        c_in.write(s_out.read())
    assert cli.version() is not None  # handshake, including hostname check, succeeded


def test_renew_keeps_names_and_ca(tmp_path: Path) -> None:
    _create(tmp_path)
    before = certificates.read_certs(tmp_path / "tls.crt")[0]
    ca_before = (tmp_path / "ca.crt").read_bytes()
    result = CliRunner().invoke(main, ["certs", "renew", "--dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    after = certificates.read_certs(tmp_path / "tls.crt")[0]
    assert after.serial_number != before.serial_number
    assert certificates.certificate_names(after) == certificates.certificate_names(before)
    assert (tmp_path / "ca.crt").read_bytes() == ca_before
    assert not (tmp_path / "ca-bundle.crt").exists()


def test_rotate_ca_bundles_new_and_old(tmp_path: Path) -> None:
    _create(tmp_path)
    old_ca = certificates.read_certs(tmp_path / "ca.crt")[0]
    result = CliRunner().invoke(main, ["certs", "renew", "--dir", str(tmp_path), "--rotate-ca"])
    assert result.exit_code == 0, result.output
    assert "ca-bundle.crt" in result.output
    new_ca = certificates.read_certs(tmp_path / "ca.crt")[0]
    bundle = certificates.read_certs(tmp_path / "ca-bundle.crt")
    assert [c.serial_number for c in bundle] == [new_ca.serial_number, old_ca.serial_number]
    leaf = certificates.read_certs(tmp_path / "tls.crt")[0]
    assert leaf.issuer == new_ca.subject
    leaf.verify_directly_issued_by(new_ca)
    # a second rotation keeps still-valid CAs, without duplicates
    certificates.renew(tmp_path, rotate_ca=True)
    assert len(certificates.read_certs(tmp_path / "ca-bundle.crt")) == 3


def test_show_prints_expiry_and_names(tmp_path: Path) -> None:
    _create(tmp_path)
    result = CliRunner().invoke(main, ["certs", "show", "--dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "tls.crt" in result.output and "ca.crt" in result.output
    assert "dragate.gpu-system.svc" in result.output and "days left" in result.output
    assert "PRIVATE KEY" not in result.output


@pytest.mark.parametrize("command", [["renew", "--dir"], ["show", "--dir"]])
def test_missing_directory_is_exit_2(tmp_path: Path, command: list[str]) -> None:
    result = CliRunner().invoke(main, ["certs", *command, str(tmp_path / "none")])
    assert result.exit_code == 2


def test_ensure_dev_makes_then_reuses(tmp_path: Path) -> None:
    first = certificates.ensure_dev(tmp_path)
    serial = certificates.read_certs(first.file(certificates.TLS_CERT))[0].serial_number
    again = certificates.ensure_dev(tmp_path)
    assert certificates.read_certs(again.file(certificates.TLS_CERT))[0].serial_number == serial
