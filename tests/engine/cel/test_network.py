"""IP, CIDR and URL libraries, optionals, two-variable comprehensions, operator semantics.

Each expected value is what Kubernetes 1.34 answers (checked with the Go oracle of
tests/fidelity/cel); the differential test covers the upstream tables in bulk.
"""

from cel_cases import expect_error, expect_value, table

VALUES = [
    ("ip_family", "ip('10.0.0.1').family()", 4),
    ("ip6_family", "ip('fd00::1').family()", 6),
    ("ip_string", "string(ip('2001:DB8::1'))", "2001:db8::1"),
    ("ip_canonical", "ip.isCanonical('2001:db8::1')", True),
    ("ip_not_canonical", "ip.isCanonical('2001:DB8::1')", False),
    ("ip_loopback", "ip('127.0.0.1').isLoopback()", True),
    ("ip_global_private", "ip('10.0.0.1').isGlobalUnicast()", True),
    ("ip_link_local", "ip('169.254.1.1').isLinkLocalUnicast()", True),
    ("is_ip_mapped", "isIP('::ffff:1.2.3.4')", False),
    ("cidr_contains_ip", "cidr('10.0.0.0/8').containsIP(ip('10.1.2.3'))", True),
    ("cidr_contains_string", "cidr('10.0.0.0/8').containsIP('11.0.0.1')", False),
    ("cidr_contains_cidr", "cidr('10.0.0.0/8').containsCIDR('10.1.0.0/16')", True),
    ("cidr_masked", "string(cidr('192.168.0.1/24').masked())", "192.168.0.0/24"),
    ("cidr_prefix", "cidr('192.168.0.0/24').prefixLength()", 24),
    ("cidr_ip", "string(cidr('192.168.0.1/24').ip())", "192.168.0.1"),
    ("url_host", "url('https://example.com:8080/x').getHost()", "example.com:8080"),
    ("url_hostname_v6", "url('https://[::1]:80/x').getHostname()", "::1"),
    ("url_port", "url('https://example.com:8080/x').getPort()", "8080"),
    ("url_query", "url('/p?a=1&a=2').getQuery()['a']", ["1", "2"]),
    ("is_url_relative", "isURL('example.com/x')", False),
    ("optional_select", "{'a': 1}.?a.orValue(0)", 1),
    ("optional_missing", "{'a': 1}.?b.orValue(0)", 0),
    ("optional_index", "{'a': 1}[?'a'].hasValue()", True),
    ("optional_none", "optional.none().hasValue()", False),
    ("two_var_all", "[1, 2, 3].all(i, v, i < v)", True),
    ("two_var_map", "{'a': 1}.exists(k, v, k == 'a' && v == 1)", True),
    ("transform_list", "[3, 2, 1].transformList(i, v, v > i, v * 2)", [6, 4]),
    ("transform_map", "{'a': 1}.transformMap(k, v, v + 1)", {"a": 2}),
    ("list_concat_keeps_type", "sets.contains(['Ampere'] + ['Hopper'], ['Hopper'])", True),
    ("string_concat_keeps_type", "('a b' + ' c').split(' ').size()", 3),
    ("mixed_compare", "dyn(1) < 1.5", True),
    ("mixed_equal", "dyn(1) == 1u", True),
    ("mixed_equal_other", "dyn(1) == 'a'", False),
    ("string_bool", "string(true)", "true"),
    ("string_negative_zero", "string(-0.0)", "-0"),
    ("string_double_exponent", "string(1234567.0)", "1.234567e+06"),
    ("lastIndexOf_past_end", "'abc'.lastIndexOf('b', 100)", -1),
    ("triple_quoted_keeps_newline", "'''a\nb'''", "a\nb"),
    ("sign_is_global", "sign(quantity('-1'))", -1),
]

ERRORS = [
    ("ip_zone", "ip('fe80::1%eth0')", "zone value is not allowed"),
    ("ip_mapped", "ip('::ffff:1.2.3.4')", "IPv4-mapped"),
    ("cidr_bad", "cidr('10.0.0.0/')", "parse error"),
    ("url_relative", "url('example.com')", "URL parse error"),
    ("optional_value_of_none", "optional.none().value()", "optional.none() dereference"),
    ("negative_index", "dyn([1, 2])[-1]", "index out of bounds: -1"),
    ("semver_equals_string", "dyn(semver('1.0.0')) == '1.0.0'", "no such overload"),
    ("transform_duplicate", "[1, 1].transformMapEntry(i, v, {v: i})", "already exists"),
    ("unknown_function", "two_var([1], x)", "undeclared reference"),
    ("sign_is_not_a_method", "quantity('1').sign()", "found no matching overload for 'sign'"),
]


@table(VALUES, "expected")
def test_values(run, expr, expected):
    expect_value(run(expr), expected)


@table(ERRORS, "message")
def test_errors(run, expr, message):
    expect_error(run(expr), message)
