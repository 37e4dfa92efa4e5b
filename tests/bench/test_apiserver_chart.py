"""The apiserver benchmark registers the chart's own webhook configurations (helm template,
url mode), scoped to its namespaces; needs helm from the e2e toolchain, else skipped."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from e2e import chart_webhooks

URL = "https://127.0.0.1:9443"
LABELS = {"dragate-bench/variant": "validate"}


def _helm() -> Path:
    from e2e.toolchain_bins import toolchain_bin_dir

    try:
        helm = Path(toolchain_bin_dir()) / "helm"
    except Exception as err:  # no bash, or the toolchain is not built
        pytest.skip(f"no e2e toolchain: {err}")
    if not helm.exists():
        pytest.skip("helm is not built: tests/e2e/toolchain/build.sh")
    return helm


def _webhooks(objects: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {w["name"]: w for o in objects if o["kind"] == kind for w in o["webhooks"]}


@pytest.mark.parametrize("mutating", [True, False], ids=["validate+mutate", "validate"])
def test_the_chart_decides_what_is_sent_and_the_bench_only_narrows_namespaces(
    mutating: bool,
) -> None:
    rendered = chart_webhooks.render(_helm(), "dragate-bench", URL, b"ca", mutating=mutating)
    scoped = chart_webhooks.scoped(rendered, LABELS)
    mutate = _webhooks(scoped, "MutatingWebhookConfiguration")
    validate = _webhooks(scoped, "ValidatingWebhookConfiguration")
    assert set(mutate) == ({"pods.mutate.dragate.io"} if mutating else set())
    for webhook in mutate.values():  # Pods only, and only those still asking for legacy GPUs
        assert [r["resources"] for r in webhook["rules"]] == [["pods"]]
        assert [c["name"] for c in webhook["matchConditions"]] == ["legacy-gpu-pod"]
        assert webhook["clientConfig"]["url"] == URL + "/mutate"
    assert "claims.validate.dragate.io" in validate
    for webhook in [*mutate.values(), *validate.values()]:
        selector = webhook["namespaceSelector"]
        assert selector["matchLabels"] == LABELS
        assert selector["matchExpressions"][0]["key"] == "kubernetes.io/metadata.name"
    unscoped = _webhooks(rendered, "ValidatingWebhookConfiguration")
    assert all("matchLabels" not in w["namespaceSelector"] for w in unscoped.values())
