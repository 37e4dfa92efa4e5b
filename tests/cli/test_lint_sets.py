"""`dragate lint` on a GitOps repository: each directory of policy files is one policy set."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from repo_tree import CLAIM, write

from webhook.cli import main

TENANT = """\
apiVersion: dragate.io/v1alpha1
kind: Tenant
metadata:
  name: ml
spec:
  namespaces: [{namespace}]
  quota:
  - deviceClassName: gpu.nvidia.com
    maxDevices: 8
"""

CLUSTERS = {
    "clusters/east/policies/tenants.yaml": TENANT.format(namespace="ml"),
    "clusters/west/policies/tenants.yaml": TENANT.format(namespace="ml"),
    "clusters/east/apps/claim.yaml": CLAIM.format(device_class="gpu.nvidia.com"),
}


def lint(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["lint", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.output


@pytest.mark.parametrize(
    ("extra", "code"),
    [
        ({}, 0),
        ({"clusters/east/policies/more.yaml": TENANT.format(namespace="ml-2")}, 1),
        ({"clusters/east/policies/team/more.yaml": TENANT.format(namespace="ml-2")}, 0),
        ({"clusters/west/apps/ml.yaml": TENANT.format(namespace="ml-2")}, 0),
    ],
    ids=["one-per-cluster", "twice-in-one-directory", "own-subdirectory", "other-directory"],
)
def test_the_same_tenant_in_two_directories_is_two_sets(
    tmp_path: Path, extra: dict[str, str], code: int
) -> None:
    root = write(tmp_path, {**CLUSTERS, **extra})
    assert lint(str(root))[0] == code


def test_a_duplicate_within_one_set_names_both_files(tmp_path: Path) -> None:
    root = write(tmp_path, {**CLUSTERS, "clusters/east/policies/z.yaml": CLUSTERS[
        "clusters/east/policies/tenants.yaml"]})  # fmt: skip
    code, out = lint(str(root))
    assert code == 1
    east = root / "clusters" / "east" / "policies"
    assert f"{east / 'z.yaml'}:4: error policy:" in out
    assert f'Tenant "ml" is already defined at {east / "tenants.yaml"}:4' in out
    assert "west" not in out


@pytest.mark.parametrize(
    ("changed", "code"),
    [
        ("clusters/east/policies/z.yaml", 1),
        ("clusters/east/policies/tenants.yaml", 1),
        ("clusters/west/policies/tenants.yaml", 0),
    ],
    ids=["the-later-file", "the-earlier-file", "the-other-cluster"],
)
def test_a_file_named_alone_is_judged_with_the_rest_of_its_set(
    tmp_path: Path, changed: str, code: int
) -> None:
    root = write(tmp_path, {**CLUSTERS, "clusters/east/policies/z.yaml": TENANT.format(
        namespace="ml-2")})  # fmt: skip
    code_seen, out = lint(str(root / changed))
    assert (code_seen, "already defined" in out) == (code, code == 1)
