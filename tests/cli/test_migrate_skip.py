"""`dragate migrate`'s fast paths give the very bytes, notes and errors of the slow ones.

Skipping a document (never loading it), knowing the file's indentation without loading the
whole file, reading an edit back with libyaml, and rendering a repeated template once are each
compared with the plain ruamel way, over every golden input and fuzz-style variant.
"""

from __future__ import annotations

import io
import os
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from migrate_cases import assert_unchanged, outcome, renamed, skipped_bodies, variants
from ruamel.yaml import YAML

from webhook.cli import main
from webhook.cli.migrate import skip_rule
from webhook.files import roundtrip, rtyaml
from webhook.files.plainyaml import read_document
from webhook.files.roundtrip import Doc, parse_stream, whole_text_loads
from webhook.files.yamlio import YamlError, to_plain
from webhook.policy.loading import default_mappings

VARIANTS = list(variants())
SKIP = skip_rule(default_mappings())
pytestmark = pytest.mark.filterwarnings("ignore::ruamel.yaml.error.ReusedAnchorWarning")


def _parses(text: str) -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ruamel warns about a reused anchor in some variants
        try:
            parse_stream(text, "f.yaml")
        except YamlError:
            return False
    return True


PARSED = [(i, t) for i, t in VARIANTS if _parses(t)]


@pytest.mark.parametrize("text", [t for _, t in VARIANTS], ids=[i for i, _ in VARIANTS])
def test_skipping_changes_nothing(text: str) -> None:
    assert outcome(text, skip=True) == outcome(text, skip=False)


@pytest.mark.parametrize("text", [t for _, t in VARIANTS], ids=[i for i, _ in VARIANTS])
def test_skipped_bodies_load_and_stay(text: str) -> None:
    assert SKIP is not None
    for body in skipped_bodies(text, SKIP):
        assert_unchanged(body)


def test_renamed_inputs_are_mostly_skipped() -> None:
    """The proof above means something only if the skip path is taken: it is, widely."""
    assert SKIP is not None
    renamed_texts = [t for i, t in VARIANTS if i.endswith("-renamed")]
    assert sum(bool(skipped_bodies(t, SKIP)) for t in renamed_texts) >= len(renamed_texts) - 2


def _bodies(text: str) -> list[str]:
    return [body for _, body, _ in roundtrip.split_documents(text)]


@pytest.mark.parametrize("text", [t for _, t in VARIANTS], ids=[i for i, _ in VARIANTS])
def test_libyaml_data_is_ruamels(text: str) -> None:
    for body in _bodies(text):
        plain = read_document(body)
        if plain is not None:
            assert plain.data == to_plain(rtyaml._yaml().load(body))


def test_most_documents_are_read_by_libyaml() -> None:
    """The proof above means something only if libyaml reads many documents: it does."""
    bodies = [b for i, t in VARIANTS if "-broken-" not in i for b in _bodies(t)]
    assert sum(read_document(b) is not None for b in bodies) >= len(bodies) // 2


def _real_load_ok(text: str) -> bool:
    try:
        YAML().load(text)
    except Exception:  # any failure is what the indent guess treats as "no"
        return False
    return True


@pytest.mark.parametrize("text", [t for _, t in PARSED], ids=[i for i, _ in PARSED])
def test_whole_file_load_is_known_without_loading(text: str) -> None:
    known = whole_text_loads(parse_stream(text, "f.yaml").docs)
    if known is not None:
        assert known is _real_load_ok(text)


@pytest.mark.parametrize(
    ("text", "known"),
    [
        ("a: 1\n", True),
        ("--- # c\na: 1\n", None),
        ("# c\n---\na: 1\n", None),
        ("a: 1\n---\nb: 2\n", False),
        ("---\na: 1\n---\nb: 2\n", False),
        ("%YAML 1.2\n---\na: 1\n", None),
        ("- a\n---\nb\n", None),
        ("x\n---\n---\n", False),
    ],
    ids=[
        "one",
        "marker",
        "comment-first",
        "two",
        "two-with-marker",
        "directive",
        "sequence-first",
        "three",
    ],
)
def test_whole_text_loads_table(text: str, known: bool | None) -> None:
    docs = [Doc(h, b, line) for h, b, line in roundtrip.split_documents(text)]
    assert whole_text_loads(docs) is known
    if known is not None:
        assert known is _real_load_ok(text)


@pytest.mark.parametrize("text", [t for _, t in PARSED], ids=[i for i, _ in PARSED])
def test_libyaml_read_back_agrees_with_ruamel(text: str) -> None:
    for doc in parse_stream(text, "f.yaml").docs:
        if doc.node is not None:
            rendered = rtyaml.render_yaml(doc.node, (2, 0))
            assert rtyaml.reads_back(rendered, doc.data)
            assert to_plain(rtyaml._yaml().load(rendered)) == doc.data


def test_rendered_templates_are_remembered_by_value_and_type() -> None:
    one, text = {"a": 1}, {"a": "1"}
    assert rtyaml.render_new(one, (2, 0)) == "a: 1\n"
    assert rtyaml.render_new(text, (2, 0)) == "a: '1'\n"
    assert rtyaml.render_new({"a": True}, (2, 0)) == "a: true\n"
    assert rtyaml.render_new(one, (4, 2)) == rtyaml.render_yaml({"a": 1}, (4, 2))


def test_unchanged_file_is_not_rewritten(tmp_path: Path) -> None:
    path = tmp_path / "app.yaml"
    path.write_text(renamed(VARIANTS[0][1]) + "---\nkind: Service\nmetadata: {name: s}\n")
    before = os.stat(path)
    result = CliRunner().invoke(main, ["migrate", "--write", str(tmp_path)])
    after = os.stat(path)
    assert result.exit_code == 0 and "migrated 0 file(s)" in result.stderr
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


LOADS = [
    "a: yes\n",
    "%YAML 1.1\n---\na: yes\n",
    "a: yes\n",
    "a: [\n",
    "a: &x {b: *x}\n",
    "a: 2001-02-30\n",
    "a: 1\na: 2\n",
    "- &y 1\n- *y\n",
    "a: yes\n",
]


def test_reused_loader_reads_as_a_fresh_one() -> None:
    """The thread's shared loader keeps no state from one document (or failure) to the next."""

    def read(load: Callable[[str], object], text: str) -> object:
        try:
            return to_plain(load(text))
        except Exception as err:  # the failure must be the same too
            return type(err).__name__, str(err)

    for text in LOADS:
        assert read(rtyaml.load_rt, text) == read(lambda t: rtyaml._yaml().load(t), text)


def test_reused_dumper_writes_as_a_fresh_one() -> None:
    for indent in ((2, 0), (4, 2), (2, 0), (3, 1)):
        node = rtyaml.load_rt("a:\n- b: 1  # c\n  d: [x, y]\n")
        fresh = rtyaml._yaml()
        fresh.indent(mapping=indent[0], sequence=max(indent[0], indent[1] + 2), offset=indent[1])
        buffer = io.StringIO()
        fresh.dump(node, buffer)
        assert rtyaml.render_yaml(node, indent) == buffer.getvalue()


POD = "apiVersion: v1\nkind: Pod\nmetadata: {{name: p}}\nspec:\n  containers:\n  - name: c\n{}"
CM_DASHES = "kind: ConfigMap\ndata:\n  s: |\n    ---\n    a: 1\n    ---\n"
FILES = [
    (
        "gpu-then-block-scalar-dashes",
        POD.format("    resources: {limits: {nvidia.com/gpu: 1}}\n") + "---\n" + CM_DASHES,
        True,
        1,
    ),
    ("name-in-block-scalar-after-dashes", CM_DASHES + "    nvidia.com/gpu: 1\n", False, 0),
    ("name-only-in-comment", POD.format("    image: x  # was nvidia.com/gpu: 1\n"), False, 0),
    (
        "flow-style",
        "{apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: [{name: c,"
        " resources: {limits: {nvidia.com/mig-1g.5gb: 1}}}]}}\n",
        True,
        0,
    ),
    ("quoted-key", POD.format('    resources:\n      limits: {"nvidia.com/gpu": 1}\n'), True, 0),
    (
        "escaped-key",
        POD.format('    resources:\n      limits: {"nvidia.com/\\x67pu": 1}\n'),
        True,
        0,
    ),
    (
        "anchor-and-alias",
        POD.format(
            "    resources: {limits: &l {nvidia.com/gpu: 1}}\n"
            "  - {name: d, resources: {limits: *l}}\n"
        ),
        True,
        0,
    ),
    ("services-only", "kind: Service\n---\nkind: ConfigMap\ndata: {a: b}\n---\n# end\n", False, 3),
]


@pytest.mark.parametrize(
    ("text", "changes", "skipped"), [f[1:] for f in FILES], ids=[f[0] for f in FILES]
)
def test_files(text: str, changes: bool, skipped: int) -> None:
    assert SKIP is not None
    fast = outcome(text, skip=True)
    assert fast == outcome(text, skip=False)
    assert (fast[0] != text) is changes
    assert len(skipped_bodies(text, SKIP)) == skipped
