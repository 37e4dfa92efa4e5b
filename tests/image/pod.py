"""A running pod of the image: start it as the chart would, probe it, look inside, stop it."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from e2e import certs
from e2e.processes import ManagedProcess, wait_for

from .container import ImageConfig, PodSpec, container_pid, launch_argv, nsenter

REPO = Path(__file__).resolve().parents[2]
PROBE = Path(__file__).resolve().with_name("probe.py")
READY_TIMEOUT = 60.0


def build_image() -> Path:
    """The cached image dir for the current inputs (built on the first call after a change)."""
    result = subprocess.run([sys.executable, str(REPO / "image/build.py"), "build"],
                            capture_output=True, text=True, check=False)  # fmt: skip
    if result.returncode != 0:
        raise AssertionError(f"image/build.py failed:\n{result.stdout}\n{result.stderr}")
    return Path(result.stdout.strip().splitlines()[-1])


def write_serving_cert(directory: Path) -> bytes:
    """tls.crt, tls.key and ca.crt for 127.0.0.1/localhost, as the chart's Secret holds them;
    returns the CA PEM."""
    directory.mkdir(parents=True)
    ca = certs.make_ca("dragate-image-ca")
    ca.write(directory, "ca")
    certs.make_serving_cert(ca, ("127.0.0.1", "localhost")).write(directory, "tls")
    return ca.cert_pem


@dataclass
class Pod:
    process: ManagedProcess
    port: int
    ca_file: Path
    own_net: bool

    @classmethod
    def start(cls, image_dir: Path, spec: PodSpec, sources: Mapping[str, Path], workdir: Path,
              *, own_net: bool = True) -> Pod:  # fmt: skip
        image = ImageConfig.read(image_dir / "oci")
        argv = launch_argv(image_dir / "rootfs", image, spec, sources, workdir, own_net=own_net)
        process = ManagedProcess("pod", argv, workdir)
        port = spec.container["ports"][0]["containerPort"]
        pod = cls(process, port, sources["tls"] / "ca.crt", own_net)
        process.wait_ready(lambda: pod.get("/readyz")["status"] == 200, READY_TIMEOUT)
        return pod

    @property
    def pid(self) -> int:
        """Host PID of the container's PID 1 (gunicorn's master)."""
        found = container_pid(self.process.pid)
        assert found is not None, f"no container process\n{self.process.log_tail()}"
        return found

    def request(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        argv = [sys.executable, str(PROBE), method, f"https://127.0.0.1:{self.port}{path}",
                str(self.ca_file)]  # fmt: skip
        if body is not None:
            body_file = self.process.log_path.with_suffix(".body.json")
            body_file.write_text(json.dumps(body))
            argv.append(str(body_file))
        result = nsenter(self.pid, *argv, net=True) if self.own_net else subprocess.run(
            argv, capture_output=True, text=True, timeout=30, check=False)  # fmt: skip
        if result.returncode != 0:
            return {"status": 0, "body": result.stderr}
        answer: dict[str, Any] = json.loads(result.stdout)
        return answer

    def get(self, path: str) -> dict[str, Any]:
        return self.request("GET", path)

    def run_inside(self, *argv: str, user: int = 65532) -> subprocess.CompletedProcess[str]:
        """`argv` in the container's mounts and root, as `user` (no shell in the image)."""
        return nsenter(self.pid, *argv, root=True, user=user)

    def terminate(self, grace: float = 40.0) -> int:
        """SIGTERM to the container's PID 1, as the kubelet sends it; returns the exit code."""
        os.kill(self.pid, signal.SIGTERM)
        wait_for(lambda: not self.process.is_running(), timeout=grace, what="the pod to exit")
        code = self.process._popen.returncode
        return int(code)

    def stop(self) -> None:
        """SIGTERM to PID 1 (unshare does not forward it), SIGKILL to it if stuck: killing
        unshare alone would orphan the server (chroot --userspec clears the parent-death
        signal), while PID 1's death ends the whole PID namespace."""
        pid = container_pid(self.process.pid) if self.process.is_running() else None
        if pid is not None:
            os.kill(pid, signal.SIGTERM)
            try:
                wait_for(lambda: not self.process.is_running(), timeout=40.0, what="exit")
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        self.process.stop(grace=10.0)
