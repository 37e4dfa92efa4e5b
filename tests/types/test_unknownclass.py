"""`unknown_class`: one wording for a DeviceClass name that does not exist, with the closest."""

from __future__ import annotations

import pytest

from webhook.types import UnknownClass, unknown_class

KNOWN = {"gpu.nvidia.com", "mig.nvidia.com", "tpu.google.com"}


@pytest.mark.parametrize(
    ("name", "known", "expected"),
    [
        ("gpu.nvdia.com", KNOWN, UnknownClass("gpu.nvdia.com", "gpu.nvidia.com")),
        ("mig.nvidia.co", KNOWN, UnknownClass("mig.nvidia.co", "mig.nvidia.com")),
        ("fpga.example.org", KNOWN, UnknownClass("fpga.example.org", None)),
        ("gpu.nvidia.com", KNOWN, None),
        ("gpu.nvdia.com", set(), None),
        ("", KNOWN, None),
    ],
    ids=["typo", "missing-letter", "nothing-close", "known", "nothing-known", "no-name"],
)
def test_unknown_class(name: str, known: set[str], expected: UnknownClass | None) -> None:
    assert unknown_class(name, known) == expected


@pytest.mark.parametrize(
    ("unknown", "text"),
    [
        (
            UnknownClass("gpu.nvdia.com", "gpu.nvidia.com"),
            "DeviceClass 'gpu.nvdia.com' does not exist (did you mean 'gpu.nvidia.com'?)",
        ),
        (UnknownClass("x", None), "DeviceClass 'x' does not exist"),
    ],
    ids=["with-suggestion", "without"],
)
def test_wording(unknown: UnknownClass, text: str) -> None:
    assert str(unknown) == text
