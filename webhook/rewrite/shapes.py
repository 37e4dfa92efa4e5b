"""The shapes a pod spec takes inside workload objects, each rewritten in place.

`pod` is a Pod or a PodTemplateSpec (`metadata` + `spec`), `podspec` a bare PodSpec (KServe's
LLMInferenceService `template`/`worker`), `kserve` an InferenceService component (pod spec fields
inline plus one container under `model` or a framework shorthand such as `pytorch`), and `argo`
an Argo Workflows template (`container`/`script`/`containerSet`, no `resourceClaims` field, so
claims go into `podSpecPatch` when it is free). Each shape takes a node already found at its
path; anything of the wrong type is left alone, never an error: manifests in git hold every shape.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from collections.abc import Set as AbstractSet
from typing import Any

from webhook.rewrite.mappings import find_match
from webhook.rewrite.notes import note
from webhook.rewrite.podspec import Options, Outcome, containers_of, rewrite_in_place

REWRITTEN_ANNOTATION = "dragate.io/rewritten"
REWRITTEN_LABEL = "dragate.io/rewritten"
"""Set (`"true"`) on a Pod the rewrite changed, never on a template. The chart's validating
webhooks select on it (`objectSelector`), so the API server sends a rewritten Pod to the
validating entry without matchConditions, and runs no CEL for it there."""

Path = tuple[str, ...]
_POD_KEYS = ("resourceClaims", "nodeSelector", "affinity")
KSERVE_CONTAINERS = (
    "model",
    "sklearn",
    "xgboost",
    "tensorflow",
    "pytorch",
    "triton",
    "onnx",
    "pmml",
    "lightgbm",
    "paddle",
    "huggingface",
)
"""An InferenceService component's single-container fields: `model` and the framework
shorthands, each a container named `kserve-container` unless it says otherwise."""


def find_nodes(root: Any, path: Path) -> Iterator[dict[str, Any]]:
    """Every mapping at `path` (`*`: each list item, `{}`: each mapping value)."""
    if not path:
        if isinstance(root, dict):
            yield root
        return
    step, rest = path[0], path[1:]
    if step == "*" and isinstance(root, list):
        children: list[Any] = list(root)
    elif step == "{}" and isinstance(root, dict):
        children = list(root.values())
    elif isinstance(root, dict) and step in root:
        children = [root[step]]
    else:
        children = []
    for child in children:
        yield from find_nodes(child, rest)


def _pod(pod: dict[str, Any], opts: Options, out: Outcome) -> None:
    spec = pod.get("spec")
    if isinstance(spec, dict):
        mark(pod, rewrite_spec(spec, opts, out), label=pod.get("kind") == "Pod")


def _podspec(spec: dict[str, Any], opts: Options, out: Outcome) -> None:
    """A bare PodSpec: no metadata of its own to record the rewrite in."""
    rewrite_spec(spec, opts, out)


def rewrite_spec(spec: dict[str, Any], opts: Options, out: Outcome) -> set[str]:
    """`rewrite_in_place` once claims can be added: `resourceClaims` and each container's
    `resources.claims` absent, null (as kubectl reads it: absent) or a list. Otherwise the pod
    spec stays as it is, with a note."""
    shared = _sharing(spec, opts)
    if shared:
        out.notes.append(
            note(
                f"dragate: pod spec not migrated: {shared} asks for a share of "
                "a GPU (HAMi-style); migrate by hand"
            )
        )
        return set()
    nulls: list[tuple[dict[str, Any], str]] = []
    checkpoint = opts.deadline.checkpoint
    for where, holder, key in _claim_slots(spec):
        checkpoint("reading the containers' claims")
        value = holder.get(key, [])
        if value is None:
            nulls.append((holder, key))
        elif not isinstance(value, list) and _legacy_in(spec):
            text = f"dragate: pod spec not migrated: {where} is {_type(value)}, not a list"
            out.notes.append(note(text))
            return set()
    for holder, key in nulls:
        holder[key] = []
    removed = rewrite_in_place(spec, opts, out)
    for holder, key in nulls:
        if holder.get(key) == []:
            holder[key] = None
    return removed


def _sharing(spec: dict[str, Any], opts: Options) -> str:
    """An unmapped `nvidia.com/` resource in a container that also asks for a mapped one
    (`nvidia.com/gpumem`, `nvidia.com/gpucores`): the GPU count then means shares of a GPU, and
    a whole-device claim would change what the Pod gets."""
    checkpoint = opts.deadline.checkpoint
    for container in containers_of(spec):
        checkpoint("looking for shared GPUs")
        names = _resource_names(container)
        if any(find_match(n, opts.mappings) for n in names):
            others = [
                n for n in names if n.startswith("nvidia.com/") and not find_match(n, opts.mappings)
            ]
            if others:
                return others[0]
    return ""


def _claim_slots(spec: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any], str]]:
    yield "resourceClaims", spec, "resourceClaims"
    for container in containers_of(spec):
        resources = container.get("resources")
        if isinstance(resources, dict):
            yield f'container "{container.get("name", "")}" resources.claims', resources, "claims"


def _legacy_in(spec: dict[str, Any]) -> bool:
    return any(_resource_names(c) for c in containers_of(spec))


def _type(value: Any) -> str:
    return {
        dict: "a mapping",
        str: "a string",
        int: "a number",
        float: "a number",
        bool: "a boolean",
        type(None): "null",
    }.get(type(value), type(value).__name__)


def mark(holder: dict[str, Any], removed: AbstractSet[str], *, label: bool) -> None:
    """Record on the Pod (template) which legacy resources were replaced; `label`: `holder`
    holds a Pod's metadata (not a template's), which gets `REWRITTEN_LABEL` too.

    A `metadata:`, `annotations:` or `labels:` left empty (null) in the file becomes a mapping.
    """
    if not removed:
        return
    if not isinstance(holder.get("metadata"), dict):
        holder["metadata"] = {}
    metadata = holder["metadata"]
    for field, (key, value) in marks(metadata, removed, label=label).items():
        if not isinstance(metadata.get(field), dict):
            metadata[field] = {}
        metadata[field][key] = value


def marks(
    metadata: dict[str, Any], removed: AbstractSet[str], *, label: bool
) -> dict[str, tuple[str, str]]:
    """What `mark` writes into `metadata`: field (annotations, labels) -> (key, value). The
    annotation lists the resources replaced, with those an earlier rewrite listed."""
    annotations = metadata.get("annotations")
    listed = annotations.get(REWRITTEN_ANNOTATION) if isinstance(annotations, dict) else None
    old = [v for v in str(listed or "").split(",") if v]
    found = {"annotations": (REWRITTEN_ANNOTATION, ",".join(sorted({*old, *removed})))}
    if label:
        found["labels"] = (REWRITTEN_LABEL, "true")
    return found


def _named(container: dict[str, Any], default: str) -> dict[str, Any]:
    """A view of a container with a name; shares `resources`, so edits reach the original."""
    return container if "name" in container else {"name": default, **container}


def _kserve(component: dict[str, Any], opts: Options, out: Outcome) -> None:
    """A KServe component is a pod spec inline; `model` or a shorthand is one more container."""
    view: dict[str, Any] = {k: component[k] for k in _POD_KEYS if k in component}
    singles = [
        _named(component[k], "kserve-container")
        for k in KSERVE_CONTAINERS
        if isinstance(component.get(k), dict)
    ]
    view["containers"] = singles + containers_of(component)
    rewrite_spec(view, opts, out)
    _copy_back(view, component, _POD_KEYS)


def _argo(template: dict[str, Any], opts: Options, out: Outcome) -> None:
    """Argo templates carry containers but no `resourceClaims`: claims go to `podSpecPatch`."""
    containers = _argo_containers(template)
    if not containers or not any(_mapped(c, opts) for c in containers):
        return
    if "podSpecPatch" in template:
        name = template.get("name", "")
        text = f'dragate: Argo template "{name}": has a podSpecPatch; migrate by hand'
        out.notes.append(note(text))
        return
    view: dict[str, Any] = {k: template[k] for k in ("nodeSelector", "affinity") if k in template}
    view["containers"] = containers
    rewrite_spec(view, opts, out)
    _copy_back(view, template, ("nodeSelector", "affinity"))
    if view.get("resourceClaims"):
        patch = {"resourceClaims": view["resourceClaims"]}
        template["podSpecPatch"] = json.dumps(patch, separators=(",", ":"))


def _argo_containers(template: dict[str, Any]) -> list[dict[str, Any]]:
    found = [
        _named(template[k], "main")
        for k in ("container", "script")
        if isinstance(template.get(k), dict)
    ]
    return found + list(find_nodes(template, ("containerSet", "containers", "*")))


def _mapped(container: dict[str, Any], opts: Options) -> bool:
    return any(find_match(r, opts.mappings) for r in _resource_names(container))


def _resource_names(container: dict[str, Any]) -> list[str]:
    resources = container.get("resources")
    if not isinstance(resources, dict):
        return []
    return [
        str(k)
        for s in ("limits", "requests")
        if isinstance(resources.get(s), dict)
        for k in resources[s]
    ]


def _copy_back(view: dict[str, Any], target: dict[str, Any], keys: Sequence[str]) -> None:
    for key in keys:
        if key in view:
            target[key] = view[key]
        else:
            target.pop(key, None)


def train_job(job: dict[str, Any], opts: Options, out: Outcome) -> None:
    """TrainJob asks for GPUs per node but its pods come from a runtime: say so, change nothing."""
    for resources in find_nodes(job, ("spec", "trainer", "resourcesPerNode")):
        names = _resource_names({"resources": resources})
        legacy = ", ".join(dict.fromkeys(n for n in names if find_match(n, opts.mappings)))
        if legacy:
            meta = job.get("metadata")
            name = meta.get("name", "") if isinstance(meta, dict) else ""
            text = f'dragate: TrainJob "{name}": {legacy} kept; migrate its runtime'
            out.notes.append(note(text))


Shape = Callable[[dict[str, Any], Options, Outcome], None]
SHAPES: dict[str, Shape] = {
    "pod": _pod,
    "template": _pod,
    "podspec": _podspec,
    "kserve": _kserve,
    "argo": _argo,
}
