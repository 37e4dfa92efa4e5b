"""How Go prints a `resource.Quantity` that has no remembered text (CanonicalizeBytes).

The number becomes an integer mantissa times a power of ten that is a multiple of three, then
the suffix of the quantity's format: an SI letter (none when the power has no letter), an
`e<n>` exponent, or for binary quantities of at least 1024 that are whole numbers, the
largest power of 1024 (`1536Mi`).
"""

from __future__ import annotations

from fractions import Fraction

DECIMAL_SI, BINARY_SI, DECIMAL_EXPONENT = "DecimalSI", "BinarySI", "DecimalExponent"
_DECIMAL_SUFFIX = {
    -9: "n",
    -6: "u",
    -3: "m",
    0: "",
    3: "k",
    6: "M",
    9: "G",
    12: "T",
    15: "P",
    18: "E",
}
_BINARY_SUFFIX = {0: "", 1: "Ki", 2: "Mi", 3: "Gi", 4: "Ti", 5: "Pi", 6: "Ei"}


def _decimal(value: Fraction) -> tuple[int, int]:
    """(mantissa, exponent): value == mantissa * 10**exponent, exponent a multiple of 3."""
    exponent = 0
    while value.denominator != 1:
        value, exponent = value * 10, exponent - 1
    mantissa = int(value)
    while mantissa and mantissa % 10 == 0:
        mantissa, exponent = mantissa // 10, exponent + 1
    shift = exponent % 3
    return mantissa * 10**shift, exponent - shift


def _binary(whole: int) -> tuple[int, int]:
    power = 0
    while whole and whole % 1024 == 0:
        whole, power = whole // 1024, power + 1
    return whole, power


def canonical(value: Fraction, kind: str) -> str:
    """Go's String() for a quantity of this value and format, without cached text."""
    if value == 0:
        return "0"
    if kind == BINARY_SI and (abs(value) < 1024 or value.denominator != 1):
        kind = DECIMAL_SI
    if kind == BINARY_SI:
        mantissa, power = _binary(int(value))
        return f"{mantissa}{_BINARY_SUFFIX.get(power, '')}"
    mantissa, exponent = _decimal(value)
    if kind == DECIMAL_EXPONENT:
        return f"{mantissa}e{exponent}" if exponent else str(mantissa)
    return f"{mantissa}{_DECIMAL_SUFFIX.get(exponent, '')}"
