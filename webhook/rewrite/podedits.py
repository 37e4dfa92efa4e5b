"""A Pod's rewrite at admission: edits to its pod spec, remembered by what they depend on.

Each Pod a workload creates is rewritten the same way, yet Pods differ in fields the rewrite
never reads: name, uid, generateName suffix, the service-account token volume's random name,
env, labels. The rewrite of a pod spec reads only the spec's `SPEC_KEYS` and each container's
`CONTAINER_KEYS` (tests/rewrite/test_podedits.py records every key it touches), so the exact
`fingerprint` of that projection, with the options, is the memo key, in the table of the
policy set whose mappings are applied (`EDITS`, a slot of its `memos`; without one, nothing
is remembered), so a reload drops the edits of the set it replaces. The value is what the
rewrite made of the projection: the JSON patch from it to its rewrite, notes, templates,
denials and the legacy resources removed. Applying the patch copies only the dicts and lists
on its paths (copy on write), so a Pod with a large spec costs what a small one does.

`rewrite_pod` returns what `rewrite_object` returns for the Pod, and the patch `make_patch`
computes between the two; other kinds, and Pods whose projection has no fingerprint (a
subclass of dict or str in it), take exactly that path. Read-only, because shared: a result's
templates (every Pod with the same rewrite gets the same objects), and the parts of its object
the rewrite left as they were (the request's own).
"""

from __future__ import annotations

import copy
import functools
import marshal
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from webhook.rewrite.patch import (
    Operation,
    Steps,
    apply_copied,
    copy_tree,
    escape,
    make_patch,
    steps,
)
from webhook.rewrite.podspec import Options, Outcome
from webhook.rewrite.shapes import mark, marks, rewrite_spec
from webhook.rewrite.workloads import group_kind, rewrite_object
from webhook.types import Deadline, LegacyResourceMapping, MappingAction, Object, RewriteResult
from webhook.types.adapters import NEVER
from webhook.types.lrutable import LruTable
from webhook.types.memos import Memos, Slot
from webhook.types.records import record

SPEC_KEYS = frozenset(
    {"initContainers", "containers", "resourceClaims", "nodeSelector", "affinity"}
)
CONTAINER_KEYS = frozenset({"name", "restartPolicy", "resources"})
_CONTAINER_LISTS = ("initContainers", "containers")
MEMO_SIZE = 512
"""Distinct pod spec rewrites kept (a few kB each): one per workload shape creating Pods."""
MEMO_MAX_CONTAINERS = 64
"""A pod spec with more containers than this is rewritten afresh each time, never kept: its
edits grow with it (about 7 kB a container), and a handful of huge specs would otherwise hold
hundreds of MiB for shapes no workload repeats."""


@dataclass(frozen=True)
class SpecEdits:
    """What the rewrite does to one pod spec projection (shared by every Pod that has it)."""

    steps: Steps
    operations: tuple[Operation, ...]  # `steps` as applied under /spec (values shared)
    notes: tuple[str, ...]
    templates: tuple[Object, ...]
    denied: tuple[str, ...]
    removed: frozenset[str]


@record
class PodRewrite:
    """A rewrite's JSON patch against the object it was made from (empty: unchanged), what it
    says and needs, and the rewritten object, built only when `result` is first read."""

    patch: tuple[Operation, ...]
    notes: tuple[str, ...]
    templates: tuple[Object, ...]
    denied: tuple[str, ...]
    build: Callable[[], RewriteResult]

    @property
    def changed(self) -> bool:
        return bool(self.patch)

    @functools.cached_property
    def result(self) -> RewriteResult:
        """What `rewrite_object` makes of the object (built once, on the first read)."""
        return self.build()

    def rewritten(self) -> Object:
        return self.result.object


Edits = LruTable[Hashable, tuple[Sequence[LegacyResourceMapping], SpecEdits]]
EDITS: Slot[Edits] = Slot("pod spec edits", lambda: Edits(MEMO_SIZE))


def rewrite_pod(
    pod: Object,
    mappings: Sequence[LegacyResourceMapping],
    *,
    native_resources: frozenset[str] = frozenset(),
    action_override: MappingAction | None = None,
    namespace: str | None = None,
    deadline: Deadline = NEVER,
    memos: Memos | None = None,
) -> PodRewrite:
    """`rewrite_object(pod, ...)` with its patch, the pod spec's edits taken from the memo
    in `memos` (the policy set's whose `mappings` these are); `deadline` is passed at each
    container and each patch operation."""
    spec = pod.get("spec")
    metadata = pod.get("metadata")
    ns = namespace or _namespace_of(metadata)
    opts = Options(mappings, native_resources, action_override, ns, deadline)
    if type(pod) is not dict or type(spec) is not dict or group_kind(pod) != ("", "Pod"):
        return _generally(pod, opts)
    edits = spec_edits(spec, opts, memos)
    if edits is None:
        return _generally(pod, opts)
    return PodRewrite(
        patch=tuple(_pod_patch(pod, edits)),
        notes=edits.notes,
        templates=edits.templates,
        denied=edits.denied,
        build=functools.partial(_built, pod, spec, edits, deadline),
    )


def spec_edits(spec: dict[str, Any], opts: Options, memos: Memos | None) -> SpecEdits | None:
    """The edits of one pod spec (remembered in `memos`), None when what the rewrite reads of
    it has no exact `fingerprint`."""
    projection = _projection(spec)
    try:
        key: Hashable = (
            id(opts.mappings),
            opts.native_resources,
            opts.action_override,
            opts.namespace,
            fingerprint(projection),
        )
    except ValueError:
        return None
    if memos is None or type(opts.mappings) is not tuple:
        return _edits(projection, opts)  # mutable mappings: not rememberable by identity
    if _container_count(spec) > MEMO_MAX_CONTAINERS:
        return _edits(projection, opts)
    table = memos.of(EDITS)
    found = table.get(key)
    if found is not None and found[0] is opts.mappings:
        return found[1]
    edits = _edits(projection, opts)
    table.put(key, (opts.mappings, edits))
    return edits


def _container_count(spec: dict[str, Any]) -> int:
    lists = (spec.get(name) for name in _CONTAINER_LISTS)
    return sum(len(items) for items in lists if isinstance(items, list))


def fingerprint(node: Any) -> bytes:
    """An exact image of a tree of Python data: equal only for trees equal in content, order
    and type (`1`, `1.0`, `True`, `-0.0` and `"1"` all differ; a tuple is no list).

    The `marshal` format version 0: it writes each value in full, never a reference to an
    interned string or to an object seen before (versions 1 and 3 add those, and with them
    bytes that depend on interning and reference counts). Raises ValueError for what marshal
    refuses: subclasses of the built-in types (a YAML loader's CommentedMap) and trees nested
    more than a couple of thousand levels.
    """
    return marshal.dumps(node, 0)


def _projection(spec: dict[str, Any]) -> dict[str, Any]:
    """The part of the pod spec the rewrite reads, in the spec's own order (shares values)."""
    return {
        key: _containers(value) if key in _CONTAINER_LISTS and type(value) is list else value
        for key, value in spec.items()
        if key in SPEC_KEYS
    }


def _containers(items: list[Any]) -> list[Any]:
    return [
        {k: v for k, v in item.items() if k in CONTAINER_KEYS} if type(item) is dict else item
        for item in items
    ]


def _edits(projection: dict[str, Any], opts: Options) -> SpecEdits:
    new = _copied(projection, opts.deadline)
    out = Outcome()
    removed = rewrite_spec(new, opts, out)
    patch = make_patch(projection, new, deadline=opts.deadline)
    return SpecEdits(
        steps=steps(projection, patch, opts.deadline),
        operations=tuple({**op, "path": "/spec" + op["path"]} for op in patch),
        notes=tuple(dict.fromkeys(out.notes)),
        templates=tuple(out.templates.values()),
        denied=tuple(dict.fromkeys(out.denied)),
        removed=frozenset(removed),
    )


def _copied(projection: dict[str, Any], deadline: Deadline) -> dict[str, Any]:
    """`copy_tree(projection)`, its containers one at a time (passing `deadline` at each)."""
    new = {}
    for key, value in projection.items():
        if key in _CONTAINER_LISTS and type(value) is list:
            new[key] = _copied_items(value, deadline)
        else:
            new[key] = copy_tree(value)
    return new


def _copied_items(items: list[Any], deadline: Deadline) -> list[Any]:
    copies = []
    for item in items:
        deadline.checkpoint("copying containers")
        copies.append(copy_tree(item))
    return copies


def _marked(pod: Object, removed: frozenset[str]) -> dict[str, Any]:
    """The Pod's `metadata` as the rewrite leaves it, under its key (`{}`: untouched)."""
    if not removed:
        return {}
    metadata = pod.get("metadata")
    marked = {"metadata": _with_own_marks(metadata)} if isinstance(metadata, dict) else {}
    mark(marked, removed, label=pod.get("kind") == "Pod")
    return marked


def _built(
    pod: Object, spec: dict[str, Any], edits: SpecEdits, deadline: Deadline
) -> RewriteResult:
    """The rewritten Pod: `pod` with the spec's edits applied (copy on write), and marked."""
    new = dict(pod)
    new["spec"], _ = apply_copied(spec, edits.steps, deadline=deadline)
    new.update(_marked(pod, edits.removed))
    return RewriteResult(
        object=new,
        changed=new != pod,
        notes=edits.notes,
        templates=edits.templates,
        denied=edits.denied,
    )


def _with_own_marks(metadata: dict[str, Any]) -> dict[str, Any]:
    """A copy of `metadata` with its own annotations and labels, for `mark` to write into
    (shallow copies of the same types, as `rewrite_object`'s deep copy would have)."""
    own = copy.copy(metadata)
    for key in ("annotations", "labels"):
        if isinstance(own.get(key), dict):
            own[key] = copy.copy(own[key])
    return own


def _pod_patch(pod: Object, edits: SpecEdits) -> list[Operation]:
    """`make_patch(pod, new)` for the rewritten Pod `new`, from the spec's operations (paths
    under /spec) and the marks' own: in the order of `pod`'s keys, a metadata the rewrite
    added last, as `new` has them."""
    operations: list[Operation] = []
    for key in pod:
        if key == "spec":
            operations += [dict(op) for op in edits.operations]  # each Pod's own, values shared
        elif key == "metadata":
            operations += _mark_operations(pod, edits.removed)
    if "metadata" not in pod:
        operations += _mark_operations(pod, edits.removed)
    return operations


def _mark_operations(pod: Object, removed: frozenset[str]) -> list[Operation]:
    """`make_patch` from the Pod's metadata to `_marked`'s, without copying or diffing it:
    each mark is an add or a replace of one key, or of its field where that is no mapping."""
    if not removed:
        return []
    metadata = pod.get("metadata")
    label = pod.get("kind") == "Pod"
    if not isinstance(metadata, dict):
        marked = _marked(pod, removed)["metadata"]
        if "metadata" in pod:
            return make_patch(metadata, marked, "/metadata")
        return [{"op": "add", "path": "/metadata", "value": marked}]
    wanted = marks(metadata, removed, label=label)
    operations: list[Operation] = []
    for field in metadata:  # fields there already, in the Pod's order, as make_patch diffs
        if field in wanted:
            operations += _mark_field(metadata[field], f"/metadata/{field}", *wanted[field])
    for field, (key, value) in wanted.items():
        if field not in metadata:
            operations.append({"op": "add", "path": f"/metadata/{field}", "value": {key: value}})
    return operations


def _mark_field(field: Any, path: str, key: str, value: str) -> list[Operation]:
    """The operation setting `key` to the string `value` in the mapping at `path`."""
    if not isinstance(field, dict):
        return [{"op": "replace", "path": path, "value": {key: value}}]
    if key not in field:
        return [{"op": "add", "path": f"{path}/{escape(key)}", "value": value}]
    if field[key] == value:  # as make_patch: an equal field is not descended into
        return []
    return [{"op": "replace", "path": f"{path}/{escape(key)}", "value": value}]


def _generally(pod: Object, opts: Options) -> PodRewrite:
    result = rewrite_object(
        pod,
        opts.mappings,
        native_resources=opts.native_resources,
        action_override=opts.action_override,
        namespace=opts.namespace,
        deadline=opts.deadline,
    )
    changed = result.changed
    patch = make_patch(dict(pod), dict(result.object), deadline=opts.deadline) if changed else []
    return PodRewrite(
        patch=tuple(patch),
        notes=result.notes,
        templates=result.templates,
        denied=result.denied,
        build=lambda: result,
    )


def _namespace_of(metadata: Any) -> str | None:
    ns = metadata.get("namespace") if isinstance(metadata, dict) else None
    return str(ns) if ns else None
