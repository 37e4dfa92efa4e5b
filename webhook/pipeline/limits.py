"""Objects Kubernetes refuses anyway, refused before the review does any work on them.

Mutating webhooks run before the API server validates an object, so /mutate (and /validate,
for whatever a mutation let through) can be sent objects no cluster would store: a legacy Pod
with 4,000 containers all named `c` cost seconds to minutes of rewriting, for an object the
API server then refuses for its duplicate names, and one of 34,000 GPU containers is twice
the size etcd stores. Checking the limits Kubernetes enforces (`webhook.types.kubelimits`)
costs one encoding and one linear walk; an object over them is denied at once, with the limit
in the message, by the webhook, `dragate check`, `dragate test` and the audit alike.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import orjson

from webhook.types import AdmissionRequest, Decision, Reason, Verdict
from webhook.types.kubelimits import (
    CLAIM_LISTS,
    DEVICE_SELECTORS_MAX,
    OBJECT_BYTES_MAX,
    REQUEST_LISTS,
)

POLICY = "dragate/kubernetes-limits"
CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")
CLAIM_SPECS = {"ResourceClaim": ("spec",), "ResourceClaimTemplate": ("spec", "spec")}
EXACTLY_LISTS = {"selectors": DEVICE_SELECTORS_MAX}


def refusal(request: AdmissionRequest) -> Verdict | None:
    """A denial when the object breaks a limit Kubernetes validates; None otherwise."""
    obj = request.object
    if not obj:
        return None
    problem = next(problems(request.kind, obj), None)
    if problem is None:
        return None
    reason = Reason(policy=POLICY, message=f"{problem}; Kubernetes refuses this object anyway")
    return Verdict(Decision(allowed=False, reasons=(reason,), audit={"refused": "limits"}))


def problems(kind: str, obj: Mapping[str, Any]) -> Iterator[str]:
    """Every broken limit: the object's size first (the cheapest to tell, and the one that
    makes every other walk long), claim list sizes, container names repeated in a pod spec."""
    size = stored_size(obj)
    if size is not None and size > OBJECT_BYTES_MAX:
        yield (f"the object is {size:,} bytes as JSON, more than the {OBJECT_BYTES_MAX:,} bytes "
               "(1.5 MiB) etcd stores in one write")  # fmt: skip
        return
    if kind in CLAIM_SPECS:  # a claim's schema holds no pod spec to look for containers in
        yield from _claim_problems(obj, CLAIM_SPECS[kind])
        return
    yield from _duplicate_containers(obj, kind)


def _claim_problems(obj: Mapping[str, Any], spec_path: tuple[str, ...]) -> Iterator[str]:
    """Paths are written only for a list found too long: most claims break no limit. The
    object is decoded JSON, tested with `isinstance` of `dict` as `_mappings` explains."""
    devices = _at(obj, (*spec_path, "devices"))
    prefix = ".".join((*spec_path, "devices"))
    yield from _too_many(devices, CLAIM_LISTS, prefix)
    requests = devices.get("requests")
    for i, item in enumerate(requests if isinstance(requests, list) else ()):
        if isinstance(item, dict):
            path = f"{prefix}.requests[{i}]"
            yield from _too_many(item, REQUEST_LISTS, path)
            yield from _too_many(item.get("exactly"), EXACTLY_LISTS, f"{path}.exactly")


def _too_many(where: Any, limits: Mapping[str, int], path: str) -> Iterator[str]:
    """Each list of `where` named in `limits` that holds more items than its limit."""
    if not isinstance(where, dict):
        return
    for field, limit in limits.items():
        value = where.get(field)
        if isinstance(value, list) and len(value) > limit:
            yield f"{path}.{field} has {len(value)} items, at most {limit} are allowed"


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
        node = node.get(key) if isinstance(node, dict) else None
    return node if isinstance(node, dict) else {}


def stored_size(obj: Mapping[str, Any]) -> int | None:
    """The bytes of `obj` as compact JSON less one per backslash of its escapes (`\\"`, `\\n`,
    ...): about what its characters take in etcd, where strings are stored unescaped (the real
    kube-apiserver stores a Pod of 2.8 MB of JSON made of quotation marks, and refuses one of
    1.58 MB of plain letters). None when the object cannot be encoded at all (nesting too
    deep): the review then denies it as unreadable, as it would have anyway.

    Its `status` and `metadata.managedFields` are left out: the API server writes both itself
    (and the audit reads objects etcd stored with them, in a denser encoding than JSON)."""
    obj = _as_written(obj)
    try:
        encoded = orjson.dumps(obj, option=orjson.OPT_NON_STR_KEYS)
    except orjson.JSONEncodeError:  # an integer past 64 bits, or deeper than orjson goes
        try:
            encoded = json.dumps(obj, separators=(",", ":"), ensure_ascii=False,
                                 default=str).encode("utf-8", "surrogatepass")  # fmt: skip
        except (RecursionError, ValueError, TypeError):
            return None
    return len(encoded) - encoded.count(b"\\")


def _as_written(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """`obj` without `status` and `metadata.managedFields` (shallow copies, when it has them)."""
    meta = obj.get("metadata")
    fields = meta if isinstance(meta, dict) and "managedFields" in meta else None
    if "status" not in obj and fields is None:
        return obj
    written = {k: v for k, v in obj.items() if k != "status"}
    if fields is not None:
        written["metadata"] = {k: v for k, v in fields.items() if k != "managedFields"}
    return written
