"""The CEL text of the rewriting MutatingAdmissionPolicy: its matchConditions and its patch.

Each condition says one way a Pod could leave the shape the policy rewrites exactly; the
Python rewrite is the reference for every one of them (webhook/rewrite/podspec.py):
- containers ask for one eligible resource each at most, 1 to `max_count` devices, whole
  numbers, limits equal to requests, no container claims of their own, and no unmapped
  `nvidia.com/` resource beside it (a share of a GPU); other mapped resources (a prefix, a
  selector, another action, a native one) send the Pod to the webhook;
- init containers ask for no mapped resource (the webhook shares their devices);
- no pod claims yet (names stay the rewrite's own), no `nvidia.com/` node label in the node
  selector or the required node affinity (the webhook turns those into device selectors);
- not rewritten before (its annotation would be merged), not by an exempt user.

Quantities reach CEL as the API server's canonical strings, as they reach the webhook's
JSON, so a whole number is digits and nothing else there and here. Container names are not
checked beyond their length (a claim name must fit 63 characters): a name that is not a DNS
label fails the Pod's validation whoever rewrote it. The conditions are evaluated for every
Pod created in a bound namespace, so each loops over a container's resources once (for a
legacy GPU Pod a measurable share of the API server's CPU per create, docs/benchmarks.md).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from webhook.rewrite.names import DNS_LABEL_MAX
from webhook.rewrite.nodes import NVIDIA
from webhook.rewrite.workloads import REWRITTEN_ANNOTATION, REWRITTEN_LABEL
from webhook.types.records import record

SECTIONS = ("limits", "requests")


@record
class RewriteShape:
    """What the policy rewrites: per eligible resource its claim prefix and the template
    name for each count from 1; the mapped resources it leaves to the webhook."""

    eligible: tuple[tuple[str, str, tuple[str, ...]], ...]
    others: tuple[tuple[str, ...], tuple[str, ...]]  # (exact names, prefixes)
    max_count: int
    max_containers: int
    exempt_users: tuple[str, ...] = ()


def literal(value: object) -> str:
    """JSON's strings, numbers, lists and maps are CEL literals as they are."""
    return json.dumps(value)


def pod_conditions(shape: RewriteShape) -> list[tuple[str, str]]:
    """(name, expression) of every matchCondition: a Pod the policy rewrites exactly."""
    spec = "object.spec"
    conditions = [
        ("asks-for-a-rewritable-gpu", f"{spec}.containers.exists(c, {_asks(shape, 'c')})"),
        ("containers-in-shape", _containers_in_shape(shape)),
        ("init-containers-ask-no-gpu", _init_containers(shape)),
        ("no-pod-claims", f"!has({spec}.resourceClaims)"),
        ("no-gpu-node-labels", _no_node_labels()),
        ("not-rewritten-before", _not_marked()),
    ]
    if shape.exempt_users:
        users = literal(list(shape.exempt_users))
        conditions.append(("not-an-exempt-user", f"!(request.userInfo.username in {users})"))
    return conditions


def rewrite_expression(shape: RewriteShape) -> str:
    """The JSONPatch list: the rewritten mark, each container's edits, the pod claims."""
    parts = [f"[{_mark_op('annotations', REWRITTEN_ANNOTATION, _removed(shape))}, "
             f"{_mark_op('labels', REWRITTEN_LABEL, literal('true'))}]"]  # fmt: skip
    parts += [_container_ops(shape, i) for i in range(shape.max_containers)]
    claims = (
        f"object.spec.containers.filter(c, {_asks(shape, 'c')}).map(c, "
        f"{{'name': {_choose(shape, 'c', _prefix)} + c.name, "
        f"'resourceClaimTemplateName': {_choose(shape, 'c', _template)}}})"
    )
    parts.append(f"[JSONPatch{{op: 'add', path: '/spec/resourceClaims', value: {claims}}}]")
    return " +\n".join(parts)


def _has_section(c: str, section: str) -> str:
    return f"has({c}.resources) && has({c}.resources.{section})"


def _in_section(c: str, section: str, resource: str) -> str:
    return f"({_has_section(c, section)} && {resource} in {c}.resources.{section})"


def _has_key(c: str, resource: str) -> str:
    return "(" + " || ".join(_in_section(c, s, resource) for s in SECTIONS) + ")"


def _eligible_names(shape: RewriteShape) -> str:
    return literal([name for name, _, _ in shape.eligible])


def _asks(shape: RewriteShape, c: str) -> str:
    return "(" + " || ".join(_has_key(c, literal(r)) for r, _, _ in shape.eligible) + ")"


def _mapped_elsewhere(shape: RewriteShape, key: str) -> str:
    """Whether `key` is a mapped resource the policy does not rewrite."""
    names, prefixes = shape.others
    tests = [f"{key} in {literal(list(names))}"] if names else []
    if prefixes:
        tests.append(f"{literal(list(prefixes))}.exists(p, {key}.startsWith(p) && {key} != p)")
    return "(" + (" || ".join(tests) or "false") + ")"


def _keys_allowed(c: str, section: str, test: str) -> str:
    return f"(!({_has_section(c, section)}) || {c}.resources.{section}.all(k, {test}))"


def _containers_in_shape(shape: RewriteShape) -> str:
    """Every app container in shape; one loop over each section's keys per container."""
    names = _eligible_names(shape)
    nvidia = literal(NVIDIA)
    # beside a mapped resource, an unmapped `nvidia.com/` one (HAMi's `gpumem`, `gpucores`)
    # means shares of a GPU: the webhook leaves the whole Pod as it is
    asking_keys = f"k in {names} || !(k.startsWith({nvidia}) || {_mapped_elsewhere(shape, 'k')})"
    other_keys = f"!{_mapped_elsewhere(shape, 'k')}"
    longest = max(len(prefix) for _, prefix, _ in shape.eligible)
    asking = [
        *(_keys_allowed("c", s, asking_keys) for s in SECTIONS),
        "!has(c.resources.claims)",
        f"has(c.name) && size(c.name) <= {DNS_LABEL_MAX - longest}",
        *(_count_ok(shape, literal(r)) for r, _, _ in shape.eligible),
    ]
    if len(shape.eligible) > 1:
        asking.append(f"size({names}.filter(r, {_has_key('c', 'r')})) == 1")
    other = " && ".join(_keys_allowed("c", s, other_keys) for s in SECTIONS)
    each = f"!has(c.resources) || ({_asks(shape, 'c')} ? ({' && '.join(asking)}) : ({other}))"
    return (
        f"size(object.spec.containers) <= {shape.max_containers} && "
        f"object.spec.containers.all(c, {each})"
    )


def _count_ok(shape: RewriteShape, resource: str) -> str:
    """1 to `max_count` devices, limits equal to requests: canonical quantities are equal
    exactly when their strings are, and a whole number's is its digits."""
    counts = literal([str(n) for n in range(1, shape.max_count + 1)])
    checks = [
        f"(!{_in_section('c', s, resource)} || c.resources.{s}[{resource}] in {counts})"
        for s in SECTIONS
    ]
    both = " && ".join(_in_section("c", s, resource) for s in SECTIONS)
    limits, requests = (f"c.resources.{s}[{resource}]" for s in SECTIONS)
    checks.append(f"(!({both}) || {limits} == {requests})")
    return " && ".join(checks)


def _init_containers(shape: RewriteShape) -> str:
    test = f"!(k in {_eligible_names(shape)}) && !{_mapped_elsewhere(shape, 'k')}"
    keys = " && ".join(_keys_allowed("c", s, test) for s in SECTIONS)
    return "!has(object.spec.initContainers) || object.spec.initContainers.all(c, " + keys + ")"


def _no_node_labels() -> str:
    nvidia = literal(NVIDIA)
    selector = (
        "(!has(object.spec.nodeSelector) || "
        f"!object.spec.nodeSelector.exists(k, k.startsWith({nvidia})))"
    )
    node = "object.spec.affinity.nodeAffinity"
    required = f"{node}.requiredDuringSchedulingIgnoredDuringExecution"
    affinity = (
        f"(!has(object.spec.affinity) || !has({node}) || !has({required}) || "
        f"!{required}.nodeSelectorTerms.exists(t, has(t.matchExpressions) && "
        f"t.matchExpressions.exists(e, e.key.startsWith({nvidia}))))"
    )
    return f"{selector} && {affinity}"


def _not_marked() -> str:
    key = literal(REWRITTEN_ANNOTATION)
    return f"!has(object.metadata.annotations) || !({key} in object.metadata.annotations)"


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _mark_op(field: str, key: str, value: str) -> str:
    whole = f"JSONPatch{{op: 'add', path: '/metadata/{field}', value: {{{literal(key)}: {value}}}}}"
    one = f"JSONPatch{{op: 'add', path: '/metadata/{field}/{_escape(key)}', value: {value}}}"
    return f"(has(object.metadata.{field}) ? {one} : {whole})"


def _removed(shape: RewriteShape) -> str:
    """The rewritten annotation's value: the resources removed, sorted, comma-separated."""
    asked = _has_key("c", "r")
    return (
        f"{_eligible_names(shape)}.filter(r, object.spec.containers.exists(c, {asked})).join(',')"
    )


def _container_ops(shape: RewriteShape, index: int) -> str:
    c = f"object.spec.containers[{index}]"
    path = f"/spec/containers/{index}/resources"
    per_resource = []
    for resource, prefix, _ in shape.eligible:
        name = literal(resource)
        ops = [_remove_op(c, path, section, resource) for section in SECTIONS]
        claim = f"[{{'name': {literal(prefix)} + {c}.name}}]"
        ops.append(f"[JSONPatch{{op: 'add', path: '{path}/claims', value: {claim}}}]")
        per_resource.append(f"({_has_key(c, name)} ? {' + '.join(ops)} : [])")
    guarded = " + ".join(per_resource)
    return f"(size(object.spec.containers) > {index} ? {guarded} : [])"


def _remove_op(c: str, path: str, section: str, resource: str) -> str:
    name = literal(resource)
    target = (
        f"size({c}.resources.{section}) == 1 ? '{path}/{section}' : "
        f"'{path}/{section}/{_escape(resource)}'"
    )
    return f"({_in_section(c, section, name)} ? [JSONPatch{{op: 'remove', path: {target}}}] : [])"


def _prefix(entry: tuple[str, str, tuple[str, ...]]) -> str:
    return literal(entry[1])


def _template(entry: tuple[str, str, tuple[str, ...]]) -> str:
    resource, _, names = entry
    by_count = literal({str(n): t for n, t in enumerate(names, 1)})
    name = literal(resource)
    limits = _in_section("c", "limits", name)
    return f"{by_count}[{limits} ? c.resources.limits[{name}] : c.resources.requests[{name}]]"


def _choose(shape: RewriteShape, c: str, pick: Callable[..., str]) -> str:
    """`pick` of the eligible resource container `c` asks for (it asks for exactly one)."""
    *rest, last = shape.eligible
    text = pick(last)
    for entry in reversed(rest):
        text = f"({_has_key(c, literal(entry[0]))} ? {pick(entry)} : {text})"
    return text


__all__: Sequence[str] = ["RewriteShape", "pod_conditions", "rewrite_expression"]
