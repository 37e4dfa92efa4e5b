"""Shared by the TenantUsage ledger tests: the CRD, racing processes, the stored holders."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from webhook.kube.api import ApiError
from webhook.ledger.kube import KubeLedger
from webhook.ledger.tenantusage import object_name, records_of

from .cluster import Cluster

CRD = Path(__file__).parents[2] / "webhook" / "defaults" / "crds" / "tenantusages.yaml"
RACER = textwrap.dedent(
    """
    import json, sys, threading, time
    from webhook.ledger.grants import GrantBook, process_owner
    from webhook.ledger.kube import KubeLedger
    kubeconfig, tenant, quota, threads, proc, start, each, grants = sys.argv[1:9]
    book = GrantBook(process_owner()) if grants == "1" else None
    ledger = KubeLedger.from_kubeconfig(kubeconfig, budget=20.0, grants=book)
    if ledger.loops is not None:
        ledger.loops.start()  # as the composer starts them
    granted, answered = [], []
    def race(number):
        time.sleep(max(0.0, float(start) - time.time()))
        for claim in range(int(each)):
            key, gpu = f"claim:race/p{proc}-{number}-{claim}", "gpu.nvidia.com"
            if ledger.reserve(tenant, {key: {gpu: 1}}, {gpu: int(quota)}).granted:
                granted.append(key)
            answered.append(key)
    workers = [threading.Thread(target=race, args=(n,)) for n in range(int(threads))]
    for worker in workers: worker.start()
    for worker in workers: worker.join()
    ledger.close()
    print(json.dumps({"granted": granted, "answered": len(answered)}))
    """
)  # with grants, what was admitted is written by `close` (the Flusher's drain)


def started(ledger: KubeLedger) -> KubeLedger:
    """`ledger` with its grant loops running, as `webhook.assembly` starts them."""
    if ledger.loops is not None:
        ledger.loops.start()
    return ledger


def race(
    cluster: Cluster,
    tenant: str,
    quota: int,
    processes: int,
    threads: int,
    *,
    each: int = 1,
    grants: bool = False,
) -> list[Any]:
    """`processes` x `threads` x `each` one-GPU reservations, started together; each
    process's answer. The processes are replicas; with `grants`, each admits from grants."""
    start = time.time() + 2.0
    arguments = [str(cluster.kubeconfig), tenant, str(quota), str(threads)]
    options = [str(each), "1" if grants else "0"]
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, *arguments, str(proc), str(start), *options],
            stdout=subprocess.PIPE,
            text=True,
        )
        for proc in range(processes)
    ]
    return [json.loads(racer.communicate(timeout=60)[0]) for racer in racers]


def stored(cluster: Cluster, tenant: str) -> dict[str, Any]:
    """The TenantUsage's holders as the real kubectl reads them: key -> {"devices": ...,
    "expiresAt": ... while pending}, decoded from `spec.records`."""
    result = cluster.kubectl("get", "tenantusage", object_name(tenant), "-o", "json")
    return {key: r.as_json() for key, r in records_of(json.loads(result.stdout)).items()}


class WatchedApi:
    """The real API, logging each request ("PUT", or "PUT 409" when refused) in `log`.

    Requests of a method in `gated` wait until `gate` opens, so a test can hold the thread
    committing a batch while other threads queue behind it. `after_write` runs after every
    PUT or POST that the API server accepted (the write has landed).
    """

    def __init__(self, api: Any, gated: tuple[str, ...] = ()) -> None:
        self.api = api
        self.gated = gated
        self.gate = threading.Event()
        self.waiting = Counter[str]()
        self.log: list[str] = []
        self.after_write: Callable[[], None] = lambda: None

    def request(self, method: str, path: str, **options: Any) -> Any:
        if method in self.gated:
            self.waiting[method] += 1
            assert self.gate.wait(60), "the test never opened the gate"
        try:
            answer = self.api.request(method, path, **options)
        except ApiError as error:
            self.log.append(f"{method} {error.status}")
            raise
        self.log.append(method)
        if method in ("PUT", "POST"):
            self.after_write()
        return answer
