"""The controller role as a process: the table of cluster-wide loops on ordinary threads,
with /healthz, /readyz and /metrics over plain HTTP on the probe port.

No gunicorn and no gevent here: nothing is monkey-patched, so a pass that walks every claim
of a cluster takes the GIL in turns with the probe server's threads, and no AdmissionReview
ever waits on it (reviews are answered by the webhook role, another process). With
`dragate serve --role all` in a cluster this process is a child of the webhook's gunicorn
master (`webhook.cli.roles`), ended with it.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
from typing import Any

from webhook.admission import jsonlog, metrics
from webhook.admission.config import ServeConfig
from webhook.admission.reload import PolicyHolder, PolicyWatcher, policy_report
from webhook.assembly import ControllerSource, controller_mode, policy_feed
from webhook.controllers import probes

log = logging.getLogger("dragate.controller")


def run_controller(config: ServeConfig, stop: threading.Event | None = None) -> int:
    """Run until SIGTERM/SIGINT (or `stop`); 0 when it ends cleanly."""
    if config.cluster is None:
        raise ValueError("the controller role needs a cluster")
    _check_unpatched()
    jsonlog.configure(config.log_level)
    stop = stop or _stop_on_signals()
    feed = policy_feed(config.cluster)
    paths = [str(config.policy_dir)] if config.policy_dir is not None else []
    holder = PolicyHolder(paths, feed.load, changes=feed.changes)
    watcher = PolicyWatcher(holder, config.reload_interval)
    mode = controller_mode(
        config.cluster, holder.get, feed, served=lambda: holder.loaded,
        observe=metrics.observe_audit,
    )  # fmt: skip
    checks = [mode.ready, *([feed.objects.ready] if feed.objects else [])]
    server = probes.bind(config.host, config.probe_port, probes.Probes(
        lambda: readiness(holder, checks, mode.controller),
        lambda: metrics.exposition(None, mode.controller),
    ))  # fmt: skip
    watcher.ensure_running()
    mode.start()
    probes.serve(server)
    port = server.server_address[1]
    log.info("controller serving probes", extra={"url": f"http://{config.host}:{port}"})
    stop.wait()
    mode.runner.stop()
    server.shutdown()
    return 0


def readiness(
    holder: PolicyHolder, checks: list[Any], controller: ControllerSource
) -> tuple[bool, dict[str, Any]]:
    """Ready once the caches listed and a policy set is loaded. Not leading never makes a
    controller unready: it is the standby, and takes the Lease when the leader goes."""
    results = {name: ok for ok, name in (check() for check in checks)}
    results["policies"] = holder.loaded is not None
    ok = all(results.values())
    return ok, {
        "status": "ok" if ok else "unready",
        "role": "controller",
        "policies": policy_report(holder),
        "checks": results,
        "controller": controller().report(time.time()),
    }


def _check_unpatched() -> None:
    """The loops walk whole clusters on the assumption that threads are threads: refuse to
    run under gevent's monkey patching (`webhook.cli.patches_gevent` leaves it out)."""
    monkey = sys.modules.get("gevent.monkey")
    if monkey is not None and monkey.is_module_patched("threading"):
        raise RuntimeError("the controller role must not run under gevent's monkey patching")


def _stop_on_signals() -> threading.Event:
    stop = threading.Event()

    def handler(_signum: int, _frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    return stop
