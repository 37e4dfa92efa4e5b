"""The round-trip layer: unchanged documents byte-identical, edits keep comments and layout."""

from __future__ import annotations

import copy
import json

import pytest

from webhook.files.roundtrip import parse_stream, split_documents
from webhook.files.yamlio import YamlError

TEXT = """\
# header comment
apiVersion: v1
kind: ConfigMap
metadata: {name: a}   # flow style kept
---   # marker comment
apiVersion: v1
kind: Pod
metadata:
    name: p
spec:
    containers:
      - name: c   # the container
        resources:
            limits:
                nvidia.com/gpu: 1
                cpu: "2"
        # about the image
        image: 'x'
"""


def test_split_documents_concatenates_back() -> None:
    parts = split_documents(TEXT)
    assert "".join(h + b for h, b, _ in parts) == TEXT
    assert [line for _, _, line in parts] == [1, 6]


def test_untouched_stream_is_identical() -> None:
    assert parse_stream(TEXT, "f.yaml").text() == TEXT


def test_edit_keeps_comments_quotes_indent_and_other_documents() -> None:
    stream = parse_stream(TEXT, "f.yaml")
    new = copy.deepcopy(stream.docs[1].data)
    del new["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"]
    new["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu-c"}]
    stream.update(1, new)
    out = stream.text()
    assert out.startswith(TEXT.split("---", maxsplit=1)[0] + "---   # marker comment\n")
    for kept in (
        "# the container",
        "# about the image",
        "image: 'x'",
        'cpu: "2"',
        "    containers:\n      - name: c",
    ):
        assert kept in out
    assert out.index("claims") < out.index("# about the image")
    assert "nvidia.com/gpu" not in out


def test_append_documents() -> None:
    stream = parse_stream("a: 1\n", "f.yaml")
    stream.append([{"kind": "X"}])
    assert stream.text() == "a: 1\n---\nkind: X\n"


@pytest.mark.parametrize("indent", [None, 2, 4], ids=["one-line", "two", "four"])
def test_json_object_is_wrapped_in_a_list_with_its_lines_kept(indent: int | None) -> None:
    pod = {"kind": "Pod", "apiVersion": "v1", "spec": {"args": ["a", "b"]}}
    text = json.dumps(pod, indent=indent) + "\n"
    stream = parse_stream(text, "f.json")
    stream.update(0, {**pod, "metadata": {"name": "p"}})
    stream.append([{"kind": "T"}])
    out = stream.text()
    assert json.loads(out) == {
        "apiVersion": "v1",
        "kind": "List",
        "items": [{**pod, "metadata": {"name": "p"}}, {"kind": "T"}],
    }
    lines = out.splitlines()
    assert lines[0] == '{"apiVersion": "v1", "kind": "List", "items": ['
    assert lines[-1] == "]}" and out.endswith("]}\n")
    assert [line for line in text.splitlines() if line not in lines] == (
        [] if indent else [text.rstrip()]
    )  # on one line, the new entry shares the line


@pytest.mark.parametrize(
    ("text", "line"),
    [("a: 1\n---\nb: [\n", 4), ('{"a": }', 1)],
    ids=["yaml", "json"],
)
def test_broken_input_names_the_line(text: str, line: int) -> None:
    with pytest.raises(YamlError) as err:
        parse_stream(text, "f.json" if text.startswith("{") else "f.yaml")
    assert err.value.source.line == line


def test_json_change_that_cannot_be_spliced_is_dumped_whole() -> None:
    """A root array of scalars has no entry to patch: the file is written whole, still JSON."""
    stream = parse_stream("[1,2]\n", "f.json")
    stream.update(0, [1, 3])
    assert stream.text() == "[1, 3]\n"


def test_document_rendered_whole_keeps_its_two_space_mappings() -> None:
    """A change no text patch can place renders the document whole, at the steps it shows:
    `  - name:` under 2-space mappings is not a 4-space document."""
    text = "spec:\n  containers:\n    - name: a\n      x: 1\n  volumes:\n    - name: v\n"
    stream = parse_stream(text, "f.yaml")
    new = copy.deepcopy(stream.docs[0].data)
    del new["spec"]["containers"][0]["name"]
    stream.update(0, new)
    assert stream.text() == "spec:\n  containers:\n    - x: 1\n  volumes:\n    - name: v\n"
