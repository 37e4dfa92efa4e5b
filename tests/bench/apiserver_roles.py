"""The apiserver benchmark's two roles of dragate, as the chart runs them: the webhook
(`dragate serve --role webhook`, gunicorn with one gevent worker, answering every review)
and the controller beside it (`dragate serve --role controller`: the Lease, the reconciler,
the background audit and its PolicyReports, status, on plain threads, probes and /metrics
over plain HTTP on `--probe-port`).

While the creates are measured, `RoleWatch` samples every SAMPLE_SECONDS each role's memory
(PSS from /proc/<pid>/smaps_rollup: the webhook's master and worker summed, the controller's
one process) and the controller's /metrics (`dragate_audit_last_success_timestamp_seconds`,
`dragate_audit_duration_seconds`), so the report says how much memory each role took at its
peak and at the end, against the chart's limit, and which audit passes ran during the
measured rounds and how long each took.
"""

from __future__ import annotations

import math
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from processcpu import run_ns, with_children
from timing import pss_mib, rss_mib

REPO = Path(__file__).resolve().parents[2]
VALUES = REPO / "charts" / "dragate" / "values.yaml"
LIMIT_KEYS = {
    "webhook": ("webhook", "resources", "limits", "memory"),
    "controller": ("controller", "resources", "limits", "memory"),
}
"""Where the chart sets each role's memory limit."""
CPU_REQUEST_KEYS = {
    "webhook": ("webhook", "resources", "requests", "cpu"),
    "controller": ("controller", "resources", "requests", "cpu"),
}
"""Where the chart sets each role's CPU request: its share of a busy node's CPUs."""
NICE_STEP = 1.25
"""The ratio of the kernel's CPU weights between neighbouring nice levels
(`sched_prio_to_weight`: 1024 at nice 0, 820 at nice 1, ...)."""
SAMPLE_SECONDS = 1.0
READY_SECONDS = 900.0
"""How long a controller may take to list a large cluster and load its policies."""
AUDIT_INTERVAL_S = 60.0
"""The controller's audit interval (webhook/kube/policyreports.py): a pass every 60 s."""
AUDIT_TICK_S = 2.0


# ------------------------------------------------------------------------- the chart


def _mib(quantity: str) -> float:
    units = {"Ki": 1 / 1024, "Mi": 1, "Gi": 1024, "K": 1e3 / 2**20, "M": 1e6 / 2**20}
    units["G"] = 1e9 / 2**20
    for suffix, factor in sorted(units.items(), key=lambda u: -len(u[0])):
        if quantity.endswith(suffix):
            return round(float(quantity[: -len(suffix)]) * factor, 1)
    return round(float(quantity) / 2**20, 1)


def _dig(values: Any, keys: tuple[str, ...]) -> Any:
    for key in keys:
        values = values.get(key) if isinstance(values, dict) else None
    return values


def chart_limits(values: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each role's memory limit in the chart's values and where it comes from."""
    limits = {}
    for role, keys in LIMIT_KEYS.items():
        found = _dig(values, keys)
        if found is None:
            raise RuntimeError(f"the chart sets no {'.'.join(keys)}")
        limits[role] = {"limit_mib": _mib(str(found)), "from": ".".join(keys)}
    return limits


def read_chart_limits(path: Path = VALUES) -> dict[str, dict[str, Any]]:
    import yaml

    return chart_limits(yaml.safe_load(path.read_text()))


def _millicpu(quantity: str) -> float:
    return float(quantity[:-1]) if quantity.endswith("m") else float(quantity) * 1000


def controller_niceness(values: dict[str, Any]) -> int:
    """The nice level that gives the controller, beside the webhook, the CPU share the
    chart's requests give it on a busy node: a container's CPU weight is proportional to its
    request (cgroup `cpu.weight`), a process's to NICE_STEP per nice level."""
    found = {role: _dig(values, keys) for role, keys in CPU_REQUEST_KEYS.items()}
    if None in found.values():
        raise RuntimeError("the chart sets no CPU request for each role")
    ratio = _millicpu(str(found["webhook"])) / _millicpu(str(found["controller"]))
    return max(0, min(19, round(math.log(ratio) / math.log(NICE_STEP))))


def read_controller_niceness(path: Path = VALUES) -> int:
    import yaml

    return controller_niceness(yaml.safe_load(path.read_text()))


# ------------------------------------------------------------------------- the controller


def controller_command(kubeconfig: Path, policies: Path, probe_port: int) -> list[str]:
    """`dragate serve --role controller` for the same cluster and policies as the webhook
    (policy files alone, the chart's default `policies.source: files`)."""
    return [
        sys.executable, "-m", "webhook", "serve", "--role", "controller",
        "--kubeconfig", str(kubeconfig), "--policies", str(policies), "--no-policy-objects",
        "--host", "127.0.0.1", "--probe-port", str(probe_port), "--log-level", "info",
    ]  # fmt: skip


@dataclass
class Controller:
    """A running controller role and its probe port."""

    process: Any  # e2e.processes.ManagedProcess
    port: int

    def get(self, what: str, timeout: float = 5.0) -> tuple[int, str]:
        url = f"http://127.0.0.1:{self.port}{what}"
        try:
            with urllib.request.urlopen(url, timeout=timeout) as reply:
                return int(reply.status), reply.read().decode()
        except OSError as err:
            return getattr(err, "code", 0) or 0, str(err)

    def stop(self) -> None:
        self.process.stop(grace=30.0)


def launch_controller(kubeconfig: Path, policies: Path, workdir: Path) -> Controller:
    """The controller, once its /readyz answers 200 (caches listed, policies loaded), at the
    nice level of its CPU request against the webhook's (`controller_niceness`): the two
    roles share this machine's CPUs as their pods share a node's."""
    from e2e.processes import ManagedProcess, free_port

    port = free_port()
    niceness = ["nice", "-n", str(read_controller_niceness())]
    command = [*niceness, *controller_command(kubeconfig, policies, port)]
    controller = Controller(ManagedProcess("dragate-controller", command, workdir), port)
    try:
        controller.process.wait_ready(lambda: controller.get("/readyz")[0] == 200, READY_SECONDS)
    except BaseException:
        controller.stop()
        raise
    return controller


def audit_pass(metrics: str) -> tuple[float, float] | None:
    """(Unix time the last audit pass ended, its seconds) from the controller's /metrics;
    None before its first pass."""
    found: dict[str, float] = {}
    for line in metrics.splitlines():
        name, _, value = line.partition(" ")
        if name in (
            "dragate_audit_last_success_timestamp_seconds",
            "dragate_audit_duration_seconds",
        ):
            found[name] = float(value)
    if len(found) < 2:
        return None
    return found["dragate_audit_last_success_timestamp_seconds"], found[
        "dragate_audit_duration_seconds"
    ]


# ------------------------------------------------------------------------- sampling


@dataclass
class RoleWatch:
    """Samples each role's PSS and the controller's audit passes on a thread of its own."""

    webhook_master: int
    controller: Controller
    passes: dict[float, float] = field(default_factory=dict)
    """Each audit pass seen: the Unix time it ended -> its seconds."""
    peak: dict[str, float] = field(default_factory=lambda: {"webhook": 0.0, "controller": 0.0})
    last: dict[str, float] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def sample(self) -> None:
        now = {
            "webhook": round(sum(_pss(p) for p in with_children(self.webhook_master)), 1),
            "controller": _pss(self.controller.process.pid),
        }
        status, text = self.controller.get("/metrics")
        seen = audit_pass(text) if status == 200 else None
        with self._lock:
            self.last = now
            self.peak = {role: max(self.peak[role], mib) for role, mib in now.items()}
            if seen is not None:
                self.passes[seen[0]] = seen[1]

    def seen(self) -> dict[float, float]:
        """The audit passes seen so far (a copy: the thread adds to them)."""
        with self._lock:
            return dict(self.passes)

    def start(self) -> None:
        self.sample()
        self._thread = threading.Thread(target=self._loop, name="role-watch", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(SAMPLE_SECONDS):
            self.sample()

    def stop(self) -> None:
        """Stop sampling, with a last sample (once: a second call changes nothing)."""
        if self._stop.is_set():
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.sample()

    def wait_passes(self, count: int, timeout: float) -> None:
        """Until `count` audit passes ended: the first pass of a controller also writes every
        namespace's PolicyReport before its loop runs the next, so the second's end says the
        controller is in its steady state."""
        deadline = time.monotonic() + timeout
        while len(self.seen()) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{len(self.seen())} audit passes in {timeout:.0f}s, not {count}"
                )
            time.sleep(SAMPLE_SECONDS)

    def wait_overlap(self, start: float, end: float, timeout: float) -> list[dict[str, float]]:
        """The passes that overlapped [start, end], once one did (a pass that began in the
        window may end after it) or `timeout` passed."""
        deadline = time.monotonic() + timeout
        while not during(self.seen(), start, end) and time.monotonic() < deadline:
            time.sleep(SAMPLE_SECONDS)
        return during(self.seen(), start, end)

    def memory(self, limits: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """Per role: PSS at its sampled peak and at the end (MiB), the resident high-water
        mark of its processes over their whole lives (VmHWM: their start-up lists included,
        which ran before sampling began), and the chart's limit."""
        pids = {
            "webhook": with_children(self.webhook_master),
            "controller": [self.controller.process.pid],
        }
        with self._lock:
            return {
                role: {
                    "pss_peak_mib": self.peak[role],
                    "pss_end_mib": self.last.get(role, 0.0),
                    "rss_hwm_mib": round(sum(_hwm(p) for p in pids[role]), 1),
                    "limit_mib": limits[role]["limit_mib"],
                    "limit_from": limits[role]["from"],
                }
                for role in ("webhook", "controller")
            }

    def cpu_ns(self) -> int:
        return run_ns(self.controller.process.pid)


def _hwm(pid: int) -> float:
    try:
        return rss_mib(pid)["peak_rss_mib"]
    except OSError:
        return 0.0


def _pss(pid: int) -> float:
    try:
        return pss_mib(pid)
    except OSError:
        return 0.0


def next_pass_start(passes: dict[float, float]) -> float:
    """When the controller's next audit pass is due (Unix time): one interval after the last
    one started, on the loop's tick."""
    end = max(passes)
    return end - passes[end] + AUDIT_INTERVAL_S + AUDIT_TICK_S


def align(
    passes: dict[float, float], lead: float = 2.0, sleep: Callable[[float], None] = time.sleep
) -> float:
    """Sleep until `lead` seconds before the next pass is due, so that even a short
    measurement overlaps a pass; the seconds slept."""
    wait = max(0.0, next_pass_start(passes) - lead - time.time())
    sleep(wait)
    return wait


def during(passes: dict[float, float], start: float, end: float) -> list[dict[str, float]]:
    """The audit passes that overlapped the window [start, end] (Unix times): when each began
    and ended relative to `start`, and its seconds."""
    return [
        {
            "began_s": round(ended - seconds - start, 1),
            "ended_s": round(ended - start, 1),
            "pass_s": round(seconds, 2),
        }
        for ended, seconds in sorted(passes.items())
        if ended - seconds < end and ended > start
    ]
