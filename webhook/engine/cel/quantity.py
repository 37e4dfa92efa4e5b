"""Kubernetes `resource.Quantity` for CEL, parsed and compared exactly like apimachinery.

Values are kept as exact `Fraction`s so `quantity('1Gi') == quantity('1024Mi')` and
`quantity('200M') == quantity('0.2G')` hold by value, as in Go. Go also remembers whether a
quantity fits its fast `int64Amount` form (unscaled int64 plus base-10 scale); that form decides
`isInteger()`/`asInteger()` (e.g. Go answers false for `quantity('1.5Gi').isInteger()`), so it is
tracked in `scaled` and updated by `add`/`sub` with the same overflow rules.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from functools import lru_cache
from typing import Any

import celpy.celtypes as ct

from webhook.engine.cel.errors import CelFunctionError
from webhook.engine.cel.quantity_text import BINARY_SI, DECIMAL_EXPONENT, DECIMAL_SI, canonical
from webhook.engine.cel.values import expect, register_value_type

_SPLIT_RE = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
ERR_FORMAT = f"quantities must match the regular expression '{_SPLIT_RE}'"
ERR_NUMERIC = "unable to parse numeric part of quantity"
ERR_SUFFIX = "unable to parse quantity's suffix"
_DIGITS = frozenset("0123456789")
_SUFFIX_CHARS = frozenset("eEinumkKMGTP")
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_MAX_EXPONENT = 1000  # Go allows int32; beyond this an exact Fraction would be a memory bomb
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_NANO = 10**9

Scaled = tuple[int, int]
"""Go's int64Amount: (unscaled int64 value, base-10 scale)."""


def _fits(value: int) -> bool:
    return _INT64_MIN <= value <= _INT64_MAX


class Quantity:
    """An immutable Kubernetes quantity; equality and hashing are by exact value."""

    __slots__ = ("kind", "scaled", "text", "value")
    CEL_TYPE_NAME = "kubernetes.Quantity"

    def __init__(
        self, value: Fraction, scaled: Scaled | None, text: str = "", kind: str = DECIMAL_SI
    ) -> None:
        self.value = value
        self.scaled = scaled
        self.text = text  # Go's remembered text: the input, when it was already canonical
        self.kind = kind  # Go's Format: DecimalSI, BinarySI or DecimalExponent

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Quantity) and self.value == other.value

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(self.value)

    def __repr__(self) -> str:
        return f"Quantity({str(self)!r})"

    def __str__(self) -> str:
        return self.text or canonical(self.value, self.kind)

    def compare(self, other: Any) -> int:
        """-1, 0 or 1 like Go's Quantity.Cmp; `other` must be a Quantity."""
        theirs: Fraction = expect(other, Quantity, "compareTo").value
        return int(self.value > theirs) - int(self.value < theirs)

    def plus(self, other: Quantity) -> Quantity:
        """Go's Quantity.Add: exact sum; the int64 form survives unless it overflows.

        A zero receiver takes the other's format, as Go's Add does.
        """
        scaled = None
        if self.scaled is not None and other.scaled is not None:
            scaled = _add_scaled(self.scaled, other.scaled)
        kind = other.kind if self.value == 0 else self.kind
        return Quantity(self.value + other.value, scaled, kind=kind)

    def negated(self) -> Quantity:
        scaled = None if self.scaled is None else (-self.scaled[0], self.scaled[1])
        return Quantity(-self.value, scaled, kind=self.kind)

    def as_int64(self) -> int | None:
        """Go's AsInt64: only the int64 form with a non-negative scale converts."""
        if self.scaled is None or self.scaled[1] < 0:
            return None
        return _positive_scale(*self.scaled)

    def approximate_float(self) -> float:
        """Go's AsApproximateFloat64, with overflow saturating to +/-Inf."""
        try:
            if self.scaled is None:
                return float(self.value)
            unscaled, scale = self.scaled
            return float(unscaled) * (10.0**scale) if scale else float(unscaled)
        except OverflowError:
            return math.copysign(math.inf, self.value)


register_value_type(Quantity)


def _positive_scale(value: int, scale: int) -> int | None:
    if value == 0 or scale == 0:
        return value
    if scale > 19:
        return None
    result = value * 10**scale
    return result if _fits(result) else None


def _add_scaled(a: Scaled, b: Scaled) -> Scaled | None:
    """int64Amount.Add: align to the smaller scale, fail (-> Dec form) on int64 overflow."""
    (av, ascale), (bv, bscale) = a, b
    if bv == 0:
        return a
    if av == 0:
        return b
    if ascale > bscale:
        av_aligned = _positive_scale(av, ascale - bscale)
        total = None if av_aligned is None else av_aligned + bv
        return (total, bscale) if total is not None and _fits(total) else None
    bv_aligned = _positive_scale(bv, bscale - ascale)
    total = None if bv_aligned is None else av + bv_aligned
    return (total, ascale) if total is not None and _fits(total) else None


def _scan(text: str) -> tuple[bool, str, str, str]:
    """parseQuantityString: (positive, numerator digits, fraction digits, suffix)."""
    end, pos, positive = len(text), 0, True
    if text[0] in "+-":
        positive, pos = text[0] == "+", 1
    while pos < end and text[pos] == "0":
        pos += 1
    if pos >= end:
        return positive, "0", "", ""
    start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    num, denom = text[start:pos] or "0", ""
    if pos < end and text[pos] == ".":
        start = pos = pos + 1
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        denom = text[start:pos]
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos < end:
        raise CelFunctionError(ERR_FORMAT)
    return positive, num, denom, text[suffix_start:]


def _interpret(suffix: str) -> tuple[int, int]:
    """(base, exponent) of a suffix: decimal SI, binary SI or an `e<n>` exponent."""
    if suffix in _DECIMAL:
        return 10, _DECIMAL[suffix]
    if suffix in _BINARY:
        return 2, _BINARY[suffix]
    if len(suffix) > 1 and suffix[0] in "eE":
        try:
            exponent = int(suffix[1:])
        except ValueError:
            raise CelFunctionError(ERR_SUFFIX) from None
        if abs(exponent) > _MAX_EXPONENT:
            raise CelFunctionError(f"quantity exponent {exponent} is out of the supported range")
        return 10, exponent
    raise CelFunctionError(ERR_SUFFIX)


def _fast_form(positive: bool, num: str, denom: str, base: int, exponent: int) -> Scaled | None:
    """The int64Amount ParseQuantity produces when the value fits, else None (Dec form)."""
    if base == 2:
        if denom:
            return None
        mantissa, scale = 1 << exponent, 0
        precision = 15 - len(num) - int(exponent * 3 / 10) - 1
    else:
        mantissa, scale = 1, exponent
        precision = 18 - (len(num) + len(denom))
    scale -= len(denom)
    if precision < 0 or scale < -9:
        return None
    result = int(num + denom) * mantissa
    if not _fits(result):
        return None
    return (result if positive else -result), scale


def _slow_value(positive: bool, num: str, denom: str, base: int, exponent: int) -> Fraction:
    """The inf.Dec path: exact value, magnitude rounded up to a nano, BinarySI capped."""
    try:
        amount = Fraction(int(num + denom), 10 ** len(denom)) * Fraction(base) ** exponent
    except ValueError:
        raise CelFunctionError(ERR_NUMERIC) from None
    if amount:
        amount = Fraction(math.ceil(amount * _NANO), _NANO)
    if base == 2 and amount > _INT64_MAX:
        amount = Fraction(_INT64_MAX)
    return amount if positive else -amount


@lru_cache(maxsize=1024)
def parse_quantity(text: str) -> Quantity:
    """resource.ParseQuantity; raises CelFunctionError with Go's messages.

    Cached: quantities are immutable and selectors repeat the same literals on every device.
    """
    if not text:
        raise CelFunctionError(ERR_FORMAT)
    if text == "0":
        return Quantity(Fraction(0), (0, 0), text)
    positive, num, denom, suffix = _scan(text)
    base, exponent = _interpret(suffix)
    kind = _format_of(suffix)
    scaled = _fast_form(positive, num, denom, base, exponent)
    if scaled is not None:
        remembered = text if _is_canonical(num + denom, len(denom), base, exponent) else ""
        value = Fraction(scaled[0]) * Fraction(10) ** scaled[1]
        return Quantity(value, scaled, remembered, kind)
    return Quantity(_slow_value(positive, num, denom, base, exponent), None, "", kind)


def _format_of(suffix: str) -> str:
    if suffix in _DECIMAL:
        return DECIMAL_SI
    return BINARY_SI if suffix in _BINARY else DECIMAL_EXPONENT


def _is_canonical(digits: str, decimals: int, base: int, exponent: int) -> bool:
    """Whether Go's fast path keeps the input as the quantity's text (ParseQuantity)."""
    if base == 2:
        return int(digits) & 7 != 0
    return (exponent - decimals) % 3 == 0 and not digits.endswith("000") and digits[0] != "0"


# --------------------------------------------------------------------------- CEL functions


def quantity(text: Any) -> Quantity:
    return parse_quantity(str(expect(text, ct.StringType, "quantity")))


def is_quantity(text: Any) -> ct.BoolType:
    text = expect(text, ct.StringType, "isQuantity")
    try:
        parse_quantity(str(text))
    except CelFunctionError:
        return ct.BoolType(False)
    return ct.BoolType(True)


def _operand(value: Any, function: str) -> Quantity:
    """A Quantity or int operand for add/sub; ints become int64Amount{n, 0} as in Go."""
    if isinstance(value, ct.IntType) and not isinstance(value, ct.BoolType):
        return Quantity(Fraction(int(value)), (int(value), 0))
    return expect(value, Quantity, function)  # type: ignore[no-any-return]


def add(receiver: Quantity, other: Any) -> Quantity:
    return receiver.plus(_operand(other, "add"))


def sub(receiver: Quantity, other: Any) -> Quantity:
    return receiver.plus(_operand(other, "sub").negated())


def sign(receiver: Any) -> ct.IntType:
    value = expect(receiver, Quantity, "sign").value
    return ct.IntType((value > 0) - (value < 0))


def is_integer(receiver: Any) -> ct.BoolType:
    return ct.BoolType(expect(receiver, Quantity, "isInteger").as_int64() is not None)


def as_integer(receiver: Any) -> ct.IntType:
    value = expect(receiver, Quantity, "asInteger").as_int64()
    if value is None:
        raise CelFunctionError("cannot convert value to integer")
    return ct.IntType(value)


def as_approximate_float(receiver: Any) -> ct.DoubleType:
    return ct.DoubleType(expect(receiver, Quantity, "asApproximateFloat").approximate_float())


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "quantity": quantity,
    "isQuantity": is_quantity,
    "sign": sign,
    "isInteger": is_integer,
    "asInteger": as_integer,
    "asApproximateFloat": as_approximate_float,
}
"""Names only Quantity answers; add/sub/compareTo are shared and dispatched in library.py."""
