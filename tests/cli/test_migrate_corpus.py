"""`dragate migrate` over real repositories: example folders from KubeRay, KServe, Kubeflow
trainer, Volcano and LWS, plus reproductions of every shape that once broke it (see
tests/migrate_corpus/README.md).

Run twice in each mode, it must never crash, must change only GPU lines (measured: every
removed or added line of the diff lies inside a value that changed between the old and new
documents, or in a new ResourceClaimTemplate), leave every other file byte-identical, produce
objects the 1.34 API schema accepts (strict), explain each legacy request it leaves, and find
nothing to do on the second pass.
"""

from __future__ import annotations

import difflib
import json
import re
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import jsonpatch
import kubernetes_validate
import pytest
import yaml
from click.testing import CliRunner
from kubernetes_validate.utils import latest_version
from migrate_corpus_support import (
    CORPUS,
    HELM,
    HELM_CHARTS,
    HELM_OUTCOMES,
    checkable,
    masked,
    snapshot,
)
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq

from webhook.cli import main
from webhook.files.gotemplates import has_placeholders
from webhook.files.roundtrip import split_documents

LEGACY = ("nvidia.com/gpu", "nvidia.com/mig-")
TEMPLATE_FILES = {f"helm-charts/{name}" for name, outcome in HELM_OUTCOMES.items() if outcome[0]}
Step = str | int


def _ignored(folder: str, names: list[str]) -> set[str]:
    """Unreadable inputs, and whole charts (their own test migrates each chart together)."""
    charts = {(HELM / chart).parent: Path(chart).name for chart in HELM_CHARTS}
    return {"unreadable", charts.get(Path(folder), "")} & set(names)


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["migrate", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def migrated(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The corpus before, the outputs of each mode, and the tree after two `--write` runs."""
    work = tmp_path_factory.mktemp("corpus")
    shutil.copytree(CORPUS, work, dirs_exist_ok=True, ignore=_ignored)
    before = snapshot(work)
    outputs = {
        mode: run(*flags, str(work))
        for mode, flags in (("summary", []), ("check", ["--check"]), ("diff", ["--diff"]))
    }
    outputs["write"] = run("--write", str(work))
    after = snapshot(work)
    outputs["write-again"] = run("--write", str(work))
    outputs["check-again"] = run("--check", str(work))
    return {
        "work": work,
        "before": before,
        "after": after,
        "outputs": outputs,
        "again": snapshot(work),
    }


def test_modes_agree_and_exit_codes(migrated: dict[str, Any]) -> None:
    out = migrated["outputs"]
    assert [out[m][0] for m in ("summary", "check", "diff", "write")] == [0, 1, 0, 1]
    for mode in ("summary", "check", "diff", "write"):
        assert "Traceback" not in out[mode][1] + out[mode][2]
        assert "internal error" not in out[mode][2]
    changed = {k for k, v in migrated["after"].items() if migrated["before"].get(k) != v}
    left = out["summary"][2].count(" left (")
    assert out["summary"][2].splitlines()[-1] == (
        f"would migrate {len(changed)} file(s), {len(TEMPLATE_FILES)} template file(s) skipped, "
        f"{left} legacy request(s) left"
    )
    assert left >= 50
    assert len(changed) >= 30


def test_second_pass_changes_nothing(migrated: dict[str, Any]) -> None:
    """Nothing is left to change, but the legacy requests dragate cannot rewrite remain: the
    gate still fails, listing the very same ones `--write` listed."""
    assert migrated["again"] == migrated["after"]
    code, _, err = migrated["outputs"]["check-again"]
    assert code == 1, err
    assert "would migrate 0 file(s)" in err
    written = migrated["outputs"]["write"][2]
    assert _left(err) == _left(written) and _left(err)


def _left(err: str) -> list[str]:
    return sorted(line for line in err.splitlines() if " left (" in line)


def test_untouched_files_are_byte_identical(migrated: dict[str, Any]) -> None:
    """Every file the summary did not name is exactly as it was (JSON and templates too)."""
    named = {
        line.removeprefix("would migrate ")
        for line in migrated["outputs"]["summary"][1].splitlines()
    }
    work: Path = migrated["work"]
    for name, data in migrated["before"].items():
        if str(work / name) not in named:
            assert migrated["after"][name] == data, name
    for name in TEMPLATE_FILES:
        assert migrated["after"][name] == migrated["before"][name]
    assert any(n.endswith(".json") for n in migrated["before"])


def test_only_gpu_lines_change(migrated: dict[str, Any]) -> None:
    """Measured: the number of changed lines outside a changed value is zero (a JSON file
    wrapped in a `List` aside: its head line is counted apart, at most one per file)."""
    unrelated: list[str] = []
    changed_lines = 0
    for name, old in migrated["before"].items():
        new = migrated["after"][name]
        if old == new:
            continue
        if name.endswith(".json"):
            found, total, wrapper = unrelated_json_lines(old.decode(), new.decode())
            assert len(wrapper) <= 1, (name, wrapper)
        else:
            found, total = unrelated_lines(masked(old.decode()), masked(_unguarded(new)))
        unrelated += [f"{name}: {line}" for line in found]
        changed_lines += total
    assert changed_lines > 0
    assert unrelated == []


_CLAIM_GUARD = re.compile(
    r"^\s*\{\{- if \$\.Values\.[\w.]*[gG]puClaim \}\}\n((?:.*\n){3})\s*\{\{- end \}\}\n", re.M
)


def _unguarded(new: bytes) -> str:
    """A values-driven chart's template without the `{{- if $.Values.gpuClaim }}` /
    `{{- end }}` lines around the `resourceClaims` it gains (part of that change)."""
    return _CLAIM_GUARD.sub(r"\1", new.decode())


def test_changed_json_files_are_measured(migrated: dict[str, Any]) -> None:
    """The JSON cases are in the measurement: a single object (wrapped), a `List`, both
    indentations, a minified file; and their compact arrays stayed on one line."""
    changed = {
        n
        for n, d in migrated["before"].items()
        if n.endswith(".json") and migrated["after"][n] != d
    }
    assert {
        f"reproductions/{n}.json"
        for n in ("deployment-compact-arrays", "job-4space", "list-2space", "pod-minified")
    } <= changed
    after = migrated["after"]["reproductions/deployment-compact-arrays.json"].decode()
    assert '            "args": ["--port", "8000", "--workers", "2"],' in after.splitlines()


def test_output_is_strict_valid_for_1_34(migrated: dict[str, Any]) -> None:
    version = latest_version()
    assert tuple(int(p) for p in version.split(".")[:2]) >= (1, 34)
    checked = json_checked = 0
    for name, old in migrated["before"].items():
        new = migrated["after"][name]
        if old == new or not name.endswith((".yaml", ".yml", ".json")):
            continue
        for obj in _objects(name, new.decode()):
            kubernetes_validate.validate(obj, version, strict=True)
            checked += 1
            json_checked += name.endswith(".json")
    assert checked >= 30
    assert json_checked >= 8


def _objects(name: str, text: str) -> Iterator[dict[str, Any]]:
    """What `checkable` finds in a file; in a JSON `List`, in each of its items."""
    if not name.endswith(".json"):
        yield from checkable(masked(text), templated=has_placeholders(text))
        return
    data = json.loads(text)
    for item in data["items"] if data.get("kind") == "List" else [data]:
        found = list(checkable(json.dumps(item)))
        assert found, (name, item.get("kind"))
        yield from found


def test_every_legacy_request_left_is_explained(migrated: dict[str, Any]) -> None:
    """A file that still holds a legacy name after `--write` got a note or was skipped."""
    err = migrated["outputs"]["write"][2]
    work: Path = migrated["work"]
    for name in TEMPLATE_FILES:
        assert f"{work / name}: template file, skipped" in err
    for name, data in migrated["after"].items():
        if name in TEMPLATE_FILES:
            continue
        text = masked(data.decode())
        if any(marker in text for marker in LEGACY) and legacy_in_resources(text):
            assert f"{work / name}: " in err, name


def unrelated_lines(old: str, new: str) -> tuple[list[str], int]:
    """The diff lines of one file that lie outside every changed value, and all diff lines."""
    old_docs = [h + b for h, b, _ in split_documents(old)]
    new_docs = [h + b for h, b, _ in split_documents(new)]
    found: list[str] = []
    total = 0
    for index, new_doc in enumerate(new_docs):
        if index >= len(old_docs):
            assert yaml.safe_load(new_doc)["kind"] == "ResourceClaimTemplate"
            continue
        removed, added = _changed_lines(old_docs[index], new_doc)
        total += len(removed) + len(added)
        patch = jsonpatch.make_patch(_plain(old_docs[index]), _plain(new_doc)).patch
        gone = [_pointer(op["path"]) for op in patch if op["op"] in ("remove", "replace")]
        came = [_pointer(op["path"]) for op in patch if op["op"] in ("add", "replace")]
        parents = [c[:-1] for c in gone + came]
        found += _outside(old_docs[index], removed, gone, "-", parents=parents)
        found += _outside(new_doc, added, came, "+", parents=parents)
    return found, total


def unrelated_json_lines(old: str, new: str) -> tuple[list[str], int, list[str]]:
    """`unrelated_lines` for a JSON file, and the `List` head lines of a wrapped object.

    The templates dragate adds are items of the new `List` (ahead of the old items, or after
    the single object it wraps): their lines count as new, the other items are measured
    against their old selves. JSON cannot drop the last entry of an object without taking the
    comma off the line before, so lines are compared without a trailing comma.
    """
    before, after = json.loads(old), json.loads(new)
    counterpart, where = _json_counterpart(before, after)
    removed, added = _changed_lines(old, new, strip=",")
    patch = jsonpatch.make_patch(before, counterpart).patch
    gone = [_pointer(op["path"]) for op in patch if op["op"] in ("remove", "replace")]
    came = [_pointer(op["path"]) for op in patch if op["op"] in ("add", "replace")]
    new_owners = {
        n: [q for p in paths if (q := where(p)) is not None]
        for n, paths in line_paths(new).items()
        if all(where(p) is not None for p in paths)
    }
    wrapper = [
        new.splitlines()[n]
        for n, paths in new_owners.items()
        if n in added and any(p == WRAPPER for p in paths)
    ]
    parents = [c[:-1] for c in gone + came]
    found = _outside(old, removed, gone, "-", parents=parents)
    found += _outside(
        new, [n for n in added if n in new_owners], came, "+", owners=new_owners, parents=parents
    )
    return [f for f in found if f[1:] not in wrapper], len(removed) + len(added), wrapper


WRAPPER = ("<List head>",)


def _json_counterpart(old: Any, new: Any) -> tuple[Any, Any]:
    """The new document shaped as the old one, and where a path of the new one lands in it
    (None: inside a template dragate added; WRAPPER: the `List` head of a wrapped object)."""
    if not (isinstance(new, dict) and new.get("kind") == "List"):
        return new, lambda path: path
    items = new["items"]
    if not (isinstance(old, dict) and old.get("kind") == "List"):
        assert items[0] == _json_counterpart_item(old, items[0])
        assert all(_added_template(i) for i in items[1:])
        return (
            items[0],
            lambda path: (
                path[2:]
                if path[:2] == ("items", "0")
                else None
                if path[:1] == ("items",) and len(path) > 1
                else WRAPPER
            ),
        )
    kept = [i for i, item in enumerate(items) if not _added_template(item)]

    def where(path: tuple[str, ...]) -> tuple[str, ...] | None:
        if path[:1] != ("items",) or len(path) < 2:
            return path
        index = int(path[1])
        return ("items", str(kept.index(index)), *path[2:]) if index in kept else None

    return {**new, "items": [items[i] for i in kept]}, where


def _json_counterpart_item(old: Any, item: Any) -> Any:
    return item if isinstance(old, dict) else old


def _added_template(item: Any) -> bool:
    return (
        isinstance(item, dict)
        and item.get("kind") == "ResourceClaimTemplate"
        and item["metadata"].get("labels", {}).get("app.kubernetes.io/managed-by") == "dragate"
    )


def _changed_lines(old: str, new: str, strip: str = "") -> tuple[list[int], list[int]]:
    removed: list[int] = []
    added: list[int] = []
    before = [line.rstrip().removesuffix(strip) for line in old.splitlines()]
    after = [line.rstrip().removesuffix(strip) for line in new.splitlines()]
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            removed.extend(range(i1, i2))
            added.extend(range(j1, j2))
    return removed, added


def _plain(text: str) -> Any:
    body = text.split("\n", 1)[1] if text.startswith("---") else text
    return yaml.safe_load(body) if body.strip() else None


def _pointer(pointer: str) -> tuple[str, ...]:
    return tuple(jsonpatch.JsonPointer(pointer).parts)


def _outside(
    text: str,
    lines: list[int],
    changed: list[tuple[str, ...]],
    sign: str,
    *,
    owners: dict[int, list[tuple[str, ...]]] | None = None,
    parents: Sequence[tuple[str, ...]] = (),
) -> list[str]:
    """Lines none of whose value paths is inside a changed path, or is the collection holding
    a change (`parents`: a collection on one line changes on its line; blank lines count as
    inside)."""
    owners = line_paths(text) if owners is None else owners
    all_lines = text.splitlines()
    out = []
    for number in lines:
        paths = owners.get(number)
        if not all_lines[number].strip() or not paths:
            continue
        if not any(p[: len(c)] == c for p in paths for c in changed) and not any(
            p in parents for p in paths
        ):
            out.append(f"{sign}{all_lines[number]}")
    return out


def line_paths(text: str) -> dict[int, list[tuple[str, ...]]]:
    """The key and item paths starting on each line (0-based lines of `text`, its `---`
    included); a line where none starts has the last one before it."""
    offset = 1 if text.startswith("---") else 0
    body = text.split("\n", 1)[1] if offset else text
    loader = YAML(typ="rt", pure=True)
    loader.allow_duplicate_keys = True
    node = loader.load(body)
    owners: dict[int, list[tuple[str, ...]]] = {}
    for line, path in _walk(node, ()):
        owners.setdefault(line + offset, []).append(path)
    last: list[tuple[str, ...]] | None = None
    for number in range(len(text.splitlines())):
        if number in owners:
            last = owners[number][-1:]
        elif last is not None:
            owners[number] = last
    return owners


def _walk(node: Any, path: tuple[str, ...]) -> Iterator[tuple[int, tuple[str, ...]]]:
    if isinstance(node, CommentedMap):
        for key, value in node.items():
            yield node.lc.key(key)[0], (*path, str(key))
            yield from _walk(value, (*path, str(key)))
    elif isinstance(node, CommentedSeq):
        for index, value in enumerate(node):
            yield node.lc.item(index)[0], (*path, str(index))
            yield from _walk(value, (*path, str(index)))


def legacy_in_resources(text: str) -> bool:
    found = False

    def walk(node: Any) -> None:
        nonlocal found
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("limits", "requests") and isinstance(value, dict):
                    found |= any(str(n).startswith(LEGACY) for n in value)
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    for doc in yaml.safe_load_all(text):
        walk(doc)
    return found


def test_unreadable_examples_fail_alone() -> None:
    """Real examples that are not YAML (`{username}/image`) fail with file:line, exit 2, and
    do not stop the other files."""
    code, out, err = run(str(CORPUS / "unreadable"), str(CORPUS / "reproductions" / "katib.yaml"))
    assert code == 2
    assert "not valid YAML" in err and "Traceback" not in err
    assert out.strip().endswith("katib.yaml")
