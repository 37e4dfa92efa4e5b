"""`dragate check` without `--policies`: the nearest policy directory above the manifests."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from repo_tree import CLAIM, write

from webhook.cli import main

DENY_ALL = """\
apiVersion: dragate.io/v1alpha1
kind: DeviceClassPolicy
metadata:
  name: no-gpus-here
spec:
  deviceClassNames: [gpu.nvidia.com]
  validations:
  - expression: "false"
    message: "this cluster takes no GPU claims"
    action: Deny
"""

REPOSITORY = {
    "clusters/east/policies.yaml": DENY_ALL,
    "clusters/east/apps/claim.yaml": CLAIM.format(device_class="gpu.nvidia.com"),
    "clusters/west/apps/claim.yaml": CLAIM.format(device_class="gpu.nvidia.com"),
}


def check(*args: str) -> Result:
    return CliRunner().invoke(main, ["check", *args], catch_exceptions=False)


@pytest.mark.parametrize(
    ("manifest", "code", "judged_with"),
    [
        ("clusters/east/apps/claim.yaml", 1, "the policies in {root}/clusters/east"),
        ("clusters/east/apps", 1, "the policies in {root}/clusters/east"),
        ("clusters/west/apps/claim.yaml", 0, "the built-in example policies"),
    ],
    ids=["a-file-below-a-policy-directory", "a-directory-below-it", "no-policy-directory-above"],
)
def test_manifests_are_judged_with_the_nearest_policy_directory_above_them(
    tmp_path: Path, manifest: str, code: int, judged_with: str
) -> None:
    root = write(tmp_path, REPOSITORY).resolve()
    result = check(str(root / manifest))
    assert result.exit_code == code, result.output
    assert f"no --policies: judged with {judged_with.format(root=root)}" in result.stderr


def test_manifests_under_two_policy_directories_need_policies_named(tmp_path: Path) -> None:
    root = write(tmp_path, {**REPOSITORY, "clusters/west/policies.yaml": DENY_ALL})
    result = check(str(root / "clusters/east/apps"), str(root / "clusters/west/apps"))
    assert result.exit_code == 2
    assert "give --policies" in result.stderr
