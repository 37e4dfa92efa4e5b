"""Shared by the migrate corpus tests (tests/cli) and their kube-apiserver oracle (tests/e2e):
the corpus, and the objects in a migrated file that the API schema can judge."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from webhook.files.gotemplates import has_placeholders, mask
from webhook.rewrite import pod_specs

CORPUS = Path(__file__).parent / "migrate_corpus"
BUILTIN = {"v1", "apps/v1", "batch/v1", "resource.k8s.io/v1"}


def snapshot(root: Path) -> dict[str, bytes]:
    """Every corpus file's bytes by relative path (its README aside)."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != "README.md"
    }


def masked(text: str) -> str:
    """Helm placeholders as plain tokens, so that the text reads as the YAML it stands for."""
    return mask(text).text if has_placeholders(text) else text


def checkable(text: str, *, templated: bool = False) -> Iterator[dict[str, Any]]:
    """Built-in objects as they are; the pod specs of custom resources (and of Helm
    templates, whose other fields hold placeholders) as Pods."""
    for doc in yaml.safe_load_all(text):
        if not isinstance(doc, dict):
            continue
        if doc.get("apiVersion") in BUILTIN and (
            not templated or doc.get("kind") == "ResourceClaimTemplate"
        ):
            yield doc
            continue
        for spec in pod_specs(doc):
            yield {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}


HELM = CORPUS / "helm-charts"


class Outcome(NamedTuple):
    """What `dragate migrate` does with one public Helm chart file: the reason it skips it as
    a template file (or ""), whether it changes it, and its legacy requests left, by reason."""

    skipped: str
    migrated: bool
    left: dict[str, int]


NOT_YAML = "not YAML until rendered (not valid YAML: expected <block end>, but found"
NEMO = "NVIDIA+NeMo-Framework-Launcher/launcher_scripts/nemo_launcher/core/k8s_templates"
HCC = "GoogleCloudPlatform+ai-on-gke/applications/hcc/modules/nemo/helm-charts/training"
TRITON = "triton-inference-server+server/deploy"
COMPUTED = "resource name computed in a template"
HELM_OUTCOMES: dict[str, Outcome] = {
    f"{HCC}/a3mega/nemo-training/templates/nemo-launcher-job.yaml": Outcome(
        "", False, {"templated count": 1}
    ),
    f"{HCC}/a3ultra/maxtext-training/templates/maxtext-launcher-job.yaml": Outcome(
        "line 59 " + NOT_YAML + " '[')", False, {"unparseable template": 1}
    ),
    f"{HCC}/a3ultra/nemo-training/templates/nemo-launcher-job.yaml": Outcome(
        "line 59 " + NOT_YAML + " '[')", False, {"unparseable template": 1}
    ),
    "GoogleCloudPlatform+ai-on-gke/tutorials-and-examples/llamaindex/rag/templates/"
    "ollama-deployment.yaml": Outcome("", True, {}),
    f"{NEMO}/conversion/conversion.yaml": Outcome("", False, {"templated count": 2}),
    f"{NEMO}/evaluation/evaluation.yaml": Outcome("", False, {"templated count": 2}),
    f"{NEMO}/peft/peft.yaml": Outcome(
        "line 38 " + NOT_YAML + " '?')", False, {"unparseable template": 2}
    ),
    f"{NEMO}/rlhf_ppo/rlhf-ppo-actor.yaml": Outcome(
        "{{ $config.ibResourceName }} stands in a key", False, {"unparseable template": 2}
    ),
    f"{NEMO}/rlhf_ppo/rlhf-ppo-critic.yaml": Outcome(
        "{{ $config.ibResourceName }} stands in a key", False, {"unparseable template": 2}
    ),
    f"{NEMO}/training/training.yaml": Outcome(
        "{{ $val }} stands in a key", False, {"unparseable template": 2}
    ),
    "llm-d+llm-d-deployer/charts/llm-d/values.yaml": Outcome("", False, {"values file": 2}),
    "otwld+ollama-helm/templates/deployment.yaml": Outcome("", False, {COMPUTED: 2}),
    "otwld+ollama-helm/templates/knative/model-job.yaml": Outcome("", False, {COMPUTED: 1}),
    "otwld+ollama-helm/templates/knative/service.yaml": Outcome("", False, {COMPUTED: 1}),
    "otwld+ollama-helm/values.yaml": Outcome("", False, {"values file": 1}),
    "substratusai+kubeai/charts/kubeai/values.yaml": Outcome("", False, {"values file": 13}),
    f"{TRITON}/aws/templates/deployment.yaml": Outcome("", False, {"templated count": 1}),
    f"{TRITON}/fleetcommand/templates/deployment.yaml": Outcome("", False, {"templated count": 1}),
    f"{TRITON}/gcp/templates/deployment.yaml": Outcome("", False, {"templated count": 1}),
    f"{TRITON}/gke-marketplace-app/server-deployer/chart/triton/templates/deployment.yaml": Outcome(
        "", False, {"templated count": 1}
    ),
    f"{TRITON}/k8s-onprem/templates/deployment.yaml": Outcome("", False, {"templated count": 1}),
    f"{TRITON}/oci/templates/deployment.yaml": Outcome("", False, {"templated count": 1}),
    "vllm-project+production-stack/helm/templates/ray-cluster.yaml": Outcome(
        "{{ $modelSpec.chatTemplate }} stands in a key", False, {"unparseable template": 1}
    ),
    "vllm-project+production-stack/helm/values.yaml": Outcome("", False, {"values file": 1}),
    "NVIDIA+nim-deploy/rendered/nim-llm-multinode-lws.yaml": Outcome("", True, {}),
}
"""Pinned by tests/cli/test_migrate_helm_corpus.py; the share migrated and the reasons counted
are in docs/cli.md's `dragate migrate` section."""


class ChartOutcome(NamedTuple):
    """What `dragate migrate --write` does with a whole values-driven chart: the files it
    changes or creates (relative to the chart), and the lines, as written, of the template
    actions reading the count that now read the new values entry."""

    changed: frozenset[str]
    reads: dict[str, tuple[int, ...]]


CLAIMS = "templates/dragate-gpu-claims.yaml"
HELM_CHARTS: dict[str, ChartOutcome] = {
    "NVIDIA+nim-deploy/helm/nim-llm": ChartOutcome(
        frozenset(
            {
                "values.yaml",
                "templates/deployment.yaml",
                "templates/multi_node_deployment.yaml",
                CLAIMS,
            }
        ),
        {},
    ),
    "substratusai+helm/charts/text-generation-inference": ChartOutcome(
        frozenset({"values.yaml", "templates/deployment.yaml", CLAIMS}),
        {"templates/deployment.yaml": (47, 49)},
    ),
}
"""Whole charts (templates, values, helpers) in tests/migrate_corpus/helm-charts, migrated
together; pinned by tests/cli/test_migrate_helm_corpus.py, which renders them with helm."""
