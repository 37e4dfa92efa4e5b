"""`dragate migrate`: modes, exit codes, formats, and what it must never touch."""

from __future__ import annotations

import json
import shutil
import stat
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from repo_tree import LEGACY_POD, repository, write

from webhook.cli import main

DATA = Path(__file__).parent / "data" / "migrate"
GOOD = ["deploy.yaml", "pod.json", "list.yaml", "clean.yaml", "has-template.yaml"]


@pytest.fixture
def work(tmp_path: Path) -> Path:
    for name in [*GOOD, "broken.yaml"]:
        shutil.copy(DATA / name, tmp_path / name)
    shutil.copytree(DATA / "policies", tmp_path / "policies")
    return tmp_path


def run(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["migrate", *args], input=stdin)
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize(
    ("flag", "files", "code"),
    [
        ([], ["deploy.yaml"], 0),
        (["--check"], ["deploy.yaml"], 1),
        (["--check"], ["clean.yaml"], 0),
        (["--diff"], ["deploy.yaml"], 0),
        (["--check"], ["broken.yaml", "deploy.yaml"], 2),
    ],
    ids=["dry-run", "check-work", "check-clean", "diff", "broken-among-good"],
)
def test_exit_codes(work: Path, flag: list[str], files: list[str], code: int) -> None:
    before = {f: (work / f).read_bytes() for f in files}
    status, _, _ = run(*flag, *(str(work / f) for f in files))
    assert status == code
    assert {f: (work / f).read_bytes() for f in files} == before  # only --write writes


def test_broken_file_is_reported_and_others_processed(work: Path) -> None:
    status, out, err = run(str(work / "broken.yaml"), str(work / "deploy.yaml"))
    assert status == 2
    assert f"{work / 'broken.yaml'}:4: not valid YAML" in err
    assert "would migrate" in out and "deploy.yaml" in out


def test_write_keeps_comments_and_untouched_documents(work: Path) -> None:
    original = (work / "deploy.yaml").read_text()
    status, _, _ = run("--write", str(work / "deploy.yaml"))
    text = (work / "deploy.yaml").read_text()
    assert status == 0
    assert text.startswith(original.split("---")[0])  # first document byte-identical
    for kept in ("# keep me", "# volumes follow", 'image: "server:1"', "# Inference server"):
        assert kept in text
    assert "- name: gpu-server  # one GPU\n" in text  # the removed line's comment
    assert text.index("claims:") < text.index("# volumes follow")
    docs = list(yaml.safe_load_all(text))
    assert [d["kind"] for d in docs] == ["ConfigMap", "Deployment", "ResourceClaimTemplate"]
    assert docs[2]["metadata"]["namespace"] == "ml"


def test_write_is_idempotent_and_keeps_mode(work: Path) -> None:
    target = work / "deploy.yaml"
    target.chmod(0o640)
    run("--write", str(target))
    once = target.read_bytes()
    status, out, _ = run("--write", str(target))
    assert status == 0 and "migrated" not in out
    assert target.read_bytes() == once
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert run("--check", str(target))[0] == 0


def test_json_stays_json(work: Path) -> None:
    run("--write", str(work / "pod.json"))
    text = (work / "pod.json").read_text()
    data = json.loads(text)
    assert data["kind"] == "List"
    assert [i["kind"] for i in data["items"]] == ["Pod", "ResourceClaimTemplate"]
    lines, original = text.splitlines(), (DATA / "pod.json").read_text().splitlines()
    assert lines[0] == '{"apiVersion": "v1", "kind": "List", "items": ['
    assert lines[1:4] == original[:3] and lines[6] == original[5]  # the Pod's lines kept
    assert lines[7:9] == [", {", '    "apiVersion": "resource.k8s.io/v1",']  # its indent
    assert text.endswith("\n]}\n")


def test_list_items_are_migrated(work: Path) -> None:
    run("--write", str(work / "list.yaml"))
    docs = list(yaml.safe_load_all((work / "list.yaml").read_text()))
    job = docs[0]["items"][0]
    assert job["spec"]["template"]["spec"]["resourceClaims"][0]["name"] == "gpu-j"
    assert docs[1]["kind"] == "ResourceClaimTemplate"


def test_templates_already_present_are_not_repeated(work: Path) -> None:
    run("--write", str(work / "has-template.yaml"))
    kinds = [d["kind"] for d in yaml.safe_load_all((work / "has-template.yaml").read_text())]
    assert kinds == ["ResourceClaimTemplate", "Pod"]


def test_templates_out(work: Path) -> None:
    out_file = work / "templates.yaml"
    run(
        "--write",
        "--templates-out",
        str(out_file),
        str(work / "deploy.yaml"),
        str(work / "list.yaml"),
    )
    kinds = [d["kind"] for d in yaml.safe_load_all((work / "deploy.yaml").read_text())]
    assert "ResourceClaimTemplate" not in kinds
    names = [d["metadata"]["name"] for d in yaml.safe_load_all(out_file.read_text())]
    assert len(names) == 2  # ml/... and the List's namespace-less one


def test_templates_out_json_keeps_a_json_object_single(work: Path) -> None:
    """`--templates-out x.json` writes a JSON `List`; the migrated JSON Pod stays one object."""
    out_file = work / "templates.json"
    status, _, err = run("--write", "--templates-out", str(out_file), str(work / "pod.json"))
    assert status == 0, err
    assert json.loads((work / "pod.json").read_text())["kind"] == "Pod"
    written = json.loads(out_file.read_text())
    assert written["kind"] == "List"
    assert [i["kind"] for i in written["items"]] == ["ResourceClaimTemplate"]


def test_stdin_prints_result() -> None:
    text = (DATA / "deploy.yaml").read_text()
    status, out, err = run("-", stdin=text)
    assert status == 0
    assert "claims:" in out and "# keep me" in out
    assert "<stdin>: dragate:" in err
    assert "<stdin>:22: nvidia.com/gpu: migrated in the output" in err
    assert "--write" not in err  # standard input has no file to write


def test_diff_is_unified(work: Path) -> None:
    _, out, _ = run("--diff", str(work / "deploy.yaml"))
    assert out.startswith(f"--- a/{work / 'deploy.yaml'}")
    assert "-            nvidia.com/gpu: 1   # one GPU" in out


def test_directory_is_searched(work: Path) -> None:
    status, out, _ = run("--check", str(work))
    assert status == 2  # broken.yaml is in it
    assert out.count("would migrate") == 4


def test_policies_change_the_action(work: Path) -> None:
    """A Warn mapping leaves the request as it is: nothing to migrate, yet a legacy request
    remains, so the gate still fails and says why."""
    status, out, err = run(
        "--check", "--policies", str(work / "policies"), str(work / "deploy.yaml")
    )
    assert status == 1
    assert "legacy GPU request" in err and "would migrate" not in out
    assert "nvidia.com/gpu left (the mapping's action is Warn)" in err


@pytest.mark.parametrize(
    ("exclude", "code", "written"),
    [
        ([], 1, True),
        (["legacy"], 0, False),
        (["legacy/*.yaml"], 0, False),
        (["pod.yaml"], 0, False),
        (["deploy"], 1, True),
    ],
    ids=["none", "directory-name", "relative-glob", "basename", "other-directory"],
)
def test_exclude(tmp_path: Path, exclude: list[str], code: int, written: bool) -> None:
    root = write(repository(tmp_path), {"legacy/pod.yaml": LEGACY_POD})
    # the chart's values.yaml asks for a GPU too (a leftover migrate cannot rewrite)
    flags = [arg for pattern in ["charts", *exclude] for arg in ("--exclude", pattern)]
    assert run("--check", *flags, str(root))[0] == code
    run("--write", *flags, str(root))
    assert ((root / "legacy" / "pod.yaml").read_text() != LEGACY_POD) == written
