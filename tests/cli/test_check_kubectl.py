"""`dragate check` reads what kubectl prints: `kubectl get tenants,... -o yaml` as policies and
as state, and says which policies it judged with and what it could not read, first."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from repo_tree import write

from webhook.cli import main

SERVED = """\
  metadata:
    name: {name}
    uid: 6f1c{name}
    resourceVersion: "4711"
    generation: 2
    creationTimestamp: "2026-12-01T10:00:00Z"
    managedFields:
    - {{manager: kubectl, operation: Apply, apiVersion: dragate.io/v1alpha1}}
"""
KUBECTL_GET = f"""\
apiVersion: v1
kind: List
metadata: {{resourceVersion: ""}}
items:
- apiVersion: dragate.io/v1alpha1
  kind: Tenant
{SERVED.format(name="team-a")}  spec:
    namespaces: [team-a]
    quota: [{{deviceClassName: gpu.nvidia.com, maxDevices: 2}}]
  status:
    usage: [{{deviceClassName: gpu.nvidia.com, used: 0, limit: 2}}]
    conditions: [{{type: Ready, status: "True", reason: Loaded, message: ok}}]
- apiVersion: dragate.io/v1alpha1
  kind: DeviceClassPolicy
{SERVED.format(name="gpu")}  spec:
    deviceClassNames: [gpu.nvidia.com]
    maxCountPerRequest: 8
"""
STATE = """\
- apiVersion: v1
  kind: Namespace
  metadata: {name: team-a, resourceVersion: "9"}
- apiVersion: resource.k8s.io/v1
  kind: DeviceClass
  metadata: {name: gpu.nvidia.com, resourceVersion: "10"}
  spec: {}
"""
CLAIM = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: big, namespace: team-a}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.nvidia.com, count: 3}
"""


def check(*args: str) -> Result:
    return CliRunner().invoke(main, ["check", *args], catch_exceptions=False)


@pytest.mark.parametrize("as_directory", [False, True], ids=["file", "directory"])
def test_kubectl_get_output_is_a_policy_input(tmp_path: Path, as_directory: bool) -> None:
    write(tmp_path, {"cluster/policies.yaml": KUBECTL_GET, "claim.yaml": CLAIM})
    policies = tmp_path / "cluster" if as_directory else tmp_path / "cluster" / "policies.yaml"
    result = check("--policies", str(policies), str(tmp_path / "claim.yaml"))
    assert result.exit_code == 1, result.output
    assert "team-a" in result.stdout and "limit 2" in result.stdout


def test_kubectl_get_output_with_policies_is_a_state_input(tmp_path: Path) -> None:
    listed = KUBECTL_GET.replace("items:\n", "items:\n" + STATE)
    write(tmp_path, {"state.yaml": listed, "policies/p.yaml": KUBECTL_GET, "claim.yaml": CLAIM})
    result = check(
        "--policies", str(tmp_path / "policies"), "--state", str(tmp_path / "state.yaml"),
        str(tmp_path / "claim.yaml"),
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    assert "limit 2" in result.stdout


def test_the_built_in_examples_are_named_on_stderr(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path, {"claim.yaml": CLAIM})
    monkeypatch.chdir(tmp_path)
    result = check("claim.yaml")
    assert "no --policies: judged with the built-in example policies" in result.stderr
    assert "built-in" not in result.stdout


def test_an_unparsable_file_is_reported_before_the_table(tmp_path: Path) -> None:
    write(tmp_path, {"a-broken.yaml": "a: [1\n", "claim.yaml": CLAIM})
    result = check("--policies", str(_policies(tmp_path)), str(tmp_path))
    assert result.exit_code == 2
    errors, table = result.output.index("error: "), result.output.index("big")
    assert errors < table


def _policies(tmp_path: Path) -> Path:
    return write(tmp_path / "p", {"p.yaml": KUBECTL_GET}) / "p.yaml"
