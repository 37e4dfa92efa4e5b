"""The rewriting MutatingAdmissionPolicy (webhook/rewrite/admissionpolicy.py), judged by a real
kube-apiserver (Kubernetes 1.37, the policy in admissionregistration.k8s.io/v1) against the
Python rewrite.

Every Pod is created (dry run) twice: where the policy is bound, and where it is not (the
Pod as the API server hands it to admission, defaulted). Where the policy changed the Pod, the
result must be exactly what `rewrite_pod` makes of the defaulted Pod; where it did not, the
Pod must come back as it went in, for the webhook to rewrite. The table says which Pods the
policy takes (so it is never vacuous); the golden corpus's pod specs only have to agree.
"""

from __future__ import annotations

import copy
import json
import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from webhook.policy.loading import load_policies
from webhook.rewrite import pod_specs, rewrite_pod
from webhook.rewrite.admissionpolicy import RewritePolicy, rewrite_policy
from webhook.types import PolicySet

from .cluster import Cluster, running_cluster
from .toolchain_bins import require_binaries

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "tests" / "rewrite" / "golden"
BOUND, UNBOUND, WARNED = "rewritten-here", "left-alone", "warned-here"
TENANTS = f"""
apiVersion: dragate.io/v1alpha1
kind: Tenant
metadata: {{name: ml}}
spec: {{namespaces: [{BOUND}], allowedDeviceClasses: [gpu.nvidia.com, mig.nvidia.com]}}
---
apiVersion: dragate.io/v1alpha1
kind: Tenant
metadata: {{name: legacy}}
spec: {{namespaces: [{WARNED}], legacyMappingAction: Warn}}
"""


def gpu(n: Any, *, requests: Any = None, extra: dict[str, str] | None = None) -> dict[str, Any]:
    limits = {**(extra or {}), "nvidia.com/gpu": str(n)} if n is not None else dict(extra or {})
    resources: dict[str, Any] = {"limits": limits} if limits else {}
    if requests is not None:
        resources["requests"] = {**(extra or {}), "nvidia.com/gpu": str(requests)}
    return resources


def pod(*containers: dict[str, Any], **spec: Any) -> dict[str, Any]:
    metadata = spec.pop("metadata", {})
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
            "spec": {"containers": list(containers), **spec}}  # fmt: skip


def ctr(name: str, resources: dict[str, Any] | None = None, **more: Any) -> dict[str, Any]:
    return {"name": name, "image": "cuda:12", **({"resources": resources} if resources else {}),
            **more}  # fmt: skip


MIG = {"limits": {"nvidia.com/mig-1g.10gb": "1"}}
NVIDIA_AFFINITY = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {
                            "key": "nvidia.com/gpu.product",
                            "operator": "In",
                            "values": ["NVIDIA-A100-SXM4-80GB"],
                        }
                    ]
                }
            ]
        }
    }
}
ZONE_AFFINITY = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a"]}
                    ]
                }
            ]
        }
    }
}

TABLE: list[tuple[str, dict[str, Any], bool]] = [
    ("one-gpu", pod(ctr("cuda", gpu(1))), True),
    ("eight-gpus-and-cpu", pod(ctr("cuda", gpu(8, extra={"cpu": "2"}))), True),
    ("nine-gpus", pod(ctr("cuda", gpu(9))), False),
    ("zero-gpus", pod(ctr("cuda", gpu(0))), False),
    ("requests-only", pod(ctr("cuda", gpu(None, requests=2))), True),
    ("requests-equal-limits", pod(ctr("cuda", gpu(2, requests=2, extra={"memory": "1Gi"}))), True),
    ("millis-of-a-whole", pod(ctr("cuda", gpu("1000m"))), True),
    ("half-a-gpu", pod(ctr("cuda", gpu("500m"))), False),
    ("two-gpu-containers", pod(ctr("a", gpu(1)), ctr("b", gpu(2)), ctr("c")), True),
    ("gpu-after-plain", pod(ctr("plain"), ctr("trainer", gpu(4))), True),
    ("mig-slice", pod(ctr("cuda", MIG)), False),
    ("gpu-and-mig", pod(ctr("a", gpu(1)), ctr("b", MIG)), False),
    ("init-container-gpu", pod(ctr("cuda", gpu(1)), initContainers=[ctr("warm", gpu(1))]), False),
    ("plain-init-container", pod(ctr("cuda", gpu(1)), initContainers=[ctr("warm")]), True),
    (
        "sidecar-gpu",
        pod(ctr("cuda"), initContainers=[ctr("s", gpu(1), restartPolicy="Always")]),
        False,
    ),
    (
        "nvidia-node-selector",
        pod(ctr("cuda", gpu(1)), nodeSelector={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}),
        False,
    ),
    ("other-node-selector", pod(ctr("cuda", gpu(1)), nodeSelector={"pool": "gpu"}), True),
    ("nvidia-affinity", pod(ctr("cuda", gpu(1)), affinity=NVIDIA_AFFINITY), False),
    ("zone-affinity", pod(ctr("cuda", gpu(1)), affinity=ZONE_AFFINITY), True),
    (
        "labels-and-annotations",
        pod(ctr("cuda", gpu(1)), metadata={"labels": {"app": "x"}, "annotations": {"team": "ml"}}),
        True,
    ),
    (
        "rewritten-before",
        pod(
            ctr("cuda", gpu(1)),
            metadata={"annotations": {"dragate.io/rewritten": "nvidia.com/gpu"}},
        ),
        False,
    ),
    ("long-container-name", pod(ctr("c" * 60, gpu(1))), False),
    ("longest-container-name", pod(ctr("c" * 59, gpu(1))), True),
    ("gpu-share", pod(ctr("cuda", gpu(1, extra={"nvidia.com/gpumem": "1024"}))), False),
    ("share-beside", pod(ctr("a", gpu(1)), ctr("b", {"limits": {"nvidia.com/gpumem": "1"}})), True),
    ("no-gpu", pod(ctr("cuda", {"limits": {"cpu": "1"}})), False),
    (
        "own-container-claims",
        pod(
            ctr("cuda", {**gpu(1), "claims": [{"name": "x"}]}),
            resourceClaims=[{"name": "x", "resourceClaimTemplateName": "t"}],
        ),
        False,
    ),
]


@pytest.fixture(scope="module")
def policies(tmp_path_factory: pytest.TempPathFactory) -> PolicySet:
    directory = tmp_path_factory.mktemp("policies")
    (directory / "legacy.yaml").write_text((REPO / "policies/legacy-mapping.yaml").read_text())
    (directory / "tenants.yaml").write_text(TENANTS)
    return load_policies([str(directory)])


@pytest.fixture(scope="module")
def generated(policies: PolicySet) -> RewritePolicy:
    made = rewrite_policy(policies)
    assert made is not None
    return made


@pytest.fixture(scope="module")
def policy_cluster(e2e_bin_dir: Path, generated: RewritePolicy) -> Iterator[Cluster]:
    with running_cluster(
        require_binaries(e2e_bin_dir), controller_manager=False, mutating_policies=True
    ) as cluster:
        namespaces = [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}}
            for n in (BOUND, UNBOUND, WARNED)
        ]
        items = [*namespaces, *generated.objects, *generated.templates]
        cluster.apply(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
        _await_policy(cluster)
        yield cluster


def _await_policy(cluster: Cluster) -> None:
    """A policy is compiled after it is stored: wait until a legacy Pod comes back rewritten."""
    deadline = time.monotonic() + 60
    probe = {**pod(ctr("cuda", gpu(1))), "metadata": {"name": "probe"}}
    while "resourceClaims" not in _created(cluster, BOUND, [probe])["probe"]["spec"]:
        assert time.monotonic() < deadline, "the MutatingAdmissionPolicy never took effect"
        time.sleep(0.2)


def _created(cluster: Cluster, namespace: str, pods: list[dict[str, Any]]) -> dict[str, Any]:
    """Each Pod as the API server would store it (a dry run), by name; refused ones absent."""
    listed = json.dumps({"apiVersion": "v1", "kind": "List", "items": pods})
    done = cluster.kubectl("create", "--dry-run=server", "-n", namespace, "-o", "json",
                           "-f", "-", input=listed, check=False)  # fmt: skip
    items, text, at = [], done.stdout, 0
    decoder = json.JSONDecoder()
    while text[at:].strip():  # kubectl prints one JSON document per object it created
        found, at = decoder.raw_decode(text, len(text) - len(text[at:].lstrip()))
        items.extend(found.get("items", []) if found.get("kind") == "List" else [found])
    return {str(p["metadata"]["name"]): p for p in items}


def _named(cases: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    out = []
    for name, body in cases:
        named = copy.deepcopy(body)
        named["metadata"] = {**named.get("metadata", {}), "name": name}
        out.append(named)
    return out


def _golden_pods() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in sorted(GOLDEN.glob("*.in.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            for obj in doc.get("items", [doc]) if isinstance(doc, dict) else []:
                for i, spec in enumerate(pod_specs(obj)):
                    name = f"{path.name.removesuffix('.in.yaml')}-{i}"[:60].rstrip("-")
                    found.append((name, {"apiVersion": "v1", "kind": "Pod", "spec": spec}))
    return found


CANONICAL = {"1000m": "1"}
"""The API server's canonical form of the amounts below that are not canonical already (the
`millis-of-a-whole` row shows it: a valid Pod, so it comes back from the API server)."""


def _defaulted_locally(body: dict[str, Any]) -> dict[str, Any]:
    """A Pod the API server refuses without the rewrite, as it hands it to admission: its
    quantities canonical, its requests defaulted from its limits (all the rewrite reads)."""
    out = copy.deepcopy(body)
    for c in out["spec"].get("containers", []) + out["spec"].get("initContainers", []):
        resources = c.get("resources") or {}
        for section in (resources.get(s) for s in ("limits", "requests")):
            if section:
                section.update({k: CANONICAL.get(v, v) for k, v in section.items()})
        if "limits" in resources:
            resources["requests"] = {**resources["limits"], **resources.get("requests", {})}
    return out


TOUCHED = ("resourceClaims", "containers", "initContainers")


def _touched(obj: dict[str, Any]) -> dict[str, Any]:
    """What the rewrite may change: the mark, and the spec's claims and container resources."""
    metadata = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    return {
        "labels": metadata.get("labels"),
        "annotations": metadata.get("annotations"),
        "spec": {
            k: [{"name": c.get("name"), "resources": c.get("resources") or {}} for c in spec[k]]
            if k != "resourceClaims" else spec[k]
            for k in TOUCHED if k in spec
        },
    }  # fmt: skip


def _judge(
    cluster: Cluster, policies: PolicySet, cases: list[tuple[str, dict[str, Any]]]
) -> dict[str, bool]:
    """Compare every case's policy result with the Python rewrite; which ones it rewrote."""
    pods = _named(cases)
    bound, unbound = _created(cluster, BOUND, pods), _created(cluster, UNBOUND, pods)
    rewrote = {}
    for body in pods:
        name = body["metadata"]["name"]
        before = unbound.get(name) or _defaulted_locally(body)
        after = bound.get(name)
        if after is None:  # invalid either way (say, half a GPU): nothing to compare
            assert name not in unbound, f"{name}: refused only where the policy is bound"
            rewrote[name] = False
            continue
        rewrote[name] = (after["metadata"].get("labels") or {}).get(
            "dragate.io/rewritten"
        ) == "true"
        if not rewrote[name]:
            assert _touched(after) == _touched(before), f"{name}: changed, yet not marked"
            continue
        expected = rewrite_pod(before, policies.mappings, namespace=BOUND).rewritten()
        assert _touched(after) == _touched(expected), name
        if name in unbound:
            assert after["spec"] == expected["spec"], name
    return rewrote


@pytest.mark.parametrize(("name", "body", "rewritten"), TABLE, ids=[row[0] for row in TABLE])
def test_the_policy_rewrites_as_the_webhook(
    policy_cluster: Cluster, policies: PolicySet, name: str, body: dict[str, Any], rewritten: bool
) -> None:
    assert _judge(policy_cluster, policies, [(name, body)]) == {name: rewritten}


def test_the_golden_corpus_agrees(policy_cluster: Cluster, policies: PolicySet) -> None:
    rewrote = _judge(policy_cluster, policies, _golden_pods())
    assert any(rewrote.values()), "the policy rewrote no Pod of the golden corpus"


@pytest.mark.parametrize("namespace", [UNBOUND, WARNED])
def test_pods_outside_its_namespaces_are_left_alone(
    policy_cluster: Cluster, namespace: str
) -> None:
    created = _created(policy_cluster, namespace, _named([("legacy", pod(ctr("c", gpu(1))))]))
    assert "resourceClaims" not in created["legacy"]["spec"]


def test_every_template_it_names_exists(policy_cluster: Cluster, generated: RewritePolicy) -> None:
    stored = policy_cluster.get_json("resourceclaimtemplates", "-n", BOUND)["items"]
    names = {t["metadata"]["name"] for t in stored}
    assert names == {f"dragate-gpu-nvidia-com-{n}" for n in range(1, 9)}
    assert generated.namespaces == (BOUND,)


GPU = "nvidia.com/gpu"
RESOURCES = (GPU, GPU, GPU, "nvidia.com/mig-1g.10gb", "nvidia.com/gpumem", "cpu", "memory")
AMOUNTS = ("0", "1", "1", "2", "3", "8", "9", "10", "1000m", "500m", "2k")


def _random_resources(rng: random.Random) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    for section in ("limits", "requests"):
        names = rng.sample(RESOURCES, rng.choice((0, 0, 1, 1, 2)))
        if names:
            resources[section] = {n: rng.choice(AMOUNTS) for n in names}
    if "limits" in resources and rng.random() < 0.5:  # mostly requests equal to limits
        resources["requests"] = dict(resources["limits"])
    return resources


def _random_pod(rng: random.Random) -> dict[str, Any]:
    containers = [
        ctr(rng.choice(("a", "main", "x-y", "c" * rng.choice((58, 59, 60)))) + str(i),
            _random_resources(rng))
        for i in range(rng.choice((1, 1, 2, 3)))
    ]  # fmt: skip
    spec: dict[str, Any] = {}
    if rng.random() < 0.2:
        spec["initContainers"] = [ctr("init", _random_resources(rng))]
    if rng.random() < 0.15:
        spec["nodeSelector"] = rng.choice(({"pool": "a"}, {"nvidia.com/mig.strategy": "single"}))
    if rng.random() < 0.15:
        spec["metadata"] = {"labels": {"dragate.io/rewritten": "false"}, "annotations": {"a": "b"}}
    return pod(*containers, **spec)


def test_random_pods_agree(policy_cluster: Cluster, policies: PolicySet) -> None:
    """Pods drawn from the resources and shapes above (seeded): wherever the policy rewrites,
    it rewrites as the webhook does; and it takes a fair share of them."""
    rng = random.Random(1734)
    cases = [(f"random-{i}", _random_pod(rng)) for i in range(200)]
    rewrote = _judge(policy_cluster, policies, cases)
    assert 10 <= sum(rewrote.values()) <= 190, sum(rewrote.values())
