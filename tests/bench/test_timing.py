"""The harness's own pieces: summaries of no samples, and a load window too short to matter."""

from __future__ import annotations

import http.server
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from loadgen import run_python
from timing import SUMMARY_KEYS, pod_pss_mib, summarize

from webhook import certificates


@pytest.mark.parametrize(
    ("samples", "expected"),
    [
        ([], {"samples": 0, "note": "no samples", **dict.fromkeys(SUMMARY_KEYS)}),
        (
            [5.0],
            {
                "samples": 1,
                "min_us": 5.0,
                "p50_us": 5.0,
                "p90_us": 5.0,
                "p99_us": 5.0,
                "max_us": 5.0,
            },
        ),
        (
            [3.0, 1.0, 2.0],
            {
                "samples": 3,
                "min_us": 1.0,
                "p50_us": 2.0,
                "p90_us": 3.0,
                "p99_us": 3.0,
                "max_us": 3.0,
            },
        ),
    ],
    ids=["none", "one", "three"],
)
def test_summarize(samples: list[float], expected: dict[str, object]) -> None:
    assert summarize(samples) == expected


class _Allow(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def allow_server(tmp_path: Path) -> Iterator[str]:
    certificates.create(tmp_path, ["localhost", "127.0.0.1"])
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Allow)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(tmp_path / "tls.crt"), str(tmp_path / "tls.key"))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"https://127.0.0.1:{server.server_address[1]}/validate"
    server.shutdown()
    server.server_close()


def test_an_empty_window_still_measures_one_request_per_connection(allow_server: str) -> None:
    """A zero-second window is what a starved machine sees: samples, never an IndexError."""
    result = run_python(allow_server, b"{}", connections=3, seconds=0)
    assert result["requests"] >= 3 and result["samples"] >= 3
    assert result["p50_us"] is not None and result["non_2xx"] == 0


def test_a_pods_memory_is_the_pss_of_its_two_processes() -> None:
    code = "import time; print('up', flush=True); time.sleep(30)"
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stdout.readline() == b"up\n"
        pod = pod_pss_mib(child.pid, child.pid)
    finally:
        child.kill()
        child.wait()
    assert pod["master_pss_mib"] > 1 and pod["master_pss_mib"] == pod["worker_pss_mib"]
    assert pod["pss_mib"] == round(2 * pod["master_pss_mib"], 1)
