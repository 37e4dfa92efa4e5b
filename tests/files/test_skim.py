"""The skip rule: which document bodies `dragate migrate` may copy without loading them.

Each case says whether a body is skipped; whatever it says, a skipped body must load in ruamel
and come out of the rewriter unchanged, silent (tested for every case here, and for every
golden input and fuzz-style variant in tests/cli/test_migrate_skip.py).
"""

from __future__ import annotations

import pytest
from migrate_cases import assert_unchanged

from webhook.cli.migrate import skip_rule
from webhook.files.plainyaml import MAX_DEPTH
from webhook.files.skim import plain_document, skipper
from webhook.policy.loading import default_mappings
from webhook.rewrite import resource_markers
from webhook.types import LegacyResourceMapping, ResourceMapping

SKIP = skip_rule(default_mappings())
DEEP = "".join(f"{' ' * 2 * i}k{i}:\n" for i in range(MAX_DEPTH + 1)) + " " * 80 + "v: 1\n"

CASES = [
    ("configmap", "apiVersion: v1\nkind: ConfigMap\ndata:\n  a: '1'\n", True),
    ("service-flow", "kind: Service\nspec:\n  ports: [{port: 80, targetPort: 8080}]\n", True),
    (
        "cpu-deployment",
        "kind: Deployment\nspec:\n  template:\n    spec:\n      containers:\n"
        "      - name: c\n        resources: {limits: {cpu: 500m, memory: 64Gi}}\n",
        True,
    ),
    ("quoted-keys", "'kind': \"Pod\"\n\"metadata\": {'name': x}\n", True),
    ("comments-only", "# nothing here\n\n", True),
    ("empty", "", True),
    ("explicit-end", "a: 1\n...\n", True),
    ("block-scalar-with-marker-line", "data:\n  s: |\n    ---\n    x: 1\n", True),
    ("gpu-request", "spec: {containers: [{resources: {limits: {nvidia.com/gpu: 1}}}]}\n", False),
    ("mig-request", "limits:\n  nvidia.com/mig-1g.10gb: 1\n", False),
    ("name-in-comment", "kind: Pod  # was nvidia.com/gpu\n", False),
    ("name-in-string", 'description: "moved off nvidia.com/gpu"\n', False),
    ("name-in-block-scalar", "script: |\n  echo nvidia.com/mig-1g\n", False),
    ("name-behind-anchor", "x: &r {nvidia.com/gpu: 1}\nlimits: *r\n", False),
    ("anchor-and-alias", "a: &x 1\nb: *x\n", False),
    ("merge-key", "base: &b {a: 1}\nc:\n  <<: *b\n", False),
    ("escaped-name", 'limits: {"nvidia.com/\\x67pu": 1}\n', False),
    ("escaped-line-break", 'limits: {"nvidia.com/\\\n  gpu": 1}\n', False),
    ("template-kind", "kind: ResourceClaimTemplate\nmetadata: {name: t}\n", False),
    ("duplicate-key", "a: 1\na: 2\n", False),
    ("duplicate-quoted-key", "a: 1\n'a': 2\n", False),
    ("bool-key", "true: 1\n", False),
    ("null-key", "~: 1\n", False),
    ("number-key", "80: http\n", False),
    ("complex-key", "? [a, b]\n: c\n", False),
    ("tag", "a: !!str 1\n", False),
    ("local-tag", "a: !thing {b: 1}\n", False),
    ("bad-date", "created: 2001-02-30\n", False),
    ("bad-binary-int", "a: 0b_\n", False),
    ("negative-number", "a: -1\n", False),
    ("directive", "%YAML 1.2\n---\na: 1\n", False),
    ("two-documents", "a: 1\n...\nb: 2\n", False),
    ("broken-flow", "apiVersion: v1\nspec: [\n", False),
    ("non-printable", "a: \x07\n", False),
    ("too-deep", DEEP, False),
    ("tab-after-value", "a: b\t\nc: d\n", False),
    ("tab-in-block-scalar", "s: |\n  make\tall\n", False),
]


@pytest.mark.parametrize(
    ("body", "skipped"), [(b, s) for _, b, s in CASES], ids=[c[0] for c in CASES]
)
def test_skip_rule(body: str, skipped: bool) -> None:
    assert SKIP is not None
    assert SKIP(body) is skipped
    if skipped:
        assert_unchanged(body)


@pytest.mark.parametrize(
    ("markers", "usable"),
    [
        ((), False),
        (("",), False),
        (("nvidia.com/gpu ",), False),
        (("a'b",), False),
        (("nvidia.com/gpu", "nvidia.com/mig-"), True),
    ],
    ids=["none", "empty-prefix", "space", "quote", "default"],
)
def test_markers_that_could_hide_are_refused(markers: tuple[str, ...], usable: bool) -> None:
    assert (skipper(markers) is not None) is usable


@pytest.mark.parametrize(
    ("resources", "markers"),
    [
        ((ResourceMapping("gpu.nvidia.com", resource_name="nvidia.com/gpu"),), ("nvidia.com/gpu",)),
        (
            (ResourceMapping("mig.nvidia.com", resource_name_prefix="nvidia.com/mig-"),),
            ("nvidia.com/mig-",),
        ),
        ((ResourceMapping("any"),), ("",)),
    ],
    ids=["exact", "prefix", "prefix-none-takes-all"],
)
def test_resource_markers(resources: tuple[ResourceMapping, ...], markers: tuple[str, ...]) -> None:
    assert resource_markers([LegacyResourceMapping("m", resources=resources)]) == markers


def test_more_than_one_document_is_not_plain() -> None:
    assert plain_document("a: 1\n") and not plain_document("a: 1\n---\nb: 2\n")
