"""Text patches: only the changed entries' lines move; everything else stays byte for byte."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import yaml

from webhook.files.rtyaml import load_rt
from webhook.files.textpatch import patch_text
from webhook.files.yamlio import to_plain

Edit = Callable[[Any], None]


def _drop_gpu(data: Any) -> None:
    del data["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"]


def _claims(data: Any) -> None:
    data["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpu"}]}


def _annotate(data: Any) -> None:
    data["metadata"] = {"annotations": {"a": "b"}}


def _append(data: Any) -> None:
    data["spec"]["resourceClaims"].append({"name": "two"})


def _rename_first(data: Any) -> None:
    del data["items"][0]["name"]


CASES: list[tuple[str, str, Edit, str | None]] = [
    (
        "remove-keeps-comments-and-spaces",
        "spec:\n  containers:\n  - name: a   \n    resources:\n      limits:\n"
        "        nvidia.com/gpu: 1  # one\n        cpu: 2\n    # next\n",
        _drop_gpu,
        "spec:\n  containers:\n  - name: a   \n    resources:\n      limits:\n"
        "        cpu: 2\n    # next\n",
    ),
    (
        "replace-block-with-own-sequence-style",
        "spec:\n  containers:\n    - name: a\n      resources:\n        limits:\n"
        "          nvidia.com/gpu: 1\n",
        _claims,
        "spec:\n  containers:\n    - name: a\n      resources:\n        claims:\n"
        "          - name: gpu\n",
    ),
    (
        "flow-value-becomes-block",
        "spec:\n  containers:\n  - name: a\n    resources: {limits: {nvidia.com/gpu: 1}}\n",
        _claims,
        "spec:\n  containers:\n  - name: a\n    resources:\n      claims:\n      - name: gpu\n",
    ),
    (
        "null-metadata-filled",
        "kind: Pod\nmetadata:\nspec: {}\n",
        _annotate,
        "kind: Pod\nmetadata:\n  annotations:\n    a: b\nspec: {}\n",
    ),
    (
        "new-metadata-goes-first",
        "template:\n  spec: {}\n",
        lambda d: d["template"].update(metadata={"x": 1}),
        "template:\n  metadata:\n    x: 1\n  spec: {}\n",
    ),
    (
        "append-item-after-comment-free-end",
        "spec:\n  resourceClaims:\n  - name: one\n\n# tail\n",
        _append,
        "spec:\n  resourceClaims:\n  - name: one\n  - name: two\n\n# tail\n",
    ),
    (
        "crlf-kept",
        "spec:\r\n  containers:\r\n  - name: a\r\n    resources:\r\n      limits:\r\n"
        "        nvidia.com/gpu: 1\r\n",
        _claims,
        "spec:\r\n  containers:\r\n  - name: a\r\n    resources:\r\n      claims:\r\n"
        "      - name: gpu\r\n",
    ),
    (
        "no-final-newline",
        "spec:\n  containers:\n  - name: a\n    resources:\n      limits: {nvidia.com/gpu: 1}",
        _claims,
        "spec:\n  containers:\n  - name: a\n    resources:\n      claims:\n      - name: gpu",
    ),
    (
        "empty-flow-mapping-filled",
        "metadata:\n  annotations: {}\n  labels:\n    app: a\n",
        lambda d: d["metadata"]["annotations"].update(a="b"),
        "metadata:\n  annotations:\n    a: b\n  labels:\n    app: a\n",
    ),
    (
        "flow-mapping-with-entries-filled",
        "metadata:\n  annotations: {x: y}\n  labels:\n    app: a\n",
        lambda d: d["metadata"]["annotations"].update(a="b"),
        "metadata:\n  annotations:\n    x: y\n    a: b\n  labels:\n    app: a\n",
    ),
    (
        "empty-flow-sequence-filled",
        "spec:\n  resourceClaims: []\n  containers:\n    - name: a\n",
        lambda d: d["spec"]["resourceClaims"].append({"name": "one"}),
        "spec:\n  resourceClaims:\n    - name: one\n  containers:\n    - name: a\n",
    ),
    (
        "comment-of-a-removed-line-on-its-replacement",
        "spec:\n  containers:\n  - name: a\n    resources:\n      limits:\n"
        "        nvidia.com/gpu: 2   # two GPUs\n",
        _claims,
        "spec:\n  containers:\n  - name: a\n    resources:\n      claims:\n"
        "      - name: gpu  # two GPUs\n",
    ),
    ("dash-line-entry-falls-back", "items:\n- name: a\n  x: 1\n", _rename_first, None),
    ("flow-root-falls-back", "{a: 1}\n", lambda d: d.update(b=2), None),
]


@pytest.mark.parametrize(
    ("text", "edit", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_patch_text(text: str, edit: Edit, expected: str | None) -> None:
    node = load_rt(text)
    old = to_plain(node)
    new = to_plain(load_rt(text))
    edit(new)
    patched = patch_text(text, node, old, new)
    assert patched == expected
    if patched is not None:
        assert yaml.safe_load(patched) == new
