# ruff: noqa: RUF001
"""cel-go ext/strings_test.go cases (code-point semantics, error messages)."""

from cel_cases import expect_error, expect_value, table

VALUES = [
    ("charAt", "'tacocat'.charAt(3) == 'o'", True),
    ("charAt_end", "'tacocat'.charAt(7) == ''", True),
    ("charAt_unicode", "'©αT'.charAt(0) == '©' && '©αT'.charAt(1) == 'α'", True),
    ("indexOf_empty", "'tacocat'.indexOf('') == 0", True),
    ("indexOf", "'tacocat'.indexOf('ac') == 1", True),
    ("indexOf_missing", "'tacocat'.indexOf('none') == -1", True),
    ("indexOf_offset_empty", "'tacocat'.indexOf('', 3) == 3", True),
    ("indexOf_offset", "'tacocat'.indexOf('a', 3) == 5", True),
    ("indexOf_offset_at", "'tacocat'.indexOf('at', 3) == 5", True),
    ("indexOf_unicode", "'ta©o©αT'.indexOf('©') == 2", True),
    ("indexOf_unicode_offset", "'ta©o©αT'.indexOf('©', 3) == 4", True),
    ("indexOf_unicode_pair", "'ta©o©αT'.indexOf('©αT', 3) == 4", True),
    ("indexOf_too_long", "'ta©o©αT'.indexOf('©α', 5) == -1", True),
    ("indexOf_past_end", "'tacocat'.indexOf('a', 30) == -1", True),
    ("indexOf_at_len", "'tacocat'.indexOf('a', 7) == -1", True),
    ("lastIndexOf_past_end", "'tacocat'.lastIndexOf('a', 30) == -1", True),
    ("indexOf_longer_needle", "'ijk'.indexOf('k') == 2", True),
    ("indexOf_hello", "'hello wello'.indexOf('hello wello') == 0", True),
    ("indexOf_past", "'hello wello'.indexOf('ello', 6) == 7", True),
    ("indexOf_none_from_offset", "'hello wello'.indexOf('elbo room!!') == -1", True),
    ("lastIndexOf_empty", "'tacocat'.lastIndexOf('') == 7", True),
    ("lastIndexOf", "'tacocat'.lastIndexOf('at') == 5", True),
    ("lastIndexOf_missing", "'tacocat'.lastIndexOf('none') == -1", True),
    ("lastIndexOf_offset_empty", "'tacocat'.lastIndexOf('', 3) == 3", True),
    ("lastIndexOf_offset", "'tacocat'.lastIndexOf('a', 3) == 1", True),
    ("lastIndexOf_unicode", "'ta©o©αT'.lastIndexOf('©') == 4", True),
    ("lastIndexOf_unicode_offset", "'ta©o©αT'.lastIndexOf('©', 3) == 2", True),
    ("lastIndexOf_unicode_pair", "'ta©o©αT'.lastIndexOf('©α', 4) == 4", True),
    ("lastIndexOf_whole", "'hello wello'.lastIndexOf('hello wello') == 0", True),
    ("lastIndexOf_clamped", "'bananananana'.lastIndexOf('nana', 7) == 6", True),
    ("lowerAscii", "'TacoCat'.lowerAscii() == 'tacocat'", True),
    ("lowerAscii_unicode", "'TacoCÆt Xii'.lowerAscii() == 'tacocÆt xii'", True),
    ("upperAscii", "'tacoCat'.upperAscii() == 'TACOCAT'", True),
    ("upperAscii_unicode", "'tacoCαt'.upperAscii() == 'TACOCαT'", True),
    ("replace", "'12 days 12 hours'.replace('{0}', '2') == '12 days 12 hours'", True),
    ("replace_all", "'{0} days {0} hours'.replace('{0}', '2') == '2 days 2 hours'", True),
    (
        "replace_n",
        "'{0} days {0} hours'.replace('{0}', '2', 1).replace('{0}', '23') == '2 days 23 hours'",
        True,
    ),
    ("replace_unicode", "'1 ©αT taco'.replace('αT', 'o©α') == '1 ©o©α taco'", True),
    ("replace_zero", "'abc'.replace('b', 'x', 0) == 'abc'", True),
    ("replace_empty_old", "'abc'.replace('', '-') == '-a-b-c-'", True),
    ("split", "'hello world'.split(' ') == ['hello', 'world']", True),
    ("split_n_zero", "'hello world events!'.split(' ', 0) == []", True),
    ("split_n_one", "'hello world events!'.split(' ', 1) == ['hello world events!']", True),
    ("split_n_two", "'o©o©o©o'.split('©', 3) == ['o', 'o', 'o©o']", True),
    ("split_n_negative", "'o©o©o©o'.split('©', -1) == ['o', 'o', 'o', 'o']", True),
    ("split_empty_sep", "'abc'.split('') == ['a', 'b', 'c']", True),
    ("split_empty_sep_n", "'abcd'.split('', 2) == ['a', 'bcd']", True),
    ("split_empty_string", "''.split(',') == ['']", True),
    ("substring", "'tacocat'.substring(4) == 'cat'", True),
    ("substring_end", "'tacocat'.substring(7) == ''", True),
    ("substring_range", "'tacocat'.substring(0, 4) == 'taco'", True),
    ("substring_empty_range", "'tacocat'.substring(4, 4) == ''", True),
    ("substring_unicode", "'ta©o©αT'.substring(2, 6) == '©o©α'", True),
    ("trim", "' \\f\\n\\r\\t\\vtext  '.trim() == 'text'", True),
    ("trim_unicode", "'\\u0085\\u00a0\\u1680text\\u2000\\u2001'.trim() == 'text'", True),
    ("trim_not_go_space", "'\\u001ctext'.trim() == '\\u001ctext'", True),
    ("join", "['x', 'y'].join() == 'xy'", True),
    ("join_sep", "['x', 'y'].join('-') == 'x-y'", True),
    ("join_empty", "[].join() == ''", True),
    ("join_empty_sep", "[].join('-') == ''", True),
    ("quote", 'strings.quote("first\\nsecond") == "\\"first\\\\nsecond\\""', True),
    (
        "quote_escapes",
        "strings.quote('\\a\\b\\f\\r\\t\\v\\\\') == '\"\\\\a\\\\b\\\\f\\\\r\\\\t\\\\v\\\\\\\\\"'",
        True,
    ),
    ("quote_unicode", "strings.quote('ta©o©αT') == '\"ta©o©αT\"'", True),
    ("quote_quotes", "strings.quote('\"') == '\"\\\\\"\"'", True),
]

ERRORS = [
    ("charAt_oob", "'tacocat'.charAt(30) == ''", "index out of range: 30"),
    ("charAt_negative", "'tacocat'.charAt(-1) == ''", "index out of range: -1"),
    ("lastIndexOf_negative", "'tacocat'.lastIndexOf('a', -1) == -1", "index out of range: -1"),
    ("substring_oob", "'tacocat'.substring(40) == 'cat'", "index out of range: 40"),
    ("substring_negative", "'tacocat'.substring(-1) == 'cat'", "index out of range: -1"),
    ("substring_range_oob", "'tacocat'.substring(1, 50) == 'cat'", "index out of range: 50"),
    ("substring_range_negative", "'tacocat'.substring(49, 50) == 'cat'", "index out of range: 49"),
    (
        "substring_inverted",
        "'tacocat'.substring(4, 3) == ''",
        "invalid substring range. start: 4, end: 3",
    ),
    ("join_non_string", "[1, 2].join() == ''", "found no matching overload"),
    ("charAt_not_int", "'abc'.charAt('1') == ''", "found no matching overload"),
]


@table(VALUES, "expected")
def test_values(run, expr, expected):
    expect_value(run(expr), expected)


@table(ERRORS, "message")
def test_errors(run, expr, message):
    expect_error(run(expr), message)


def test_replace_refuses_to_build_huge_strings(run):
    result = run(
        "cel.bind(s, 'aaaaaaaaaaaaaaaa'.replace('a', 'aaaaaaaaaaaaaaaa'), "
        "cel.bind(t, s.replace('a', s), t.replace('a', t))).size() > 0"
    )
    assert result.error is not None and "longer than" in result.error
