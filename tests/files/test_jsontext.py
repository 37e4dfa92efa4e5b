"""JSON text patches: only the changed values' lines move; everything else stays byte for byte."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from webhook.files.jsontext import patch_json, scan, wrap_in_list

Edit = Callable[[Any], None]
POD = (
    '{\n  "kind": "Pod",\n  "spec": {\n    "containers": [\n      {\n'
    '        "name": "a",\n        "args": ["x", "y"],\n'
    '        "resources": {"limits": {"nvidia.com/gpu": 1, "cpu": "2"}}\n'
    "      }\n    ]\n  }\n}\n"
)


def _resources(data: Any) -> Any:
    return data["spec"]["containers"][0]["resources"]


def _drop_gpu(data: Any) -> None:
    del _resources(data)["limits"]["nvidia.com/gpu"]


def _drop_cpu(data: Any) -> None:
    del _resources(data)["limits"]["cpu"]


def _limits_to_claims(data: Any) -> None:
    data["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpu"}]}


def _claims_beside_limits(data: Any) -> None:
    _resources(data)["claims"] = [{"name": "gpu"}]


def _annotate(data: Any) -> None:
    data["metadata"] = {"annotations": {"a": "b"}}


def _append_item(data: Any) -> None:
    data["items"].append({"kind": "T"})


def _gpu_out_claims_in(data: Any) -> None:
    _drop_gpu(data)
    _resources(data)["limits"]["claims"] = 1


def _swap_last(data: Any) -> None:
    data["spec"]["requests"] = {"x": 1}
    del data["spec"]["limits"]


CASES: list[tuple[str, str, Edit, str | None]] = [
    (
        "remove-first-of-compact-object",
        POD,
        _drop_gpu,
        POD.replace('{"nvidia.com/gpu": 1, "cpu": "2"}', '{"cpu": "2"}'),
    ),
    (
        "remove-last-of-compact-object",
        POD,
        _drop_cpu,
        POD.replace('{"nvidia.com/gpu": 1, "cpu": "2"}', '{"nvidia.com/gpu": 1}'),
    ),
    (
        "only-entry-replaced-on-its-line",
        POD,
        _limits_to_claims,
        POD.replace(
            '{"limits": {"nvidia.com/gpu": 1, "cpu": "2"}}', '{"claims": [{"name": "gpu"}]}'
        ),
    ),
    (
        "remove-and-insert-at-the-same-place",
        POD,
        _gpu_out_claims_in,
        POD.replace('{"nvidia.com/gpu": 1, "cpu": "2"}', '{"claims": 1, "cpu": "2"}'),
    ),
    (
        "new-entry-first-on-one-line",
        POD,
        _claims_beside_limits,
        POD.replace('{"limits"', '{"claims": [{"name": "gpu"}], "limits"'),
    ),
    (
        "new-block-entry-first-in-own-indent",
        POD,
        _annotate,
        POD.replace(
            '{\n  "kind"',
            '{\n  "metadata": {\n    "annotations": {\n      "a": "b"\n    }\n  },\n  "kind"',
        ),
    ),
    (
        "four-spaces-and-tight-separators",
        '{\n    "kind":"List",\n    "items":[\n        {"kind":"Pod"}\n    ]\n}',
        _append_item,
        '{\n    "kind":"List",\n    "items":[\n        {\n            "kind":"T"\n        },\n'
        '        {"kind":"Pod"}\n    ]\n}',
    ),
    (
        "tabs-and-crlf",
        '{\r\n\t"kind": "Pod"\r\n}\r\n',
        _annotate,
        '{\r\n\t"metadata": {\r\n\t\t"annotations": {\r\n\t\t\t"a": "b"\r\n\t\t}\r\n\t},\r\n'
        '\t"kind": "Pod"\r\n}\r\n',
    ),
    (
        "removed-last-entry-gives-place-to-new",
        '{\n  "spec": {\n    "a": 1,\n    "limits": {\n      "g": 1\n    }\n  }\n}\n',
        _swap_last,
        '{\n  "spec": {\n    "a": 1,\n    "requests": {\n      "x": 1\n    }\n  }\n}\n',
    ),
    ("empty-root-cannot-be-placed", "{}", _annotate, None),
]


@pytest.mark.parametrize(
    ("text", "edit", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_patch_json(text: str, edit: Edit, expected: str | None) -> None:
    old = json.loads(text)
    new = copy.deepcopy(old)
    edit(new)
    result = patch_json(text, old, new)
    assert (result and result[0]) == expected
    if result is not None:
        patched, data = result
        assert json.loads(patched) == data
        assert patch_json(patched, data, data) == (patched, data)  # second pass: no change


@pytest.mark.parametrize(
    "text",
    ["{", '{"a": 1} x', '{"a" 1}', "[1,]"],
    ids=["unclosed", "extra-data", "no-colon", "trailing-comma"],
)
def test_scan_refuses_what_json_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        scan(text)


@pytest.mark.parametrize(
    ("text", "indent", "expected"),
    [
        (
            '{"kind": "Pod"}',
            None,
            '{"apiVersion": "v1", "kind": "List", "items": [\n{"kind": "Pod"}\n, {"kind": "T"}\n]}',
        ),
        (
            '{\n  "kind": "Pod"\n}\n',
            2,
            '{"apiVersion": "v1", "kind": "List", "items": [\n{\n  "kind": "Pod"\n}\n, {\n'
            '  "kind": "T"\n}\n]}\n',
        ),
    ],
    ids=["one-line-no-final-newline", "pretty"],
)
def test_wrap_in_list_keeps_the_object_lines(text: str, indent: int | None, expected: str) -> None:
    assert wrap_in_list(text, [{"kind": "T"}], indent) == expected
