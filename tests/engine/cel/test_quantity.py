"""Quantity: kubernetes/apiserver pkg/cel/library/quantity_test.go cases plus parser edges."""

from fractions import Fraction

import pytest
from cel_cases import expect_error, expect_value, table

from webhook.engine.cel.errors import CelFunctionError
from webhook.engine.cel.quantity import parse_quantity

VALUES = [
    ("parse", 'quantity("12Mi") == quantity("12582912")', True),
    ("isQuantity", 'isQuantity("20")', True),
    ("isQuantity_megabytes", 'isQuantity("20M")', True),
    ("isQuantity_mebibytes", 'isQuantity("20Mi")', True),
    ("isQuantity_invalidSuffix", 'isQuantity("20Mo")', False),
    ("isQuantity_passingRegex", 'isQuantity("10Mm")', False),
    ("equality_reflexivity", 'quantity("200M") == quantity("200M")', True),
    (
        "equality_symmetry",
        'quantity("200M") == quantity("0.2G") && quantity("0.2G") == quantity("200M")',
        True,
    ),
    (
        "equality_transitivity",
        'quantity("2M") == quantity("0.002G") && '
        'quantity("2000k") == quantity("2M") && quantity("0.002G") == quantity("2000k")',
        True,
    ),
    ("inequality", 'quantity("200M") == quantity("0.3G")', False),
    ("binary_equals_decimal_by_value", "quantity('1Gi') == quantity('1024Mi')", True),
    ("quantity_less", 'quantity("50M").isLessThan(quantity("50Mi"))', True),
    ("quantity_less_obvious", 'quantity("50M").isLessThan(quantity("100M"))', True),
    ("quantity_less_false", 'quantity("100M").isLessThan(quantity("50M"))', False),
    ("quantity_greater", 'quantity("50Mi").isGreaterThan(quantity("50M"))', True),
    ("quantity_greater_obvious", 'quantity("150Mi").isGreaterThan(quantity("100Mi"))', True),
    ("quantity_greater_false", 'quantity("50M").isGreaterThan(quantity("100M"))', False),
    ("compare_equal", 'quantity("200M").compareTo(quantity("0.2G"))', 0),
    ("compare_less", 'quantity("50M").compareTo(quantity("50Mi"))', -1),
    ("compare_greater", 'quantity("50Mi").compareTo(quantity("50M"))', 1),
    ("add_quantity", 'quantity("50k").add(quantity("20")) == quantity("50.02k")', True),
    ("add_int", 'quantity("50k").add(20).isLessThan(quantity("50020"))', False),
    ("add_string_doc", 'quantity("50k").add(20) == quantity("50020")', True),
    ("sub_quantity", 'quantity("50k").sub(quantity("20")) == quantity("49.98k")', True),
    ("sub_int", 'quantity("50k").sub(20) == quantity("49980")', True),
    ("arith_chain_1", 'quantity("50k").add(20).sub(quantity("100k")).asInteger()', -49980),
    ("arith_chain", 'quantity("50k").add(20).sub(quantity("100k")).sub(-50000).asInteger()', 20),
    ("as_integer", 'quantity("50k").asInteger()', 50000),
    ("is_integer_huge", 'quantity("9999999999999999999999999999999999999G").isInteger()', False),
    ("is_integer", 'quantity("50").isInteger()', True),
    ("is_integer_50000000G", 'quantity("50000000G").isInteger()', True),
    ("is_integer_dec_form_is_false_in_go", 'quantity("1.5Gi").isInteger()', False),
    ("as_float", 'quantity("50.703k").asApproximateFloat()', 50703.0),
    ("as_float_doc", 'quantity("50k").sub(20000).asApproximateFloat() == 30000.0', True),
    ("sign_positive", 'sign(quantity("1m"))', 1),
    ("sign_negative", 'sign(quantity("-1Ki"))', -1),
    ("sign_zero", 'sign(quantity("0"))', 0),
    ("doc_isQuantity_1.3G", "isQuantity('1.3G')", True),
    ("doc_isQuantity_1.3Gi", "isQuantity('1.3Gi')", True),
    ("doc_isQuantity_comma", "isQuantity('1,3G')", False),
    ("doc_isQuantity_10000k", "isQuantity('10000k')", True),
    ("doc_isQuantity_200K", "isQuantity('200K')", False),
    ("doc_isQuantity_Three", "isQuantity('Three')", False),
    ("exponent", "quantity('1e3') == quantity('1k')", True),
    ("exponent_negative", "quantity('1E-3') == quantity('1m')", True),
    ("nano_rounds_up", "quantity('0.1n') == quantity('1n')", True),
    ("negative_rounds_away", "quantity('-0.1n') == quantity('-1n')", True),
    ("fraction_binary", "quantity('1.5Gi') == quantity('1536Mi')", True),
    ("plus_sign", "quantity('+5') == quantity('5')", True),
    ("micro", "quantity('1000u') == quantity('1m')", True),
    ("peta_exa", "quantity('1000P') == quantity('1E')", True),
    ("capacity_requests_idiom", "quantity('80Gi').compareTo(quantity('40Gi')) >= 0", True),
]

ERRORS = [
    ("parseInvalidSuffix", 'quantity("10Mo")', "quantities must match the regular expression"),
    ("parseInvalidSuffixPassesRegex", 'quantity("10Mm")', "unable to parse quantity's suffix"),
    (
        "as_integer_error",
        'quantity("9999999999999999999999999999999999999G").asInteger()',
        "cannot convert value to integer",
    ),
    ("doc_200K", "quantity('200K')", "unable to parse quantity's suffix"),
    ("doc_Three", "quantity('Three')", "quantities must match"),
    ("empty", "quantity('')", "quantities must match"),
    ("whitespace", "quantity(' 1')", "quantities must match"),
    ("compare_to_semver", "quantity('1').compareTo(semver('1.0.0'))", "found no matching overload"),
    ("no_overload", "isQuantity(1)", "found no matching overload"),
    ("huge_exponent", "quantity('1e99999')", "out of the supported range"),
]


@table(VALUES, "expected")
def test_values(run, expr, expected):
    expect_value(run(expr), expected)


@table(ERRORS, "message")
def test_errors(run, expr, message):
    expect_error(run(expr), message)


@pytest.mark.parametrize(
    ("text", "value", "scaled"),
    [
        ("12Mi", 12 * 2**20, (12 * 2**20, 0)),
        ("100m", Fraction(1, 10), (100, -3)),
        ("1.5", 1.5, (15, -1)),
        ("-", 0, (0, 0)),  # Go's scanner reads a bare sign as zero
        ("1.5Gi", 1.5 * 2**30, None),
        ("1Ei", 2**60, None),  # too many binary digits for the fast form
        ("16Ei", 2**63 - 1, None),  # BinarySI is capped at int64 max
    ],
)
def test_parse_forms(text, value, scaled):
    parsed = parse_quantity(text)
    assert parsed.value == value
    assert parsed.scaled == scaled


def test_parse_error_type():
    with pytest.raises(CelFunctionError):
        parse_quantity("1.1.M")


@pytest.mark.parametrize(
    ("text", "printed"),
    [
        ("1e-10", "1e-9"),  # rounded up to a nano, printed canonically
        ("1.5", "1500m"),
        ("1.5Gi", "1536Mi"),
        ("1024Ki", "1Mi"),
        ("0.5Mi", "512Ki"),
        ("1.1k", "1100"),
        ("5e-7", "500e-9"),
        ("1e100", "10e99"),
        ("1.000001", "1.000001"),  # already canonical: Go keeps the text
        ("1E3", "1E3"),
        ("8Ki", "8Ki"),
    ],
    ids=str,
)
def test_printed_as_go_prints(text, printed):
    assert str(parse_quantity(text)) == printed
