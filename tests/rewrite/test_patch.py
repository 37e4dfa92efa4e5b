"""The rewrite's JSON patch: `make_patch` between two trees, and `apply_copied` back.

Properties over random trees: jsonpatch (the RFC's reference behaviour) turns the old tree into
the new one with `make_patch`'s operations; `apply_copied` does exactly what jsonpatch does
(key order included: a patch cannot move a key, so neither can the rewrite, see
tests/rewrite/test_podedits.py) from parsed steps, leaves its input alone, shares whatever no
operation touched, and hands back the operations as `make_patch` wrote them, each value the
one it placed.
"""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import pytest
from fuzz.fuzz_support import fuzz_settings
from hypothesis import given
from hypothesis import strategies as st

from webhook.rewrite.patch import apply_copied, escape, make_patch, steps

keys = st.sampled_from(["a", "b", "c", "x/y", "m~n", "0"])
leaves = st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from([1.0, -0.0, "s", ""])
trees = st.recursive(
    leaves,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=12,
)


@st.composite
def edited(draw: st.DrawFn, value: Any) -> Any:
    """`value` with some members kept, some removed, added, replaced or edited in turn."""
    if isinstance(value, dict):
        out = {}
        for key, member in value.items():
            choice = draw(st.sampled_from(["keep", "drop", "replace", "edit"]))
            if choice != "drop":
                out[key] = {"keep": member, "replace": draw(trees)}.get(choice) or draw(
                    edited(member)
                )
        for key in draw(st.lists(keys, max_size=2)):
            out.setdefault(key, draw(trees))
        return out
    if isinstance(value, list) and draw(st.booleans()):
        return [draw(edited(v)) for v in value]
    return draw(trees) if draw(st.booleans()) else copy.deepcopy(value)


@st.composite
def pairs(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    old = draw(st.dictionaries(keys, trees, max_size=4))
    return old, draw(edited(old))


@fuzz_settings(300)
@given(pair=pairs())
def test_make_patch_is_what_jsonpatch_applies(pair: tuple[Any, Any]) -> None:
    old, new = pair
    assert jsonpatch.apply_patch(old, make_patch(old, new)) == new


@fuzz_settings(300)
@given(pair=pairs())
def test_apply_copied_gives_the_new_tree_and_the_same_operations(pair: tuple[Any, Any]) -> None:
    old, new = pair
    before = repr(old)
    operations = make_patch(old, new)
    got, applied = apply_copied(old, steps(old, operations))
    assert got == new
    assert repr(got) == repr(jsonpatch.apply_patch(old, operations))  # key order too
    assert repr(applied) == repr(operations)
    assert repr(old) == before
    touched = {op["path"].split("/")[1] for op in operations}
    assert all(got[k] is old[k] for k in got if k in old and escape(k) not in touched)


def test_applied_values_are_copies_and_paths_can_be_prefixed() -> None:
    old = {"spec": {"a": [1]}, "keep": {"b": 2}}
    new = {"spec": {"a": [1, 2]}, "keep": {"b": 2}}
    parsed = steps(old, make_patch(old, new))
    got, applied = apply_copied(old, parsed, "/doc")
    again, _ = apply_copied(old, parsed, "/doc")
    assert applied == [{"op": "replace", "path": "/doc/spec/a", "value": [1, 2]}]
    assert applied[0]["value"] is got["spec"]["a"] and got["spec"]["a"] is not again["spec"]["a"]
    assert got["keep"] is old["keep"]


def test_no_operations_share_the_whole_input() -> None:
    old = {"a": {"b": 1}}
    assert apply_copied(old, steps(old, [])) == (old, [])
    assert apply_copied(old, steps(old, []))[0] is old


REFUSED = {
    "root": ({"a": 1}, [{"op": "replace", "path": "", "value": []}]),
    "list-add": ({"a": [1]}, [{"op": "add", "path": "/a/0", "value": 2}]),
}


@pytest.mark.parametrize(("root", "operations"), REFUSED.values(), ids=REFUSED.keys())
def test_operations_make_patch_never_writes_for_a_dict_are_refused(
    root: Any, operations: list[dict[str, Any]]
) -> None:
    with pytest.raises(ValueError, match="not an operation"):
        steps(root, operations)


def test_make_patch_inside_a_document() -> None:
    assert make_patch({"a": 1}, {"a": 2}, "/metadata") == [
        {"op": "replace", "path": "/metadata/a", "value": 2}
    ]
