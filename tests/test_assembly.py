"""The composer: every offline Context counts what the snapshot already holds, the webhook's
offline Context reads its snapshot and ledger files, a webhook replica in a cluster has no
cluster-wide loop, and the controller is composed as told, its loops under the Lease
(running both is covered in tests/e2e)."""

from __future__ import annotations

import ast
import threading
from pathlib import Path

import pytest
import yaml
from builders import claim, exact, namespace, request

from webhook.assembly import (
    ClusterTarget,
    cluster_mode,
    controller_mode,
    offline_context,
    seed_ledger_file,
    serving_context,
)
from webhook.kube.policykeeper import RewritePolicyKeeper
from webhook.kube.snapshot import SnapshotState
from webhook.ledger.kube import KubeLedger
from webhook.ledger.memory import MemoryLedger
from webhook.ledger.sqlite import SqliteLedger
from webhook.pipeline.scope import Identity
from webhook.policy.loading import parse_policies

POLICIES = parse_policies(
    """
apiVersion: dragate.io/v1alpha1
kind: Tenant
metadata: {name: team-a}
spec:
  namespaces: [team-a]
  quota: [{deviceClassName: gpu.nvidia.com, maxDevices: 8}]
"""
)
GPU = "gpu.nvidia.com"
HELD = (namespace("team-a"), claim(request(exact("gpu", GPU, 3)), name="held"))


@pytest.mark.parametrize(
    ("objects", "ledger", "used"),
    [
        pytest.param(HELD, None, 3, id="no-ledger-starts-from-the-snapshot"),
        pytest.param((), None, 0, id="empty-snapshot-empty-ledger"),
        pytest.param(HELD, MemoryLedger(), 0, id="a-given-ledger-is-used-as-is"),
    ],
)
def test_offline_context_ledger(
    objects: tuple[dict[str, object], ...], ledger: MemoryLedger | None, used: int
) -> None:
    context = offline_context(lambda: POLICIES, SnapshotState(objects), ledger)
    usage = context.ledger.usage("team-a")
    assert (usage[GPU].used if GPU in usage else 0) == used


def test_offline_templates_land_in_the_snapshot_unless_dry_run() -> None:
    state = SnapshotState()
    context = offline_context(lambda: POLICIES, state)
    made = {"kind": "ResourceClaimTemplate", "metadata": {"name": "t"}}
    context.templates("team-a", [made], True, 10.0)
    assert state.template("team-a", "t") is None
    context.templates("team-a", [made], False, 10.0)
    assert state.template("team-a", "t") is not None


def test_serving_context_offline_reads_the_state_and_ledger_files(tmp_path: Path) -> None:
    state_file = tmp_path / "state.yaml"
    state_file.write_text(yaml.safe_dump_all(HELD))
    ledger_file = tmp_path / "ledger.sqlite3"
    seed_ledger_file(ledger_file, POLICIES, SnapshotState(HELD))
    context, readiness = serving_context(lambda: POLICIES, None, state_file, ledger_file)
    assert readiness == []  # offline: nothing to wait for
    assert context.state.claims()[0]["metadata"]["name"] == "held"
    ledger = context.ledger
    assert isinstance(ledger, SqliteLedger)
    try:
        assert ledger.usage("team-a")[GPU].used == 3
    finally:
        ledger.close()


EDGES = ("cli", "admission")


@pytest.mark.parametrize("edge", EDGES, ids=EDGES)
def test_no_edge_builds_a_ledger(edge: str) -> None:
    """The command line and the serving layer get every ledger from the composer, so the
    offline and cluster ledgers are chosen in one place."""
    built = [
        f"{path.name}:{node.lineno}"
        for path in sorted((Path(__file__).parents[1] / "webhook" / edge).rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call) and _called(node).endswith("Ledger")
    ]
    assert built == []


def _called(call: ast.Call) -> str:
    func = call.func
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")


KUBECONFIG = """
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""


@pytest.mark.parametrize("grants", [True, False], ids=["quota-grants", "no-quota-grants"])
def test_a_webhook_replica_takes_quota_grants_as_told_and_runs_no_loop(
    tmp_path: Path, grants: bool
) -> None:
    """Composed, not started: nothing connects to the (unreachable) server."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    target = ClusterTarget(str(kubeconfig), quota_grants=grants, keep_rewrite_policy=True)
    mode = cluster_mode(target, lambda: POLICIES)
    assert isinstance(mode.context.ledger, KubeLedger)
    assert (mode.context.ledger.grants is not None) is grants
    assert not hasattr(mode, "leader") and not hasattr(mode, "reconciler")


@pytest.mark.parametrize("grants", [True, False], ids=["quota-grants", "no-quota-grants"])
def test_a_webhook_replica_starts_its_ledgers_loops_and_stops_them(
    tmp_path: Path, grants: bool
) -> None:
    """The ledger starts nothing itself; the replica's start runs its grant loops beside the
    caches, and its stop ends them."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    mode = cluster_mode(ClusterTarget(str(kubeconfig), quota_grants=grants), lambda: POLICIES)
    loops = {"ledger-flusher", "ledger-wants"}
    assert not loops & _threads()
    mode.start()
    try:
        assert (loops <= _threads()) is grants
        assert mode.ledger.loops is None or mode.ledger.loops.running()
    finally:
        mode.stop(timeout=1.0)
        mode.state.stop()
    assert not loops & _threads()


def _threads() -> set[str]:
    return {t.name for t in threading.enumerate() if t.is_alive()}


def test_the_controller_keeps_the_rewrite_policy_when_told(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    own = Identity("gpu-system", "dragate")
    target = ClusterTarget(str(kubeconfig), keep_rewrite_policy=True, own=own)
    keeper = controller_mode(target, lambda: POLICIES).pieces.policy_keeper
    assert isinstance(keeper, RewritePolicyKeeper)
    assert keeper.own_namespace == "gpu-system"
    assert keeper.exempt_users == {"system:serviceaccount:gpu-system:dragate"}
    plain = controller_mode(ClusterTarget(str(kubeconfig)), lambda: POLICIES)
    assert plain.pieces.policy_keeper is None  # opt-in
    assert isinstance(plain.context.ledger, KubeLedger) and plain.context.ledger.grants is None


@pytest.mark.parametrize(
    "loop", ["reconciler", "template-keeper", "policy-reports", "rewrite-policy-keeper"]
)
def test_the_controller_runs_its_loops_under_the_lease(tmp_path: Path, loop: str) -> None:
    """Each leader-only loop passes only while the controller holds the Lease, and is woken
    when it gains it (`Leadership.on_change`)."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    target = ClusterTarget(str(kubeconfig), keep_rewrite_policy=True)
    mode = controller_mode(target, lambda: POLICIES)
    row = next(r for r in mode.runner.loops if r.name == loop)
    assert row.leading and not mode.runner.due(row)
    mode.leader._started()  # the election's callback: this process now holds the Lease
    assert mode.runner.due(row) and row.wake.is_set()
    mode.leader._stopped()
    assert not mode.runner.due(row)


TENANT_OBJECT = {
    "apiVersion": "dragate.io/v1alpha1",
    "kind": "Tenant",
    "metadata": {"name": "team-b", "uid": "u1", "generation": 1},
    "spec": {"namespaces": ["team-b"], "quota": [{"deviceClassName": GPU, "maxDevice": 4}]},
}


@pytest.mark.parametrize(
    ("spec", "denied"),
    [
        pytest.param(TENANT_OBJECT["spec"], "spec.quota[0].maxDevice: unknown field", id="typo"),
        pytest.param(
            {"namespaces": ["team-a"], "quota": [{"deviceClassName": GPU, "maxDevices": 4}]},
            "",
            id="valid",
        ),
    ],
)
def test_a_policy_object_under_admission_meets_the_policy_loader(spec: object, denied: str) -> None:
    from webhook.pipeline import review
    from webhook.types import AdmissionRequest, Operation

    context = offline_context(lambda: POLICIES, SnapshotState.empty())
    obj = {**TENANT_OBJECT, "spec": spec}
    req = AdmissionRequest("u", "Tenant", "dragate.io", "v1alpha1", "tenants",
                           Operation.CREATE, name="team-b", object=obj)  # fmt: skip
    verdict = review(req, context)
    assert verdict.allowed is (denied == "")
    messages = [r.message for r in verdict.decision.reasons]
    assert all(m.startswith("Tenant/team-b would not be enforced: ") for m in messages)
    assert denied in " ".join(messages)


def test_the_controller_reports_its_state(tmp_path: Path) -> None:
    """What the controller's /readyz and /metrics show: the Lease held or not, why not, the
    last good pass."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    mode = controller_mode(ClusterTarget(str(kubeconfig)), lambda: POLICIES)
    mode.leader.failed("create: 403 Forbidden")
    state = mode.controller()
    assert (state.leading, state.last_reconcile, state.lease_failure) == (
        False, None, "create: 403 Forbidden",
    )  # fmt: skip
    mode.leader._started()
    mode.pieces.reconciler.last_success = 1234.0
    assert (mode.controller().leading, mode.controller().last_reconcile) == (True, 1234.0)
