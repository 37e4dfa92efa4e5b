"""Security properties of a real `dragate serve` (real pipeline, real policies, over TLS)."""

from __future__ import annotations

import http.client
import socket
import ssl
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import requests
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from reliability.reliability_support import (
    Serve,
    claim,
    eventually,
    pod,
    request,
    review,
    serving,
    tls_context,
)

from webhook import certificates

SECRET = "hunter2"
CONTROL = tuple(chr(c) for c in [*range(0x20), *range(0x7F, 0xA0), 0x2028, 0x2029, 0x202E])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    with serving(tmp_path_factory.mktemp("security"), "sec", deny_unknown=True) as running:
        yield running


def post(server: Serve, path: str, body: Any) -> dict[str, Any]:
    status, answer = request(server.port, server.cert_dir / "ca.crt", "POST", path, body)
    assert status == 200, answer
    response: dict[str, Any] = answer["response"]
    return response


# --------------------------------------------------------------------------- transport


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize(
    ("version", "accepted"),
    [
        (ssl.TLSVersion.TLSv1, False),
        (ssl.TLSVersion.TLSv1_1, False),
        (ssl.TLSVersion.TLSv1_2, True),
        (ssl.TLSVersion.TLSv1_3, True),
    ],
)
def test_tls_versions(server: Serve, version: ssl.TLSVersion, accepted: bool) -> None:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.load_verify_locations(str(server.cert_dir / "ca.crt"))
    context.minimum_version = context.maximum_version = version
    context.set_ciphers("DEFAULT:@SECLEVEL=0")  # let this client offer old versions at all
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as raw:
        if accepted:
            with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                assert tls.version() == version.name.replace("v1_", "v1.").replace("TLSv1", "TLSv1")
        else:
            with pytest.raises(ssl.SSLError) as refused:
                context.wrap_socket(raw, server_hostname="127.0.0.1")
            assert refused.value.reason == "TLSV1_ALERT_PROTOCOL_VERSION"  # the server said no


def test_plaintext_http_is_refused_and_logs_no_traceback(server: Serve) -> None:
    before = len(server.logs())
    with pytest.raises(requests.ConnectionError):
        requests.post(f"http://127.0.0.1:{server.port}/validate", json={}, timeout=5)
    socket.create_connection(("127.0.0.1", server.port), timeout=5).close()  # a port scan
    assert post(server, "/validate", review(claim("after-scan", "team-a"), "scan"))["allowed"]
    assert "Traceback" not in server.logs()[before:]


def test_chunked_body_over_the_cap_is_413(server: Serve) -> None:
    """No Content-Length (chunked): the cap still holds, the answer is a 413 with a message."""
    conn = http.client.HTTPSConnection(
        "127.0.0.1", server.port, context=tls_context(server.cert_dir / "ca.crt"), timeout=20
    )
    chunk = b" " * 65536
    try:
        conn.request("POST", "/validate", body=iter([chunk] * 49),  # 3 MiB + 64 KiB
                     headers={"Content-Type": "application/json"}, encode_chunked=True)  # fmt: skip
        response = conn.getresponse()
        assert response.status == 413 and b"limit" in response.read()
    finally:
        conn.close()


ClientFiles = dict[str, tuple[str, str]]


def _two_common_names(ca: x509.Certificate, ca_key: Any, first: str, second: str) -> Any:
    """A client certificate from `ca` whose subject has two CNs (`first`, then `second`)."""
    key = ec.generate_private_key(ec.SECP256R1())
    cn = NameOID.COMMON_NAME
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(cn, first), x509.NameAttribute(cn, second)]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=1))
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return cert, key


def _client_files(clients: Path) -> ClientFiles:
    """Client certificates: CN=apiserver and CN=kubelet from the trusted CA, one with both
    CNs in its subject, one from a rogue CA; the trusted CA is written to clients/ca.crt."""
    good_ca, good_key = certificates.make_ca("apiserver-client-ca")
    rogue_ca, rogue_key = certificates.make_ca("rogue-ca")
    issued = {
        "apiserver": (good_ca, good_key, "apiserver"),
        "kubelet": (good_ca, good_key, "kubelet"),
        "rogue": (rogue_ca, rogue_key, "apiserver"),
    }
    files: ClientFiles = {}
    made = {label: certificates.make_client(*issue) for label, issue in issued.items()}
    made["two-cns"] = _two_common_names(good_ca, good_key, "kubelet", "apiserver")
    for label, (cert, cert_key) in made.items():
        certificates.write_file(
            clients / f"{label}.crt", certificates.pem_certs([cert]), private=False
        )
        certificates.write_file(
            clients / f"{label}.key", certificates.pem_key(cert_key), private=True
        )
        files[label] = (str(clients / f"{label}.crt"), str(clients / f"{label}.key"))
    certificates.write_file(clients / "ca.crt", certificates.pem_certs([good_ca]), private=False)
    return files


@pytest.fixture(scope="module")
def mtls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Serve, ClientFiles]]:
    """A server requiring client certificates from clients/ca.crt named `apiserver`."""
    tmp = tmp_path_factory.mktemp("mtls")
    files = _client_files(tmp / "clients")
    named = ("--client-ca", str(tmp / "clients" / "ca.crt"), "--client-name", "apiserver")
    with serving(tmp, "mtls", args=named, client_cert=files["apiserver"]) as running:
        yield running, files


CLIENTS = [
    # (client certificate, status of a review, words in the message)
    pytest.param("apiserver", 200, "", id="named-client"),
    pytest.param("kubelet", 403, "names are not among --client-name", id="other-name-same-ca"),
    pytest.param(None, 403, "client certificate", id="no-certificate"),
    pytest.param("two-cns", 403, "more than one Common Name", id="two-cns-one-allowed"),
]


@pytest.mark.parametrize(("client", "status", "words"), CLIENTS)
def test_reviews_only_from_a_named_client_certificate(
    mtls: tuple[Serve, ClientFiles], client: str | None, status: int, words: str
) -> None:
    server, files = mtls
    forged = review(claim(f"c-{client}", "team-a", 2), f"mtls-{client}")
    code, answer = request(server.port, server.cert_dir / "ca.crt", "POST", "/validate", forged,
                           client_cert=files[client] if client else None)  # fmt: skip
    assert code == status, answer
    if status == 200:
        assert answer["response"]["allowed"] is True
    else:
        assert answer["code"] == status and words in answer["message"]  # JSON, no reservation


def test_a_certificate_from_another_ca_fails_the_handshake(mtls: tuple[Serve, ClientFiles]) -> None:
    server, files = mtls
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
        request(server.port, server.cert_dir / "ca.crt", "GET", "/healthz",
                client_cert=files["rogue"])  # fmt: skip


def test_probes_need_no_certificate_and_reviews_are_refused_before_the_body(
    mtls: tuple[Serve, ClientFiles],
) -> None:
    server, _ = mtls
    trust = server.cert_dir / "ca.crt"
    assert request(server.port, trust, "GET", "/healthz")[0] == 200  # kubelet probes
    # refused once the headers are in: a 3 MiB body that never comes is never waited for
    with (
        socket.create_connection(("127.0.0.1", server.port), timeout=10) as raw,
        tls_context(trust).wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        tls.sendall(b"POST /validate HTTP/1.1\r\nHost: d\r\nContent-Length: 3145728\r\n\r\n")
        assert b" 403 " in tls.recv(4096)


# --------------------------------------------------------------------------- logs and messages


def test_no_objects_or_secrets_in_logs(server: Serve) -> None:
    before = len(server.logs())
    secret_pod = pod("leaky", "team-a", containers=[{
        "name": "c", "image": "busybox", "env": [{"name": "PASSWORD", "value": SECRET}],
        "resources": {"limits": {"nvidia.com/gpu": 1}},
    }])  # fmt: skip
    assert post(server, "/mutate", review(secret_pod, "leak-1"))["allowed"] is True
    assert post(server, "/validate", review(secret_pod, "leak-2"))["allowed"] is True
    denied = claim("leaky-claim", "team-a", 5, annotations={"token": SECRET})
    assert post(server, "/validate", review(denied, "leak-3"))["allowed"] is False
    broken = review(secret_pod, "leak-4")
    broken["request"]["object"]["spec"]["containers"] = {"not": "a list", "x": SECRET}
    post(server, "/validate", broken)  # a malformed object: an explicit answer, no traceback
    eventually(lambda: '"uid":"leak-3"' in server.logs(), what="the review log lines")
    logs = server.logs()[before:]
    assert '"uid":"leak-3"' in logs  # review lines are written...
    assert SECRET not in logs  # ...but never the object
    assert "Traceback" not in logs


def _clean(text: str) -> None:
    assert not any(c in text for c in CONTROL), repr(text)


EVIL = "evil\n\x1b[31mRED\x1b[0m\r\u202efdp.exe\x85" + "名前" * 200


def test_user_strings_are_escaped_in_warnings_and_messages(server: Serve) -> None:
    gpu_pod = pod("p", "team-a", containers=[
        {"name": EVIL, "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": 1}}},
    ])  # fmt: skip
    mutated = post(server, "/mutate", review(gpu_pod, "esc-1"))
    assert mutated["warnings"]
    for warning in mutated["warnings"]:
        assert len(warning) <= 120
        _clean(warning)
    stranger = claim(EVIL, EVIL)  # a namespace in no tenant: denied, the name in the message
    denied = post(server, "/validate", review(stranger, "esc-2"))
    assert denied["allowed"] is False
    _clean(denied["status"]["message"])
    assert "RED" in denied["status"]["message"]  # escaped, not dropped
    for value in denied["auditAnnotations"].values():
        _clean(value)


def test_deny_unknown_namespaces_end_to_end(server: Serve) -> None:
    stranger = post(server, "/validate", review(claim("c", "nobody-owns-this"), "unk-1"))
    assert stranger["allowed"] is False
    assert stranger["status"]["code"] == 403
    assert "nobody-owns-this" in stranger["status"]["message"]
    no_devices = post(server, "/validate", review(pod("p", "nobody-owns-this"), "unk-2"))
    assert no_devices["allowed"] is True  # no devices asked: nothing to refuse
    member = post(server, "/validate", review(claim("c", "team-a"), "unk-3", dry_run=True))
    assert member["allowed"] is True


def test_every_answer_carries_audit_annotations(server: Serve) -> None:
    cases = [
        ("/validate", review(claim("a1", "team-a"), "au-1", dry_run=True), "allowed"),
        ("/validate", review(claim("a2", "team-a", 9), "au-2"), "denied"),
        ("/validate", review(claim("a3", "nobody"), "au-3"), "denied"),
        ("/mutate", review(pod("a4", "team-a"), "au-4"), "allowed"),
        ("/validate", review(pod("a5", "kube-system"), "au-5"), "allowed"),  # exempt by Settings
    ]
    delete = review(claim("a6", "team-a"), "au-6")
    delete["request"].update(operation="DELETE", object=None, oldObject=claim("a6", "team-a"))
    cases.append(("/validate", delete, "allowed"))  # exempt by the handler
    for path, body, decision in cases:
        response = post(server, path, body)
        annotations = response["auditAnnotations"]
        assert annotations["decision"] == decision, (body["request"]["uid"], annotations)
        for key in annotations:
            assert "/" not in key and len(key) <= 63
        if decision == "denied":
            assert annotations["policies"]
