"""Where pod specs live inside workload objects, and the object-level rewrite.

Plain dicts only: the CLI applies the resulting changes to its round-trip tree, and the webhook
turns them into a JSON patch. Kinds are matched by API group and kind together (a Volcano
`batch.volcano.sh` Job is not a `batch` Job). Paths use `*` for "every item of a list" and `{}`
for "every value of a mapping" (Kubeflow's `<role>` replica specs); `webhook.rewrite.shapes`
says what each shape is.

A legacy request the rewriter leaves anywhere else in an object (an unknown CRD, an old API
group, a field no shape covers) gets a note naming where it is, so that nothing is kept silently.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any

from webhook.rewrite.mappings import find_match
from webhook.rewrite.notes import note
from webhook.rewrite.patch import copy_tree
from webhook.rewrite.podspec import Options, Outcome
from webhook.rewrite.shapes import (
    REWRITTEN_ANNOTATION,
    REWRITTEN_LABEL,
    SHAPES,
    find_nodes,
    train_job,
)
from webhook.types import Deadline, LegacyResourceMapping, MappingAction, Object, RewriteResult
from webhook.types.adapters import NEVER

__all__ = [
    "POD_PATHS",
    "REWRITTEN_ANNOTATION",
    "REWRITTEN_LABEL",
    "group_kind",
    "pod_specs",
    "rewrite_object",
]

Path = tuple[str, ...]
GroupKind = tuple[str, str]
_TEMPLATE = ("spec", "template")
_RAY = (("spec", "headGroupSpec", "template"), ("spec", "workerGroupSpecs", "*", "template"))
_JOBSET = ("spec", "replicatedJobs", "*", "template", "spec", "template")
_KSERVE = (
    ("spec", "predictor"),
    ("spec", "transformer"),
    ("spec", "explainer"),
    ("spec", "predictor", "workerSpec"),
)
_LLM = tuple(
    ("spec", *part, field) for part in ((), ("prefill",)) for field in ("template", "worker")
)
_KATIB_TRIAL = ("spec", "trialTemplate", "trialSpec")
_RESOURCE_SECTIONS = ("limits", "requests")


def _under(prefix: Path, paths: Sequence[Path]) -> tuple[Path, ...]:
    return tuple(prefix + p[1:] for p in paths)


def _replicas(field: str) -> tuple[Path, ...]:
    return (("spec", field, "{}", "template"),)


def _kinds(
    group: str, kinds: Sequence[str], shape: str, paths: tuple[Path, ...]
) -> dict[GroupKind, tuple[tuple[str, tuple[Path, ...]], ...]]:
    return {(group, kind): ((shape, paths),) for kind in kinds}


POD_PATHS: Mapping[GroupKind, tuple[tuple[str, tuple[Path, ...]], ...]] = {
    ("", "Pod"): (("pod", ((),)),),
    ("", "PodTemplate"): (("template", (("template",),)),),
    ("", "ReplicationController"): (("template", (_TEMPLATE,)),),
    **_kinds(
        "apps", ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet"), "template", (_TEMPLATE,)
    ),
    ("batch", "Job"): (("template", (_TEMPLATE,)),),
    ("batch", "CronJob"): (("template", (("spec", "jobTemplate", "spec", "template"),)),),
    ("ray.io", "RayCluster"): (("template", _RAY),),
    ("ray.io", "RayJob"): (
        ("template", (*_under(("spec", "rayClusterSpec"), _RAY), ("spec", "submitterPodTemplate"))),
    ),
    ("ray.io", "RayService"): (("template", _under(("spec", "rayClusterConfig"), _RAY)),),
    **{
        ("kubeflow.org", kind): (("template", _replicas(field)),)
        for kind, field in (
            ("PyTorchJob", "pytorchReplicaSpecs"),
            ("TFJob", "tfReplicaSpecs"),
            ("MPIJob", "mpiReplicaSpecs"),
            ("XGBoostJob", "xgbReplicaSpecs"),
            ("PaddleJob", "paddleReplicaSpecs"),
            ("JAXJob", "jaxReplicaSpecs"),
        )
    },
    ("kubeflow.org", "Notebook"): (("template", (_TEMPLATE,)),),
    ("jobset.x-k8s.io", "JobSet"): (("template", (_JOBSET,)),),
    **_kinds(
        "trainer.kubeflow.org",
        ("TrainingRuntime", "ClusterTrainingRuntime"),
        "template",
        (("spec", "template", *_JOBSET),),
    ),
    ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"): (
        (
            "template",
            (
                ("spec", "leaderWorkerTemplate", "leaderTemplate"),
                ("spec", "leaderWorkerTemplate", "workerTemplate"),
            ),
        ),
    ),
    ("serving.kserve.io", "InferenceService"): (("kserve", _KSERVE),),
    **_kinds(
        "serving.kserve.io", ("LLMInferenceService", "LLMInferenceServiceConfig"), "podspec", _LLM
    ),
    ("batch.volcano.sh", "Job"): (("template", (("spec", "tasks", "*", "template"),)),),
    **_kinds(
        "argoproj.io",
        ("Workflow", "WorkflowTemplate", "ClusterWorkflowTemplate"),
        "argo",
        (("spec", "templates", "*"),),
    ),
    ("argoproj.io", "CronWorkflow"): (("argo", (("spec", "workflowSpec", "templates", "*"),)),),
}
"""(API group, kind) -> (shape, paths). TrainJob has no pod template of its own (see
`shapes.train_job`); a Katib Experiment's trial template is an object of its own, rewritten
as such."""

CLUSTER_SCOPED = frozenset(
    {("trainer.kubeflow.org", "ClusterTrainingRuntime"), ("argoproj.io", "ClusterWorkflowTemplate")}
)
"""Their pods run in other objects' namespaces, where the claim templates must be too."""
TRAIN_JOB = ("trainer.kubeflow.org", "TrainJob")
KATIB_EXPERIMENT = ("kubeflow.org", "Experiment")


def group_kind(obj: Mapping[str, Any]) -> GroupKind:
    """The API group (`""` for the core group) and kind of an object."""
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    api = api_version if isinstance(api_version, str) else ""
    return (api.rsplit("/", 1)[0] if "/" in api else ""), (kind if isinstance(kind, str) else "")


def rewrite_object(
    obj: Object,
    mappings: Sequence[LegacyResourceMapping],
    *,
    native_resources: frozenset[str] = frozenset(),
    action_override: MappingAction | None = None,
    namespace: str | None = None,
    deadline: Deadline = NEVER,
) -> RewriteResult:
    """A rewritten copy of `obj` (any kind; `List` items too) and the templates it needs.

    `namespace` overrides `metadata.namespace` for the templates (admission knows it even
    when the object does not say it); `deadline` is passed at each container.
    """
    new = copy_tree(dict(obj))
    out = Outcome()
    for item in _objects(new):
        ns = namespace or _namespace_of(item)
        opts = Options(mappings, native_resources, action_override, ns, deadline)
        _rewrite_item(item, opts, out)
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
    """Rewrite every pod spec of one object, then explain any legacy request left elsewhere."""
    key = group_kind(obj)
    handled: set[int] = set()
    if key == TRAIN_JOB:
        train_job(obj, opts, out)
        handled.update(id(n) for n in find_nodes(obj, ("spec", "trainer", "resourcesPerNode")))
    if key == KATIB_EXPERIMENT:
        for trial in find_nodes(obj, _KATIB_TRIAL):
            handled.add(id(trial))
            _rewrite_item(trial, opts, out)
    made = len(out.templates)
    for shape, paths in POD_PATHS.get(key, ()):
        for path in paths:
            for node in find_nodes(obj, path):
                handled.add(id(node))
                SHAPES[shape](node, opts, out)
    if key in CLUSTER_SCOPED and len(out.templates) > made:
        out.notes.append(
            note(
                f"dragate: {key[1]} is cluster-scoped: its claim templates must "
                "exist in each namespace its pods run in"
            )
        )
    _explain_leftovers(obj, key, opts, out, handled)


def _explain_leftovers(
    obj: dict[str, Any], key: GroupKind, opts: Options, out: Outcome, handled: set[int]
) -> None:
    found = list(legacy_requests(obj, opts.mappings, handled))
    if found:
        names = ", ".join(dict.fromkeys(name for _, name in found))
        out.notes.append(
            note(
                f"dragate: {_describe(obj, key)} not migrated ({_why(key)}): "
                f"{names} at {found[0][0]}"
            )
        )


def legacy_requests(
    root: Any,
    mappings: Sequence[LegacyResourceMapping],
    skip: AbstractSet[int] = frozenset(),
    path: str = "",
) -> Iterator[tuple[str, str]]:
    """(path, name) of each mapped resource under a `limits`/`requests` key, outside `skip`."""
    if id(root) in skip:
        return
    if isinstance(root, list):
        for index, item in enumerate(root):
            yield from legacy_requests(item, mappings, skip, f"{path}[{index}]")
        return
    if not isinstance(root, dict):
        return
    for key, value in root.items():
        where = f"{path}.{key}" if path else str(key)
        if key in _RESOURCE_SECTIONS and isinstance(value, dict) and id(value) not in skip:
            yield from ((where, str(n)) for n in value if find_match(str(n), mappings))
        else:
            yield from legacy_requests(value, mappings, skip, where)


def _describe(obj: dict[str, Any], key: GroupKind) -> str:
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    api = f"{key[0]}/{key[1]}" if key[0] else key[1] or "object"
    return f'{api} "{name}"' if name else api


def _why(key: GroupKind) -> str:
    if key in POD_PATHS or key in (TRAIN_JOB, KATIB_EXPERIMENT):
        return "outside its pod spec"
    return "unknown kind" if key[1] else "not a Kubernetes object"


def pod_specs(obj: Object) -> Iterator[dict[str, Any]]:
    """Each pod spec in `obj` (Pods, PodTemplateSpecs, bare PodSpecs), for callers that
    inspect them."""
    for item in _objects(dict(obj)):
        for shape, paths in POD_PATHS.get(group_kind(item), ()):
            for node in (n for path in paths for n in find_nodes(item, path)):
                if shape == "podspec":
                    yield node
                elif shape in ("pod", "template") and isinstance(node.get("spec"), dict):
                    yield node["spec"]
