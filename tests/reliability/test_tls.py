"""TLS of a real `dragate serve`: the suites it accepts, and certificates replaced under load.

- TLS 1.2 with an AEAD suite (AES-GCM, ChaCha20-Poly1305) and TLS 1.3 are served; a TLS 1.2
  client offering only CBC suites fails the handshake.
- A new pair written while reviews go on (as a Secret volume swaps it, or file by file) is
  served on new connections, and no review fails meanwhile.
- A key file read half-written, or holding another pair's key, is never served: the last
  good pair goes on serving (no failed handshake), and the next good pair is picked up.
"""

from __future__ import annotations

import os
import shutil
import socket
import ssl
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from net_support import serving_serial
from reliability.reliability_support import (
    ReviewLoad,
    Serve,
    eventually,
    latency_summary,
    serving,
    start,
    write_policies,
)

from webhook import certificates

LOAD_THREADS = 3
PROBES = 20  # new connections checked after each change


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    """Serving from plain files in its cert dir (a hostPath or a hand-managed directory)."""
    with serving(tmp_path_factory.mktemp("tls"), "tls") as running:
        yield running


# --------------------------------------------------------------------------- suites


def _client(version: ssl.TLSVersion, ciphers: str | None, trust: Path) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.load_verify_locations(str(trust))
    context.minimum_version = context.maximum_version = version
    if ciphers is not None:
        context.set_ciphers(ciphers)
    return context


TLS12, TLS13 = ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3
SUITES = [
    # (version, what the client offers (None: its defaults), the suite agreed or None: refused)
    pytest.param(TLS12, "ECDHE-ECDSA-AES128-SHA256", None, id="tls12-ecdsa-cbc"),
    pytest.param(TLS12, "ECDHE-RSA-AES128-SHA256", None, id="tls12-rsa-cbc"),
    pytest.param(TLS12, "ECDHE-ECDSA-AES128-SHA256:ECDHE-RSA-AES128-SHA256", None,
                 id="tls12-both-cbc"),
    pytest.param(TLS12, "ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-ECDSA-AES128-GCM-SHA256",
                 id="tls12-aes-gcm"),
    pytest.param(TLS12, "ECDHE-ECDSA-CHACHA20-POLY1305", "ECDHE-ECDSA-CHACHA20-POLY1305",
                 id="tls12-chacha20"),
    pytest.param(TLS12, "ECDHE-ECDSA-AES128-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384",
                 "ECDHE-ECDSA-AES256-GCM-SHA384", id="tls12-cbc-and-aead-picks-aead"),
    pytest.param(TLS13, None, "TLS_AES_256_GCM_SHA384", id="tls13"),
]  # fmt: skip


@pytest.mark.parametrize(("version", "offered", "agreed"), SUITES)
def test_tls12_suites_are_aead_only(
    server: Serve, version: ssl.TLSVersion, offered: str | None, agreed: str | None
) -> None:
    context = _client(version, offered, server.cert_dir / "ca.crt")
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as raw:
        if agreed is None:
            with pytest.raises(ssl.SSLError) as refused:
                context.wrap_socket(raw, server_hostname="127.0.0.1")
            assert refused.value.reason == "SSLV3_ALERT_HANDSHAKE_FAILURE"  # the server said no
            return
        with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            cipher = tls.cipher()
            assert cipher is not None and cipher[0] == agreed
            assert tls.version() == version.name.replace("v1_", "v1.")


# --------------------------------------------------------------------------- rotation


def _new_pair(cert_dir: Path) -> tuple[bytes, bytes, int]:
    """A new serving certificate and key from the same CA: (cert PEM, key PEM, serial)."""
    ca, ca_key = certificates.read_ca(certificates.CertDir(cert_dir))
    cert, key = certificates.make_serving(ca, ca_key, ["localhost", "127.0.0.1"])
    return certificates.pem_certs([cert]), certificates.pem_key(key), cert.serial_number


def _serials(server: Serve, trust: Path, count: int = PROBES) -> set[int]:
    """The serials new connections are served with; every handshake must succeed."""
    seen = set()
    for _ in range(count):
        status, serial = serving_serial(server.port, trust)
        assert status == 200
        seen.add(serial)
    return seen


def _serves(server: Serve, trust: Path, serial: int) -> Callable[[], bool]:
    return lambda: serving_serial(server.port, trust)[1] == serial


def _replace_file_by_file(cert_dir: Path, cert: bytes, key: bytes) -> None:
    """Each file renamed into place, the key first: for a moment the new key sits beside the
    old certificate, a pair that must not be served."""
    certificates.write_file(cert_dir / "tls.key", key, private=True)
    time.sleep(0.3)  # handshakes meet the mismatched pair meanwhile
    certificates.write_file(cert_dir / "tls.crt", cert, private=False)


def test_a_pair_replaced_under_load_is_served_and_no_review_fails(server: Serve) -> None:
    trust = server.cert_dir / "ca.crt"
    cert, key, serial = _new_pair(server.cert_dir)
    with ReviewLoad(server, LOAD_THREADS, "rotate") as load:
        eventually(_answered(load, 10), what="reviews under way")
        _replace_file_by_file(server.cert_dir, cert, key)
        eventually(_serves(server, trust, serial), what="the new certificate served")
        eventually(_answered(load, load.answered() + 10), what="reviews after the rotation")
    print(f"\nreviews across a rotation: {latency_summary(load.latencies)}")
    assert load.failures == []
    assert _serials(server, trust) == {serial}


def _answered(load: ReviewLoad, count: int) -> Callable[[], bool]:
    return lambda: load.answered() >= count


def _pem_parts(cert_dir: Path) -> dict[str, bytes]:
    return {name: (cert_dir / name).read_bytes() for name in ("tls.crt", "tls.key")}


def _first_half(key: bytes, _other: bytes) -> bytes:
    return key[: len(key) // 2]


def _other_pairs_key(_key: bytes, other: bytes) -> bytes:
    return other


def _empty(_key: bytes, _other: bytes) -> bytes:
    return b""


BAD_KEYS = {
    "first-half-of-the-key": _first_half,
    "key-of-another-pair": _other_pairs_key,
    "empty": _empty,
}


@pytest.mark.parametrize("bad", list(BAD_KEYS), ids=list(BAD_KEYS))
def test_a_bad_key_keeps_the_last_good_pair_serving(server: Serve, bad: str) -> None:
    trust = server.cert_dir / "ca.crt"
    good = _pem_parts(server.cert_dir)
    serving = _serials(server, trust, 1).pop()
    _, other_key, _ = _new_pair(server.cert_dir)
    with ReviewLoad(server, LOAD_THREADS, bad) as load:
        with (server.cert_dir / "tls.key").open("wb") as key_file:  # in place, not renamed
            key_file.write(BAD_KEYS[bad](good["tls.key"], other_key))
        time.sleep(0.5)  # the server has seen the file change
        assert _serials(server, trust) == {serving}  # 0 failed handshakes, the last good pair
        cert, key, serial = _new_pair(server.cert_dir)
        _replace_file_by_file(server.cert_dir, cert, key)
        eventually(_serves(server, trust, serial), what="the next good pair served")
    assert load.failures == [] and load.answered() > 0
    assert _serials(server, trust) == {serial}


# --------------------------------------------------------------------------- Secret volume


def _publish(cert_dir: Path, files: dict[str, bytes], generation: int) -> None:
    """What the kubelet does to a Secret volume: write the files to a new directory, then
    swap the `..data` link to it in one rename; `tls.crt` and `tls.key` point through it."""
    target = cert_dir / f"..generation-{generation}"
    target.mkdir()
    for name, data in files.items():
        (target / name).write_bytes(data)
    link = cert_dir / "..data_tmp"
    link.symlink_to(target.name)
    os.replace(link, cert_dir / "..data")
    for name in files:
        if not (cert_dir / name).is_symlink():
            (cert_dir / name).symlink_to(f"..data/{name}")


@pytest.fixture(scope="module")
def secret_volume(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    """Serving from a directory laid out as a mounted Secret."""
    tmp = tmp_path_factory.mktemp("secret-volume")
    made = certificates.create(tmp / "made", ["localhost", "127.0.0.1"]).path
    names = ("ca.crt", "ca.key", "tls.crt", "tls.key")
    (tmp / "certs").mkdir()
    _publish(tmp / "certs", {n: (made / n).read_bytes() for n in names}, 0)
    shutil.rmtree(made)
    running = start(
        tmp, "volume", policies=write_policies(tmp / "policies", {"team-a": 2}),
        cert_dir=tmp / "certs",
    )  # fmt: skip
    yield running
    assert running.stop() == 0, running.logs()


def test_a_secret_volume_swap_under_load_is_served_and_no_review_fails(
    secret_volume: Serve,
) -> None:
    server, trust = secret_volume, secret_volume.cert_dir / "ca.crt"
    for generation in (1, 2):
        cert, key, serial = _new_pair(server.cert_dir)
        files = {"ca.crt": trust.read_bytes(), "ca.key": (server.cert_dir / "ca.key").read_bytes()}
        with ReviewLoad(server, LOAD_THREADS, f"volume-{generation}") as load:
            eventually(_answered(load, 10), what="reviews under way")
            _publish(server.cert_dir, {**files, "tls.crt": cert, "tls.key": key}, generation)
            eventually(_serves(server, trust, serial), what="the new certificate served")
        assert load.failures == []
        assert _serials(server, trust) == {serial}
