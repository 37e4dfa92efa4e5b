"""The apiserver benchmark's objects: variants and their namespaces, the ResourceClaim and
legacy Pod every variant creates, the policies dragate and the ValidatingAdmissionPolicy
enforce, the patch dragate's rewrite makes of the Pod (for `noop-patch`), and dragate's
rewriting MutatingAdmissionPolicy for `mutate-map`'s namespaces."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

VARIANTS = (
    "none", "vap", "noop-validate", "validate", "noop-mutate", "noop-patch", "mutate", "mutate-map",
)  # fmt: skip
KINDS = ("claim", "pod")
CLASS = "gpu.nvidia.com"
MAX_PER_CLAIM = 8
REPO = Path(__file__).resolve().parents[2]


def namespace(variant: str, kind: str, level: str) -> str:
    return f"bench-{variant}-{kind}-{level}"


def namespaces() -> dict[str, tuple[str, str]]:
    """Every namespace the bench creates: (variant, kind) it measures."""
    return {namespace(v, k, lv): (v, k) for v in VARIANTS for k in KINDS for lv in ("seq", "conc")}


def claim(name: str, count: int = 1) -> dict[str, Any]:
    request = {"name": "gpu", "exactly": {"deviceClassName": CLASS, "count": count}}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {"devices": {"requests": [request]}},
    }


def legacy_pod(name: str, gpus: int = 1) -> dict[str, Any]:
    limits = {"nvidia.com/gpu": str(gpus)}
    container = {"name": "cuda", "image": "cuda:12", "resources": {"limits": limits}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [container]},
    }


def path(kind: str, ns: str) -> str:
    if kind == "claim":
        return f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims"
    return f"/api/v1/namespaces/{ns}/pods"


def make(kind: str, name: str) -> dict[str, Any]:
    return claim(name) if kind == "claim" else legacy_pod(name)


def policies(directory: Path) -> Path:
    """The example policies (CEL guardrails, legacy mapping) plus one tenant per namespace."""
    shutil.copytree(REPO / "policies", directory, ignore=shutil.ignore_patterns("tests"))
    tenants = [
        {
            "apiVersion": "dragate.io/v1alpha1",
            "kind": "Tenant",
            "metadata": {"name": ns},
            "spec": {
                "namespaces": [ns],
                "allowedDeviceClasses": [CLASS],
                "quota": [
                    {
                        "deviceClassName": CLASS,
                        "maxDevices": 100_000,
                        "maxDevicesPerClaim": MAX_PER_CLAIM,
                    }
                ],
            },
        }
        for ns in namespaces()
    ]
    (directory / "bench-tenants.yaml").write_text(
        "\n---\n".join(json.dumps(t) for t in tenants) + "\n"
    )
    return directory


def rewriting_policy(policy_dir: Path, exempt_user: str) -> list[dict[str, Any]]:
    """`mutate-map`'s MutatingAdmissionPolicy, binding and templates: `dragate rewrite-policy`
    of the bench's policies, bound to the variant's namespaces (the Pods of the chart's user,
    dragate's own, exempt as the chart's webhooks exempt them)."""
    from dataclasses import replace

    from webhook.policy.loading import load_policies
    from webhook.rewrite.admissionpolicy import rewrite_policy

    loaded = load_policies([str(policy_dir)])
    mine = {namespace("mutate-map", "pod", level) for level in ("seq", "conc")}
    tenants = tuple(t for t in loaded.tenants if t.namespaces & mine)
    made = rewrite_policy(replace(loaded, tenants=tenants), exempt_users=frozenset({exempt_user}))
    if made is None or set(made.namespaces) != mine:
        raise RuntimeError(f"dragate's rewrite policy does not cover {sorted(mine)}: {made}")
    return [dict(o) for o in (*made.templates, *made.objects)]


def admission_policy() -> list[dict[str, Any]]:
    """The VAP variant: dragate's allow-list and per-claim cap, as CEL the API server runs."""
    claims = (
        f"object.spec.devices.requests.all(r, has(r.exactly) && "
        f"r.exactly.deviceClassName in ['{CLASS}'] && "
        f"(!has(r.exactly.count) || r.exactly.count <= {MAX_PER_CLAIM}))"
    )
    pods = (
        "object.spec.containers.all(c, !has(c.resources) || !has(c.resources.limits) || "
        "!('nvidia.com/gpu' in c.resources.limits) || "
        "quantity(c.resources.limits['nvidia.com/gpu'])"
        f".compareTo(quantity('{MAX_PER_CLAIM}')) <= 0)"
    )
    objects: list[dict[str, Any]] = []
    for name, group, resource, expression in (
        ("claims", "resource.k8s.io", "resourceclaims", claims),
        ("pods", "", "pods", pods),
    ):
        policy = f"bench-gpu-{name}"
        objects.append(
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingAdmissionPolicy",
                "metadata": {"name": policy},
                "spec": {
                    "failurePolicy": "Fail",
                    "matchConstraints": {
                        "resourceRules": [
                            {
                                "apiGroups": [group],
                                "apiVersions": ["*"],
                                "resources": [resource],
                                "operations": ["CREATE", "UPDATE"],
                            }
                        ]
                    },
                    "validations": [
                        {
                            "expression": expression,
                            "message": "GPU class not allowed or over the cap",
                        }
                    ],
                },
            }
        )
        objects.append(
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingAdmissionPolicyBinding",
                "metadata": {"name": policy},
                "spec": {
                    "policyName": policy,
                    "validationActions": ["Deny"],
                    "matchResources": {
                        "namespaceSelector": {"matchLabels": {"dragate-bench/variant": "vap"}}
                    },
                },
            }
        )
    return objects


def dragate_patch(policy_dir: Path) -> list[dict[str, Any]]:
    """The JSON patch dragate's rewrite makes of the bench's legacy Pod as the API server
    sends it for review (`noop-patch`): defaulted, so its requests equal its
    limits."""
    return list(_rewrite(policy_dir, namespace("noop-patch", "pod", "seq")).patch)


def _rewrite(policy_dir: Path, ns: str) -> Any:
    from webhook.policy.loading import load_policies
    from webhook.rewrite import rewrite_pod

    mappings = load_policies([str(policy_dir)]).mappings
    pod = legacy_pod("bench")
    for container in pod["spec"]["containers"]:
        resources = container["resources"]
        resources["requests"] = {**resources["limits"], **resources.get("requests", {})}
    rewrite = rewrite_pod(pod, mappings, namespace=ns)
    if not rewrite.changed or rewrite.denied:
        raise RuntimeError(f"the bench's legacy Pod is not rewritten: {rewrite.denied}")
    return rewrite
