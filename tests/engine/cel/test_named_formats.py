"""Named formats, package-qualified type values, Go's URL and duration rules, format verbs.

Each expected value is what Kubernetes 1.34 answers (checked with the Go oracle of
tests/fidelity/cel); the differential test covers the edges in bulk.
"""

from cel_cases import expect_error, expect_value, table

_LABEL_REGEX = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"

VALUES = [
    ("valid_label", "format.dns1123Label().validate('my-name').hasValue()", False),
    ("label_with_dots", "format.dns1123Label().validate('a.b').value()", ["must not contain dots"]),
    (
        "label_message",
        "format.dns1123Label().validate('A').value()[0]",
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
        "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', "
        f"regex used for validation is '{_LABEL_REGEX}')",
    ),
    ("prefix_masks_dash", "format.dns1123LabelPrefix().validate('ab-').hasValue()", False),
    (
        "qualified_empty_prefix",
        "format.qualifiedName().validate('/x').value()",
        ["prefix part must be non-empty"],
    ),
    ("named_unknown", "format.named('DNS1123Label').hasValue()", False),
    ("named_equal", "format.named('uri').value() == format.uri()", True),
    (
        "uri_error",
        "format.uri().validate('http://x.com:8a/').value()",
        ['parse "http://x.com:8a/": invalid port ":8a" after host'],
    ),
    ("date_leap", "format.date().validate('2023-02-29').value()", ["invalid date"]),
    ("datetime_ok", "format.datetime().validate('2021-01-01t00:00:00z').hasValue()", False),
    ("uuid_upper", "format.uuid().validate('123E4567E89B12D3A456426614174000').hasValue()", False),
    ("type_value", "type(ip('::1')) == net.IP", True),
    ("type_values_compare", "int == string", False),
    ("url_space_in_path", "isURL('/a b')", True),
    ("escaped_path", "url('http://x.com/a b').getEscapedPath()", "/a%20b"),
    ("duration_zero", "duration('0') == duration('0s')", True),
    ("non_zero_int", "optional.ofNonZeroValue(0).hasValue()", False),
    ("format_scientific", "'%e'.format([0.00123])", "1.230000\u00d710\u207b\u2070\u00b3"),
    ("format_duration", "'%s'.format([duration('1.5s')])", "1.5s"),
]

ERRORS = [
    ("net_alone", "net", "undeclared reference to 'net'"),
    ("net_unknown_type", "net.Address", "undeclared reference to 'net'"),
    ("duration_days", "duration('1d')", "invalid duration argument"),
    ("sum_of_strings", "['a'].sum()", "found no matching overload for 'sum'"),
    ("validate_non_format", "'x'.validate('y')", "found no matching overload for 'validate'"),
]


@table(VALUES, "expected")
def test_values(run, expr, expected):
    expect_value(run(expr), expected)


@table(ERRORS, "message")
def test_errors(run, expr, message):
    expect_error(run(expr), message)
