"""Pod and workload rules: `spec.resourceClaims` entries and the containers that use them."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from webhook.lint.findings import ERROR, Finding, Path
from webhook.lint.objects import as_list, as_map, dig, pod_spec_path
from webhook.lint.registry import RuleInfo, register
from webhook.lint.rules.claims import dns_label_problem

SOURCE = RuleInfo(
    "pod-claim-source",
    ERROR,
    "pod claim with both/neither of resourceClaimName/resourceClaimTemplateName, or `source:`",
)
REF = RuleInfo("pod-claim-ref", ERROR, "container claim naming no entry of spec.resourceClaims")
CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")
REFERENCES = ("resourceClaimName", "resourceClaimTemplateName")


@register(SOURCE, REF)
def check_pod_claims(obj: Mapping[str, Any]) -> Iterator[Finding]:
    spec_path = pod_spec_path(obj)
    if spec_path is None:
        return
    spec = as_map(dig(obj, spec_path))
    names: set[str] = set()
    for i, item in enumerate(as_list(spec.get("resourceClaims"))):
        path: Path = (*spec_path, "resourceClaims", i)
        claim = as_map(item)
        name = claim.get("name")
        if isinstance(name, str):
            names.add(name)
        yield from _pod_claim(path, claim)
    for list_name in CONTAINER_LISTS:
        for j, container in enumerate(as_list(spec.get(list_name))):
            claims = dig(container, ("resources", "claims"))
            for k, ref in enumerate(as_list(claims)):
                ref_name = as_map(ref).get("name")
                if isinstance(ref_name, str) and ref_name in names:
                    continue
                container_name = as_map(container).get("name", j)
                yield Finding(
                    REF.id,
                    ERROR,
                    (*spec_path, list_name, j, "resources", "claims", k, "name"),
                    f"container `{container_name}` uses claim `{ref_name}`, which is not in "
                    f"spec.resourceClaims"
                    + (f" (known: {', '.join(sorted(names))})" if names else ""),
                    f"add `{{name: {ref_name}, resourceClaimTemplateName: <template>}}` to "
                    f"spec.resourceClaims, or fix the name",
                )


def _pod_claim(path: Path, claim: Mapping[str, Any]) -> Iterator[Finding]:
    problem = dns_label_problem(claim.get("name"))
    if problem is not None:
        yield Finding(
            SOURCE.id,
            ERROR,
            (*path, "name"),
            f"pod claim name {problem}",
            "name it with a DNS label, e.g. `gpu`",
        )
    if "source" in claim:
        inner = as_map(claim.get("source"))
        moved = ", ".join(f"{k}: {inner[k]}" for k in REFERENCES if k in inner)
        yield Finding(
            SOURCE.id,
            ERROR,
            (*path, "source"),
            "the `source:` wrapper of pod resourceClaims was removed in Kubernetes 1.31",
            f"move its field up one level: `{{name: {claim.get('name')}, {moved or '...'}}}`",
        )
        return
    given = [k for k in REFERENCES if claim.get(k)]
    if len(given) == 2:
        yield Finding(
            SOURCE.id,
            ERROR,
            (*path, REFERENCES[1]),
            "pod claim sets both resourceClaimName and resourceClaimTemplateName",
            "keep resourceClaimName to share an existing claim, or resourceClaimTemplateName "
            "for a claim per pod",
        )
    elif not given:
        yield Finding(
            SOURCE.id,
            ERROR,
            path,
            "pod claim sets neither resourceClaimName nor resourceClaimTemplateName",
            "add `resourceClaimTemplateName: <template>` (a claim per pod) or "
            "`resourceClaimName: <claim>` (a shared claim)",
        )
