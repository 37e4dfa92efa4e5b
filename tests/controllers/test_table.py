"""The controller's table: one row per cluster-wide loop, every row leader-only, each sharing
its piece's wake event (a deleted claim or template wakes the runner's thread)."""

from __future__ import annotations

from pathlib import Path

import pytest

from webhook.assembly import ClusterTarget, PolicyFeed, controller_mode
from webhook.kube.policywatch import PolicyObjects
from webhook.policy.loading import parse_policies

KUBECONFIG = """
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""
POLICIES = parse_policies("")
ALWAYS = ["reconciler", "template-keeper", "policy-reports"]


@pytest.mark.parametrize(
    ("keep_rewrite_policy", "objects", "names"),
    [
        pytest.param(False, False, ALWAYS, id="files-alone"),
        pytest.param(False, True, [*ALWAYS, "policy-status"], id="policy-objects"),
        pytest.param(
            True, True, [*ALWAYS, "policy-status", "rewrite-policy-keeper"], id="everything"
        ),
    ],
)
def test_the_table_lists_the_configured_loops(
    tmp_path: Path, keep_rewrite_policy: bool, objects: bool, names: list[str]
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    target = ClusterTarget(str(kubeconfig), keep_rewrite_policy=keep_rewrite_policy)
    feed = None
    if objects:
        from webhook.assembly import cluster_api

        watched = PolicyObjects(cluster_api(target))  # not started: nothing connects
        feed = PolicyFeed(lambda _paths: POLICIES, watched.fingerprint, watched)
    mode = controller_mode(target, lambda: POLICIES, feed, served=lambda: POLICIES)
    rows = mode.runner.loops
    assert [r.name for r in rows] == names
    assert all(r.leading and r.interval > 0 and r.writes for r in rows)


def test_a_deleted_claim_wakes_the_reconcilers_row(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    mode = controller_mode(ClusterTarget(str(kubeconfig)), lambda: POLICIES)
    row = next(r for r in mode.runner.loops if r.name == "reconciler")
    assert not row.wake.is_set()
    mode.pieces.reconciler.claim_deleted({"metadata": {"namespace": "a", "name": "c", "uid": "u"}})
    assert row.wake.is_set()
