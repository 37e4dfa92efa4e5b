"""The real `dragate serve`: gunicorn, TLS, workers, reload and shutdown, over real sockets."""

from __future__ import annotations

import base64
import json
import signal
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from admission.admission_support import pod, review_body
from admission.server_support import (
    Server,
    readyz,
    start,
    write_policies,
)
from net_support import serving_serial

from webhook import certificates


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    running = start(tmp_path_factory.mktemp("serve"))
    yield running
    assert running.stop() == 0, running.logs()


def test_allow_deny_and_mutate(server: Server) -> None:
    allowed = server.post("/validate", review_body()).json()["response"]
    assert allowed["allowed"] is True and allowed["uid"] == review_body()["request"]["uid"]
    denied = server.post("/validate", review_body(pod(deny="yes"))).json()["response"]
    assert denied["status"]["code"] == 403 and "limit 8" in denied["status"]["message"]
    mutated = server.post("/mutate", review_body()).json()["response"]
    assert mutated["patchType"] == "JSONPatch"
    assert json.loads(base64.b64decode(mutated["patch"]))[0]["path"].startswith("/metadata")


def test_dry_run_is_passed_through(server: Server) -> None:
    response = server.post("/validate", review_body(dryRun=True)).json()["response"]
    assert response["warnings"] == ["dry run: nothing reserved"]


def test_timeout_parameter_answers_in_time(server: Server) -> None:
    """Each answered at its 0.75 s budget, long before its 3 s of work would end."""
    started = time.monotonic()
    validate = server.post("/validate?timeout=1s", review_body(pod(sleep="3"))).json()
    assert time.monotonic() - started < 3.0
    started = time.monotonic()
    mutate = server.post("/mutate?timeout=1s", review_body(pod(sleep="3"))).json()
    assert time.monotonic() - started < 3.0
    assert validate["response"]["allowed"] is False
    assert mutate["response"]["allowed"] is True and "exceeded" in mutate["response"]["warnings"][0]


@pytest.mark.parametrize(
    ("data", "headers", "code"),
    [
        (b"{", {"Content-Type": "application/json"}, 400),
        (json.dumps(review_body()).encode(), {"Content-Type": "text/plain"}, 400),
        (b"x" * (3 * 1024 * 1024 + 1), {"Content-Type": "application/json"}, 413),
    ],
    ids=["malformed", "content-type", "too-large"],
)
def test_bad_input_is_a_json_4xx(
    server: Server, data: bytes, headers: dict[str, str], code: int
) -> None:
    response = requests.post(
        server.url + "/validate", data=data, headers=headers, verify=str(server.trust), timeout=10
    )
    assert response.status_code == code and "message" in response.json()


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1_1 is deprecated:DeprecationWarning")
def test_tls_versions(server: Server) -> None:
    modern = ssl.create_default_context(cafile=str(server.trust))
    with (
        socket.create_connection(("127.0.0.1", server.port)) as raw,
        modern.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        assert tls.version() == "TLSv1.3"
        assert tls.selected_alpn_protocol() in (None, "http/1.1")
    old = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    old.load_verify_locations(str(server.trust))
    old.minimum_version = old.maximum_version = ssl.TLSVersion.TLSv1_1
    old.set_ciphers("DEFAULT:@SECLEVEL=0")
    with socket.create_connection(("127.0.0.1", server.port)) as raw, pytest.raises(ssl.SSLError):
        old.wrap_socket(raw, server_hostname="127.0.0.1")


def test_plaintext_is_refused(server: Server) -> None:
    with pytest.raises(requests.ConnectionError):
        requests.get(f"http://127.0.0.1:{server.port}/healthz", timeout=5)


def test_metrics_count_every_review(server: Server) -> None:
    body = review_body(
        operation="UPDATE",
        kind={"group": "", "version": "v1", "kind": "Namespace"},
        resource={"group": "", "version": "v1", "resource": "namespaces"},
    )
    for _ in range(12):  # a new connection each time
        assert server.post("/validate", body, headers={"Connection": "close"}).ok
    text = server.get("/metrics").text
    line = (
        'dragate_admission_requests_total{endpoint="validate",kind="Namespace",'
        'operation="UPDATE",result="allowed"} 12.0'
    )
    assert line in text
    assert "dragate_policy_reload_success 1.0" in text
    assert "dragate_certificate_expiry_timestamp_seconds " in text


def _client_pair(directory: Path, name: str) -> tuple[tuple[str, str], Path]:
    """A CA and a client certificate it signed: ((cert, key) files, the CA file)."""
    ca, ca_key = certificates.make_ca(f"{name}-ca")
    cert, key = certificates.make_client(ca, ca_key)
    write = certificates.write_file
    write(directory / f"{name}-ca.crt", certificates.pem_certs([ca]), private=False)
    write(directory / f"{name}.crt", certificates.pem_certs([cert]), private=False)
    certificates.write_file(directory / f"{name}.key", certificates.pem_key(key), private=True)
    pair = (str(directory / f"{name}.crt"), str(directory / f"{name}.key"))
    return pair, directory / f"{name}-ca.crt"


def test_mtls_is_required_for_reviews_with_client_ca(tmp_path: Path) -> None:
    """With --client-ca only a peer presenting a certificate of that CA gets a review; a
    certificate of another CA fails the handshake; probes without any still see /healthz."""
    pair, client_ca = _client_pair(tmp_path / "clients", "apiserver")
    rogue, _ = _client_pair(tmp_path / "clients", "rogue")
    server = start(tmp_path, "--client-ca", str(client_ca), client_cert=pair)
    body = review_body()
    try:
        assert server.post("/validate", body).json()["response"]["allowed"] is True
        for path in ("/validate", "/mutate"):
            forged = server.post(path, body, cert=None)
            assert forged.status_code == 403 and "client certificate" in forged.json()["message"]
        with pytest.raises((requests.exceptions.SSLError, requests.ConnectionError)):
            server.post("/validate", body, cert=rogue)
        assert server.get("/healthz", cert=None).status_code == 200  # kubelet probes
    finally:
        assert server.stop() == 0


def test_certificate_rotation_without_failures(tmp_path: Path) -> None:
    """Same-CA renewal, then a new CA published as old+new bundle first, under load."""
    live = tmp_path / "certs"
    certificates.create(live, ["localhost", "127.0.0.1"])
    trust = tmp_path / "trust.pem"
    trust.write_bytes((live / "ca.crt").read_bytes())
    server = start(tmp_path)
    seen: set[int] = set()
    failures: list[str] = []
    stop = threading.Event()

    calls = [0]  # connections the client has finished

    def client() -> None:
        while not stop.is_set():
            try:
                status, serial = serving_serial(server.port, trust)
                seen.add(serial) if status == 200 else failures.append(str(status))
            except (OSError, ssl.SSLError) as err:
                failures.append(repr(err))
            calls[0] += 1

    thread = threading.Thread(target=client, daemon=True)
    thread.start()
    try:
        _eventually(lambda: len(seen) == 1)  # the client is served the first certificate
        certificates.renew(live)
        _wait_for_serial(seen, live)
        staging = tmp_path / "staging"  # rotate the CA in a copy; publish the bundle first
        staging.mkdir()
        for name in ("ca.crt", "ca.key", "tls.crt", "tls.key"):
            (staging / name).write_bytes((live / name).read_bytes())
        certificates.renew(staging, rotate_ca=True)
        # published whole, as the API server takes a new caBundle: the client reads it for
        # every connection, and a half-written file fails its own TLS setup, not the server
        bundle = (staging / "ca-bundle.crt").read_bytes()
        certificates.write_file(trust, bundle, private=False)
        published = calls[0]
        _eventually(lambda: calls[0] >= published + 2)  # a whole connection with the new bundle
        for name in ("tls.key", "tls.crt"):
            certificates.write_file(live / name, (staging / name).read_bytes(), private=True)
        _wait_for_serial(seen, live)
    finally:
        stop.set()
        thread.join(10)
        assert server.stop() == 0
    assert failures == []
    assert len(seen) >= 3


def _wait_for_serial(seen: set[int], live: Path) -> None:
    serial = certificates.read_certs(live / "tls.crt")[0].serial_number
    deadline = time.monotonic() + 10
    while serial not in seen and time.monotonic() < deadline:
        time.sleep(0.05)
    assert serial in seen


BROKEN = {
    "wrong-type": (
        "apiVersion: dragate.io/v1alpha1\nkind: Tenant\nmetadata: {name: x}\nspec: {quota: 7}\n",
        "broken.yaml:4: spec.quota",
    ),
    "undefined-request-field": (
        "apiVersion: dragate.io/v1alpha1\nkind: DeviceClassPolicy\nmetadata: {name: x}\n"
        "spec:\n  validations:\n  - expression: request.cnt <= 4\n",
        "broken.yaml:6: spec.validations[0].expression: does not compile: undefined field 'cnt'",
    ),
}


@pytest.mark.parametrize(("broken", "error"), BROKEN.values(), ids=BROKEN)
def test_broken_policy_keeps_the_last_good_set(tmp_path: Path, broken: str, error: str) -> None:
    policies = tmp_path / "policies"
    write_policies(policies, "team-a")
    server = start(tmp_path, "--reload-interval", "0.1", policies=policies)
    team_b = review_body(pod("team-b"))
    try:
        assert server.post("/validate", team_b).json()["response"]["allowed"] is False
        write_policies(policies, "team-a", "team-b")
        _eventually(
            lambda: all(
                server.post("/validate", team_b, headers={"Connection": "close"}).json()[
                    "response"
                ]["allowed"]
                for _ in range(6)
            )
        )
        time.sleep(1.0)  # every worker has polled many times by now, not just the one we hit
        (policies / "broken.yaml").write_text(broken)
        _eventually(lambda: all(readyz(server)["policies"]["state"] == "stale" for _ in range(6)))
        time.sleep(1.0)
        ready = server.get("/readyz")
        assert ready.status_code == 200
        assert error in " ".join(ready.json()["policies"]["errors"])
        for _ in range(6):
            response = server.post("/validate", team_b, headers={"Connection": "close"})
            assert response.json()["response"]["allowed"] is True
        assert "dragate_policy_reload_success 0.0" in server.get("/metrics").text
    finally:
        assert server.stop() == 0


def _eventually(check: object, seconds: float = 10) -> None:
    assert callable(check)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise AssertionError("condition not reached in time")


def test_sigterm_drains_in_flight_requests_and_exits_0(tmp_path: Path) -> None:
    server = start(tmp_path, "--graceful-timeout", "3")
    session = requests.Session()
    trust = str(server.trust)
    assert session.get(server.url + "/healthz", verify=trust).status_code == 200  # kept alive
    results: list[requests.Response] = []
    slow = threading.Thread(
        target=lambda: results.append(server.post("/validate", review_body(pod(sleep="1.5"))))
    )
    slow.start()
    time.sleep(0.4)
    server.process.send_signal(signal.SIGTERM)

    def drained() -> bool:  # same connection, answered "close" once the worker is stopping
        answer = session.get(server.url + "/healthz", verify=trust)
        assert answer.status_code == 200
        return answer.headers.get("Connection", "").lower() == "close"

    _eventually(drained)
    slow.join(10)
    assert results and results[0].status_code == 200
    assert results[0].json()["response"]["allowed"] is True
    assert server.process.wait(timeout=15) == 0
    with pytest.raises(requests.ConnectionError):
        requests.get(server.url + "/healthz", verify=str(server.trust), timeout=2)


def test_real_pipeline_denies_over_quota(tmp_path: Path) -> None:
    """No double: the default wiring (real loader, pipeline, offline state, memory ledger)."""
    policies = tmp_path / "policies"
    write_policies(policies, "team-a")
    server = start(tmp_path, double=False, policies=policies)
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "big", "namespace": "team-a"},
        "spec": {
            "devices": {
                "requests": [
                    {"name": "gpus", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 4}}
                ]
            }
        },
    }
    body = review_body(
        claim,
        kind={"group": "resource.k8s.io", "version": "v1", "kind": "ResourceClaim"},
        resource={"group": "resource.k8s.io", "version": "v1", "resource": "resourceclaims"},
    )
    try:
        response = server.post("/validate", body).json()["response"]
        assert response["allowed"] is False, response
        assert response["status"]["code"] == 403
        assert "team-a" in response["status"]["message"]
    finally:
        assert server.stop() == 0
