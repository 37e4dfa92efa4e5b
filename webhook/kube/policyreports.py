"""The background audit's results as `wgpolicyk8s.io/v1alpha2` PolicyReports.

The format Kyverno writes and Policy Reporter shows, so teams get `kubectl get polr -A`, a UI
and alerts without dragate building them. Reports are current state, not history: one
`dragate` PolicyReport per namespace (a ClusterPolicyReport for cluster-scoped objects),
rewritten when its results change and deleted when its namespace has none left, so results
of deleted objects disappear. Only the leader audits and writes; a pass runs every
`interval` seconds and soon after the served policy set changes, never on the admission
path; writes are spaced (`writes_per_second`), a namespace's first report before the
rewrites of the others, and a report keeps at most `max_results` results (failures and
warnings first), its summary counting them all. Each result names its `policy` and `rule`,
as Policy Reporter groups them.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from webhook.kube.api import APPLY, ApiError, KubeApi, Unreachable, list_pages
from webhook.kube.background import BackgroundLoop
from webhook.types import MANAGED_BY_LABEL, MANAGED_BY_VALUE, AuditResult, FactsUnavailable

GROUP = "/apis/wgpolicyk8s.io/v1alpha2"
REPORT_NAME = "dragate"
SOURCE = "dragate"
MAX_RESULTS = 1000
"""Results a report lists at most (failures and warnings first); its summary counts all."""
RESULTS = ("pass", "fail", "warn", "error", "skip")
log = logging.getLogger("dragate.kube.policyreports")

Audit = Callable[[], Sequence[AuditResult]]
"""One audit pass over the cluster's objects; raises FactsUnavailable without facts."""
Observe = Callable[[Sequence[AuditResult]], None]
"""Told each pass's results (metrics); `[]` when this process stops auditing."""


def report_path(namespace: str) -> str:
    if namespace:
        return f"{GROUP}/namespaces/{namespace}/policyreports/{REPORT_NAME}"
    return f"{GROUP}/clusterpolicyreports/{REPORT_NAME}"


def by_namespace(results: Iterable[AuditResult]) -> dict[str, list[AuditResult]]:
    """The results by namespace ("" is the cluster's): one report each (`report_of`)."""
    grouped: dict[str, list[AuditResult]] = {}
    for result in results:
        grouped.setdefault(result.namespace, []).append(result)
    return grouped


def report_of(
    namespace: str, results: list[AuditResult], seconds: int, max_results: int = MAX_RESULTS
) -> dict[str, Any]:
    """One namespace's report: results ordered failures first, the first `max_results` of
    them listed and the summary counting all."""
    rank = {"fail": 0, "error": 1, "warn": 2, "pass": 3, "skip": 4}
    ordered = sorted(results, key=lambda r: (rank.get(r.result, 5), r.kind, r.name, r.policy))
    summary = {key: sum(1 for r in results if r.result == key) for key in RESULTS}
    metadata: dict[str, Any] = {"name": REPORT_NAME, "labels": {MANAGED_BY_LABEL: MANAGED_BY_VALUE}}
    if namespace:
        metadata["namespace"] = namespace
    return {
        "apiVersion": "wgpolicyk8s.io/v1alpha2",
        "kind": "PolicyReport" if namespace else "ClusterPolicyReport",
        "metadata": metadata,
        "summary": summary,
        "results": [_entry(r, seconds) for r in ordered[:max_results]],
    }


def _entry(result: AuditResult, seconds: int) -> dict[str, Any]:
    resource = {"apiVersion": result.api_version, "kind": result.kind, "name": result.name}
    if result.namespace:
        resource["namespace"] = result.namespace
    if result.uid:
        resource["uid"] = result.uid
    properties = {**({"tenant": result.tenant} if result.tenant else {}), **result.properties}
    entry: dict[str, Any] = {
        "policy": result.policy,
        "rule": result.rule,
        "result": result.result,
        "message": result.message,
        "source": SOURCE,
        "scored": True,
        "timestamp": {"seconds": seconds, "nanos": 0},
        "resources": [resource],
    }
    if properties:
        entry["properties"] = properties
    return entry


def content_digest(report: Mapping[str, Any]) -> str:
    """What a report says, timestamps aside: equal digests need no write."""
    results = [{k: v for k, v in r.items() if k != "timestamp"} for r in report["results"]]
    text = json.dumps([report["summary"], results], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


class PolicyReportWriter(BackgroundLoop):
    """Audits and keeps the PolicyReports current, in the leader only."""

    thread_name = "policy-reports"

    def __init__(
        self,
        api: KubeApi,
        audit: Audit,
        *,
        leading: Callable[[], bool] = lambda: True,
        changed: Callable[[], object] = lambda: None,
        observe: Observe = lambda _results: None,
        interval: float = 60.0,
        tick: float = 2.0,
        writes_per_second: float = 20.0,
    ) -> None:
        super().__init__()
        self.api = api
        self.audit = audit
        self.leading = leading
        self.changed = changed
        self.observe = observe
        self.interval = interval
        self.tick = tick
        self.pause = 1.0 / writes_per_second
        self._written: dict[str, str] = {}
        self._next_pass = 0.0  # monotonic time the next pass is due
        self._last_change: object = None  # what `changed` said at the last pass
        self._installed = True
        self.last_success: float | None = None
        """Unix time the last audit pass that had its facts ended; None: never."""
        self.last_duration: float | None = None
        """Seconds that pass took: an audit nearing `interval` falls behind the cluster."""

    def run_once(self) -> int:
        """One audit pass and the writes it calls for; the number of reports written."""
        if not self.leading():
            self._written.clear()  # a new term starts from what the cluster holds
            self.observe([])
            return 0
        began = time.monotonic()
        try:
            results = list(self.audit())
        except FactsUnavailable as err:
            log.warning("audit skipped", extra={"error": str(err)})
            return 0
        self.last_duration = time.monotonic() - began
        self.last_success = time.time()
        self.observe(results)
        if not self._reports_installed():
            return 0
        grouped, seconds = by_namespace(results), int(time.time())
        written = sum(
            1
            for ns in self._first_reports_first(grouped)
            if self._write(ns, report_of(ns, grouped[ns], seconds))
        )
        self._delete_stale(set(grouped))
        return written

    def _first_reports_first(self, namespaces: Iterable[str]) -> list[str]:
        """Namespaces this term never wrote come first: a pass after a policy change rewrites
        every report at `writes_per_second`, and a namespace the change brings in gets its
        report at the start of that pass, not after the rest. Each report is made just before
        it is written, so a pass holds one report at a time, not one per namespace."""
        return sorted(namespaces, key=lambda ns: ns in self._written)

    def _reports_installed(self) -> bool:
        """Whether the API server serves PolicyReports; said once each time it changes."""
        try:
            found = self.api.request("GET", GROUP)
            installed = any(r.get("name") == "policyreports" for r in found.get("resources") or [])
        except ApiError as err:
            installed = err.status != 404
        except Unreachable:
            return False
        if installed != self._installed:
            log.warning("PolicyReport CRDs %s", "installed" if installed else
                        "not installed: audit results go to metrics only")  # fmt: skip
            self._installed = installed
        return installed

    def _write(self, namespace: str, report: dict[str, Any]) -> bool:
        digest = content_digest(report)
        if self._written.get(namespace) == digest:
            return False
        query = {"fieldManager": "dragate", "force": "true"}
        try:
            self.api.request("PATCH", report_path(namespace), query=query, body=report,
                             content_type=APPLY)  # fmt: skip
        except (ApiError, Unreachable) as err:
            log.warning("policy report not written", extra={"namespace": namespace,
                                                            "error": str(err)})  # fmt: skip
            return False
        self._written[namespace] = digest
        time.sleep(self.pause)
        return True

    def _delete_stale(self, current: set[str]) -> None:
        for namespace in self._stored() - current:
            try:
                self.api.request("DELETE", report_path(namespace))
            except (ApiError, Unreachable) as err:
                if getattr(err, "status", None) != 404:
                    log.warning("stale policy report kept", extra={"namespace": namespace,
                                                                   "error": str(err)})  # fmt: skip
                    continue
            self._written.pop(namespace, None)
            time.sleep(self.pause)

    def _stored(self) -> set[str]:
        """Namespaces holding a report of dragate's ("" for the cluster's), by paged lists."""
        found: set[str] = set()
        for path in (f"{GROUP}/policyreports", f"{GROUP}/clusterpolicyreports"):
            found |= {str(item["metadata"].get("namespace", "")) for item in self._list(path)}
        return found

    def _list(self, path: str) -> list[Mapping[str, Any]]:
        query = {"labelSelector": f"{MANAGED_BY_LABEL}={MANAGED_BY_VALUE}"}
        try:
            items = list(list_pages(self.api, path, query))
        except (ApiError, Unreachable):
            return []  # not installed, or away: nothing known to delete this pass
        return [i for i in items if i["metadata"]["name"] == REPORT_NAME]

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.step()
            except Exception:  # an audit loop that dies would leave reports stale forever
                log.exception("audit pass failed")
            self._sleep(self.tick)

    def step(self) -> None:
        """What each tick does: a pass every `interval`, and soon after the policy set
        changes."""
        change = self.changed()
        if time.monotonic() < self._next_pass and change == self._last_change:
            return
        self._last_change = change
        self._next_pass = time.monotonic() + self.interval
        self.run_once()
