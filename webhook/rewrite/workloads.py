"""Where pod specs live inside workload objects, and the object-level rewrite.

Plain dicts only: the CLI applies the resulting changes to its round-trip tree, and the webhook
turns them into a JSON patch. Paths use `*` for "every item of a list" and `{}` for "every
value of a mapping" (Kubeflow's `<role>` replica specs).

Shapes: `pod` (the Pod itself), `template` (a PodTemplateSpec: `metadata` + `spec`),
`kserve` (an InferenceService component: pod spec fields inline plus a `model` container) and
`argo` (an Argo Workflows template: `container`/`script`/`containerSet`, no `resourceClaims`
field, so claims go into `podSpecPatch` when it is free).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from webhook.rewrite.mappings import find_match
from webhook.rewrite.notes import note
from webhook.rewrite.podspec import Options, Outcome, containers_of, rewrite_in_place
from webhook.types import LegacyResourceMapping, MappingAction, Object, RewriteResult

REWRITTEN_ANNOTATION = "dragate.io/rewritten"

Path = tuple[str, ...]
_TEMPLATE = ("spec", "template")
_RAY = (("spec", "headGroupSpec", "template"), ("spec", "workerGroupSpecs", "*", "template"))
_JOBSET = ("spec", "replicatedJobs", "*", "template", "spec", "template")
_KSERVE = (("spec", "predictor"), ("spec", "transformer"), ("spec", "explainer"))
_POD_KEYS = ("resourceClaims", "nodeSelector", "affinity")


def _under(prefix: Path, paths: Sequence[Path]) -> tuple[Path, ...]:
    return tuple(prefix + p[1:] for p in paths)


def _replicas(field: str) -> tuple[Path, ...]:
    return (("spec", field, "{}", "template"),)


POD_PATHS: Mapping[str, tuple[tuple[str, tuple[Path, ...]], ...]] = {
    "Pod": (("pod", ((),)),),
    "PodTemplate": (("template", (("template",),)),),
    **{k: (("template", (_TEMPLATE,)),) for k in (
        "Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "ReplicationController", "Job")},
    "CronJob": (("template", (("spec", "jobTemplate", "spec", "template"),)),),
    "RayCluster": (("template", _RAY),),
    "RayJob": (("template", (*_under(("spec", "rayClusterSpec"), _RAY),
                            ("spec", "submitterPodTemplate"))),),
    "RayService": (("template", _under(("spec", "rayClusterConfig"), _RAY)),),
    "PyTorchJob": (("template", _replicas("pytorchReplicaSpecs")),),
    "TFJob": (("template", _replicas("tfReplicaSpecs")),),
    "MPIJob": (("template", _replicas("mpiReplicaSpecs")),),
    "XGBoostJob": (("template", _replicas("xgbReplicaSpecs")),),
    "PaddleJob": (("template", _replicas("paddleReplicaSpecs")),),
    "JAXJob": (("template", _replicas("jaxReplicaSpecs")),),
    "JobSet": (("template", (_JOBSET,)),),
    "TrainingRuntime": (("template", (("spec", "template", *_JOBSET[1:]),)),),
    "ClusterTrainingRuntime": (("template", (("spec", "template", *_JOBSET[1:]),)),),
    "LeaderWorkerSet": (("template", (
        ("spec", "leaderWorkerTemplate", "leaderTemplate"),
        ("spec", "leaderWorkerTemplate", "workerTemplate"))),),
    "InferenceService": (("kserve", _KSERVE),),
    "Workflow": (("argo", (("spec", "templates", "*"),)),),
    "WorkflowTemplate": (("argo", (("spec", "templates", "*"),)),),
    "ClusterWorkflowTemplate": (("argo", (("spec", "templates", "*"),)),),
    "CronWorkflow": (("argo", (("spec", "workflowSpec", "templates", "*"),)),),
}
"""kind -> (shape, paths). TrainJob has no pod template of its own: see `_train_job`."""


def rewrite_object(
    obj: Object,
    mappings: Sequence[LegacyResourceMapping],
    *,
    native_resources: frozenset[str] = frozenset(),
    action_override: MappingAction | None = None,
    namespace: str | None = None,
) -> RewriteResult:
    """A rewritten copy of `obj` (any kind; `List` items too) and the templates it needs.

    `namespace` overrides `metadata.namespace` for the templates (admission knows it even
    when the object does not say it).
    """
    new = copy.deepcopy(dict(obj))
    out = Outcome()
    for item in _objects(new):
        ns = namespace or _namespace_of(item)
        _rewrite_item(item, Options(mappings, native_resources, action_override, ns), out)
    return RewriteResult(
        object=new,
        changed=new != obj,
        notes=tuple(dict.fromkeys(out.notes)),
        templates=tuple(out.templates.values()),
        denied=tuple(dict.fromkeys(out.denied)),
    )


def _objects(obj: dict[str, Any]) -> list[dict[str, Any]]:
    kind, items = obj.get("kind"), obj.get("items")
    if isinstance(kind, str) and kind.endswith("List") and isinstance(items, list):
        return [i for i in items if isinstance(i, dict)]
    return [obj]


def _namespace_of(obj: dict[str, Any]) -> str | None:
    meta = obj.get("metadata")
    ns = meta.get("namespace") if isinstance(meta, dict) else None
    return str(ns) if ns else None


def _rewrite_item(obj: dict[str, Any], opts: Options, out: Outcome) -> None:
    kind = str(obj.get("kind", ""))
    if kind == "TrainJob":
        _train_job(obj, opts, out)
    for shape, paths in POD_PATHS.get(kind, ()):
        for path in paths:
            for node in find_nodes(obj, path):
                SHAPES[shape](node, opts, out)


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
        _rewrite_and_mark(spec, pod, opts, out)


def _template(template: dict[str, Any], opts: Options, out: Outcome) -> None:
    _pod(template, opts, out)


def _rewrite_and_mark(
    spec: dict[str, Any], holder: dict[str, Any], opts: Options, out: Outcome
) -> None:
    """Rewrite, and record on the Pod (template) which legacy resources were replaced."""
    removed = rewrite_in_place(spec, opts, out)
    if removed:
        annotations = holder.setdefault("metadata", {}).setdefault("annotations", {})
        old = [v for v in str(annotations.get(REWRITTEN_ANNOTATION, "")).split(",") if v]
        annotations[REWRITTEN_ANNOTATION] = ",".join(sorted({*old, *removed}))


def _named(container: dict[str, Any], default: str) -> dict[str, Any]:
    """A view of a container with a name; shares `resources`, so edits reach the original."""
    return container if "name" in container else {"name": default, **container}


def _kserve(component: dict[str, Any], opts: Options, out: Outcome) -> None:
    """A KServe component is a pod spec inline; its `model` is one more container."""
    view: dict[str, Any] = {k: component[k] for k in _POD_KEYS if k in component}
    model = component.get("model")
    models = [_named(model, "kserve-container")] if isinstance(model, dict) else []
    view["containers"] = models + containers_of(component)
    rewrite_in_place(view, opts, out)
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
    rewrite_in_place(view, opts, out)
    _copy_back(view, template, ("nodeSelector", "affinity"))
    if view.get("resourceClaims"):
        patch = {"resourceClaims": view["resourceClaims"]}
        template["podSpecPatch"] = json.dumps(patch, separators=(",", ":"))


def _argo_containers(template: dict[str, Any]) -> list[dict[str, Any]]:
    found = [_named(template[k], "main") for k in ("container", "script")
             if isinstance(template.get(k), dict)]
    return found + list(find_nodes(template, ("containerSet", "containers", "*")))


def _mapped(container: dict[str, Any], opts: Options) -> bool:
    return any(find_match(r, opts.mappings) for r in _resource_names(container))


def _resource_names(container: dict[str, Any]) -> list[str]:
    resources = container.get("resources")
    if not isinstance(resources, dict):
        return []
    return [str(k) for s in ("limits", "requests") if isinstance(resources.get(s), dict)
            for k in resources[s]]


def _copy_back(view: dict[str, Any], target: dict[str, Any], keys: Sequence[str]) -> None:
    for key in keys:
        if key in view:
            target[key] = view[key]
        else:
            target.pop(key, None)


def _train_job(job: dict[str, Any], opts: Options, out: Outcome) -> None:
    """TrainJob asks for GPUs per node but its pods come from a runtime: say so, change nothing."""
    for resources in find_nodes(job, ("spec", "trainer", "resourcesPerNode")):
        names = _resource_names({"resources": resources})
        legacy = ", ".join(n for n in names if find_match(n, opts.mappings))
        if legacy:
            name = job.get("metadata", {}).get("name", "")
            text = f'dragate: TrainJob "{name}": {legacy} kept; migrate its runtime'
            out.notes.append(note(text))


SHAPES = {"pod": _pod, "template": _template, "kserve": _kserve, "argo": _argo}


def pod_specs(obj: Object) -> Iterator[dict[str, Any]]:
    """Each pod spec in `obj` (Pods and PodTemplateSpecs), for callers that inspect them."""
    for item in _objects(dict(obj)):
        for shape, paths in POD_PATHS.get(str(item.get("kind", "")), ()):
            if shape in ("pod", "template"):
                for path in paths:
                    for node in find_nodes(item, path):
                        if isinstance(node.get("spec"), dict):
                            yield node["spec"]
