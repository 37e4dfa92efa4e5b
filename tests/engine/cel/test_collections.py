"""Kubernetes lists library, cel-go ext sets and the RE2 regex library."""

from cel_cases import expect_error, expect_value, table

VALUES = [
    # lists (kubernetes/apiserver pkg/cel/library/lists.go doc examples and tests)
    ("isSorted", "[1, 2, 3].isSorted()", True),
    ("isSorted_false", "['y', 'z', 'x'].isSorted()", False),
    ("isSorted_empty", "[].isSorted()", True),
    ("isSorted_equal_runs", "[1, 1, 2].isSorted()", True),
    ("sum", "[1, 3].sum() == 4", True),
    ("sum_double", "[1.0, 3.5].sum() == 4.5", True),
    ("sum_empty", "[].sum() == 0", True),
    ("min", "[1, 3].min() == 1", True),
    ("min_strings", "['b', 'a', 'c'].min() == 'a'", True),
    ("max", "[1, 3].max() == 3", True),
    ("max_single", "[5].max() == 5", True),
    ("indexOf", "[1, 2, 2, 3].indexOf(2) == 1", True),
    ("indexOf_missing", "['a', 'b'].indexOf('c') == -1", True),
    ("indexOf_cross_type", "dyn([1, 2]).indexOf(2.0) == 1", True),
    ("lastIndexOf", "[1, 2, 2, 3].lastIndexOf(2) == 2", True),
    ("lastIndexOf_missing", "[].lastIndexOf(1) == -1", True),
    # sets (google/cel-go ext/sets_test.go)
    ("contains_empty", "sets.contains([], [])", True),
    ("contains_empty_sub", "sets.contains([1], [])", True),
    ("contains_single", "sets.contains([1], [1])", True),
    ("contains_cross_type", "sets.contains(dyn([1]), [dyn(1.0), dyn(1u)])", True),
    ("contains_dupes", "sets.contains([1, 2, 3, 4], [2, 3, 2])", True),
    ("contains_nested", "sets.contains([[1], [2, 3]], [[2, 3]])", True),
    ("contains_false", "sets.contains([1], [2])", False),
    ("contains_empty_super", "sets.contains([], [1])", False),
    ("contains_strings", "sets.contains(['a', 'b'], ['b'])", True),
    ("equivalent_empty", "sets.equivalent([], [])", True),
    ("equivalent_dupes", "sets.equivalent([1], [1, 1])", True),
    ("equivalent_cross_type", "sets.equivalent(dyn([1]), [dyn(1u), dyn(1.0)])", True),
    ("equivalent_order", "sets.equivalent(dyn([1, 2, 3]), [dyn(3u), dyn(2.0), dyn(1)])", True),
    ("equivalent_false", "sets.equivalent([2, 1], [1])", False),
    ("intersects", "sets.intersects([1], [1])", True),
    ("intersects_cross_type", "sets.intersects(dyn([1]), [1.0, 2.0])", True),
    ("intersects_empty", "sets.intersects([], [])", False),
    ("intersects_false", "sets.intersects([1], [2])", False),
    # regex (kubernetes/apiserver pkg/cel/library/regex.go doc examples)
    ("find", "'abc 123'.find('[0-9]+') == '123'", True),
    ("find_none", "'abc'.find('xyz') == ''", True),
    ("findAll", "'123 abc 456'.findAll('[0-9]+') == ['123', '456']", True),
    ("findAll_limit", "'123 abc 456'.findAll('[0-9]+', 1) == ['123']", True),
    ("findAll_zero", "'123 abc 456'.findAll('[0-9]+', 0) == []", True),
    ("findAll_none", "'abc'.findAll('xyz') == []", True),
    ("findAll_empty_matches_like_go", "'abc'.findAll('b*') == ['', 'b', '']", True),
    ("matches_unanchored", "'gpu-0'.matches('[0-9]')", True),
    ("matches_function_form", "matches('gpu-0', '^gpu-[0-9]+$')", True),
    ("matches_re2_linear", "'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!'.matches('^(a+)+$')", False),
]

ERRORS = [
    ("min_empty", "[].min() == 1", "min called on empty list"),
    ("max_empty", "[].max() == 1", "max called on empty list"),
    ("isSorted_mixed", "[1, 'a'].isSorted()", "expected type 'int' but found 'string'"),
    ("sets_not_list", "sets.contains(1, [1])", "found no matching overload"),
    ("bad_regex", "'abc'.matches('[')", "invalid matches argument"),
    ("bad_regex_find", "'abc'.find('(')", "invalid find argument"),
    ("backreference_is_not_re2", "'aa'.matches('(a)\\\\1')", "invalid matches argument"),
]


@table(VALUES, "expected")
def test_values(run, expr, expected):
    expect_value(run(expr), expected)


@table(ERRORS, "message")
def test_errors(run, expr, message):
    expect_error(run(expr), message)
