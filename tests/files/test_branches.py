"""Exclusive template branches: lines no rendering holds together."""

from __future__ import annotations

import pytest

from webhook.files.branches import exclusive_lines

TEXT = """\
a:
{{- if .X }}
  k: 1
{{- else if .Y }}
  k: 2
{{- else }}
  {{- range .Z }}
  k: 3
  {{- end }}
{{- end }}
  k: 4
{{- with .W }}
  k: 5
{{- end }}
"""


@pytest.mark.parametrize(
    ("first", "second", "exclusive"),
    [
        (3, 5, True),
        (5, 8, True),
        (3, 8, True),
        (3, 11, False),
        (11, 3, False),
        (11, 13, False),
        (3, 13, False),
        (1, 99, False),
    ],
    ids=[
        "if-else-if",
        "else-if-else",
        "if-nested-in-else",
        "if-and-after",
        "after-and-if",
        "after-and-with",
        "two-blocks",
        "past-the-end",
    ],
)
def test_exclusive_lines(first: int, second: int, exclusive: bool) -> None:
    assert exclusive_lines(TEXT)(first, second) is exclusive
