"""Starting `dragate serve` and the no-op baseline as real processes on loopback."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from processcpu import with_children
from timing import pod_pss_mib

HERE = Path(__file__).resolve().parent
DRAGATE = ["-m", "webhook", "serve"]
"""`dragate serve` as the console script runs it (`webhook.cli.entry`: gevent's monkey
patching before anything imports ssl or socket)."""


@dataclass
class Served:
    """One server process (the gunicorn master) and its port."""

    name: str
    process: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def processes(self) -> list[int]:
        """The gunicorn master and its one worker."""
        return with_children(self.process.pid)

    def memory(self) -> dict[str, float]:
        """The pod's memory: PSS of the master and the worker, and their sum."""
        master, *workers = self.processes()
        if len(workers) != 1:
            raise RuntimeError(f"{self.name}: expected one worker, found {len(workers)}")
        return pod_pss_mib(master, workers[0])


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _healthy(url: str) -> bool:
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    try:
        with urllib.request.urlopen(url + "/healthz", timeout=1, context=context) as reply:
            return bool(reply.status == 200)
    except OSError:
        return False


def _wait(served: Served, seconds: float = 180) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if served.process.poll() is not None:
            raise RuntimeError(f"{served.name} exited:\n{served.log.read_text()[-3000:]}")
        if _healthy(served.url):
            return
        time.sleep(0.1)
    raise RuntimeError(f"{served.name} did not become healthy:\n{served.log.read_text()[-3000:]}")


def _start(name: str, args: list[str], tmp: Path, port: int) -> Served:
    env = {**os.environ, "XDG_STATE_HOME": str(tmp / "state")}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    log = tmp / f"{name}.log"
    process = subprocess.Popen(
        [sys.executable, *args], stdout=log.open("wb"), stderr=subprocess.STDOUT, env=env
    )
    served = Served(name, process, port, log)
    try:
        _wait(served)
    except BaseException:
        stop(served)
        raise
    return served


def stop(served: Served) -> None:
    if served.process.poll() is None:
        served.process.send_signal(signal.SIGTERM)
        try:
            served.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            served.process.kill()
            served.process.wait()


def start_dragate(tmp: Path, policies: Path, state: Path) -> Served:
    """`dragate serve` with its defaults except the files and the port."""
    port = free_port()
    args = [
        *DRAGATE,
        "--port",
        str(port),
        "--cert-dir",
        str(tmp / "certs"),
        "--policies",
        str(policies),
        "--state",
        str(state),
        "--ledger",
        str(tmp / "ledger.sqlite3"),
    ]
    return _start("dragate", args, tmp, port)


def start_noop(tmp: Path) -> Served:
    """The no-op Flask app with dragate's gunicorn settings and certificate (start dragate
    first: it makes the certificate)."""
    port = free_port()
    args = [str(HERE / "noop_server.py"), "--port", str(port), "--cert-dir", str(tmp / "certs")]
    return _start("noop", args, tmp, port)


@contextmanager
def serving(tmp: Path, policies: Path, state: Path) -> Iterator[dict[str, Served]]:
    """Both servers, stopped on the way out."""
    dragate = start_dragate(tmp, policies, state)
    try:
        noop = start_noop(tmp)
    except BaseException:
        stop(dragate)
        raise
    try:
        yield {"dragate": dragate, "noop": noop}
    finally:
        stop(noop)
        stop(dragate)


@contextmanager
def cpus_apart(served: list[Served]) -> Iterator[bool]:
    """The servers on the first CPU, this thread (and the load generator it starts) on the
    second, as an API server and its webhook are on different machines: at one connection,
    the load generator and the kernel's TLS for it then no longer take the server's CPU and
    caches. Yields False, changing nothing, on a machine with one CPU."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        yield False
        return
    _pin(served, {cpus[0]})
    os.sched_setaffinity(0, {cpus[1]})
    try:
        yield True
    finally:
        os.sched_setaffinity(0, set(cpus))
        _pin(served, set(cpus))


def _pin(served: list[Served], cpus: set[int]) -> None:
    """Every thread of every server process (threads made later inherit their maker's CPUs)."""
    for one in served:
        for pid in one.processes():
            for tid in os.listdir(f"/proc/{pid}/task"):
                with contextlib.suppress(ProcessLookupError, FileNotFoundError):
                    os.sched_setaffinity(int(tid), cpus)
