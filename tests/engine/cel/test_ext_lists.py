"""cel-go ext lists (version 3) and what differs between the minors dragate targets."""

from collections.abc import Callable
from typing import Any

import pytest
from cel_cases import expect_error, expect_value, table

from webhook.engine.cel import CelCompileError, compile_expression, selector_error
from webhook.types import EvalResult

Run = Callable[..., EvalResult]

VALUES = [
    ("range", "lists.range(4) == [0, 1, 2, 3]", True),
    ("range_empty", "lists.range(0) == []", True),
    ("range_negative", "lists.range(-2) == []", True),
    ("reverse", "[5, 1, 2, 3].reverse() == [3, 2, 1, 5]", True),
    ("slice", "[1, 2, 3, 4].slice(1, 3) == [2, 3]", True),
    ("slice_empty", "[1, 2, 3, 4].slice(4, 4) == []", True),
    ("flatten", "[[1], [2], [3, 4]].flatten() == [1, 2, 3, 4]", True),
    ("flatten_one_level", "[[[1]], [[2], [3]]].flatten() == [[1], [2], [3]]", True),
    ("flatten_depth", "[[[1]], [[2], [3]]].flatten(2) == [1, 2, 3]", True),
    ("flatten_flat", "dyn([1, 2]).flatten() == [1, 2]", True),
    ("sort", "[4, 3, 2, 1].sort() == [1, 2, 3, 4]", True),
    ("sort_strings", "['d', 'a', 'c'].sort() == ['a', 'c', 'd']", True),
    ("sort_empty", "[].sort() == []", True),
    ("sortBy", "[-3, 1, -5, -2, 4].sortBy(e, -(e * e)) == [-5, 4, -3, -2, 1]", True),
    ("sortBy_maps", "[{'x': 4}, {'x': 3}].sortBy(m, m.x) == [{'x': 3}, {'x': 4}]", True),
    ("sortBy_ties_keep_order", "['b', 'a', 'c'].sortBy(e, 0) == ['b', 'a', 'c']", True),
    ("distinct", "[-2, 5, -2, 1, 1, 5].distinct() == [-2, 5, 1]", True),
    ("distinct_cross_type", "[dyn(1), dyn(1.0), dyn(1u)].distinct() == [1]", True),
    ("distinct_lists", "[[1], [1], [2]].distinct() == [[1], [2]]", True),
]

ERRORS = [
    ("slice_reversed", "[1, 2, 3, 4].slice(3, 0)", "start index must be less than or equal"),
    ("slice_negative", "[1, 2, 3, 4].slice(-5, 10)", "negative indexes not supported"),
    ("slice_past_end", "[1, 2, 3, 4].slice(0, 10)", "list is length 4"),
    ("flatten_negative", "[].flatten(-1)", "level must be non-negative"),
    ("flatten_map", "dyn({}).flatten()", "no such overload"),
    ("sort_mixed", "[dyn(1), dyn('a')].sort()", "list elements must have the same type"),
    ("sort_uncomparable", "dyn([[1], [2]]).sort()", "list elements must be comparable"),
    ("sortBy_key_error", "[1, 0].sortBy(e, 1 / e)", "division by zero"),
    ("range_budget", "lists.range(2000000).size()", "cost limit exceeded"),
    ("sort_budget", "lists.range(1000).sort().size()", "cost limit exceeded"),
]

REFUSED = [
    ("flatten_flat_list", "[1, 2].flatten()", "found no matching overload for 'flatten'"),
    ("sort_maps", "[{'a': 1}].sort()", "found no matching overload for 'sort'"),
    (
        "sortBy_map_key",
        "[1].sortBy(e, {'a': e})",
        "found no matching overload for '@sortByAssociatedKeys'",
    ),
    ("range_string", "lists.range('3')", "found no matching overload for 'lists.range'"),
]


@table(VALUES, "expected")
def test_value(run: Run, expr: str, expected: object) -> None:
    expect_value(run(expr), expected)


@table(ERRORS, "message")
def test_error(run: Run, expr: str, message: str) -> None:
    expect_error(run(expr), message)


@table(REFUSED, "message")
def test_refused_at_compile_time(run: Run, expr: str, message: str) -> None:
    expect_error(run(expr), f"does not compile: {message}")


@pytest.mark.parametrize(
    "expr",
    ["lists.range(3)", "[1].reverse()", "[2, 1].sortBy(e, e)"],
    ids=["range", "reverse", "sortBy"],
)
def test_a_minor_before_1_35_does_not_offer_ext_lists(expr: str) -> None:
    with pytest.raises(CelCompileError, match="undeclared reference"):
        compile_expression(expr, variables=[], expect_bool=False, minor="1.34")
    compile_expression(expr, variables=[], expect_bool=False, minor="1.35")


EMPTY_NEEDLE = [
    ("index_past_end", "'tacocat'.indexOf('', 30)", {"1.36": 30, "1.37": 7}),
    ("index_negative", "'tacocat'.indexOf('', -1)", {"1.36": -1, "1.37": None}),
    ("last_index_past_end", "'tacocat'.lastIndexOf('', 30)", {"1.36": 30, "1.37": 7}),
    ("index_inside", "'tacocat'.indexOf('', 3)", {"1.36": 3, "1.37": 3}),
]


@table(EMPTY_NEEDLE, "by_minor")
def test_empty_needle_offsets_follow_each_minors_cel_go(
    expr: str, by_minor: dict[str, Any]
) -> None:
    for minor, expected in by_minor.items():
        program = compile_expression(expr, variables=[], expect_bool=False, minor=minor)
        result = program.evaluate({})
        if expected is None:
            expect_error(result, "index out of range: -1")
        else:
            expect_value(result, expected)


SELECTORS = [
    (
        "range_over_attribute",
        'device.attributes["dra.example.com"].names.exists(x, x == "a")',
        "expression of type 'any' cannot be range of a comprehension",
    ),
    (
        "ranges_beyond_cost_limit",
        "lists.range(1000).map(i, lists.range(1000).filter(j, j > i).size()).size() > 0",
        "too complex, exceeds cost limit",
    ),
    ("range_within_cost_limit", "lists.range(10000).all(i, i >= 0)", None),
]


@table(SELECTORS, "refusal")
def test_selector_verdicts(expr: str, refusal: str | None) -> None:
    found = selector_error(expr)
    assert (found is None) if refusal is None else (refusal in (found or ""))
