"""`dragate lint` end to end through click: output formats, line numbers, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
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

DATA = Path(__file__).parent / "data" / "lint"


def lint(*args: str, stdin: str | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["lint", *args], input=stdin)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.output


def lines_of(output: str) -> list[str]:
    return output.splitlines()[:-1]  # without the summary


def where(output: str) -> list[tuple[str, int, str]]:
    """(file name, line, rule) of each finding line."""
    found = []
    for line in lines_of(output):
        location, rest = line.split(": ", 1)
        file, _, number = location.rpartition(":")
        found.append((Path(file).name, int(number), rest.split(":", 1)[0].split()[1]))
    return found


def test_clean_directory_exits_0() -> None:
    code, out = lint(str(DATA / "clean"))
    assert code == 0
    assert out == "1 file checked, no problems found\n"


def test_article_examples_are_found_with_lines() -> None:
    code, out = lint(str(DATA / "bad" / "article-claim.yaml"))
    assert code == 1
    assert where(out) == [
        ("article-claim.yaml", 12, "request-shape"),
        ("article-claim.yaml", 16, "cel-compile"),
        ("article-claim.yaml", 16, "cel-domain"),
        ("article-claim.yaml", 16, "cel-quantity-compare"),
        ("article-claim.yaml", 18, "cel-version-compare"),
    ]
    assert "(fix: wrap them: `exactly: {deviceClassName: gpu.nvidia.com" in out
    assert "(fix: use `device.capacity['gpu.nvidia.com'].memory`)" in out
    assert "driverVersion.compareTo(semver('550.0.0')) >= 0" in out
    assert out.splitlines()[-1] == "5 errors, 0 warnings in 1 file"


def test_text_line_format() -> None:
    _, out = lint(str(DATA / "bad" / "pod-and-namespace.yaml"))
    first = out.splitlines()[0]
    assert first.startswith(
        f"{DATA / 'bad' / 'pod-and-namespace.yaml'}:6: error admin-access-label: "
    )
    assert first.endswith(
        '(fix: label the namespace `resource.kubernetes.io/admin-access: "true"`)'
    )


def test_workload_findings_point_into_the_pod_template() -> None:
    _, out = lint(str(DATA / "bad" / "pod-and-namespace.yaml"))
    assert where(out) == [
        ("pod-and-namespace.yaml", 6, "admin-access-label"),
        ("pod-and-namespace.yaml", 17, "pod-claim-source"),
        ("pod-and-namespace.yaml", 24, "pod-claim-ref"),
    ]


def test_findings_sorted_by_file_then_line() -> None:
    _, out = lint(str(DATA / "bad"))
    found = where(out)
    assert found == sorted(found, key=lambda f: (f[0], f[1]))
    assert {f[0] for f in found} == {"article-claim.yaml", "pod-and-namespace.yaml"}


def test_json_output() -> None:
    code, out = lint("-o", "json", str(DATA / "bad" / "article-claim.yaml"))
    assert code == 1
    body = json.loads(out)
    assert body["summary"] == {
        "files": 1,
        "errors": 5,
        "warnings": 0,
        "unreadable": 0,
        "skipped": 0,
    }
    first = body["findings"][0]
    assert set(first) == {"file", "line", "severity", "rule", "path", "message", "fix"}
    assert (first["line"], first["rule"], first["severity"]) == (12, "request-shape", "error")
    assert first["path"] == "spec.spec.devices.requests[0].deviceClassName"


def test_warnings_exit_0_unless_strict() -> None:
    path = str(DATA / "warn" / "unguarded.yaml")
    code, out = lint(path)
    assert code == 0
    assert where(out) == [("unguarded.yaml", 13, "cel-unguarded-attribute")]
    assert ": warning cel-unguarded-attribute: " in out
    assert lint("--strict", path)[0] == 1


def test_broken_files_exit_2_and_the_rest_is_still_linted() -> None:
    code, out = lint(str(DATA / "broken"), str(DATA / "bad" / "article-claim.yaml"))
    assert code == 2
    found = where(out)
    assert ("broken.yaml", 4, "parse") in found
    assert ("not-objects.yaml", 1, "parse") in found
    assert ("not-objects.yaml", 12, "request-shape") in found  # the good document of that file
    assert ("article-claim.yaml", 12, "request-shape") in found
    assert out.splitlines()[-1].endswith("in 3 files, 2 files unreadable")


def test_missing_file_exits_2_without_traceback() -> None:
    code, out = lint(str(DATA / "no-such-file.yaml"))
    assert code == 2
    assert "no-such-file.yaml: error parse: cannot read" in out


def test_binary_file_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "blob.yaml"
    bad.write_bytes(b"\xff\xfe\x00garbage")
    code, out = lint(str(bad))
    assert code == 2 and "error parse:" in out


def test_stdin() -> None:
    text = (DATA / "bad" / "article-claim.yaml").read_text()
    code, out = lint("-", stdin=text)
    assert code == 1
    assert out.splitlines()[0].startswith("<stdin>:12: error request-shape:")


def test_policy_files_go_through_the_loader_and_the_cel_rules() -> None:
    code, out = lint(str(DATA / "policies"))
    assert code == 1
    assert where(out) == [
        ("bad-policy.yaml", 7, "policy"),
        ("bad-policy.yaml", 18, "cel-version-compare"),
    ]
    assert "spec.maxCountPerRequest" in out


def test_a_rule_reading_an_undefined_request_field_is_a_policy_error(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(
        "apiVersion: dragate.io/v1alpha1\nkind: DeviceClassPolicy\nmetadata: {name: p}\n"
        "spec:\n  validations:\n  - expression: request.cnt <= 4\n"
    )
    code, out = lint(str(tmp_path))
    assert code == 1
    assert where(out) == [("p.yaml", 6, "policy")]
    assert "undefined field 'cnt'" in out


def test_good_policies_alone_are_clean() -> None:
    assert lint(str(DATA / "policies" / "good-policy.yaml")) == (
        0,
        "1 file checked, no problems found\n",
    )


def test_duplicate_policy_across_files_is_found(tmp_path: Path) -> None:
    good = (DATA / "policies" / "good-policy.yaml").read_text()
    (tmp_path / "a.yaml").write_text(good)
    (tmp_path / "b.yaml").write_text(good)
    code, out = lint(str(tmp_path))
    assert code == 1
    assert "already defined" in out


def test_policy_in_a_mixed_file_is_checked_without_blaming_the_manifest() -> None:
    code, out = lint(str(DATA / "mixed.yaml"))
    assert code == 1
    assert where(out) == [("mixed.yaml", 14, "policy")]
    assert 'did you mean "maxDevices"' in out


def test_list_items_get_their_own_lines() -> None:
    code, out = lint(str(DATA / "list.json"))
    assert code == 1
    assert where(out) == [("list.json", 2, "deprecated-api"), ("list.json", 5, "request-shape")]


def test_ignore_a_rule() -> None:
    code, out = lint(
        "--ignore", "cel-unguarded-attribute", "--strict", str(DATA / "warn" / "unguarded.yaml")
    )
    assert (code, out) == (0, "1 file checked, no problems found\n")


@pytest.mark.parametrize(
    "args",
    [[], ["--ignore", "no-such-rule", "x.yaml"], ["-o", "yaml", "x.yaml"]],
    ids=["no-paths", "unknown-rule", "bad-format"],
)
def test_usage_errors_exit_2(args: list[str]) -> None:
    assert lint(*args)[0] == 2


def test_list_rules() -> None:
    code, out = lint("--list-rules")
    assert code == 0
    assert "cel-version-compare" in out and "request-shape" in out and "policy" in out


# --------------------------------------------------------------------------- repositories


def test_a_repository_lints_as_its_manifests_alone(tmp_path: Path) -> None:
    code, out = lint(str(repository(tmp_path)))
    assert code == 0
    skipped = f"{len(WALKED_FOREIGN)} files skipped: not Kubernetes objects"
    assert out == f"1 file checked, no problems found; {skipped}\n"


def test_a_repository_with_a_mistake_exits_1_and_counts_the_skipped(tmp_path: Path) -> None:
    root = write(repository(tmp_path), {"deploy/flat.yaml": FLAT_CLAIM})
    code, out = lint("-o", "json", str(root))
    assert code == 1
    body = json.loads(out)
    assert body["summary"] == {
        "files": 2,
        "errors": 1,
        "warnings": 0,
        "unreadable": 0,
        "skipped": len(WALKED_FOREIGN),
    }
    assert [f["rule"] for f in body["findings"]] == ["request-shape"]


@pytest.mark.parametrize("name", sorted(FOREIGN), ids=sorted(FOREIGN))
def test_a_file_named_explicitly_is_still_refused(tmp_path: Path, name: str) -> None:
    root = repository(tmp_path)
    code, out = lint(str(root / name))
    assert code == 2
    assert ": error parse: " in out


@pytest.mark.parametrize(
    ("exclude", "code"),
    [
        ([], 1),
        (["legacy"], 0),
        (["legacy/*.yaml"], 0),
        (["/legacy/"], 0),
        (["flat.yaml"], 0),
        (["f*.yaml"], 0),
        (["deploy"], 1),
        (["legacy/other.yaml"], 1),
        (["deploy", "legacy"], 0),
    ],
    ids=[
        "none",
        "directory-name",
        "relative-glob",
        "slashes-ignored",
        "basename",
        "basename-glob",
        "other-directory",
        "other-file",
        "repeated",
    ],
)
def test_exclude(tmp_path: Path, exclude: list[str], code: int) -> None:
    root = write(repository(tmp_path), {"legacy/flat.yaml": FLAT_CLAIM})
    flags = [arg for pattern in exclude for arg in ("--exclude", pattern)]
    assert lint(*flags, str(root))[0] == code


def test_exclude_leaves_a_file_named_explicitly(tmp_path: Path) -> None:
    root = write(tmp_path, {"flat.yaml": FLAT_CLAIM})
    assert lint("--exclude", "flat.yaml", str(root / "flat.yaml"))[0] == 1


@pytest.mark.parametrize(
    ("files", "ignored", "code", "summary"),
    [
        ({"broken.yaml": "a: [1\n"}, [], 2, "1 error, 0 warnings in 1 file, 1 file unreadable"),
        ({"broken.yaml": "a: [1\n"}, ["parse"], 0, "1 file checked, no problems found"),
        (
            {"broken.yaml": "a: [1\n", "flat.yaml": FLAT_CLAIM},
            ["parse"],
            1,
            "1 error, 0 warnings in 2 files",
        ),
        (
            {"broken.yaml": "a: [1\n", "flat.yaml": FLAT_CLAIM},
            ["request-shape"],
            2,
            "1 error, 0 warnings in 2 files, 1 file unreadable",
        ),
    ],
    ids=["parse", "parse-ignored", "parse-ignored-with-findings", "other-rule-ignored"],
)
def test_ignore_makes_the_exit_code_match_the_summary(
    tmp_path: Path, files: dict[str, str], ignored: list[str], code: int, summary: str
) -> None:
    flags = [arg for rule in ignored for arg in ("--ignore", rule)]
    result = lint(*flags, str(write(tmp_path, files)))
    assert result[0] == code
    assert result[1].splitlines()[-1] == summary


# --------------------------------------------------------------------------- device classes


@pytest.mark.parametrize(
    ("files", "state", "found"),
    [
        (
            {"claim.yaml": CLAIM.format(device_class="gpu.nvdia.com")},
            True,
            [("claim.yaml", 11, "unknown-device-class")],
        ),
        (
            {"claim.yaml": CLAIM.format(device_class="gpu.nvdia.com"), "z.yaml": DEVICE_CLASSES},
            False,
            [("claim.yaml", 11, "unknown-device-class")],
        ),
        ({"t.yaml": TYPO_TEMPLATE}, True, [("t.yaml", 13, "unknown-device-class")]),
        ({"tenant.yaml": TYPO_TENANT}, True, [("tenant.yaml", 7, "unknown-device-class")]),
        ({"claim.yaml": CLAIM.format(device_class="gpu.nvdia.com")}, False, []),
        ({"claim.yaml": CLAIM.format(device_class="gpu.nvidia.com")}, True, []),
    ],
    ids=[
        "claim-state",
        "claim-classes-among-inputs",
        "template-subrequest-state",
        "tenant-state",
        "no-class-known",
        "known-class",
    ],
)
def test_unknown_device_classes(
    tmp_path: Path, files: dict[str, str], state: bool, found: list[tuple[str, int, str]]
) -> None:
    write(tmp_path / "in", files)
    state_flags = ["--state", str(write(tmp_path, {"state.yaml": DEVICE_CLASSES}) / "state.yaml")]
    code, out = lint(*(state_flags if state else []), str(tmp_path / "in"))
    assert where(out) == found
    assert code == 0  # a warning
    if found:
        assert "(fix: did you mean 'gpu.nvidia.com'?)" in out
        assert lint("--strict", *(state_flags if state else []), str(tmp_path / "in"))[0] == 1


def test_a_bad_state_file_exits_2(tmp_path: Path) -> None:
    write(tmp_path, {"state.yaml": FLAT_CLAIM.replace("ResourceClaim", "ConfigMap")})
    code, out = lint("--state", str(tmp_path / "state.yaml"), str(DATA / "clean"))
    assert code == 2
    assert "a state file holds only" in out


TENANT_BODY = "kind: Tenant\nmetadata: {name: a}\nspec:\n  namespaces: [a]\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            f"apiVersion: dragate.io/v1\n{TENANT_BODY}",
            'apiVersion: expected dragate.io/v1alpha1, got "dragate.io/v1" '
            '(did you mean "dragate.io/v1alpha1"?)',
        ),
        (
            f"apiVersion: dragte.io/v1alpha1\n{TENANT_BODY}",
            'apiVersion: expected dragate.io/v1alpha1, got "dragte.io/v1alpha1" '
            '(did you mean "dragate.io/v1alpha1"?)',
        ),
        (
            f"apiVersion: v1\n{TENANT_BODY}",
            'apiVersion: expected dragate.io/v1alpha1, got "v1"',
        ),
        (
            "apiVersion: dragate.io/v1\nkind: Tenantt\nmetadata: {name: a}\nspec: {}\n",
            "kind: expected one of Tenant, DeviceClassPolicy, LegacyResourceMapping, Settings, "
            'got "Tenantt" (did you mean "Tenant"?)',
        ),
        (
            "apiVersion: v1\nkind: Settings\nmetadata: {name: a}\n",
            'apiVersion: expected dragate.io/v1alpha1, got "v1"',
        ),
    ],
    ids=["version", "group-typo", "core-version", "group-and-kind", "settings"],
)
def test_a_policy_with_a_wrong_api_version_is_a_policy_error(
    tmp_path: Path, text: str, message: str
) -> None:
    write(tmp_path, {"p.yaml": text})
    code, out = lint("--strict", str(tmp_path / "p.yaml"))
    assert code == 1
    assert f": error policy: {message}\n" in out


def test_a_kind_of_another_group_is_no_policy(tmp_path: Path) -> None:
    """Capsule's Tenant (capsule.clastix.io) is not dragate's."""
    write(tmp_path, {"t.yaml": f"apiVersion: capsule.clastix.io/v1beta2\n{TENANT_BODY}"})
    assert lint("--strict", str(tmp_path / "t.yaml")) == (0, "1 file checked, no problems found\n")


def test_a_virtualenv_after_the_quick_start_is_not_linted(tmp_path: Path) -> None:
    site = ".venv/lib/python3.11/site-packages"
    write(
        tmp_path,
        {
            ".venv/pyvenv.cfg": "home = /usr/bin\n",
            f"{site}/pkg/bad.yaml": FLAT_CLAIM,
            "venv2/pyvenv.cfg": "home = /usr/bin\n",
            "venv2/lib/bad.yaml": FLAT_CLAIM,
            "deploy/claim.yaml": CLAIM.format(device_class="gpu.nvidia.com"),
        },
    )
    assert lint(str(tmp_path)) == (0, "1 file checked, no problems found\n")
