"""How a directory is walked: which files `--exclude` drops, which files hold no object."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import pytest
from repo_tree import CLAIM, FOREIGN, repository, write

from webhook.files.manifests import Found, excluded, parse_found, walk


@pytest.mark.parametrize(
    ("path", "pattern", "matched"),
    [
        ("a/b/values.yaml", "values.yaml", True),
        ("a/b/values-prod.yaml", "values*.yaml", True),
        ("node_modules/x/package.json", "node_modules", True),
        ("a/node_modules/x.json", "node_modules", True),
        ("charts/gpu/templates/d.yaml", "charts/*/templates", True),
        ("charts/gpu/templates/d.yaml", "charts/*", True),
        ("charts/gpu/templates/d.yaml", "/charts/", True),
        ("deploy/old.yaml", "deploy/old.yaml", True),
        ("deploy/old.yaml", "old.yaml", True),
        ("x/deploy/old.yaml", "deploy/old.yaml", False),
        ("x/deploy/old.yaml", "*/deploy/old.yaml", True),
        ("deploy/new.yaml", "old.yaml", False),
        ("deploy/old.yaml", "Old.yaml", False),
        ("deploy/old.yaml", "", False),
    ],
    ids=[
        "basename",
        "basename-glob",
        "directory-at-root",
        "directory-below",
        "path-glob-directory",
        "star-crosses-slash",
        "slashes-stripped",
        "relative-path",
        "basename-of-path",
        "path-anchored-at-the-directory",
        "path-with-leading-star",
        "other-file",
        "case-sensitive",
        "empty-pattern",
    ],
)
def test_excluded(path: str, pattern: str, matched: bool) -> None:
    assert excluded(PurePosixPath(path), [pattern]) == matched


def test_walk_relative_to_each_directory_and_keeps_named_files(tmp_path: Path) -> None:
    root = repository(tmp_path / "repo")
    named = str(root / "charts" / "gpu" / "values.yaml")
    found = list(walk([str(root), named], ["charts"]))
    assert Found(named, named=True) in found
    assert not any("charts" in f.path for f in found if not f.named)
    assert Found(str(root / "deploy" / "claim.yaml"), named=False) in found


@pytest.mark.parametrize("name", sorted(FOREIGN), ids=sorted(FOREIGN))
def test_a_walked_file_with_no_object_is_skipped(tmp_path: Path, name: str) -> None:
    path = repository(tmp_path) / name
    assert parse_found(Found(str(path), named=False)) is None


def test_a_walked_manifest_is_read(tmp_path: Path) -> None:
    path = repository(tmp_path) / "deploy" / "claim.yaml"
    parsed = parse_found(Found(str(path), named=False))
    assert parsed is not None
    assert parsed.text == CLAIM.format(device_class="gpu.nvidia.com")
    assert [d.data["kind"] for d in parsed.documents] == ["ResourceClaim"]


NOT_THE_USERS = {
    ".venv/lib/python3.11/site-packages/pkg/claim.yaml": CLAIM,
    "env/pyvenv.cfg": "home = /usr/bin\n",
    "env/lib/site/claim.yaml": CLAIM,
    "web/node_modules/x/claim.yaml": CLAIM,
    "src/__pycache__/claim.yaml": CLAIM,
    ".git/refs/claim.yaml": CLAIM,
    ".cache/claim.yaml": CLAIM,
}


@pytest.mark.parametrize("name", sorted(NOT_THE_USERS), ids=sorted(NOT_THE_USERS))
def test_a_walk_skips_directories_that_are_not_the_users(tmp_path: Path, name: str) -> None:
    venv = {"env/pyvenv.cfg": NOT_THE_USERS["env/pyvenv.cfg"]}
    write(tmp_path, {"deploy/claim.yaml": CLAIM, **venv, name: NOT_THE_USERS[name]})
    assert [Path(f.path).relative_to(tmp_path).as_posix() for f in walk([str(tmp_path)])] == [
        "deploy/claim.yaml"
    ]


@pytest.mark.parametrize(
    "directory", [".venv", "env", "web/node_modules", ".git"], ids=lambda d: d.replace("/", "-")
)
def test_a_skipped_directory_named_on_the_command_line_is_walked(
    tmp_path: Path, directory: str
) -> None:
    write(tmp_path, NOT_THE_USERS)
    found = [f.path for f in walk([str(tmp_path / directory)])]
    assert found and all(not f.named for f in walk([str(tmp_path / directory)]))
    assert all(Path(f).suffix == ".yaml" for f in found)
