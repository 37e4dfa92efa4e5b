"""`dragate lint --kube-version`: fields judged against the named minor's pinned schemas."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from webhook.cli import main

DERIVED_CLAIM = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: gpu
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu.nvidia.com
        derivedAttributes:
        - name: x
          expression: "1"
"""

GROUPED_POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: p
spec:
  schedulingGroup:
    podGroupName: g
  containers:
  - name: main
    image: x
"""

# (manifest, --kube-version, exit code, the finding line's tail or "" for a clean run)
CASES = [
    (
        "claim-on-1.36",
        DERIVED_CLAIM,
        "1.36",
        1,
        ":11: error field-needs-newer-kubernetes: spec.devices.requests[0].exactly"
        ".derivedAttributes needs Kubernetes 1.37 (target 1.36)",
    ),
    ("claim-on-1.37", DERIVED_CLAIM, "1.37", 0, ""),
    (
        "pod-on-1.35",
        GROUPED_POD,
        "1.35",
        1,
        ":6: error field-needs-newer-kubernetes: spec.schedulingGroup needs Kubernetes 1.36 "
        "(target 1.35)",
    ),
    ("pod-on-1.36", GROUPED_POD, "1.36", 0, ""),
]


@pytest.mark.parametrize(
    ("manifest", "minor", "code", "line"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_fields_of_a_later_minor_fail_the_target(
    tmp_path: Path, manifest: str, minor: str, code: int, line: str
) -> None:
    path = tmp_path / "manifest.yaml"
    path.write_text(manifest)
    result = CliRunner().invoke(main, ["lint", "--kube-version", minor, str(path)])
    assert result.exit_code == code, result.output
    if line:
        assert f"{path}{line}" in result.output
    else:
        assert result.output == "1 file checked, no problems found\n"


def test_the_newest_minor_is_the_default_target(tmp_path: Path) -> None:
    path = tmp_path / "manifest.yaml"
    path.write_text(DERIVED_CLAIM)
    result = CliRunner().invoke(main, ["lint", str(path)])
    assert result.exit_code == 0, result.output
