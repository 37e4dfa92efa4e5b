"""The text scan that has the last word on legacy requests left: which spellings count."""

from __future__ import annotations

import pytest

from webhook.files.legacyscan import Leftover, find_leftovers

MARKERS = ("nvidia.com/gpu", "nvidia.com/mig-")


def legacy(name: str) -> bool:
    return name == "nvidia.com/gpu" or name.startswith("nvidia.com/mig-")


CASES = [
    ("plain-key", "limits:\n  nvidia.com/gpu: 1\n", [Leftover(2, "nvidia.com/gpu")]),
    ("quoted-key", '  "nvidia.com/gpu": "2"\n', [Leftover(1, "nvidia.com/gpu")]),
    ("flow", "limits: {nvidia.com/mig-1g.5gb: 1}\n", [Leftover(1, "nvidia.com/mig-1g.5gb")]),
    (
        "json-in-a-string",
        'podSpecPatch: \'{"limits":{"nvidia.com/gpu":1}}\'\n',
        [Leftover(1, "nvidia.com/gpu")],
    ),
    (
        "templated-count",
        "  nvidia.com/gpu: {{ .Values.gpus }}\n",
        [Leftover(1, "nvidia.com/gpu", templated=True)],
    ),
    ("comment", "  # nvidia.com/gpu: 1\nx: 1  # nvidia.com/gpu: 2\n", []),
    ("template-comment", "{{- /* nvidia.com/gpu: 1 */}}\n", []),
    ("toleration", "- key: nvidia.com/gpu\n  operator: Exists\n", []),
    ("node-label", "nodeSelector:\n  nvidia.com/gpu.product: A100\n", []),
    ("hami-share", "  nvidia.com/gpumem: 1024\n", []),
    ("device-plugin-config", "resourceName: nvidia.com/gpu\n- name: nvidia.com/gpu\n", []),
    ("dragate-annotations", "dragate.io/rewritten: nvidia.com/gpu\n", []),
    (
        "as-a-value",
        'gpu:\n  resource: "nvidia.com/gpu"\n',
        [Leftover(2, "nvidia.com/gpu", "value", holder="resource")],
    ),
    (
        "in-an-expression",
        '{{- $l := dict (.Values.r | default "nvidia.com/gpu") 1 }}\n',
        [Leftover(1, "nvidia.com/gpu", "expression")],
    ),
    (
        "printf-prefix",
        '{{- $k := printf "nvidia.com/mig-%s" $key -}}\n',
        [Leftover(1, "nvidia.com/mig-%s", "expression")],
    ),
    (
        "read-in-an-if",
        '{{- if index .Values.resources.limits "nvidia.com/gpu" }}\n',
        [Leftover(1, "nvidia.com/gpu", "read")],
    ),
    (
        "read-as-a-value",
        '  value: {{ index .Values.resources.limits "nvidia.com/gpu" | quote }}\n',
        [Leftover(1, "nvidia.com/gpu", "read")],
    ),
    (
        "has-key",
        '{{- if hasKey $limits "nvidia.com/gpu" }}\n',
        [Leftover(1, "nvidia.com/gpu", "read")],
    ),
    ("expression-in-a-key-line", '- key: "{{ .Values.r | default "nvidia.com/gpu" }}"\n', []),
]


@pytest.mark.parametrize(("text", "found"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_what_counts_as_a_legacy_request(text: str, found: list[Leftover]) -> None:
    assert find_leftovers(text, legacy, MARKERS) == found
