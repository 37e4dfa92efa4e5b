"""Extended resources backed by DRA (KEP-5004): the claim kube-scheduler makes for a Pod.

A DeviceClass with `spec.extendedResourceName: nvidia.com/gpu` lets a Pod keep its plain
`nvidia.com/gpu: 2`: kube-scheduler satisfies it with DRA devices of that class, creating one
special ResourceClaim for the Pod (annotated `resource.kubernetes.io/extended-resource-claim`,
controlled by the Pod). Every class also maps its implicit name
`deviceclass.resource.kubernetes.io/<class>`. The Pod's devices are charged to quota at its
own admission, as its template claims are, from the claim the scheduler would make: the same
requests, built the way kube-scheduler builds them (`createRequestsAndMappings` in its
dynamicresources plugin). The special claim, when it is created, is keyed to the same ledger
holder (`counting.holder_key`), so it consumes the Pod's reservation and is never charged a
second time.

The charge is the worst case: on a node whose device plugin serves the name the scheduler
makes no claim at all, and the reconciler then releases the reservation.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from fractions import Fraction
from typing import Any

from webhook.engine.cel.quantity import parse_quantity
from webhook.types import ClaimSpec, DeviceRequest, DragateError, Object

EXTENDED_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
IMPLICIT_PREFIX = "deviceclass.resource.kubernetes.io/"
EXTENDED_CLAIM = "<extended-resources>"
"""The pod claim name of the special claim's ledger holder (`pod:<uid>/<extended-resources>`):
kube-scheduler's own name for the claim before it exists; never a pod claim's name (a DNS
label), so it cannot meet one of the Pod's own claims."""
LABEL = "extended resources"


def class_by_resource(device_classes: Mapping[str, Object]) -> dict[str, str]:
    """Extended resource name -> DeviceClass name, as kube-scheduler resolves them: each
    class's implicit name, and each `extendedResourceName` (where two classes declare one,
    the newer class wins, and at equal age the lower name, as its ExtendedResourceCache)."""
    mapping = {IMPLICIT_PREFIX + name: name for name in device_classes}
    winners: dict[str, tuple[str, str]] = {}  # resource -> (creationTimestamp, class)
    for name, device_class in device_classes.items():
        explicit = (device_class.get("spec") or {}).get("extendedResourceName")
        if not isinstance(explicit, str) or not explicit:
            continue
        created = str((device_class.get("metadata") or {}).get("creationTimestamp") or "")
        best = winners.get(explicit)
        if best is None or created > best[0] or (created == best[0] and name < best[1]):
            winners[explicit] = (created, name)  # RFC 3339 of one format sorts as text
    mapping.update({resource: name for resource, (_, name) in winners.items()})
    return mapping


def mapped_resources(pod: Object, mapping: Mapping[str, str]) -> dict[str, str]:
    """The Pod's requested extended resources that a DeviceClass maps, with that class."""
    found: dict[str, str] = {}
    for container in _containers(pod):
        for name in _requests(container):
            if name in mapping:
                found[name] = mapping[name]
    return found


def asks_extended(pod: Object) -> bool:
    """Whether any container asks for a domain-qualified resource (`nvidia.com/gpu`): the
    only names a DeviceClass can map, so most Pods need no mapping built at all."""
    return any("/" in name for c in _containers(pod) for name in _requests(c))


def pod_special_claim(pod: Object, device_classes: Mapping[str, Object]) -> ClaimSpec | None:
    """`special_claim` of the Pod under the cluster's DeviceClasses."""
    if not device_classes or not asks_extended(pod):
        return None
    return special_claim(pod, class_by_resource(device_classes))


def special_claim(pod: Object, mapping: Mapping[str, str]) -> ClaimSpec | None:
    """The claim kube-scheduler makes for the Pod's mapped extended resources (all served by
    DRA), or None when the Pod asks for none."""
    requests: list[DeviceRequest] = []
    containers = list(_containers(pod))
    init_count = len(_list(_spec(pod).get("initContainers")))
    resources = mapped_resources(pod, mapping)
    for resource, device_class in sorted(resources.items()):
        requests += _resource_requests(containers, init_count, resource, device_class)
    if not requests:
        return None
    requests.sort(key=lambda r: r.name)
    return ClaimSpec(label=f"{LABEL} {', '.join(sorted(resources))}", requests=tuple(requests))


def _resource_requests(
    containers: list[Any], init_count: int, resource: str, device_class: str
) -> list[DeviceRequest]:
    """One resource's requests: one per long-lived container (regular and sidecar) asking for
    it, and one for the largest part of a short-lived init container's ask that the
    long-lived containers after it do not already cover."""
    long_lived: list[DeviceRequest | None] = [None] * len(containers)
    short_lived = []
    for i, container in enumerate(containers):
        if i >= init_count or _is_sidecar(container):
            long_lived[i] = _request(i, container, resource, device_class, [])
    for i, container in enumerate(containers[:init_count]):
        if not _is_sidecar(container):
            made = _request(i, container, resource, device_class, long_lived[i:])
            short_lived += [made] if made is not None else []
    largest = max(short_lived, key=lambda r: r.count, default=None)  # first of equals
    return [r for r in (largest, *long_lived) if r is not None]


def _request(
    index: int,
    container: Any,
    resource: str,
    device_class: str,
    reusable: list[DeviceRequest | None],
) -> DeviceRequest | None:
    """The container's request for `resource`, less what `reusable` requests already give."""
    requests = _requests(container)
    wanted = _whole(requests.get(resource))
    if not wanted:
        return None
    covered = 0
    for other in reusable:
        if other is not None:
            covered += other.count
            if covered >= wanted:
                return None
    position = sorted(requests).index(resource)
    name = f"container-{index}-request-{position}"
    return DeviceRequest(name=name, device_class=device_class, count=wanted - covered)


def _whole(value: Any) -> int:
    """A quantity as a whole number of devices; 0 for a fraction or what does not parse
    (the scheduler asks for no device then; the API server refuses such a Pod anyway)."""
    if value is None or isinstance(value, bool):
        return 0
    try:
        amount = parse_quantity(str(value)).value
    except DragateError:
        return 0
    return int(amount) if amount == Fraction(int(amount)) and amount > 0 else 0


def _requests(container: Any) -> dict[str, Any]:
    """The container's resource requests, each missing one defaulted from its limit as the
    API server defaults it (a validating webhook sees the defaulted Pod; files are not)."""
    resources = container.get("resources") if isinstance(container, dict) else None
    if not isinstance(resources, dict):
        return {}
    limits, requests = resources.get("limits"), resources.get("requests")
    merged = dict(limits) if isinstance(limits, dict) else {}
    merged.update(requests if isinstance(requests, dict) else {})
    return {str(k): v for k, v in merged.items()}


def _is_sidecar(container: Any) -> bool:
    return isinstance(container, dict) and container.get("restartPolicy") == "Always"


def _containers(pod: Object) -> Iterator[Any]:
    spec = _spec(pod)
    yield from _list(spec.get("initContainers"))
    yield from _list(spec.get("containers"))


def _spec(pod: Object) -> dict[str, Any]:
    spec = pod.get("spec")
    return spec if isinstance(spec, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def is_special_claim(claim: Object) -> bool:
    """Whether kube-scheduler made this claim for a Pod's extended resources."""
    annotations = (claim.get("metadata") or {}).get("annotations") or {}
    return annotations.get(EXTENDED_CLAIM_ANNOTATION) == "true"
