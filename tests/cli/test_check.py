"""`dragate check`: golden output per format, exit codes, every kind of input and bad input."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from kube_limits_cases import LEGACY_CONTAINERS, legacy_pod
from repo_tree import (
    CLAIM,
    DEVICE_CLASSES,
    FLAT_CLAIM,
    FOREIGN,
    TYPO_TEMPLATE,
    TYPO_TENANT,
    WALKED_FOREIGN,
    repository,
    write,
)

from webhook.cli import main
from webhook.types.kubelimits import OBJECT_BYTES_MAX

DATA = Path(__file__).parent / "data" / "check"
GOLDEN_FORMATS = ["text", "json", "yaml", "junit"]
UPDATE = os.environ.get("DRAGATE_UPDATE_GOLDENS") == "1"


def check(*args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(main, ["check", *args], input=stdin, catch_exceptions=False)


@pytest.fixture(autouse=True)
def _in_data_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(DATA)  # `source` fields name relative paths, stable across machines


@pytest.mark.parametrize("output", GOLDEN_FORMATS, ids=GOLDEN_FORMATS)
def test_golden_output(output: str) -> None:
    result = check("--state", "state.yaml", "-o", output, "manifests.yaml")
    golden = DATA / f"expected.{output}"
    if UPDATE:
        golden.write_text(result.stdout)
    assert result.stdout == golden.read_text()
    assert result.exit_code == 1  # `second` is denied


def test_json_contract_fields_and_accumulating_usage() -> None:
    rows = json.loads(check("--state", "state.yaml", "-o", "json", "manifests.yaml").stdout)
    assert [(r["name"], r["allowed"]) for r in rows] == [
        ("first", True),
        ("second", False),
        ("legacy", True),
        ("unrelated", True),
    ]
    contract = {"kind", "namespace", "name", "allowed", "reasons", "warnings", "patched"}
    assert contract <= set(rows[0])
    assert "used 15 + requested 2 > limit 16" in rows[1]["reasons"][0]
    assert rows[2]["patched"]["spec"]["resourceClaims"][0]["name"] == "mig-server"
    assert rows[0]["patched"] is None


@pytest.mark.parametrize(
    ("args", "stdin", "names"),  # a directory is read recursively, in sorted order
    [
        (["claim.json"], None, ["from-json"]),
        (["-"], (DATA / "claim.json").read_text(), ["from-json"]),
        (["state.yaml"], None, ["team-x", "train-a", "train-b"]),
        (["tree"], None, ["first", "second", "legacy", "unrelated", "from-json"]),
    ],
    ids=["json-file", "stdin", "kind-list", "directory"],
)
def test_inputs(args: list[str], stdin: str | None, names: list[str]) -> None:
    result = check("-o", "json", *args, stdin=stdin)
    assert [r["name"] for r in json.loads(result.stdout)] == names


def test_all_allowed_exits_zero() -> None:
    assert check("claim.json").exit_code == 0


def test_without_state_nothing_is_held() -> None:
    rows = json.loads(check("-o", "json", "manifests.yaml").stdout)
    assert all(r["allowed"] for r in rows)


@pytest.mark.parametrize(
    ("files", "extra", "message"),
    [
        ({"bad.yaml": "a: [1\n"}, [], "bad.yaml:2: not valid YAML or JSON"),
        ({"bad.yaml": "- just\n- a list\n"}, [], "expected a Kubernetes object"),
        ({"bad.yaml": "kind: Pod\n"}, [], "`apiVersion` is missing"),
        ({}, ["missing.yaml"], "missing.yaml: cannot read"),
    ],
    ids=["syntax", "not-an-object", "no-apiversion", "missing-file"],
)
def test_bad_manifests_exit_two_and_the_rest_is_still_checked(
    tmp_path: Path, files: dict[str, str], extra: list[str], message: str
) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    paths = [str(tmp_path / n) for n in [*files, *extra]]
    result = check("-o", "json", str(DATA / "claim.json"), *paths)
    assert result.exit_code == 2
    assert message in result.stderr
    assert json.loads(result.stdout)[0]["name"] == "from-json"


def test_invalid_policies_exit_two_with_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "t.yaml").write_text(
        "apiVersion: dragate.io/v1alpha1\nkind: Tenant\nmetadata: {name: a}\n"
        "spec:\n  namespaces: [a]\n  quota:\n  - {deviceClassName: x, maxDevice: 1}\n"
    )
    result = check("--policies", str(tmp_path), "claim.json")
    assert result.exit_code == 2
    assert "t.yaml:7" in result.output and "maxDevices" in result.output
    assert "Traceback" not in result.output


def test_a_rule_reading_an_undefined_request_field_is_an_invalid_policy(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(
        "apiVersion: dragate.io/v1alpha1\nkind: DeviceClassPolicy\nmetadata: {name: p}\n"
        "spec:\n  validations:\n  - expression: request.cnt <= 4\n"
    )
    result = check("--policies", str(tmp_path), "claim.json")
    assert result.exit_code == 2
    assert "p.yaml:6" in result.output and "undefined field 'cnt'" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--policies", "/nonexistent", "claim.json"], "does not exist"),
        (["--state", "manifests.yaml", "claim.json"], "a state file holds only"),
        (["--state", "/nonexistent.yaml", "claim.json"], "cannot read"),
        (["-o", "xml", "claim.json"], "Invalid value for '-o'"),
        ([], "Missing argument"),
    ],
    ids=["no-policy-dir", "state-wrong-kind", "state-missing", "bad-format", "no-manifests"],
)
def test_bad_flags_exit_two(args: list[str], message: str) -> None:
    result = check(*args)
    assert result.exit_code == 2
    assert message in result.output


# --------------------------------------------------------------------------- repositories


def test_a_repository_checks_as_its_manifests_alone(tmp_path: Path) -> None:
    result = check(str(repository(tmp_path)))
    assert result.exit_code == 0
    assert "ResourceClaim  team-a" in result.stdout
    assert result.stdout.splitlines()[-2:] == [
        "1 objects: 1 allowed, 0 denied",
        f"{len(WALKED_FOREIGN)} files skipped: not Kubernetes objects",
    ]


def test_a_repository_with_a_denial_exits_1(tmp_path: Path) -> None:
    root = write(repository(tmp_path), {"deploy/flat.yaml": FLAT_CLAIM})
    result = check("-o", "json", str(root))
    assert result.exit_code == 1
    assert [r["name"] for r in json.loads(result.stdout)] == ["one-gpu", "flat"]
    assert f"{len(WALKED_FOREIGN)} files skipped" in result.stderr


@pytest.mark.parametrize("name", sorted(FOREIGN), ids=sorted(FOREIGN))
def test_a_file_named_explicitly_is_still_refused(tmp_path: Path, name: str) -> None:
    result = check(str(repository(tmp_path) / name))
    assert result.exit_code == 2
    assert "error: " in result.stderr


@pytest.mark.parametrize(
    ("exclude", "code"),
    [([], 1), (["legacy"], 0), (["legacy/*"], 0), (["flat.yaml"], 0), (["deploy"], 1)],
    ids=["none", "directory-name", "relative-glob", "basename", "other-directory"],
)
def test_exclude(tmp_path: Path, exclude: list[str], code: int) -> None:
    root = write(repository(tmp_path), {"legacy/flat.yaml": FLAT_CLAIM})
    flags = [arg for pattern in exclude for arg in ("--exclude", pattern)]
    assert check(*flags, str(root)).exit_code == code


def test_text_output_names_each_objects_file_and_line() -> None:
    lines = check("--state", "state.yaml", "manifests.yaml").stdout.splitlines()
    rows = [line for line in lines if line.startswith(("allow", "DENY"))]
    assert [row.split()[-1] for row in rows] == [
        "manifests.yaml:2",
        "manifests.yaml:11",
        "manifests.yaml:20",
        "manifests.yaml:30",
    ]


# --------------------------------------------------------------------------- device classes

TYPO_CLAIM = CLAIM.format(device_class="gpu.nvdia.com")
HINT = "(did you mean 'gpu.nvidia.com'?)"


@pytest.mark.parametrize(
    ("files", "state", "warned"),
    [
        ({"claim.yaml": TYPO_CLAIM}, True, {"one-gpu": "request 'gpu': DeviceClass"}),
        (
            {"a.yaml": TYPO_CLAIM, "z.yaml": DEVICE_CLASSES},
            False,
            {"one-gpu": "request 'gpu': DeviceClass"},
        ),
        ({"t.yaml": TYPO_TEMPLATE}, True, {"one-gpu": "request 'gpu/big': DeviceClass"}),
        ({"t.yaml": TYPO_TENANT}, True, {"team-a": "spec.allowedDeviceClasses[0]: DeviceClass"}),
        ({"claim.yaml": TYPO_CLAIM}, False, {}),
    ],
    ids=[
        "claim-state",
        "claim-classes-among-inputs",
        "template-outside-tenants",
        "tenant",
        "no-class-known",
    ],
)
def test_unknown_device_classes_are_warned_and_allowed(
    tmp_path: Path, files: dict[str, str], state: bool, warned: dict[str, str]
) -> None:
    write(tmp_path / "in", files)
    state_file = write(tmp_path, {"state.yaml": DEVICE_CLASSES}) / "state.yaml"
    flags = ["--state", str(state_file)] if state else []
    result = check("-o", "json", *flags, str(tmp_path / "in"))
    assert result.exit_code == 0
    rows = json.loads(result.stdout)
    found = {r["name"]: [w for w in r["warnings"] if "DeviceClass" in w] for r in rows}
    assert {name: len(w) for name, w in found.items() if w} == dict.fromkeys(warned, 1)
    for name, prefix in warned.items():
        assert f"{prefix} 'gpu.nvdia.com' does not exist" in found[name][0]
        assert HINT in found[name][0]


def test_an_object_etcd_could_never_store_is_denied_with_its_size(tmp_path: Path) -> None:
    manifest = tmp_path / "huge.json"
    manifest.write_text(json.dumps(legacy_pod(LEGACY_CONTAINERS)))
    result = check(str(manifest))
    assert result.exit_code == 1
    assert "[dragate/kubernetes-limits] the object is " in result.stdout
    assert f"more than the {OBJECT_BYTES_MAX:,} bytes (1.5 MiB)" in result.stdout


GANG_POLICIES = """\
apiVersion: dragate.io/v1alpha1
kind: Tenant
metadata: {name: ml}
spec:
  namespaces: [team-a]
  quota:
  - {deviceClassName: gpu.nvidia.com, maxDevices: 8}
"""


def gang_job(name: str, pods: int, suspend: bool = False) -> dict[str, object]:
    claims = [{"name": "gpu", "resourceClaimTemplateName": "two"}]
    pod_spec = {"containers": [{"name": "c", "image": "i"}], "resourceClaims": claims}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "team-a"},
        "spec": {"parallelism": pods, "suspend": suspend, "template": {"spec": pod_spec}},
    }


GANG_TEMPLATE = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaimTemplate",
    "metadata": {"name": "two", "namespace": "team-a"},
    "spec": {"spec": {"devices": {"requests": [
        {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2}}
    ]}}},
}  # fmt: skip


@pytest.mark.parametrize(
    ("jobs", "verdicts"),
    [
        ([("a", 4, False), ("b", 4, False)], [True, True, False]),
        ([("a", 3, False), ("b", 2, False)], [True, True, False]),
        ([("a", 4, True), ("b", 4, False)], [True, True, True]),
    ],
    ids=["second-refused-whole", "second-past-what-is-left", "a-suspended-one-holds-nothing"],
)
def test_gangs_are_judged_whole_in_order(
    tmp_path: Path, jobs: list[tuple[str, int, bool]], verdicts: list[bool]
) -> None:
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "tenant.yaml").write_text(GANG_POLICIES)
    objects = [GANG_TEMPLATE, *(gang_job(*job) for job in jobs)]
    (tmp_path / "in.json").write_text(
        json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
    )
    result = check(
        "--policies", str(tmp_path / "policies"), "-o", "json", str(tmp_path / "in.json")
    )
    rows = json.loads(result.stdout)
    assert [r["allowed"] for r in rows] == verdicts
    if not verdicts[-1]:
        assert rows[-1]["reasons"][0].startswith(
            "[Tenant/ml] "
            f"gang team-a/b needs {2 * jobs[1][1]} gpu.nvidia.com; tenant ml has "
            f"{8 - 2 * jobs[0][1]} free (held by gang:team-a/Job/a"
        )
