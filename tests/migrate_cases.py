"""Manifests for proving `dragate migrate`'s skip rule: real inputs and fuzz-style variants.

Every golden input, every CLI fixture and the benchmark's manifest, each also with its GPU
names renamed away (so that realistic documents take the skip path), joined into multi-document
files, and broken by seeded random edits (so that the skip path meets what libyaml and ruamel
may judge differently). `outcome` runs one text through the real migration.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from unittest import mock

from ruamel.yaml import YAML

from webhook.cli.migrate import Run, migrate_text, skip_rule
from webhook.files import roundtrip
from webhook.files.roundtrip import split_documents
from webhook.files.yamlio import YamlError, to_plain
from webhook.policy.loading import default_mappings
from webhook.rewrite import rewrite_object

TESTS = Path(__file__).parent
RENAMES = (
    ("nvidia.com/gpu", "example.com/gpu"),
    ("nvidia.com/mig-", "example.com/mig-"),
    ("ResourceClaimTemplate", "ResourceClaimPattern"),
)
NOISE = [*":[]{}\"'-#&*!|>%@`?,\t\n ", "\\", "---\n", "- ", ": ", "0b_", "\x07", "  "]
BROKEN_PER_TEXT = 40


def base_texts() -> dict[str, str]:
    """Every YAML input the tests already trust, by name."""
    golden = sorted((TESTS / "rewrite" / "golden").glob("*.in.yaml"))
    texts = {p.name: p.read_text() for p in golden}
    texts.update(
        {p.name: p.read_text() for p in sorted((TESTS / "cli" / "data" / "migrate").glob("*.yaml"))}
    )
    texts["bench.yaml"] = bench_manifest()
    return texts


def bench_manifest() -> str:
    import sys

    sys.path.insert(0, str(TESTS / "bench"))
    import migrate_bench

    return "---\n".join(d.format(name="app-00001", index=1) for d in migrate_bench.ALL_DOCUMENTS)


def renamed(text: str) -> str:
    """The same manifest without any name the rewriter or the template check looks for."""
    for old, new in RENAMES:
        text = text.replace(old, new)
    return text


def broken(text: str, seed: int) -> str:
    """`text` with one to three random edits: deletions, insertions, duplicated lines."""
    rng = random.Random(seed)
    for _ in range(rng.randint(1, 3)):
        at = rng.randrange(len(text) + 1)
        edit = rng.choice(("delete", "insert", "insert", "line"))
        if edit == "delete":
            text = text[:at] + text[at + rng.randint(1, 3) :]
        elif edit == "insert":
            text = text[:at] + rng.choice(NOISE) + text[at:]
        else:
            lines = text.splitlines(keepends=True) or [""]
            i = rng.randrange(len(lines))
            text = "".join([*lines[: i + 1], lines[i], *lines[i + 1 :]])
    return text


def variants() -> Iterator[tuple[str, str]]:
    """(id, text): the base texts, renamed, joined and broken."""
    bases = base_texts()
    for name, text in bases.items():
        yield name, text
        yield f"{name}-renamed", renamed(text)
    joined = "---\n".join(renamed(t) if i % 2 else t for i, t in enumerate(bases.values()))
    yield "all-joined", joined
    for index, (name, text) in enumerate(bases.items()):
        for n in range(BROKEN_PER_TEXT):
            source = renamed(text) if n % 2 else text
            yield f"{name}-broken-{n}", broken(source, index * 1000 + n)


def outcome(text: str, skip: bool, file: str = "f.yaml") -> Any:
    """What migrating `text` gives: the new text with notes and templates, or the error.

    `skip=True` takes every fast path (skipped documents, documents read by libyaml);
    `skip=False` loads every document with ruamel.
    """
    mappings = default_mappings()
    run = Run(mappings, "summary", None, skip=skip_rule(mappings) if skip else None)
    with contextlib.ExitStack() as stack:
        if not skip:
            stack.enter_context(mock.patch.object(roundtrip, "read_document", lambda _: None))
        try:
            m = migrate_text(text, file, run)
        except YamlError as err:
            return ("error", str(err))
        except Exception as err:  # ruamel's own crashes must not change either
            return ("crash", type(err).__name__, str(err))
    return (m.after, m.notes, m.denied, m.templates, run.collected)


def skipped_bodies(text: str, rule: Callable[[str], bool]) -> list[str]:
    """The document bodies of `text` that `rule` would copy without loading."""
    return [body for _, body, _ in split_documents(text) if rule(body)]


def assert_unchanged(body: str) -> None:
    """What a skipped body must be: loadable by ruamel, and left alone by the rewriter."""
    data = to_plain(YAML(typ="rt", pure=True).load(body))
    if isinstance(data, dict):
        result = rewrite_object(data, default_mappings())
        assert (result.changed, result.notes, result.denied) == (False, (), ())
