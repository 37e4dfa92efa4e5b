"""Objects Kubernetes refuses anyway, refused before the review does any work on them.

Mutating webhooks run before the API server validates an object, so /mutate (and /validate,
for whatever a mutation let through) can be sent objects no cluster would store: a legacy Pod
with 4,000 containers all named `c` cost seconds to minutes of rewriting, for an object the
API server then refuses for its duplicate names. Checking the limits Kubernetes enforces
costs one linear walk; an object over them is denied at once, with the limit in the message.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from webhook.types import AdmissionRequest, Decision, Reason, Verdict

POLICY = "dragate/kubernetes-limits"
CLAIM_LIMITS = {  # resource.k8s.io/v1 validation: field under `devices` -> most items
    "requests": 32,  # DeviceRequestsMaxSize
    "constraints": 32,  # DeviceConstraintsMaxSize
    "config": 32,  # DeviceConfigMaxSize
}
REQUEST_LIMITS = {"firstAvailable": 8, "selectors": 32}  # per request (and subrequest)
CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")
CLAIM_SPECS = {"ResourceClaim": ("spec",), "ResourceClaimTemplate": ("spec", "spec")}


def refusal(request: AdmissionRequest) -> Verdict | None:
    """A denial when the object breaks a limit Kubernetes validates; None otherwise."""
    problem = next(problems(request.kind, request.object or {}), None)
    if problem is None:
        return None
    reason = Reason(policy=POLICY, message=f"{problem}; Kubernetes refuses this object anyway")
    return Verdict(Decision(allowed=False, reasons=(reason,), audit={"refused": "limits"}))


def problems(kind: str, obj: Mapping[str, Any]) -> Iterator[str]:
    """Every broken limit: claim list sizes, and container names repeated in a pod spec."""
    if kind in CLAIM_SPECS:
        yield from _claim_problems(obj, CLAIM_SPECS[kind])
    yield from _duplicate_containers(obj, kind)


def _claim_problems(obj: Mapping[str, Any], spec_path: tuple[str, ...]) -> Iterator[str]:
    devices = _at(obj, (*spec_path, "devices"))
    prefix = ".".join((*spec_path, "devices"))
    for field, limit in CLAIM_LIMITS.items():
        yield from _too_many(devices.get(field), limit, f"{prefix}.{field}")
    requests = devices.get("requests")
    for i, item in enumerate(requests if isinstance(requests, list) else ()):
        yield from _request_problems(item, f"{prefix}.requests[{i}]")


def _request_problems(item: Any, path: str) -> Iterator[str]:
    if not isinstance(item, Mapping):
        return
    exact = item.get("exactly")
    for where, fields in ((item, REQUEST_LIMITS), (exact, {"selectors": 32})):
        if isinstance(where, Mapping):
            for field, limit in fields.items():
                yield from _too_many(where.get(field), limit, f"{path}.{field}")


def _too_many(value: Any, limit: int, path: str) -> Iterator[str]:
    if isinstance(value, list) and len(value) > limit:
        yield f"{path} has {len(value)} items, at most {limit} are allowed"


def _duplicate_containers(obj: Mapping[str, Any], kind: str) -> Iterator[str]:
    """A Pod's pod spec is its `spec`; in any other kind (workloads, custom resources) every
    mapping holding a `containers` list is one."""
    specs = [obj.get("spec")] if kind == "Pod" else _mappings(obj)
    for spec in specs:
        if not isinstance(spec, dict):
            continue
        if isinstance(spec.get("containers"), list):
            seen: set[str] = set()
            for field in CONTAINER_LISTS:
                for container in spec.get(field) or ():
                    name = container.get("name") if isinstance(container, dict) else None
                    if not isinstance(name, str):
                        continue
                    if name in seen:
                        yield f"container name {name!r} is used twice in one pod spec"
                        return
                    seen.add(name)


def _mappings(root: Any) -> Iterator[dict[str, Any]]:
    """Every mapping in `root`, without recursion (a deep object must not stop the check).

    The object is decoded JSON: plain dicts and lists, tested with the cheap `isinstance`
    of a concrete type (an abstract `Mapping` check costs several times more per node).
    """
    stack = [root]
    pop, extend = stack.pop, stack.extend
    while stack:
        node = pop()
        if isinstance(node, dict):
            yield node
            extend(node.values())
        elif isinstance(node, list):
            extend(node)


def _at(obj: Mapping[str, Any], path: tuple[str, ...]) -> Mapping[str, Any]:
    node: Any = obj
    for key in path:
        node = node.get(key) if isinstance(node, Mapping) else None
    return node if isinstance(node, Mapping) else {}
