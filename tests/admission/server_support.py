"""Starting the real `dragate serve` (gunicorn, TLS) in a subprocess for the server tests."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests
from net_support import free_port

HERE = Path(__file__).parent
TENANTS = """\
apiVersion: dragate.io/v1alpha1
kind: Tenant
metadata: {{name: team-a}}
spec:
  namespaces: [{namespaces}]
  quota:
  - deviceClassName: gpu.nvidia.com
    maxDevices: 2
"""


def write_policies(directory: Path, *namespaces: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "tenants.yaml").write_text(TENANTS.format(namespaces=", ".join(namespaces)))


@dataclass
class Server:
    """One `dragate serve` process and how to reach it."""

    process: subprocess.Popen[bytes]
    port: int
    cert_dir: Path
    log: Path
    client_cert: tuple[str, str] | None = None
    trust: Path = field(init=False)

    def __post_init__(self) -> None:
        self.trust = self.cert_dir / "ca.crt"

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def post(self, path: str, body: Any, **kwargs: Any) -> requests.Response:
        kwargs.setdefault("timeout", 10)
        kwargs.setdefault("cert", self.client_cert)
        return requests.post(self.url + path, json=body, verify=str(self.trust), **kwargs)

    def get(self, path: str, **kwargs: Any) -> requests.Response:
        kwargs.setdefault("timeout", 10)
        kwargs.setdefault("cert", self.client_cert)
        return requests.get(self.url + path, verify=str(self.trust), **kwargs)

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                return self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
        return self.process.wait()

    def logs(self) -> str:
        return self.log.read_text(errors="replace")


def start(
    tmp: Path,
    *args: str,
    double: bool = True,
    policies: Path | None = None,
    client_cert: tuple[str, str] | None = None,
) -> Server:
    """`dragate serve` on a free port with a tmp cert dir; waits until /healthz answers."""
    cert_dir = tmp / "certs"
    if policies is None:
        policies = tmp / "policies"
        write_policies(policies, "team-a")
    port = free_port()
    entry = (
        [str(HERE / "serve_with_double.py")]
        if double
        else ["-c", "from webhook.cli import entry; entry()"]
    )
    command = [
        sys.executable,
        *entry,
        "serve",
        "--port",
        str(port),
        "--cert-dir",
        str(cert_dir),
        "--policies",
        str(policies),
        "--graceful-timeout",  # idle kept-alive connections hold a stopping worker this long
        "3",
        *args,
    ]
    env = {**os.environ, "XDG_STATE_HOME": str(tmp / "state")}
    log = tmp / "serve.log"
    process = subprocess.Popen(command, stdout=log.open("wb"), stderr=subprocess.STDOUT, env=env)
    server = Server(process, port, cert_dir, log, client_cert)
    _wait_healthy(server)
    return server


def _wait_healthy(server: Server, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise AssertionError(f"serve exited {server.process.returncode}:\n{server.logs()}")
        try:
            if server.get("/healthz", timeout=1).status_code == 200:
                return
        except (OSError, requests.RequestException):  # also: ca.crt not written yet
            pass
        time.sleep(0.1)
    server.stop()
    raise AssertionError(f"serve did not become healthy:\n{server.logs()}")


def readyz(server: Server) -> dict[str, Any]:
    """/readyz over a new connection."""
    body: dict[str, Any] = json.loads(server.get("/readyz", headers={"Connection": "close"}).text)
    return body
