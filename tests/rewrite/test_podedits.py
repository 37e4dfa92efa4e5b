"""The admission fast path: a Pod's rewrite from remembered pod spec edits, copy on write.

It must give what the general rewrite gives, byte for byte (object with its key order, notes,
templates, denials, and the patch `make_patch` computes), whether the edits come from the
memo or not; Pods that differ only where the rewrite never reads share one entry; anything
the rewrite reads is in the key.
"""

from __future__ import annotations

import copy
import functools
import sys
import threading
from collections.abc import Iterator
from typing import Any

import jsonpatch
import pytest
from pod_corpus import as_pod, corpus_objects, corpus_pods

from webhook.policy.loading import default_mappings
from webhook.rewrite import podedits, rewrite_object
from webhook.rewrite.patch import make_patch
from webhook.rewrite.podedits import (
    CONTAINER_KEYS,
    MEMO_MAX_CONTAINERS,
    MEMO_SIZE,
    SPEC_KEYS,
    fingerprint,
)
from webhook.rewrite.podspec import Options, Outcome
from webhook.rewrite.shapes import rewrite_spec
from webhook.types import MappingAction
from webhook.types.memos import Memos

MEMOS = Memos()  # the tables of one policy set, shared by this module's tests


def spec_edits(spec: dict[str, Any], opts: Options) -> podedits.SpecEdits | None:
    return podedits.spec_edits(spec, opts, MEMOS)


def rewrite_pod(pod: dict[str, Any], mappings: Any, **options: Any) -> podedits.PodRewrite:
    return podedits.rewrite_pod(pod, mappings, memos=MEMOS, **options)


PODS = corpus_pods()
OPTIONS: dict[str, dict[str, Any]] = {
    "default": {},
    **{f"override-{a.value}": {"action_override": a} for a in MappingAction},
    "native-gpu": {"native_resources": frozenset({"nvidia.com/gpu"})},
    "namespace": {"namespace": "team-b"},
}


Path = tuple[str | int, ...]


def legacy_pod(path: Path = (), value: Any = None) -> dict[str, Any]:
    """Two GPU containers, a GFD node label, the fields every real Pod has besides; with
    `value` at `path` when one is given."""

    def container(name: str, gpus: int) -> dict[str, Any]:
        return {
            "name": name,
            "image": f"registry.example.com/{name}:1",
            "env": [{"name": "JOB", "value": name}],
            "volumeMounts": [{"name": "kube-api-access-x7k2p", "mountPath": "/var/run"}],
            "resources": {"limits": {"memory": "1Gi", "nvidia.com/gpu": gpus}},
        }

    pod = as_pod("trainer-7d9f8-abcde", {})
    pod["spec"] = {
        "containers": [container("trainer", 1), container("evaluator", 2), container("m", 0)],
        "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
        "volumes": [{"name": "kube-api-access-x7k2p", "projected": {"sources": []}}],
    }
    if path:
        node: Any = pod
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    return pod


def exactly(value: Any) -> str:
    """Content, key order and types: `repr` tells 1, 1.0 and True apart, and dict orders."""
    return repr(value)


def check_same(pod: dict[str, Any], options: dict[str, Any]) -> None:
    before = copy.deepcopy(pod)
    expected = rewrite_object(pod, default_mappings(), **options)
    expected_patch = make_patch(pod, dict(expected.object)) if expected.changed else []
    for _ in range(2):  # once computed (or remembered from an earlier test), once remembered
        got = rewrite_pod(pod, default_mappings(), **options)
        said = (got.changed, got.notes, got.templates, got.denied)
        assert exactly(said) == exactly(
            (expected.changed, expected.notes, expected.templates, expected.denied)
        )
        assert exactly(list(got.patch)) == exactly(expected_patch)
        assert exactly(got.result) == exactly(expected)
        assert jsonpatch.apply_patch(pod, list(got.patch)) == got.result.object
        assert exactly(pod) == exactly(before)


@pytest.mark.parametrize("options", OPTIONS.values(), ids=OPTIONS.keys())
def test_the_corpus_rewrites_as_the_general_path_does(options: dict[str, Any]) -> None:
    for where, pod in PODS:
        try:
            check_same(pod, options)
        except AssertionError as error:
            raise AssertionError(f"{where}: {error}") from error


def test_other_kinds_and_lists_take_the_general_path() -> None:
    for where, obj in corpus_objects():
        try:
            check_same(obj, {})
        except AssertionError as error:
            raise AssertionError(f"{where}: {error}") from error


EXOTIC = {
    "tuple": (("spec", "containers", 0, "resources", "limits"), ("nvidia.com/gpu",)),
    "set": (("spec", "nodeSelector"), {"x"}),
    "int-key": (("spec", "containers", 0, "resources", "requests"), {1: 2}),
    "float-count": (("spec", "containers", 0, "resources", "limits", "nvidia.com/gpu"), 2.0),
    "bool-count": (("spec", "containers", 0, "resources", "limits", "nvidia.com/gpu"), True),
}


@pytest.mark.parametrize(("path", "value"), EXOTIC.values(), ids=EXOTIC.keys())
def test_other_types_than_json_are_remembered_exactly(path: Path, value: Any) -> None:
    pod = legacy_pod(path, value)
    got = rewrite_pod(pod, default_mappings())
    assert exactly(got.result) == exactly(rewrite_object(pod, default_mappings()))
    assert spec_edits(pod["spec"], Options(default_mappings())) is not None


UNMARSHALLABLE = {
    "str-subclass": (("spec", "containers", 0, "name"), type("Name", (str,), {})("trainer")),
    "dict-subclass": (("spec", "nodeSelector"), type("Map", (dict,), {})(a="b")),
    "too-deep": (("spec", "affinity"), functools.reduce(lambda n, _: [n], range(3000), [])),
}


@pytest.mark.parametrize(("path", "value"), UNMARSHALLABLE.values(), ids=UNMARSHALLABLE.keys())
def test_what_has_no_fingerprint_takes_the_general_path(path: Path, value: Any) -> None:
    pod = legacy_pod(path, value)
    assert spec_edits(pod["spec"], Options(default_mappings())) is None
    if path[-1] != "affinity":  # the general rewrite cannot read that deep: the pipeline says so
        got = rewrite_pod(pod, default_mappings())
        assert exactly(got.result) == exactly(rewrite_object(pod, default_mappings()))


def _metadata(**fields: Any) -> dict[str, Any]:
    return {"name": "p", **fields}


MARKED = "dragate.io/rewritten"
METADATA: dict[str, Any] = {
    "plain": _metadata(),
    "labels-first": {"labels": {"app": "x"}, "name": "p", "annotations": {"a": "b"}},
    "annotations-first": {"annotations": {"a": "b"}, "labels": {"app": "x"}},
    "null-labels": _metadata(labels=None),
    "null-annotations": _metadata(annotations=None, labels={"app": "x"}),
    "string-labels": _metadata(labels="app=x"),
    "list-annotations": _metadata(annotations=["a"]),
    "marked-already": _metadata(annotations={MARKED: "nvidia.com/gpu"}, labels={MARKED: "true"}),
    "marked-otherwise": _metadata(annotations={MARKED: "nvidia.com/mig-1g.10gb"}),
    "label-false": _metadata(labels={MARKED: "false"}),
    "label-not-a-string": _metadata(labels={MARKED: True}, annotations={MARKED: 1}),
    "label-a-str-subclass": _metadata(labels={MARKED: type("Text", (str,), {})("true")}),
    "empty": {},
    "null": None,
    "a-string": "p",
    "absent": ...,
}


@pytest.mark.parametrize("metadata", METADATA.values(), ids=METADATA.keys())
def test_the_marks_patch_as_the_general_path_does(metadata: Any) -> None:
    """The metadata's operations are written, not diffed: each shape of metadata, its fields
    and their marks against what `make_patch` says of the general path's Pod."""
    pod = legacy_pod()
    del pod["metadata"]
    if metadata is not ...:
        pod = {"metadata": copy.deepcopy(metadata), **pod}
    check_same(pod, {})


IDENTITY = {
    "name": (("metadata", "name"), "trainer-7d9f8-zzzzz"),
    "uid": (("metadata", "uid"), "0f9e"),
    "generate-name": (("metadata", "generateName"), "trainer-7d9f8-"),
    "labels": (("metadata", "labels"), {"pod-template-hash": "7d9f8"}),
    "token-volume": (("spec", "volumes", 0, "name"), "kube-api-access-q2w3e"),
    "token-mount": (("spec", "containers", 0, "volumeMounts", 0, "name"), "kube-api-access-q2w3e"),
    "env": (("spec", "containers", 1, "env", 0, "value"), "other"),
    "image": (("spec", "containers", 0, "image"), "registry.example.com/trainer:2"),
    "hostname": (("spec", "hostname"), "trainer-0"),
}


@pytest.mark.parametrize(("path", "value"), IDENTITY.values(), ids=IDENTITY.keys())
def test_pods_differing_where_the_rewrite_never_reads_share_one_entry(
    path: Path, value: Any
) -> None:
    first, second = legacy_pod(), legacy_pod(path, value)
    opts = Options(default_mappings())
    assert spec_edits(second["spec"], opts) is spec_edits(first["spec"], opts)
    one, two = rewrite_pod(first, default_mappings()), rewrite_pod(second, default_mappings())
    assert one.result.notes == two.result.notes
    assert one.result.templates == two.result.templates
    spec_ops = [op for op in two.patch if op["path"].startswith("/spec/")]
    assert spec_ops == [op for op in one.patch if op["path"].startswith("/spec/")]
    check_same(second, {})


READ = {
    "count": (("spec", "containers", 0, "resources", "limits", "nvidia.com/gpu"), 4),
    "count-type": (("spec", "containers", 0, "resources", "limits", "nvidia.com/gpu"), "1"),
    "container-name": (("spec", "containers", 0, "name"), "learner"),
    "restart-policy": (("spec", "containers", 0, "restartPolicy"), "Always"),
    "node-label": (("spec", "nodeSelector"), {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}),
    "claims": (("spec", "resourceClaims"), [{"name": "x", "resourceClaimTemplateName": "t"}]),
    "claims-null": (("spec", "resourceClaims"), None),
    "affinity": (("spec", "affinity"), {"nodeAffinity": {}}),
    "init": (("spec", "initContainers"), [{"name": "i", "resources": {"limits": {"cpu": "1"}}}]),
    "requests": (("spec", "containers", 1, "resources", "requests"), {"nvidia.com/gpu": 2}),
}


@pytest.mark.parametrize(("path", "value"), READ.values(), ids=READ.keys())
def test_a_change_in_what_the_rewrite_reads_misses(path: Path, value: Any) -> None:
    first, second = legacy_pod(), legacy_pod(path, value)
    opts = Options(default_mappings())
    assert spec_edits(second["spec"], opts) is not spec_edits(first["spec"], opts)
    check_same(second, {})


def test_changed_options_miss() -> None:
    spec = legacy_pod()["spec"]
    base = Options(default_mappings())
    others = [
        Options(default_mappings(), namespace="team-b"),
        Options(default_mappings(), action_override=MappingAction.WARN),
        Options(default_mappings(), native_resources=frozenset({"nvidia.com/gpu"})),
        Options(tuple(copy.deepcopy(list(default_mappings())))),  # equal, but another set
    ]
    edits = spec_edits(spec, base)
    assert all(spec_edits(spec, o) is not edits for o in others)
    assert spec_edits(spec, base) is edits


def test_a_mutable_mapping_sequence_is_never_remembered() -> None:
    spec = legacy_pod()["spec"]
    opts = Options(list(default_mappings()))
    assert spec_edits(spec, opts) is not spec_edits(spec, opts)


FINGERPRINTS_DIFFER = {
    "int-float": (1, 1.0),
    "int-bool": (1, True),
    "zero-signs": (0.0, -0.0),
    "str-int": ("1", 1),
    "list-dict": ([], {}),
    "key-order": ({"a": 1, "b": 2}, {"b": 2, "a": 1}),
    "key-type": ({"1": 2}, {1: 2}),
    "nested": ([{"a": [1]}], [{"a": [1.0]}]),
    "none-str": (None, "None"),
    "tuple-list": ((1,), [1]),
}


@pytest.mark.parametrize(("one", "other"), FINGERPRINTS_DIFFER.values(), ids=FINGERPRINTS_DIFFER)
def test_fingerprints_tell_apart_what_json_equality_would_not(one: Any, other: Any) -> None:
    assert fingerprint(one) != fingerprint(other)
    assert fingerprint(one) == fingerprint(copy.deepcopy(one))


def test_fingerprints_do_not_depend_on_interning_or_sharing() -> None:
    """Equal trees give equal bytes however their strings and members came to be: a JSON
    decoder shares some strings within a document and not others."""
    interned, built = sys.intern("nvidia.com/gpu"), "".join(["nvidia.com/", "gpu"])
    assert interned is not built
    assert fingerprint({"k": interned}) == fingerprint({"k": built})
    shared = {"a": [1]}
    assert fingerprint([shared, shared]) == fingerprint([{"a": [1]}, {"a": [1]}])


class Recording(dict[str, Any]):
    """A dict that notes every key read or written through it, and whether it was listed."""

    def __init__(self, data: dict[str, Any], seen: set[str]) -> None:
        super().__init__(data)
        self.seen = seen

    def __getitem__(self, key: str) -> Any:
        self.seen.add(key)
        return super().__getitem__(key)

    def get(self, key: str, default: Any = None) -> Any:
        self.seen.add(key)
        return super().get(key, default)

    def __contains__(self, key: object) -> bool:
        self.seen.add(str(key))
        return super().__contains__(key)

    def setdefault(self, key: str, default: Any = None) -> Any:
        self.seen.add(key)
        return super().setdefault(key, default)

    def __setitem__(self, key: str, value: Any) -> None:
        self.seen.add(key)
        super().__setitem__(key, value)

    def __delitem__(self, key: str) -> None:
        self.seen.add(key)
        super().__delitem__(key)

    def pop(self, key: str, *default: Any) -> Any:
        self.seen.add(key)
        return super().pop(key, *default)

    def __iter__(self) -> Iterator[str]:
        self.seen.add("*")
        return super().__iter__()

    def keys(self) -> Any:
        self.seen.add("*")
        return super().keys()

    def values(self) -> Any:
        self.seen.add("*")
        return super().values()

    def items(self) -> Any:
        self.seen.add("*")
        return super().items()


def recorded(spec: dict[str, Any]) -> tuple[Recording, set[str], set[str]]:
    spec_seen: set[str] = set()
    container_seen: set[str] = set()
    copied = copy.deepcopy(spec)
    for key in ("initContainers", "containers"):
        if isinstance(copied.get(key), list):
            copied[key] = [
                Recording(c, container_seen) if isinstance(c, dict) else c for c in copied[key]
            ]
    return Recording(copied, spec_seen), spec_seen, container_seen


@pytest.mark.parametrize("options", OPTIONS.values(), ids=OPTIONS.keys())
def test_the_rewrite_reads_nothing_outside_the_projection(options: dict[str, Any]) -> None:
    """What makes the memo key complete: every key the rewrite touches, over the corpus."""
    for where, pod in PODS:
        if not isinstance(pod.get("spec"), dict):
            continue
        spec, spec_seen, container_seen = recorded(pod["spec"])
        opts = Options(default_mappings(), **options)
        rewrite_spec(spec, opts, Outcome())
        assert spec_seen <= SPEC_KEYS, where
        assert container_seen <= CONTAINER_KEYS, where


def test_results_do_not_share_what_the_memo_keeps() -> None:
    pod = legacy_pod()
    first = rewrite_pod(pod, default_mappings())
    first.result.object["spec"]["containers"][0]["resources"]["claims"].append({"name": "z"})
    first.result.object["spec"]["resourceClaims"].clear()
    for op in first.patch:
        op["path"] = "/changed"
    check_same(pod, {})


def test_the_rewritten_pod_is_built_only_when_read() -> None:
    """The webhook sends the patch: a remembered rewrite copies nothing of the Pod for it."""
    pod = legacy_pod()
    rewrite_pod(pod, default_mappings())
    got = rewrite_pod(pod, default_mappings())
    assert got.patch and "result" not in vars(got)
    assert got.rewritten() is got.result.object and got.result.object["spec"] is not pod["spec"]


@pytest.mark.parametrize(
    ("containers", "kept"),
    [pytest.param(MEMO_MAX_CONTAINERS, True, id="at-the-bound"),
     pytest.param(MEMO_MAX_CONTAINERS + 1, False, id="over-the-bound")],
)  # fmt: skip
def test_a_huge_pod_spec_is_rewritten_afresh_never_kept(containers: int, kept: bool) -> None:
    MEMOS.forget()
    spec = legacy_pod()["spec"]
    spec["containers"] = [{**spec["containers"][0], "name": f"c{i}"} for i in range(containers)]
    opts = Options(default_mappings())
    first = spec_edits(spec, opts)
    assert (spec_edits(spec, opts) is first) is kept
    assert len(MEMOS.of(podedits.EDITS)) == int(kept)


def test_the_memo_is_bounded() -> None:
    opts = Options(default_mappings())
    for i in range(MEMO_SIZE + 20):
        spec_edits(legacy_pod(("spec", "containers", 0, "name"), f"c{i}")["spec"], opts)
    assert len(MEMOS.of(podedits.EDITS)) == MEMO_SIZE


def test_threads_sharing_the_memo_get_the_general_answer() -> None:
    memory: Path = ("spec", "containers", 0, "resources", "limits", "memory")
    pods = [legacy_pod(memory, f"{i}Gi") for i in range(40)]
    expected = [exactly(rewrite_object(p, default_mappings())) for p in pods]
    MEMOS.forget()
    failures: list[str] = []

    def work(offset: int) -> None:
        for n in range(len(pods)):
            i = (n + offset) % len(pods)
            if exactly(rewrite_pod(pods[i], default_mappings()).result) != expected[i]:
                failures.append(f"pod {i}")

    threads = [threading.Thread(target=work, args=(t * 5,)) for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures
