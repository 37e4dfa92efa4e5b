"""Semver: kubernetes/apiserver pkg/cel/library/semver_test.go cases plus precedence rules."""

from cel_cases import expect_error, expect_value, table

VALUES = [
    ("parse", 'semver("1.2.3") == semver("1.2.3")', True),
    ("isSemver", 'isSemver("1.2.3-beta.1+build.1")', True),
    ("isSemver_empty_false", 'isSemver("")', False),
    ("isSemver_v_prefix_false", 'isSemver("v1.0.0")', False),
    ("isSemver_v_leading_whitespace_false", 'isSemver(" 1.0.0")', False),
    ("isSemver_v_contains_whitespace_false", 'isSemver("1. 0.0")', False),
    ("isSemver_v_trailing_whitespace_false", 'isSemver("1.0.0 ")', False),
    ("isSemver_leading_zeros_false", 'isSemver("01.01.01")', False),
    ("isSemver_major_only_false", 'isSemver("1")', False),
    ("isSemver_major_minor_only_false", 'isSemver("1.1")', False),
    ("isSemver_empty_normalize_false", 'isSemver("", true)', False),
    ("isSemver_v_leading_whitespace_normalize_false", 'isSemver(" 1.0.0", true)', False),
    ("isSemver_v_contains_whitespace_normalize_false", 'isSemver("1. 0.0", true)', False),
    ("isSemver_v_trailing_whitespace_normalize_false", 'isSemver("1.0.0 ", true)', False),
    ("isSemver_v_prefix_normalize_true", 'isSemver("v1.0.0", true)', True),
    ("isSemver_leading_zeros_normalize_true", 'isSemver("01.01.01", true)', True),
    ("isSemver_major_only_normalize_true", 'isSemver("1", true)', True),
    ("isSemver_major_minor_only_normalize_true", 'isSemver("1.1", true)', True),
    ("isSemver_normalize_false_is_strict", 'isSemver("v1.0.0", false)', False),
    ("equality_normalize", 'semver("v01.01", true) == semver("1.1.0")', True),
    ("equality_reflexivity", 'semver("1.2.3") == semver("1.2.3")', True),
    ("inequality", 'semver("1.2.3") == semver("1.0.0")', False),
    ("semver_less", 'semver("1.0.0").isLessThan(semver("1.2.3"))', True),
    ("semver_less_false", 'semver("1.0.0").isLessThan(semver("1.0.0"))', False),
    ("semver_greater", 'semver("1.2.3").isGreaterThan(semver("1.0.0"))', True),
    ("semver_greater_false", 'semver("1.0.0").isGreaterThan(semver("1.0.0"))', False),
    ("compare_equal", 'semver("1.2.3").compareTo(semver("1.2.3"))', 0),
    ("compare_less", 'semver("1.0.0").compareTo(semver("1.2.3"))', -1),
    ("compare_greater", 'semver("1.2.3").compareTo(semver("1.0.0"))', 1),
    ("doc_compare_greater", 'semver("1.2.3").compareTo(semver("0.1.2"))', 1),
    ("major", 'semver("1.2.3").major()', 1),
    ("minor", 'semver("1.2.3").minor()', 2),
    ("patch", 'semver("1.2.3").patch()', 3),
    ("prerelease_lower", "semver('1.0.0-alpha').isLessThan(semver('1.0.0'))", True),
    (
        "prerelease_numeric_before_alpha",
        "semver('1.0.0-1').isLessThan(semver('1.0.0-alpha'))",
        True,
    ),
    (
        "prerelease_numeric_order",
        "semver('1.0.0-beta.2').isLessThan(semver('1.0.0-beta.11'))",
        True,
    ),
    ("prerelease_shorter_lower", "semver('1.0.0-alpha').isLessThan(semver('1.0.0-alpha.1'))", True),
    ("build_ignored", "semver('1.0.0+a') == semver('1.0.0+b')", True),
    ("numeric_not_lexical", "semver('1.10.0').isGreaterThan(semver('1.9.0'))", True),
    ("doc_dra_driver_version", "semver('550.54.15').compareTo(semver('550.0.0')) >= 0", True),
]

ERRORS = [
    ("parseInvalidVersion", 'semver("v1.0")', "No Major.Minor.Patch elements found"),
    ("leading_zero", 'semver("1.02.3")', "must not contain leading zeroes"),
    ("bad_prerelease", 'semver("1.0.0-a..b")', "Prerelease is empty"),
    ("bad_build", 'semver("1.0.0+a_b")', "Invalid character(s) found in build meta data"),
    ("short_with_prerelease", 'semver("1.0-beta", true)', "short version cannot contain"),
    ("not_a_string", "semver(1)", "found no matching overload"),
    ("semver_lt_is_not_defined", "semver('1.0.0') < semver('2.0.0')", "found no matching overload"),
]


@table(VALUES, "expected")
def test_values(run, expr, expected):
    expect_value(run(expr), expected)


@table(ERRORS, "message")
def test_errors(run, expr, message):
    expect_error(run(expr), message)
