"""`dragate crds`: every CRD dragate ships, printed for `kubectl apply -f -` or written as files."""

from __future__ import annotations

from pathlib import Path

import yaml
from click.testing import CliRunner, Result

from webhook.cli import main
from webhook.policy.policycrds import crd_texts

REPO = Path(__file__).resolve().parents[2]


def run(*args: str) -> Result:
    return CliRunner().invoke(main, ["crds", *args], catch_exceptions=False)


def test_prints_every_crd_as_one_yaml_stream() -> None:
    result = run()
    assert result.exit_code == 0, result.stderr
    documents = list(yaml.safe_load_all(result.stdout))
    names = sorted(d["metadata"]["name"] for d in documents)
    assert names == sorted([
        "tenants.dragate.io", "deviceclasspolicies.dragate.io",
        "legacyresourcemappings.dragate.io", "settings.dragate.io", "tenantusages.dragate.io",
        "policyreports.wgpolicyk8s.io", "clusterpolicyreports.wgpolicyk8s.io",
    ])  # fmt: skip
    assert {d["kind"] for d in documents} == {"CustomResourceDefinition"}


def test_prints_what_the_package_ships() -> None:
    """`kubectl apply -f webhook/defaults/crds/` and `dragate crds | kubectl apply -f -` agree."""
    shipped = REPO / "webhook" / "defaults" / "crds"
    printed = list(yaml.safe_load_all(run().stdout))
    files = [yaml.safe_load(p.read_text()) for p in sorted(shipped.glob("*.yaml"))]
    assert printed == files


def test_write_makes_one_file_per_crd_in_each_folder(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b" / "c"
    result = run("--write", str(first), "--write", str(second))
    assert result.exit_code == 0, result.stderr
    assert result.stdout == ""
    for folder in (first, second):
        assert {p.name: p.read_text() for p in folder.iterdir()} == crd_texts()


def test_write_to_a_file_is_bad_input(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    result = run("--write", str(blocker / "crds"))
    assert result.exit_code == 2
    assert f"cannot write {blocker / 'crds'}" in result.stderr
