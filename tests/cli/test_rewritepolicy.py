"""`dragate rewrite-policy`: what it prints for the shipped policies, its exit codes, bad input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result

from webhook.cli import main

REPO = Path(__file__).resolve().parents[2]
NATIVE_CLASS = """
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.nvidia.com}
spec: {extendedResourceName: nvidia.com/gpu}
"""


def run(*args: str) -> Result:
    return CliRunner().invoke(main, ["rewrite-policy", *args], catch_exceptions=False)


def _kinds(documents: list[dict[str, object]]) -> list[object]:
    return sorted({str(d["kind"]) for d in documents})


def test_the_shipped_policies() -> None:
    result = run("--policies", str(REPO / "policies"))
    assert result.exit_code == 0, result.stderr
    documents = list(yaml.safe_load_all(result.stdout))
    assert _kinds(documents) == [
        "MutatingAdmissionPolicy",
        "MutatingAdmissionPolicyBinding",
        "ResourceClaimTemplate",
    ]
    templates = [d for d in documents if d["kind"] == "ResourceClaimTemplate"]
    bound = documents[1]["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"][0]
    assert len(templates) == 8 * len(bound["values"])


def test_json_is_a_list_with_the_same_objects() -> None:
    as_yaml = list(yaml.safe_load_all(run("--policies", str(REPO / "policies")).stdout))
    as_json = json.loads(run("--policies", str(REPO / "policies"), "-o", "json").stdout)
    assert as_json["kind"] == "List"
    assert as_json["items"] == as_yaml


def test_options_reach_the_policy() -> None:
    args = ("--policies", str(REPO / "policies"), "--max-count", "2", "--name", "rw")
    documents = list(yaml.safe_load_all(run(*args, "--exempt-user", "me").stdout))
    assert documents[0]["metadata"]["name"] == documents[1]["spec"]["policyName"] == "rw"
    conditions = {c["name"]: c["expression"] for c in documents[0]["spec"]["matchConditions"]}
    assert '"me"' in conditions["not-an-exempt-user"]
    names = {d["metadata"]["name"] for d in documents if d["kind"] == "ResourceClaimTemplate"}
    assert names == {"dragate-gpu-nvidia-com-1", "dragate-gpu-nvidia-com-2"}


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ((), "admissionregistration.k8s.io/v1"),
        (("--kube-version", "1.37"), "admissionregistration.k8s.io/v1"),
        (("--kube-version", "1.36"), "admissionregistration.k8s.io/v1"),
        (("--kube-version", "1.35"), "admissionregistration.k8s.io/v1beta1"),
    ],
    ids=["default-newest", "1.37", "1.36", "1.35"],
)
def test_the_target_minor_picks_the_api_version(args: tuple[str, ...], expected: str) -> None:
    result = run("--policies", str(REPO / "policies"), *args)
    assert result.exit_code == 0, result.stderr
    documents = list(yaml.safe_load_all(result.stdout))
    assert [d["apiVersion"] for d in documents[:2]] == [expected, expected]


def test_a_native_class_leaves_nothing_to_rewrite(tmp_path: Path) -> None:
    (tmp_path / "state.yaml").write_text(NATIVE_CLASS)
    result = run("--policies", str(REPO / "policies"), "--state", str(tmp_path / "state.yaml"))
    assert (result.exit_code, result.stdout) == (1, "")
    assert "nothing to rewrite" in result.stderr


def test_no_tenant_leaves_nothing_to_rewrite(tmp_path: Path) -> None:
    shutil.copy(REPO / "policies" / "legacy-mapping.yaml", tmp_path)
    result = run("--policies", str(tmp_path))
    assert (result.exit_code, result.stdout) == (1, "")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--policies", "/nonexistent"), "does not exist"),
        (("--max-count", "0"), "--max-count"),
        (("-o", "xml"), "--output"),
        (("--kube-version", "1.30"), "--kube-version"),
    ],
    ids=["missing-policies", "bad-count", "bad-output", "unsupported-kube-version"],
)
def test_bad_input_exits_2(args: tuple[str, ...], message: str) -> None:
    result = run(*args)
    assert result.exit_code == 2
    assert message in result.stderr


def test_invalid_policies_exit_2(tmp_path: Path) -> None:
    (tmp_path / "broken.yaml").write_text("kind: Tenant\napiVersion: dragate.io/v1alpha1\n: [\n")
    result = run("--policies", str(tmp_path))
    assert result.exit_code == 2
    assert "invalid policies" in result.stderr


# --------------------------------------------------------------------------- --check


def _rendered(tmp_path: Path, *args: str) -> Path:
    """`rewrite-policy` of the shipped policies, written outside any policy directory."""
    out = tmp_path / "rendered" / "rewrite-policy.yaml"
    out.parent.mkdir(exist_ok=True)
    out.write_text(run("--policies", str(REPO / "policies"), *args).stdout)
    return out


@pytest.mark.parametrize("output", ["yaml", "json"])
def test_check_passes_on_a_current_rendering(tmp_path: Path, output: str) -> None:
    rendered = _rendered(tmp_path, "-o", output)
    result = run("--policies", str(REPO / "policies"), "--check", str(rendered))
    assert (result.exit_code, result.stdout, result.stderr) == (0, "", "")


def test_check_names_what_is_stale(tmp_path: Path) -> None:
    rendered = _rendered(tmp_path, "--max-count", "2")
    binding = list(yaml.safe_load_all(rendered.read_text()))[1]
    (bound,) = binding["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"]
    text = rendered.read_text().replace("dragate.io/rewritten", "dragate.io/other", 1)
    rendered.write_text(text + "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: left}\n")
    result = run("--policies", str(REPO / "policies"), "--max-count", "3", "--check", str(rendered))
    assert result.exit_code == 1
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert f"{rendered}: MutatingAdmissionPolicy dragate-legacy-rewrite differs" in lines
    assert f"{rendered}: ConfigMap left is no longer generated" in lines
    missing = [line for line in lines if line.endswith("dragate-gpu-nvidia-com-3 is missing")]
    assert len(missing) == len(bound["values"])
    assert "is stale; regenerate it" in lines[-1]


def test_check_of_nothing_to_rewrite(tmp_path: Path) -> None:
    policies = tmp_path / "policies"
    policies.mkdir()
    shutil.copy(REPO / "policies" / "legacy-mapping.yaml", policies)
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert run("--policies", str(policies), "--check", str(empty)).exit_code == 0
    rendered = _rendered(tmp_path)  # of the shipped policies, whose tenants rewrite
    result = run("--policies", str(policies), "--check", str(rendered))
    assert result.exit_code == 1
    assert "is no longer generated" in result.stderr


@pytest.mark.parametrize(
    ("text", "message"),
    [(None, "cannot read"), ("kind: [\n", "error:"), ("- a list\n", "error:")],
    ids=["missing-file", "malformed-yaml", "not-an-object"],
)
def test_check_of_bad_input_exits_2(tmp_path: Path, text: str | None, message: str) -> None:
    path = tmp_path / "committed.yaml"
    if text is not None:
        path.write_text(text)
    result = run("--policies", str(REPO / "policies"), "--check", str(path))
    assert result.exit_code == 2
    assert message in result.stderr
