"""Prometheus metrics of the one serving process, in prometheus-client's default registry."""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from cryptography import x509
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily

from webhook.assembly import ControllerSource, ControllerState
from webhook.kube.policystatus import QuotaRow
from webhook.types import AuditResult

BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

REQUESTS = Counter(
    "dragate_admission_requests",
    "Admission reviews answered, by operation, kind, endpoint and result "
    "(allowed, denied, exempt, timeout, bad_request, error).",
    ["operation", "kind", "endpoint", "result"],
)
DURATION = Histogram(
    "dragate_admission_duration_seconds",
    "Time from request to response for /validate and /mutate.",
    ["endpoint"],
    buckets=BUCKETS,
)
DENIALS = Counter("dragate_denials", "Denial reasons by tenant and policy.", ["tenant", "policy"])
VIOLATIONS = Counter(
    "dragate_policy_violations",
    "Policy rules broken by admitted objects, under Warn or Audit (a policy's enforcement or a "
    "validation's action), by policy name, policy kind, tenant and mode (warn, audit).",
    ["policy", "kind", "tenant", "mode"],
)
RELOAD_SUCCESS = Gauge(
    "dragate_policy_reload_success",
    "1 when the last policy (re)load succeeded, 0 while a stale set is served.",
)
NOT_ENFORCED = Gauge(
    "dragate_policy_objects_not_enforced",
    "Policy objects the served set leaves out (invalid; their status says why).",
)
RELOAD_TIMESTAMP = Gauge(
    "dragate_policy_last_reload_timestamp",
    "Unix time of the last successful policy load.",
)
AUDIT_VIOLATIONS = Gauge(
    "dragate_audit_violations",
    "Existing objects the background audit finds breaking a policy, by tenant, policy and "
    "result (fail, warn); set by the leader, 0 elsewhere.",
    ["tenant", "policy", "result"],
)
CERT_EXPIRY = "dragate_certificate_expiry_timestamp_seconds"
QUOTA_LIMIT = "dragate_tenant_quota_limit_devices"
QUOTA_USED = "dragate_tenant_used_devices"
QUOTA_PENDING = "dragate_tenant_pending_devices"
CLUSTER_ONLY = (
    "dragate_leader",
    "dragate_reconcile_seconds_without_success",
    "dragate_reconcile_last_success_timestamp_seconds",
    "dragate_audit_last_success_timestamp_seconds",
    "dragate_audit_duration_seconds",
    QUOTA_LIMIT,
    QUOTA_USED,
    QUOTA_PENDING,
)
"""What only a process in a cluster exports (`Controller`): offline `dragate serve` has no
Lease, reconciler, audit or status writer."""
_violation_labels: set[tuple[str, str, str]] = set()


def observe_audit(results: Sequence[AuditResult]) -> None:
    """Set the violation gauges from one audit pass; labels gone since the last are zeroed."""
    counts: dict[tuple[str, str, str], int] = {}
    for r in results:
        if r.result in ("fail", "warn"):
            key = (r.tenant, r.policy, r.result)
            counts[key] = counts.get(key, 0) + 1
    for key in _violation_labels - counts.keys():
        AUDIT_VIOLATIONS.labels(*key).set(0)
    for key, count in counts.items():
        AUDIT_VIOLATIONS.labels(*key).set(count)
    _violation_labels.clear()
    _violation_labels.update(counts)


@functools.lru_cache(maxsize=1024)
def request_counter(operation: str, kind: str, endpoint: str, result: str) -> Counter:
    """REQUESTS' child for these labels, looked up once: `labels()` locks and builds a key."""
    return REQUESTS.labels(operation, kind, endpoint, result)


@functools.lru_cache(maxsize=8)
def duration(endpoint: str) -> Histogram:
    return DURATION.labels(endpoint)


class CertificateExpiry:
    """Reads the serving certificate at scrape time: always the file the next connection
    gets."""

    def __init__(self, cert: Path) -> None:
        self._cert = cert

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(CERT_EXPIRY, "Unix time when the serving certificate expires.")
        try:
            cert = x509.load_pem_x509_certificate(self._cert.read_bytes())
        except (OSError, ValueError):
            return  # mid-rotation or unreadable: leave the series out rather than lie
        family.add_metric([], cert.not_valid_after_utc.timestamp())
        yield family


def exposition(
    cert: Path | None = None, controller: ControllerSource | None = None
) -> tuple[bytes, str]:
    """The text format for /metrics: the process's samples, plus the certificate expiry and
    (in a cluster) the controller state, both read at scrape time."""
    text = generate_latest(REGISTRY)
    extra = CollectorRegistry()
    if cert is not None:
        extra.register(CertificateExpiry(cert))
    if controller is not None:
        extra.register(Controller(controller))
    return text + generate_latest(extra), CONTENT_TYPE_LATEST


class Controller:
    """Whether this process holds the Lease and when its reconciler last succeeded. Alert on
    the replicas together: `max(dragate_leader) == 0` (no replica leads) or
    `min(dragate_reconcile_seconds_without_success) > 300` (no pass anywhere for 5 minutes:
    pending holders are neither confirmed nor released)."""

    def __init__(self, state: ControllerSource) -> None:
        self._state = state

    def collect(self) -> Iterator[GaugeMetricFamily]:
        state, now = self._state(), time.time()
        yield GaugeMetricFamily(
            "dragate_leader", "1 while this process holds the Lease (runs the reconciler).",
            value=1.0 if state.leading else 0.0,
        )  # fmt: skip
        yield GaugeMetricFamily(
            "dragate_reconcile_seconds_without_success",
            "Seconds since this process's reconciler last saw the claims (since start if never).",
            value=state.seconds_without_reconcile(now),
        )  # fmt: skip
        if state.last_reconcile is not None:
            yield GaugeMetricFamily(
                "dragate_reconcile_last_success_timestamp_seconds",
                "Unix time the truth of this process's last successful reconcile was seen.",
                value=state.last_reconcile,
            )  # fmt: skip
        yield from _audit(state)
        yield from _quota(state.quota)


def _audit(state: ControllerState) -> Iterator[GaugeMetricFamily]:
    """When this process's background audit last finished a pass, and how long it took."""
    if state.last_audit is not None:
        yield GaugeMetricFamily(
            "dragate_audit_last_success_timestamp_seconds",
            "Unix time this process's last background audit pass ended (the leader audits).",
            value=state.last_audit,
        )  # fmt: skip
    if state.audit_seconds is not None:
        yield GaugeMetricFamily(
            "dragate_audit_duration_seconds",
            "Seconds this process's last background audit pass took.",
            value=state.audit_seconds,
        )  # fmt: skip


def _quota(rows: Sequence[QuotaRow]) -> Iterator[GaugeMetricFamily]:
    """Each Tenant's quota and usage per DeviceClass, the rows its `status.usage` holds;
    only the leader has rows, so `max by (tenant, device_class)` is the cluster's figure."""
    labels = ["tenant", "device_class"]
    limit = GaugeMetricFamily(QUOTA_LIMIT, "A Tenant's quota of a DeviceClass, in devices "
                              "(no sample: no limit for that class).", labels=labels)  # fmt: skip
    used = GaugeMetricFamily(QUOTA_USED, "Devices a Tenant holds of a DeviceClass, pending "
                             "ones included (its status.usage).", labels=labels)  # fmt: skip
    pending = GaugeMetricFamily(QUOTA_PENDING, "Of the used devices, those admitted and "
                                "not yet confirmed by a reconcile.", labels=labels)  # fmt: skip
    for row in rows:
        key = [row.tenant, row.device_class]
        if row.limit is not None:
            limit.add_metric(key, row.limit)
        used.add_metric(key, row.used)
        pending.add_metric(key, row.pending)
    yield from (limit, used, pending)
