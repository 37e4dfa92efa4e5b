"""Values-driven charts: the values map a template renders as `resources` and the templates
rendering it migrate together, or not at all."""

from __future__ import annotations

import pytest
import yaml

from webhook.files.valuesdriven import plan_chart
from webhook.policy.loading import default_mappings

VALUES = """\
# GPUs for the server
resources:
  limits:
    nvidia.com/gpu: 2  # per replica
    cpu: 1
"""
DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
spec:
  template:
    spec:
      {{- with .Values.nodeSelector }}
      nodeSelector: {{- toYaml . | nindent 8 }}
      {{- end }}
      containers:
        - name: server
          env:
            {{- if index .Values.resources.limits "nvidia.com/gpu" }}
            - name: NUM_SHARD
              value: {{ index .Values.resources.limits "nvidia.com/gpu" | quote }}
            {{- end }}
          resources:
            {{- toYaml .Values.resources | nindent 12 }}
"""
CLAIM_BLOCK = """\
      {{- if $.Values.gpuClaim }}
      resourceClaims:
        - name: gpu
          resourceClaimTemplateName: {{ $.Release.Name }}-gpu
      {{- end }}
      containers:
"""
MIG = VALUES.replace("nvidia.com/gpu: 2", "nvidia.com/mig-1g.5gb: 1")
PIPED = DEPLOYMENT.replace("toYaml .Values.resources", ".Values.resources | toYaml")
NESTED_VALUES = "worker:\n" + "".join("  " + line + "\n" for line in VALUES.splitlines())
NESTED = DEPLOYMENT.replace(".Values.resources", ".Values.worker.resources")
TRIMMED = DEPLOYMENT.replace("{{- end }}\n      containers", "{{- end -}}\n      containers")
OWN_CLAIMS = DEPLOYMENT.replace("containers:", "resourceClaims: []\n      containers:")
NO_POD = "data:\n  resources:\n    {{- toYaml .Values.resources | nindent 4 }}\n"


@pytest.mark.parametrize(
    ("values", "template", "entry", "wanted"),
    [
        (VALUES, DEPLOYMENT, ("gpuClaim",), {"deviceClassName": "gpu.nvidia.com", "count": 2}),
        (VALUES, PIPED, ("gpuClaim",), {"deviceClassName": "gpu.nvidia.com", "count": 2}),
        (
            NESTED_VALUES,
            NESTED,
            ("worker", "gpuClaim"),
            {"deviceClassName": "gpu.nvidia.com", "count": 2},
        ),
        (
            MIG,
            DEPLOYMENT,
            ("gpuClaim",),
            {
                "deviceClassName": "mig.nvidia.com",
                "count": 1,
                "selectors": [
                    {
                        "cel": {
                            "expression": "device.attributes['gpu.nvidia.com'].profile == '1g.5gb'"
                        }
                    }
                ],
            },
        ),
    ],
    ids=["toYaml", "piped-toYaml", "nested-map", "mig"],
)
def test_the_values_map_and_its_templates_migrate_together(
    values: str, template: str, entry: tuple[str, ...], wanted: dict[str, object]
) -> None:
    plan = plan_chart(values, {"t.yaml": template}, default_mappings())
    data = yaml.safe_load(plan.values)
    for key in entry[:-1]:
        data = data[key]
    assert data[entry[-1]] == wanted
    assert data["resources"] == {"limits": {"cpu": 1}, "claims": [{"name": "gpu"}]}
    assert plan.values.startswith("# GPUs for the server\n") or entry[0] == "worker"
    block = CLAIM_BLOCK.replace("gpuClaim", ".".join(entry))
    assert (
        block.replace("-gpu\n", "-worker-gpu\n" if len(entry) > 1 else "-gpu\n")
        in (plan.templates["t.yaml"])
    )
    legacy = "nvidia.com/gpu" if "nvidia.com/gpu" in values else "nvidia.com/mig"
    assert legacy not in plan.templates["t.yaml"]
    assert "kind: ResourceClaimTemplate" in plan.claims


def test_reads_of_the_count_read_the_new_entry() -> None:
    plan = plan_chart(VALUES, {"t.yaml": DEPLOYMENT}, default_mappings())
    text = plan.templates["t.yaml"]
    assert "{{- if $.Values.gpuClaim.count }}" in text
    assert "value: {{ $.Values.gpuClaim.count | quote }}" in text
    assert [(r.line, r.new_line, r.name) for r in plan.reads["t.yaml"]] == [
        (12, 17, "nvidia.com/gpu"),
        (14, 19, "nvidia.com/gpu"),
    ]


@pytest.mark.parametrize(
    ("values", "templates"),
    [
        (VALUES, {}),
        (VALUES, {"t.yaml": TRIMMED}),
        (VALUES, {"t.yaml": OWN_CLAIMS}),
        (VALUES, {"t.yaml": DEPLOYMENT, "cm.yaml": NO_POD}),
        ("resources:\n  limits:\n    cpu: 1\n", {"t.yaml": DEPLOYMENT}),
        ("resources:\n  limits:\n    nvidia.com/gpu: 500m\n", {"t.yaml": DEPLOYMENT}),
        ("resources: [\n", {"t.yaml": DEPLOYMENT}),
    ],
    ids=[
        "no-template-renders-it",
        "action-trims-the-new-lines",
        "pod-has-its-own-claims",
        "rendered-outside-a-pod-spec",
        "no-legacy-request",
        "not-a-whole-count",
        "values-not-yaml",
    ],
)
def test_a_chart_the_plan_cannot_place_stays_as_it_is(
    values: str, templates: dict[str, str]
) -> None:
    plan = plan_chart(values, templates, default_mappings())
    assert (plan.values, plan.templates, plan.claims) == (values, {}, "")
