"""Child processes with log files, free loopback ports, and polling helpers."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

LOOPBACK = "127.0.0.1"


class StartupError(RuntimeError):
    """A component did not become ready; the message carries its log tail."""


def free_port() -> int:
    """A TCP port on the loopback interface that is free right now (bind to port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        port: int = sock.getsockname()[1]
        return port


def child_pids(parent: int) -> list[int]:
    """The processes `parent` started (forked or spawned), from /proc."""
    children = Path(f"/proc/{parent}/task/{parent}/children").read_text().split()
    return [int(pid) for pid in children]


def command_line(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_text().split("\0")


def gone(pid: int) -> bool:
    """Whether `pid` no longer runs (absent, or a zombie not yet reaped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def wait_for(
    condition: Callable[[], bool],
    *,
    timeout: float,
    interval: float = 0.25,
    what: str = "condition",
) -> None:
    """Call `condition` until it returns True; raise TimeoutError after `timeout` seconds.

    Exceptions from `condition` count as "not yet"; the last one is chained to the error.
    """
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            if condition():
                return
        except Exception as error:
            last_error = error
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}") from last_error


class ManagedProcess:
    """A long-running child process whose stdout and stderr go to `<log_dir>/<name>.log`."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log_dir: Path,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_dir / f"{name}.log"
        with self.log_path.open("wb") as log:
            self._popen = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **(env or {})},
                start_new_session=True,  # Ctrl-C reaches pytest only; teardown stops us in order
            )

    @property
    def pid(self) -> int:
        return self._popen.pid

    def is_running(self) -> bool:
        return self._popen.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError as error:
            return f"<no log: {error}>"
        return "\n".join(text.splitlines()[-lines:])

    def startup_error(self, reason: str) -> StartupError:
        state = "running" if self.is_running() else f"exited with {self._popen.returncode}"
        return StartupError(
            f"{self.name} {reason} ({state}); log {self.log_path}, last lines:\n{self.log_tail()}"
        )

    def wait_ready(self, probe: Callable[[], bool], timeout: float) -> None:
        """Poll `probe` until it succeeds; fail early if the process exits."""

        def ready() -> bool:
            if not self.is_running():
                raise self.startup_error("exited during startup")
            return probe()

        try:
            wait_for(ready, timeout=timeout, what=f"{self.name} to become ready")
        except TimeoutError as error:
            cause = error.__cause__
            failure = (
                cause
                if isinstance(cause, StartupError)
                else self.startup_error(f"not ready after {timeout:.0f}s: {cause}")
            )
            self.stop()
            raise failure from None

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after `grace` seconds."""
        if not self.is_running():
            return
        self._popen.send_signal(signal.SIGTERM)
        try:
            self._popen.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            self._popen.kill()
            self._popen.wait(timeout=grace)
