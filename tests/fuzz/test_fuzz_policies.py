"""Fuzzing the policy loader: random text, mutated example policies, mangled YAML.

A hot reload reads whatever is in the directory, half-written files included, so the loader
must answer with a PolicySet or a PolicyError listing problems; any other exception would
be a loader bug (the watcher would still keep the last good set, but the problems would not
be reported as `file:line: message`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from fuzz.fuzz_support import drop_removed, fuzz_settings, mutated
from hypothesis import given
from hypothesis import strategies as st

from webhook.policy.loading import PolicyError, default_policy_dir, parse_policies
from webhook.types import PolicySet

EXAMPLES = sorted(default_policy_dir().glob("*.yaml"))
TEXTS = [p.read_text() for p in EXAMPLES]
DOCUMENTS = [d for text in TEXTS for d in yaml.safe_load_all(text) if d]


def load(text: str) -> PolicySet | None:
    try:
        return parse_policies(text, "fuzz.yaml")
    except PolicyError as err:
        assert err.problems, "a PolicyError must list its problems"
        for problem in err.problems:
            assert str(problem).startswith("fuzz.yaml"), str(problem)
        return None


def test_examples_load() -> None:
    assert load("\n---\n".join(TEXTS)) is not None


@fuzz_settings(300)
@given(text=st.text(max_size=400))
def test_random_text(text: str) -> None:
    load(text)


@fuzz_settings(250)
@given(data=st.data(), others=st.lists(st.sampled_from(DOCUMENTS), max_size=2))
def test_mutated_documents(data: st.DataObject, others: list[dict[str, Any]]) -> None:
    document = drop_removed(data.draw(mutated(data.draw(st.sampled_from(DOCUMENTS)), huge=False)))
    text = yaml.safe_dump_all([document, *others], allow_unicode=True)
    load(text)


@st.composite
def mangled(draw: st.DrawFn) -> str:
    """An example file with a few characters inserted, deleted or replaced: a bad edit."""
    text = draw(st.sampled_from(TEXTS))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(text)))
        insert = draw(
            st.sampled_from(
                [
                    "",
                    ":",
                    " ",
                    "\n",
                    "-",
                    "'",
                    "[",
                    "{",
                    "\t",
                    "&a",
                    "*a",
                    "!!python/object",
                    "%",
                    "\x00",
                    "ü",
                    "0x",
                    "~",
                ]
            )
        )
        cut = draw(st.integers(0, 3))
        text = text[:at] + insert + text[at + cut :]
    return text


@fuzz_settings(400)
@given(text=mangled())
def test_mangled_files(text: str) -> None:
    load(text)


def test_half_written_file(tmp_path: Path) -> None:
    """Every prefix of a policy file (a write caught midway) loads or is a PolicyError."""
    text = TEXTS[-1]
    for end in range(0, len(text), 7):
        load(text[:end])
