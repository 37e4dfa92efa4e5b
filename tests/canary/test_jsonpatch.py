"""The jsonpatch internals treepatch replays on a ruamel tree."""

from __future__ import annotations

import pytest
from canary.canary_support import Internal, rows, verify


def _operations() -> None:
    """`make_patch(a, b).patch` is the list of RFC 6902 operations as dicts."""
    import jsonpatch

    operations = jsonpatch.make_patch({"a": 1, "b": [1]}, {"a": 2, "b": [1, 2]}).patch
    assert sorted(operations, key=lambda o: str(o["path"])) == [
        {"op": "replace", "path": "/a", "value": 2},
        {"op": "add", "path": "/b/1", "value": 2},
    ], operations


def _pointer_parts() -> None:
    """`JsonPointer(text).parts`: the unescaped steps of a pointer."""
    import jsonpatch

    assert jsonpatch.JsonPointer("/a~1b/0/c~0d").parts == ["a/b", "0", "c~d"]


INTERNALS = [
    Internal("jsonpatch", "jsonpatch.JsonPatch.patch", _operations),
    Internal("jsonpointer", "jsonpatch.JsonPointer(pointer).parts", _pointer_parts),
]


@pytest.mark.parametrize("internal", rows(INTERNALS))
def test_jsonpatch_internal_still_there(internal: Internal) -> None:
    verify(internal)
