"""`dragate webhook-config`: Validating and Mutating webhook configurations for dev clusters.

Choices, each for a reason (docs/cli.md, "`dragate webhook-config`"):
- rules name `pods` without subresources: `pods/status`, `pods/resize` and
  `pods/ephemeralcontainers` carry nothing dragate judges, and a status write from the
  scheduler or kubelet must never wait on (or fail with) this webhook. The server allows
  them unevaluated if they ever arrive.
- ResourceClaims and ResourceClaimTemplates in every `resource.k8s.io` version, so v1beta1/2
  clients are seen too; Namespaces because a label change can move one between tenants.
- the mutating webhook rewrites Pods at CREATE only, `reinvocationPolicy: IfNeeded` (the
  rewrite is idempotent), and fails open by default: validation still checks the result.
- the dragate.io policy kinds (Tenant, DeviceClassPolicy, LegacyResourceMapping, Settings)
  in a webhook of their own that always fails open: a policy object is refused at apply when
  it would not be enforced, but a webhook that is down never locks policy edits (an object
  stored meanwhile is left out, and its status says why).
- the gang kinds (batch/v1 Jobs, jobset.x-k8s.io/v1alpha2 JobSets, leaderworkerset.x-k8s.io/v1
  LeaderWorkerSets, scheduling.k8s.io/v1beta1 PodGroups) at CREATE and UPDATE, in an entry of
  their own whose matchConditions send only workloads whose pod templates can hold a device
  (claims, or a GPU resource prefix) and PodGroups with a gang policy, a PodGroup's UPDATE only
  when it changes the gang's minCount; it fails as the Pods' entry does (docs/decisions.md,
  "Gangs").
- `kube-system` (and the webhook's own namespace) excluded through the immutable
  `kubernetes.io/metadata.name` label; `sideEffects: NoneOnDryRun` since dry runs never
  reserve quota.
"""

from __future__ import annotations

import base64
import sys
from pathlib import Path
from typing import Any

import click
from ruamel.yaml import YAML

from webhook import certificates
from webhook.cli.certs import BadInput, state_dir

NAME = "dragate.io"
WRITE = ["CREATE", "UPDATE"]


def rules(*, mutating: bool) -> list[dict[str, Any]]:
    pods = {"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"], "scope": "Namespaced"}
    if mutating:
        return [{"operations": ["CREATE"], **pods}]
    claims = {
        "apiGroups": ["resource.k8s.io"],
        "apiVersions": ["*"],
        "resources": ["resourceclaims", "resourceclaimtemplates"],
        "scope": "Namespaced",
    }
    namespaces = {"apiGroups": [""], "apiVersions": ["v1"], "resources": ["namespaces"]}
    return [
        {"operations": WRITE, **pods},
        {"operations": WRITE, **claims},
        {"operations": WRITE, **namespaces, "scope": "Cluster"},
    ]


def webhook(
    *, mutating: bool, url: str, ca_bundle: bytes, failure_policy: str, timeout: int,
    excluded: list[str],
) -> dict[str, Any]:  # fmt: skip
    """One webhook entry; `mutating` picks the path, rules and reinvocation."""
    path = "mutate" if mutating else "validate"
    entry: dict[str, Any] = {
        "name": f"{path}.{NAME}",
        "clientConfig": {
            "url": f"{url.rstrip('/')}/{path}",
            "caBundle": base64.b64encode(ca_bundle).decode("ascii"),
        },
        "rules": rules(mutating=mutating),
        "matchPolicy": "Equivalent",
        "namespaceSelector": {
            "matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": excluded}
            ]
        },
        "failurePolicy": failure_policy,
        "sideEffects": "NoneOnDryRun",
        "timeoutSeconds": timeout,
        "admissionReviewVersions": ["v1"],
    }
    if mutating:
        entry["reinvocationPolicy"] = "IfNeeded"
    return entry


POLICY_RESOURCES = ["tenants", "deviceclasspolicies", "legacyresourcemappings", "settings"]


def policy_webhook(*, url: str, ca_bundle: bytes, timeout: int) -> dict[str, Any]:
    """The entry for dragate's own policy kinds: checked as the loader would, failing open."""
    return {
        "name": f"policies.{NAME}",
        "clientConfig": {
            "url": f"{url.rstrip('/')}/validate",
            "caBundle": base64.b64encode(ca_bundle).decode("ascii"),
        },
        "rules": [
            {
                "operations": WRITE,
                "apiGroups": [NAME],
                "apiVersions": ["v1alpha1"],
                "resources": POLICY_RESOURCES,
                "scope": "Cluster",
            }
        ],
        "matchPolicy": "Equivalent",
        "failurePolicy": "Ignore",
        "sideEffects": "None",
        "timeoutSeconds": timeout,
        "admissionReviewVersions": ["v1"],
    }


GANG_RULES = [
    ("batch", "v1", "jobs"),
    ("jobset.x-k8s.io", "v1alpha2", "jobsets"),
    ("leaderworkerset.x-k8s.io", "v1", "leaderworkersets"),
    ("scheduling.k8s.io", "v1beta1", "podgroups"),
]
"""The gang kinds at CREATE and UPDATE; PodGroups (Kubernetes 1.37, GenericWorkload) are
charged whole at CREATE and again at the UPDATE that changes the gang's minCount (mutable,
for workload scaling)."""
GANG = "spec.schedulingPolicy.gang"
PODGROUP_SCALED = (
    "request.kind.kind != 'PodGroup' || request.operation != 'UPDATE' || "
    f"!has(oldObject.{GANG}) || !has(object.{GANG}) || "
    f"oldObject.{GANG}.minCount != object.{GANG}.minCount"
)
"""CEL: every request but a PodGroup's UPDATE, and that one only when it scales the gang."""
GPU_PREFIXES = ("nvidia.com/",)
LWS_TEMPLATE = "object.spec.leaderWorkerTemplate"
POD_SPECS = (
    "request.kind.kind == 'Job' ? [object.spec.template.spec] : "
    "request.kind.kind == 'JobSet' ? "
    "object.spec.replicatedJobs.map(j, j.template.spec.template.spec) : "
    f"[{LWS_TEMPLATE}.workerTemplate.spec] + (has({LWS_TEMPLATE}.leaderTemplate) ? "
    f"[{LWS_TEMPLATE}.leaderTemplate.spec] : [])"
)
"""The pod specs of a Job, a JobSet or a LeaderWorkerSet, each read only for its own kind."""


def gpu_workload_expression(prefixes: tuple[str, ...] = GPU_PREFIXES) -> str:
    """CEL: some pod template of the workload names claims or a resource with a GPU prefix
    (the chart's `dragate.celGpuWorkload`, with its default prefixes)."""
    listed = "[" + ", ".join(f"'{p}'" for p in prefixes) + "]"
    wants = f"r, {listed}.exists(p, r.startsWith(p))"
    container = (
        f"(has(c.resources) && ((has(c.resources.limits) && c.resources.limits.exists({wants}))"
        f" || (has(c.resources.requests) && c.resources.requests.exists({wants}))))"
    )
    return (
        "request.kind.kind == 'PodGroup' ? has(object.spec.schedulingPolicy.gang) : "
        f"(({POD_SPECS}).exists(s, (has(s.resourceClaims) && size(s.resourceClaims) > 0) || "
        f"s.containers.exists(c, {container}) || "
        f"(has(s.initContainers) && s.initContainers.exists(c, {container}))))"
    )


def gang_webhook(
    *, url: str, ca_bundle: bytes, failure_policy: str, timeout: int, excluded: list[str]
) -> dict[str, Any]:
    """The entry for gangs' workloads: charged whole at creation, failing as the Pods do."""
    entry = webhook(
        mutating=False, url=url, ca_bundle=ca_bundle, failure_policy=failure_policy,
        timeout=timeout, excluded=excluded,
    )  # fmt: skip
    entry["name"] = f"gangs.{NAME}"
    entry["rules"] = [
        {"operations": WRITE, "apiGroups": [group], "apiVersions": [version],
         "resources": [resource], "scope": "Namespaced"}
        for group, version, resource in GANG_RULES
    ]  # fmt: skip
    entry["matchConditions"] = [
        {"name": "gpu-workload", "expression": gpu_workload_expression()},
        {"name": "podgroup-scaled", "expression": PODGROUP_SCALED},
    ]
    return entry


def configurations(
    url: str, ca_bundle: bytes, failure_policy: str | None, timeout: int, excluded: list[str]
) -> list[dict[str, Any]]:
    """Validating (fails closed unless told) then Mutating (fails open unless told)."""
    documents = []
    for kind, mutating, default_policy in (
        ("ValidatingWebhookConfiguration", False, "Fail"),
        ("MutatingWebhookConfiguration", True, "Ignore"),
    ):
        entry = webhook(
            mutating=mutating, url=url, ca_bundle=ca_bundle, timeout=timeout, excluded=excluded,
            failure_policy=failure_policy or default_policy,
        )  # fmt: skip
        policies = (
            []
            if mutating
            else [
                policy_webhook(url=url, ca_bundle=ca_bundle, timeout=timeout),
                gang_webhook(
                    url=url, ca_bundle=ca_bundle, timeout=timeout, excluded=excluded,
                    failure_policy=failure_policy or default_policy,
                ),
            ]
        )  # fmt: skip
        documents.append({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": kind,
            "metadata": {"name": "dragate", "labels": {"app.kubernetes.io/managed-by": "dragate"}},
            "webhooks": [entry, *policies],
        })  # fmt: skip
    return documents


def _ca_bundle(ca_bundle: Path | None, cert_dir: Path | None) -> bytes:
    path = ca_bundle or certificates.CertDir(cert_dir or state_dir() / "certs").ca_bundle
    try:
        certificates.read_certs(path)
        return path.read_bytes()
    except (OSError, certificates.CertError) as err:
        hint = "run `dragate serve` once or pass --ca-bundle"
        raise BadInput(f"no usable CA bundle: {err}; {hint}") from None


@click.command("webhook-config")
@click.option("--url", required=True, help="Base URL the apiserver calls, e.g. https://host:8443.")
@click.option("--ca-bundle", type=click.Path(path_type=Path, dir_okay=False, exists=True))
@click.option(
    "--cert-dir",
    type=click.Path(path_type=Path, file_okay=False, exists=True),
    help="Use ca-bundle.crt (after a CA rotation) or ca.crt from here.",
)
@click.option(
    "--failure-policy",
    type=click.Choice(["Fail", "Ignore"]),
    help="Both webhooks (default: Fail for validating, Ignore for mutating).",
)
@click.option("--timeout-seconds", default=10, show_default=True, type=click.IntRange(1, 30))
@click.option(
    "--exclude-namespace",
    "excluded",
    multiple=True,
    default=["kube-system"],
    show_default=True,
    help="Namespaces never sent to dragate (repeat; add your own).",
)
def command(  # noqa: PLR0917  (click passes options by keyword)
    url: str, ca_bundle: Path | None, cert_dir: Path | None, failure_policy: str | None,
    timeout_seconds: int, excluded: tuple[str, ...],
) -> None:  # fmt: skip
    """Print ready-to-apply webhook configurations (YAML) with caBundle filled in."""
    if not url.startswith("https://"):
        raise BadInput("--url must start with https:// (the apiserver calls webhooks over TLS)")
    bundle = _ca_bundle(ca_bundle, cert_dir)
    docs = configurations(url, bundle, failure_policy, timeout_seconds, list(excluded))
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    yaml.dump_all(docs, sys.stdout)
