"""`dragate migrate` over public Helm charts that ask for GPUs (tests/migrate_corpus/helm-charts,
sources in its README): each file's outcome is pinned, a second pass changes nothing, and
`--check` fails exactly on the files where a legacy request remains."""

from __future__ import annotations

import difflib
import os
import re
import shutil
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from e2e.toolchain_bins import ToolchainMissing, require_binaries, toolchain_bin_dir
from migrate_corpus_support import HELM, HELM_CHARTS, HELM_OUTCOMES, Outcome, snapshot

from webhook.cli import main
from webhook.rewrite import pod_specs

NAMES = sorted(HELM_OUTCOMES)
CHARTS = sorted(HELM_CHARTS)
RENDERED_LWS = "NVIDIA+nim-deploy/rendered/nim-llm-multinode-lws.yaml"


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["migrate", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, result.stderr


def outcome(err: str, changed: bool) -> Outcome:
    skipped = re.search(r"template file, skipped: (.*?)(?: \(it mentions|$)", err, re.M)
    reasons = [_category(r) for r in re.findall(r" left \((.*)\)$", err, re.M)]
    return Outcome(skipped.group(1) if skipped else "", changed, dict(Counter(reasons)))


def _category(reason: str) -> str:
    return "unparseable template" if reason.startswith("template not migrated") else reason


def test_the_corpus_is_what_the_index_lists() -> None:
    charts = [HELM / chart for chart in HELM_CHARTS]
    files = {
        str(p.relative_to(HELM))
        for p in HELM.rglob("*.yaml")
        if not any(p.is_relative_to(chart) for chart in charts)
    }
    assert files == set(HELM_OUTCOMES)
    assert len(files) >= 20
    index = (HELM / "README.md").read_text()
    assert all(f"`{name}`" in index for name in [*files, *(f"{c}/" for c in HELM_CHARTS)])


@pytest.mark.parametrize("name", NAMES, ids=NAMES)
def test_each_file_outcome_is_pinned(tmp_path: Path, name: str) -> None:
    path = tmp_path / Path(name).name
    shutil.copy(HELM / name, path)
    before = path.read_text()
    code, err = run("--write", str(path))
    found = outcome(err, path.read_text() != before)
    assert found == HELM_OUTCOMES[name], err
    assert "Traceback" not in err and "internal error" not in err
    assert code == (1 if found.left else 0)
    once = path.read_text()
    again, err = run("--write", str(path))
    assert path.read_text() == once
    assert again == code
    check, err = run("--check", str(path))
    assert check == (1 if found.left else 0), err
    assert f"{path}:" in err if found.left else " left (" not in err


def test_check_over_the_corpus_fails_while_requests_remain(tmp_path: Path) -> None:
    shutil.copytree(HELM, tmp_path, dirs_exist_ok=True)
    code, err = run("--check", str(tmp_path))
    left = sum(sum(o.left.values()) for o in HELM_OUTCOMES.values())
    assert code == 1
    assert err.count(" left (") == left
    assert err.splitlines()[-1].endswith(f"{left} legacy request(s) left")


def test_docs_state_the_measurement() -> None:
    """docs/cli.md gives the share migrated and each reason counted, as pinned here."""
    docs = " ".join((Path(__file__).parents[2] / "docs" / "cli.md").read_text().split())
    total, migrated = len(HELM_OUTCOMES), sum(o.migrated for o in HELM_OUTCOMES.values())
    share = round(100 * migrated / total)
    files, verb = ("file", "migrates") if migrated == 1 else ("files", "migrate")
    assert f"{migrated} {files} of {total} ({share}%) {verb} whole" in docs
    left = [o for o in HELM_OUTCOMES.values() if o.left]
    reasons: Counter[str] = Counter()
    files: Counter[str] = Counter()
    for found in left:
        reasons.update(found.left)
        files.update(found.left.keys())
    assert f"the other {len(left)} keep {sum(reasons.values())} legacy requests" in docs
    docs = docs.replace("template not migrated", "unparseable template")
    for reason, count in reasons.items():
        assert f"`{reason}` {count} ({files[reason]} files" in docs, reason


@pytest.mark.parametrize("chart", CHARTS, ids=CHARTS)
def test_each_values_driven_chart_migrates_whole(tmp_path: Path, chart: str) -> None:
    """The values file and the templates rendering its `resources` change together: nothing is
    left, no key of an exclusive branch is called a duplicate, the count's reads are reads."""
    shutil.copytree(HELM / chart, tmp_path, dirs_exist_ok=True)
    before = snapshot(tmp_path)
    code, err = run("--write", str(tmp_path))
    after = snapshot(tmp_path)
    changed = {name for name, text in after.items() if before.get(name) != text}
    pinned = HELM_CHARTS[chart]
    assert (code, frozenset(changed)) == (0, pinned.changed), err
    assert " left (" not in err and "duplicate key" not in err and "Traceback" not in err
    found = re.findall(
        r"^.*/(templates/\S+):(\d+): nvidia.com/gpu: reads the count; now reads", err, re.M
    )
    assert found == [(f, str(n)) for f, lines in pinned.reads.items() for n in lines], err
    assert "(no request)" not in err and "of a migrated request" not in err
    again, err = run("--write", str(tmp_path))
    assert (again, snapshot(tmp_path)) == (0, after), err
    assert run("--check", str(tmp_path))[0] == 0


@pytest.fixture(scope="module")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    if os.environ.get("DRAGATE_SKIP_E2E") == "1":
        pytest.skip("DRAGATE_SKIP_E2E=1: rendering needs the toolchain's helm")
    try:
        yield require_binaries(toolchain_bin_dir(), ("helm",)) / "helm"
    except ToolchainMissing as error:
        pytest.fail(str(error), pytrace=False)


def render(helm: Path, chart: Path, *flags: str) -> list[dict[str, Any]]:
    home = chart.parent / "helm-home"
    env = {**os.environ, **{f"HELM_{d}_HOME": str(home / d) for d in ("CACHE", "CONFIG", "DATA")}}
    result = subprocess.run(
        [str(helm), "template", "rel", str(chart), *flags],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


RENDERINGS = [
    ("NVIDIA+nim-deploy/helm/nim-llm", (), ("StatefulSet",)),
    ("NVIDIA+nim-deploy/helm/nim-llm", ("--set", "statefulSet.enabled=false"), ("Deployment",)),
    ("NVIDIA+nim-deploy/helm/nim-llm", ("--set", "multiNode.enabled=true"), ("LeaderWorkerSet",)),
    (
        "NVIDIA+nim-deploy/helm/nim-llm",
        ("--set", "multiNode.enabled=true", "--set", "multiNode.leaderWorkerSet.enabled=false"),
        ("MPIJob",),
    ),
    ("substratusai+helm/charts/text-generation-inference", (), ("Deployment",)),
    ("../reproductions/chart", (), ("Deployment",)),
]


@pytest.mark.parametrize(
    ("chart", "flags", "kinds"),
    RENDERINGS,
    ids=["nim-llm", "nim-llm-deployment", "nim-llm-lws", "nim-llm-mpijob", "tgi", "reproduction"],
)
def test_a_migrated_chart_renders_claims(
    helm: Path, tmp_path: Path, chart: str, flags: tuple[str, ...], kinds: tuple[str, ...]
) -> None:
    """`helm template` of the migrated chart: every pod spec of the workload asks for its GPUs
    through a claim made from the release's ResourceClaimTemplate, and none by name."""
    work = tmp_path / "chart"
    shutil.copytree(HELM / chart, work)
    run("--write", str(work))
    docs = render(helm, work, *flags)
    templates = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ResourceClaimTemplate"}
    assert templates["rel-gpu"]["spec"]["spec"]["devices"]["requests"] == [
        {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 1}}
    ]
    workloads = [d for d in docs if d["kind"] in kinds]
    specs = [spec for d in workloads for spec in pod_specs(d) if _gpu_containers(spec)]
    assert workloads and specs
    for spec in specs:
        assert spec["resourceClaims"] == [{"name": "gpu", "resourceClaimTemplateName": "rel-gpu"}]
    assert "nvidia.com/gpu:" not in yaml.safe_dump_all(docs)
    if chart.endswith("text-generation-inference"):
        env = specs[0]["containers"][0]["env"]
        assert {"name": "NUM_SHARD", "value": "1"} in env


def _gpu_containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        c
        for c in spec["containers"]
        if {"name": "gpu"} in ((c.get("resources") or {}).get("claims") or [])
    ]


def test_the_rendered_lws_changes_only_gpu_lines(tmp_path: Path) -> None:
    """`helm template` output (nim-llm's multi-node LeaderWorkerSet) migrates as manifests do:
    the lines that change are the GPU requests, the claims replacing them, the annotation
    recording it and the ResourceClaimTemplate after the last document (tests/cli/
    test_migrate_corpus.py measures the same file among the whole corpus)."""
    path = tmp_path / "lws.yaml"
    shutil.copy(HELM / RENDERED_LWS, path)
    before = path.read_text()
    code, err = run("--write", str(path))
    after = path.read_text()
    assert code == 0 and " left (" not in err, err
    template = after.index("kind: ResourceClaimTemplate")
    diff = list(difflib.ndiff(before.splitlines(), after[:template].splitlines()))
    removed = [line[2:].strip() for line in diff if line.startswith("- ")]
    added = [line[2:].strip() for line in diff if line.startswith("+ ")]
    assert removed == ["{}", "limits:", "nvidia.com/gpu: 1"] * 2
    assert added == [
        "dragate.io/rewritten: nvidia.com/gpu",
        "claims:",
        "- name: gpu-nim-leader",
        "resourceClaims:",
        "- name: gpu-nim-leader",
        "resourceClaimTemplateName: dragate-gpu-nvidia-com-1",
        "dragate.io/rewritten: nvidia.com/gpu",
        "claims:",
        "- name: gpu-nim-worker",
        "resourceClaims:",
        "- name: gpu-nim-worker",
        "resourceClaimTemplateName: dragate-gpu-nvidia-com-1",
        "---",
        "apiVersion: resource.k8s.io/v1",
    ]
