"""Install snippets run as written: dragate is not on a package registry, so every snippet
installs from the repository, pinned to a commit that exists in it (no release tag exists)."""

from __future__ import annotations

import re
import subprocess

import pytest
from docs_support import REPO

PAGES = [
    REPO / "README.md",
    REPO / "charts" / "dragate" / "README.md",
    *(REPO / "docs").glob("*.md"),
]
PIN = re.compile(r"(?:\brev:\s*|git\+https://\S+?@)([0-9A-Za-z._-]+)")


def _commits() -> set[str]:
    listed = subprocess.run(
        ["git", "rev-list", "--all"], cwd=REPO, capture_output=True, text=True, check=True
    )
    return set(listed.stdout.split())


def _pins() -> list[tuple[str, str]]:
    return [(p.relative_to(REPO).as_posix(), m) for p in PAGES for m in PIN.findall(p.read_text())]


def test_no_snippet_installs_dragate_from_a_registry() -> None:
    found = [p.name for p in PAGES if re.search(r"pip install dragate\b(?!\s*@)", p.read_text())]
    assert not found


def test_there_are_pins_to_check() -> None:
    assert len(_pins()) >= 3


@pytest.mark.parametrize(("page", "pin"), _pins(), ids=[f"{p}:{r[:12]}" for p, r in _pins()])
def test_every_pin_is_a_commit_of_this_repository(page: str, pin: str) -> None:
    assert re.fullmatch(r"[0-9a-f]{40}", pin), f"{page}: {pin} is no full commit sha"
    assert pin in _commits(), f"{page}: {pin} is not a commit of this repository"
