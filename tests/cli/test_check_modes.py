"""`dragate check` under rollout modes: the verdict says `allow (warn)` / `allow (audit)`,
the reasons a denial would give are shown, and objects admitted so exit 0."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from builders import claim, exact, request
from click.testing import CliRunner, Result

from webhook.cli import main

GPU = "gpu.nvidia.com"
NUMBERS = "used 3 + requested 2 > limit 4"


def check(tmp_path: Path, mode: str, *args: str) -> Result:
    (tmp_path / "policies").mkdir(exist_ok=True)
    (tmp_path / "policies" / "tenant.yaml").write_text(
        f"""
apiVersion: dragate.io/v1alpha1
kind: Tenant
metadata: {{name: team-a}}
spec:
  namespaces: [team-a]
  enforcement: {mode}
  quota:
  - {{deviceClassName: {GPU}, maxDevices: 4}}
"""
    )
    claims = [claim(request(exact(count=n)), name=f"c{n}") for n in (3, 2)]
    (tmp_path / "claims.yaml").write_text("---\n".join(json.dumps(c) + "\n" for c in claims))
    policies = str(tmp_path / "policies")
    return CliRunner().invoke(
        main, ["check", "--policies", policies, *args, str(tmp_path / "claims.yaml")]
    )


@pytest.mark.parametrize(
    ("mode", "verdict", "detail", "code"),
    [
        ("Deny", "DENY", "    deny: [Tenant/team-a] ", 1),
        ("Warn", "allow (warn)", "    warn: dragate: [Warn] ", 0),
        ("Audit", "allow (audit)", "    audit: [Tenant/team-a] ", 0),
    ],
    ids=["deny", "warn", "audit"],
)
def test_text_verdict_per_mode(
    tmp_path: Path, mode: str, verdict: str, detail: str, code: int
) -> None:
    result = check(tmp_path, mode)
    assert result.exit_code == code, result.output
    lines = result.stdout.splitlines()
    (row,) = [line for line in lines if line.split("  ")[0].strip() == verdict]
    assert "ResourceClaim" in row and "c2" in row
    assert any(line.startswith(detail) and NUMBERS in line for line in lines)


@pytest.mark.parametrize(
    ("mode", "allowed", "warned", "audited"),
    [("Deny", False, False, False), ("Warn", True, True, False), ("Audit", True, False, True)],
    ids=["deny", "warn", "audit"],
)
def test_json_carries_warnings_and_the_audit_list(
    tmp_path: Path, mode: str, allowed: bool, warned: bool, audited: bool
) -> None:
    result = check(tmp_path, mode, "-o", "json")
    first, second = json.loads(result.stdout)
    assert first["audit"] == [] and first["allowed"]
    assert second["allowed"] is allowed
    warnings: list[Any] = second["warnings"]
    assert any(NUMBERS in w and w.startswith("dragate: [Warn] ") for w in warnings) is warned
    assert any(NUMBERS in a and "held by claim:team-a/c3 (3)" in a for a in second["audit"]) is (
        audited
    )


def test_junit_shows_the_audited_reasons_beside_the_warnings(tmp_path: Path) -> None:
    result = check(tmp_path, "Audit", "-o", "junit")
    assert result.exit_code == 0
    assert 'failures="0"' in result.stdout
    assert f"audit: [Tenant/team-a] tenant 'team-a' quota for {GPU} exceeded" in result.stdout
