"""`dragate migrate` over public Helm charts that ask for GPUs (tests/migrate_corpus/helm-charts,
sources in its README): each file's outcome is pinned, a second pass changes nothing, and
`--check` fails exactly on the files where a legacy request remains."""

from __future__ import annotations

import re
import shutil
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner
from migrate_corpus_support import HELM, HELM_OUTCOMES, Outcome

from webhook.cli import main

NAMES = sorted(HELM_OUTCOMES)


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
    files = {str(p.relative_to(HELM)) for p in HELM.rglob("*.yaml")}
    assert files == set(HELM_OUTCOMES)
    assert len(files) >= 20
    index = (HELM / "README.md").read_text()
    assert all(f"`{name}`" in index for name in files)


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
    assert f"{migrated} file of {total} ({share}%) migrates whole" in docs
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
