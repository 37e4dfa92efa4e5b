"""The legacy rewrite as a MutatingAdmissionPolicy, for the Pods CEL rewrites exactly (pure).

Through the mutating webhook a legacy GPU Pod costs the API server a second webhook round
trip (and dragate a second review). Where the cluster serves MutatingAdmissionPolicies
(`admissionregistration.k8s.io/v1beta1` in Kubernetes 1.35 behind the MutatingAdmissionPolicy
feature gate and its runtime-config; v1 from 1.36 on, served by default), the commonest shape
is rewritten inside the API server instead: app containers that each ask for one legacy
resource mapped by exact name, without selectors, 1 to `max_count` devices, in a namespace a
tenant lists whose legacy action is Rewrite. The policy's matchConditions admit only that
shape; every other Pod meets the webhook, which also never sees a Pod the policy rewrote (it
no longer asks for a legacy resource), and validation judges the result either way.

Everything the policy writes is taken from the Python rewrite itself (claim names, template
names, the templates), so the two cannot drift apart; that the policy makes exactly the
Python rewrite's Pod, and leaves every other Pod alone, is proved against a real API server
(tests/e2e/test_admission_policy.py). The templates it names must exist before
the Pods do: they are part of what `rewrite_policy` returns.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from typing import Any

from webhook.rewrite.mappings import find_match
from webhook.rewrite.podspec import rewrite_pod_spec
from webhook.rewrite.policycel import RewriteShape, pod_conditions, rewrite_expression
from webhook.types import (
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    LegacyResourceMapping,
    MappingAction,
    Object,
    PolicySet,
    Tenant,
)
from webhook.types.kubeversions import minor_number
from webhook.types.records import record

V1 = "admissionregistration.k8s.io/v1"
V1BETA1 = "admissionregistration.k8s.io/v1beta1"
API_VERSION = V1
"""The version written unless one is asked for: the one the newest supported minors serve."""
FIRST_V1_MINOR = 36
NAME = "dragate-legacy-rewrite"
MAX_COUNT = 8
"""Devices per container the policy rewrites: one template per count and namespace."""
MAX_CONTAINERS = 16
"""App containers a Pod may have for the policy to rewrite it (its patch lists each index)."""
PROBE_CONTAINER = "c"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
"""The label every Namespace carries with its own name: what the binding selects by."""


@record
class RewritePolicy:
    """The policy and its binding, the templates they name, and what they rewrite."""

    objects: tuple[Object, ...]
    templates: tuple[Object, ...]
    resources: tuple[str, ...]
    namespaces: tuple[str, ...]


@record
class Eligible:
    """One legacy resource the policy rewrites, as the Python rewrite does it."""

    resource: str
    device_class: str
    claim_prefix: str  # a container `x` gets the pod claim `<claim_prefix>x`
    templates: tuple[Object, ...]  # the rewrite's template for 1..max_count devices

    @property
    def template_names(self) -> tuple[str, ...]:
        return tuple(str(t["metadata"]["name"]) for t in self.templates)


def rewrite_policy(
    policies: PolicySet,
    *,
    native_resources: frozenset[str] = frozenset(),
    exempt_users: frozenset[str] = frozenset(),
    name: str = NAME,
    max_count: int = MAX_COUNT,
    api_version: str = API_VERSION,
) -> RewritePolicy | None:
    """The MutatingAdmissionPolicy for `policies`, or None when it would rewrite nothing.

    `native_resources`: extended resources a DeviceClass serves natively (those Pods are kept
    as they are, so they stay with the webhook); `exempt_users`: usernames whose Pods dragate
    never rewrites (the webhook's own, `Settings.exemptServiceAccounts`); `api_version`: the
    policy's and binding's, one the cluster serves (`api_version_for`).
    """
    eligible = eligible_resources(policies.mappings, native_resources, max_count)
    namespaces = rewriting_namespaces(policies, {e.device_class for e in eligible})
    if not eligible or not namespaces:
        return None
    users = frozenset(policies.settings.exempt_service_accounts) | exempt_users
    shape = RewriteShape(
        eligible=tuple((e.resource, e.claim_prefix, e.template_names) for e in eligible),
        others=_other_markers(policies.mappings, {e.resource for e in eligible}),
        max_count=max_count,
        max_containers=MAX_CONTAINERS,
        exempt_users=tuple(sorted(users)),
    )
    return RewritePolicy(
        objects=(_policy(name, shape, api_version), _binding(name, namespaces, api_version)),
        templates=_templates(eligible, namespaces),
        resources=tuple(e.resource for e in eligible),
        namespaces=namespaces,
    )


def restricted(made: RewritePolicy, namespaces: Collection[str]) -> RewritePolicy | None:
    """`made` bound to those of its namespaces also in `namespaces`, with only their templates
    (None when none is left): what may be applied where only some namespaces are ready."""
    kept = tuple(n for n in made.namespaces if n in namespaces)
    if not kept:
        return None
    policy, binding = made.objects
    return RewritePolicy(
        objects=(policy, _binding(str(binding["metadata"]["name"]), kept, binding["apiVersion"])),
        templates=tuple(t for t in made.templates if t["metadata"]["namespace"] in kept),
        resources=made.resources,
        namespaces=kept,
    )


def api_version_for(minor: str) -> str:
    """The version Kubernetes `minor` serves the policy kinds in without a runtime-config flag
    beyond the feature gate: v1beta1 in 1.35, v1 from 1.36 (where v1beta1 is off by default)."""
    return V1 if minor_number(minor) >= FIRST_V1_MINOR else V1BETA1


def in_version(made: RewritePolicy, api_version: str) -> RewritePolicy:
    """`made` with its policy and binding in `api_version`: the two versions' fields are the
    same, so only `apiVersion` changes (the templates are `resource.k8s.io` objects)."""
    objects = tuple({**o, "apiVersion": api_version} for o in made.objects)
    return RewritePolicy(objects, made.templates, made.resources, made.namespaces)


def eligible_resources(
    mappings: Sequence[LegacyResourceMapping], native: frozenset[str], max_count: int
) -> tuple[Eligible, ...]:
    """Resources mapped by exact name, without selector, whose policy rewrites: sorted by
    name (the rewritten annotation lists them so), claim prefixes distinct and dash-free (so
    no two containers' claims can share a name)."""
    found: dict[str, Eligible] = {}
    for mapping in mappings:
        for entry in mapping.resources:
            resource = entry.resource_name
            if resource is None or resource in found:
                continue
            if not mapping.action.rewrites(resource, native):
                continue
            probed = _probe(resource, mappings, max_count)
            if probed is not None:
                found[resource] = probed
    prefixes = [e.claim_prefix for e in found.values()]
    return tuple(
        e
        for _, e in sorted(found.items())
        if "-" not in e.claim_prefix[:-1] and prefixes.count(e.claim_prefix) == 1
    )


def _probe(
    resource: str, mappings: Sequence[LegacyResourceMapping], max_count: int
) -> Eligible | None:
    """What the Python rewrite makes of one container asking `resource`, if it is plain."""
    match = find_match(resource, mappings)
    if match is None or match.entry.resource_name != resource or match.selectors:
        return None
    if match.policy.action not in (MappingAction.REWRITE, MappingAction.AUTO):
        return None
    templates = []
    for count in range(1, max_count + 1):
        claims, template = _probe_rewrite(resource, count, mappings)
        if len(claims) != 1 or not claims[0]["name"].endswith("-" + PROBE_CONTAINER):
            return None
        templates.append(template)
    prefix = str(claims[0]["name"])[: -len(PROBE_CONTAINER)]
    return Eligible(resource, match.entry.device_class, prefix, tuple(templates))


def _probe_rewrite(
    resource: str, count: int, mappings: Sequence[LegacyResourceMapping]
) -> tuple[list[dict[str, Any]], Object]:
    container = {"name": PROBE_CONTAINER, "resources": {"limits": {resource: str(count)}}}
    result = rewrite_pod_spec({"containers": [container]}, mappings)
    claims = result.object.get("resourceClaims") or []
    if result.denied or len(result.templates) != 1:
        return [], {}
    return list(claims), result.templates[0]


def rewriting_namespaces(policies: PolicySet, classes: set[str]) -> tuple[str, ...]:
    """Namespaces a tenant lists by name whose Pods the webhook would rewrite, and whose
    tenant may use every class the policy writes (elsewhere the webhook's denial is kept)."""
    exempt = policies.settings.exempt_namespaces
    found = {n for t in policies.tenants if _rewrites(t, classes) for n in t.namespaces}
    return tuple(sorted(found - exempt))


def _rewrites(tenant: Tenant, classes: set[str]) -> bool:
    action = tenant.mapping_action
    allowed = tenant.allowed_device_classes
    rewriting = (None, MappingAction.REWRITE, MappingAction.AUTO)
    return action in rewriting and (allowed is None or classes <= allowed)


def _other_markers(
    mappings: Sequence[LegacyResourceMapping], eligible: set[str]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(exact names, prefixes) of every mapped resource the policy does not rewrite."""
    names = {e.resource_name for m in mappings for e in m.resources if e.resource_name}
    prefixes = {
        e.resource_name_prefix
        for m in mappings
        for e in m.resources
        if e.resource_name is None and e.resource_name_prefix is not None
    }
    return tuple(sorted(names - eligible)), tuple(sorted(prefixes))


def _policy(name: str, shape: RewriteShape, api_version: str) -> Object:
    rules = [
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}
    ]
    conditions = [{"name": n, "expression": e} for n, e in pod_conditions(shape)]
    mutation = {"patchType": "JSONPatch", "jsonPatch": {"expression": rewrite_expression(shape)}}
    spec = {
        "matchConstraints": {"resourceRules": rules},
        "matchConditions": conditions,
        "failurePolicy": "Ignore",  # a Pod the policy fails on meets the webhook instead
        "reinvocationPolicy": "Never",
        "mutations": [mutation],
    }
    return {"apiVersion": api_version, "kind": "MutatingAdmissionPolicy",
            "metadata": _metadata(name), "spec": spec}  # fmt: skip


def _binding(name: str, namespaces: tuple[str, ...], api_version: str) -> Object:
    expression = {
        "key": NAMESPACE_NAME_LABEL,
        "operator": "In",
        "values": list(namespaces),
    }
    spec = {
        "policyName": name,
        "matchResources": {"namespaceSelector": {"matchExpressions": [expression]}},
    }
    return {"apiVersion": api_version, "kind": "MutatingAdmissionPolicyBinding",
            "metadata": _metadata(name), "spec": spec}  # fmt: skip


def _metadata(name: str) -> dict[str, Any]:
    return {"name": name, "labels": {MANAGED_BY_LABEL: MANAGED_BY_VALUE}}


def _templates(eligible: tuple[Eligible, ...], namespaces: tuple[str, ...]) -> tuple[Object, ...]:
    """Every template the policy may name, in every namespace it rewrites in: the rewrite's
    own, which differ between namespaces only by their namespace."""
    found: dict[tuple[str, str], Object] = {}
    for namespace in namespaces:
        for template in (t for entry in eligible for t in entry.templates):
            copy = json.loads(json.dumps(template))
            copy["metadata"]["namespace"] = namespace
            found.setdefault((namespace, str(copy["metadata"]["name"])), copy)
    return tuple(found.values())
