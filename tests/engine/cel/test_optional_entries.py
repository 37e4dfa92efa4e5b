"""The text rewrite that lets celpy parse optional entries of list and map literals."""

from __future__ import annotations

import pytest

from webhook.engine.cel.optional_entries import rewrite_optional_entries

CASES = [
    ("list", "[1, ?o]", "_dg_optlist([1, _dg_optentry(o)])"),
    ("map", "{?'k': o}", "_dg_optmap({'k': _dg_optentry( o)})"),
    ("nested", "[?x, [?y]]", "_dg_optlist([_dg_optentry(x), _dg_optlist([_dg_optentry(y)])])"),
    ("index_untouched", "a[?k]", "a[?k]"),
    ("select_untouched", "m.?f", "m.?f"),
    ("conditional_untouched", "x ? [1] : [2]", "x ? [1] : [2]"),
    ("conditional_in_value", "{'a': c ? 1 : 2}", "{'a': c ? 1 : 2}"),
    ("string_untouched", "['?', ?o]", "_dg_optlist(['?', _dg_optentry(o)])"),
    ("call_arguments_untouched", "f(a, b) ? 1 : 2", "f(a, b) ? 1 : 2"),
]


@pytest.mark.parametrize(("source", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_rewrite(source: str, expected: str) -> None:
    assert rewrite_optional_entries(source) == expected
