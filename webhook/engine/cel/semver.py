"""Semantic versions for CEL, following blang/semver v4 as used by Kubernetes' semver library.

`semver(s)` is strict SemVer 2.0 (no `v`, all three numbers, no leading zeros);
`semver(s, true)` first applies Kubernetes' `normalizeAndParse` (drop one leading `v`, strip
leading zeros, pad a missing minor/patch with 0). Comparison follows SemVer precedence,
prerelease included and build metadata ignored, so equality is by precedence too.
"""

from __future__ import annotations

import string
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import celpy.celtypes as ct

from webhook.engine.cel.errors import CelFunctionError, NoSuchOverload
from webhook.engine.cel.values import expect, register_value_type

_NUMBERS = frozenset(string.digits)
_ALPHANUMERICS = frozenset(string.ascii_letters + string.digits + "-")
_UINT64_MAX = 2**64 - 1

Prerelease = tuple[int | str, ...]


class Semver:
    """An immutable parsed version; `build` is kept for display only."""

    __slots__ = ("build", "major", "minor", "patch", "pre")
    CEL_TYPE_NAME = "kubernetes.Semver"

    def __init__(
        self, major: int, minor: int, patch: int, pre: Prerelease = (), build: tuple[str, ...] = ()
    ) -> None:
        self.major, self.minor, self.patch = major, minor, patch
        self.pre, self.build = pre, build

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Semver) and self.compare(other) == 0

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash((self.major, self.minor, self.patch, self.pre))

    def __repr__(self) -> str:
        return f"Semver({str(self)!r})"

    def __str__(self) -> str:
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.pre:
            text += "-" + ".".join(str(p) for p in self.pre)
        return text + ("+" + ".".join(self.build) if self.build else "")

    def compare(self, other: Any) -> int:
        """SemVer precedence: -1, 0 or 1; `other` must be a Semver."""
        other = expect(other, Semver, "compareTo")
        mine, theirs = (self.major, self.minor, self.patch), (other.major, other.minor, other.patch)
        if mine != theirs:
            return 1 if mine > theirs else -1
        return _compare_pre(self.pre, other.pre)


register_value_type(Semver)


def _compare_pre(left: Prerelease, right: Prerelease) -> int:
    """A version without prerelease ranks higher; then field by field, numbers before words."""
    if not left or not right:
        return (not left) - (not right)
    for a, b in zip(left, right, strict=False):
        if a == b:
            continue
        if isinstance(a, int) != isinstance(b, int):
            return -1 if isinstance(a, int) else 1
        return 1 if a > b else -1  # type: ignore[operator]
    return (len(left) > len(right)) - (len(left) < len(right))


def _number(text: str, what: str) -> int:
    if not set(text) <= _NUMBERS:
        raise CelFunctionError(f"Invalid character(s) found in {what} number {text!r}")
    if len(text) > 1 and text[0] == "0":
        raise CelFunctionError(
            f"{what.capitalize()} number must not contain leading zeroes {text!r}"
        )
    if not text or int(text) > _UINT64_MAX:
        raise CelFunctionError(f"invalid {what} number {text!r}")
    return int(text)


def _prerelease_part(text: str) -> int | str:
    if not text:
        raise CelFunctionError("Prerelease is empty")
    if set(text) <= _NUMBERS:
        if len(text) > 1 and text[0] == "0":
            raise CelFunctionError(
                f"Numeric PreRelease version must not contain leading zeroes {text!r}"
            )
        return int(text)
    if not set(text) <= _ALPHANUMERICS:
        raise CelFunctionError(f"Invalid character(s) found in prerelease {text!r}")
    return text


def _build_part(text: str) -> str:
    if not text:
        raise CelFunctionError("Build meta data is empty")
    if not set(text) <= _ALPHANUMERICS:
        raise CelFunctionError(f"Invalid character(s) found in build meta data {text!r}")
    return text


@lru_cache(maxsize=1024)
def parse_semver(text: str) -> Semver:
    """blang/semver Parse (strict SemVer 2.0); raises CelFunctionError with its messages.

    Cached: versions are immutable and the same literals are parsed for every device.
    """
    if not text:
        raise CelFunctionError("Version string empty")
    parts = text.split(".", 2)
    if len(parts) != 3:
        raise CelFunctionError("No Major.Minor.Patch elements found")
    major, minor = _number(parts[0], "major"), _number(parts[1], "minor")
    patch_text, plus, build = parts[2].partition("+")
    builds = tuple(_build_part(b) for b in build.split(".")) if plus else ()
    patch_text, dash, pre = patch_text.partition("-")
    pres = tuple(_prerelease_part(p) for p in pre.split(".")) if dash else ()
    return Semver(major, minor, _number(patch_text, "patch"), pres, builds)


def normalize_and_parse(text: str) -> Semver:
    """Kubernetes normalizeAndParse: `v1.2` and `01.02.03` become valid versions."""
    parts = text.removeprefix("v").split(".", 2)
    for i, part in enumerate(parts):
        if len(part) > 1:
            stripped = part.lstrip("0")
            parts[i] = stripped if stripped and stripped[0] in _NUMBERS else "0" + stripped
    if len(parts) < 3:
        if any(c in parts[-1] for c in "+-"):
            raise CelFunctionError("short version cannot contain PreRelease/Build meta data")
        parts += ["0"] * (3 - len(parts))
    return parse_semver(".".join(parts))


def _parse(text: Any, normalize: Any, function: str) -> Semver:
    text = str(expect(text, ct.StringType, function))
    if normalize is None:
        return parse_semver(text)
    return (
        normalize_and_parse(text)
        if expect(normalize, ct.BoolType, function)
        else parse_semver(text)
    )


def semver(text: Any, normalize: Any = None) -> Semver:
    return _parse(text, normalize, "semver")


def is_semver(text: Any, normalize: Any = None) -> ct.BoolType:
    try:
        _parse(text, normalize, "isSemver")
    except NoSuchOverload:
        raise
    except CelFunctionError:
        return ct.BoolType(False)
    return ct.BoolType(True)


def major(receiver: Any) -> ct.IntType:
    return ct.IntType(expect(receiver, Semver, "major").major)


def minor(receiver: Any) -> ct.IntType:
    return ct.IntType(expect(receiver, Semver, "minor").minor)


def patch(receiver: Any) -> ct.IntType:
    return ct.IntType(expect(receiver, Semver, "patch").patch)


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "semver": semver,
    "isSemver": is_semver,
    "major": major,
    "minor": minor,
    "patch": patch,
}
"""Names only Semver answers; compareTo & co. are shared with Quantity (library.py)."""
