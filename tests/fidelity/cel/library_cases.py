"""dragate's own library cases: edges the upstream tables leave out.

The named-format library returns Kubernetes' validation messages as values, so every rule's
boundaries (length limits, generateName prefixes, qualified-name prefixes, calendar dates,
URI errors, which `isURL` shares) are tried here; so are type values with a package
(`net.IP`), which compare with any other type value, and quantities as Go prints them.
"""

from __future__ import annotations

_LONG_LABEL = "a" * 64
_LONG_SUBDOMAIN = ".".join(["a" * 63] * 4) + "b"

FORMAT_INPUTS: dict[str, tuple[str, ...]] = {
    "dns1123Label": ("", "a.b", "Upper", _LONG_LABEL, "-a", "a" * 63, "é"),
    "dns1123Subdomain": ("", "a..b", "a.b.", _LONG_SUBDOMAIN, "A.b", "ab-.c"),
    "dns1035Label": ("1abc", "", "abc", "a_b", _LONG_LABEL),
    "qualifiedName": (
        "",
        "a/b/c",
        "/name",
        "example.com/",
        "Example.com/name",
        "example.com/" + _LONG_LABEL,
        "-bad-",
        "k8s.io/a_b.c-d",
        _LONG_LABEL,
    ),
    "dns1123LabelPrefix": ("-", "a-", "ab-", "a--", "A-", "ab"),
    "dns1123SubdomainPrefix": ("x.-", "a.b-", "-"),
    "dns1035LabelPrefix": ("1-", "ab-", "a-"),
    "labelValue": ("", "-a", "a" * 63, "a" * 64, "a b", "_a_"),
    "uri": (
        "",
        "*",
        "/path",
        "relative/path",
        "mailto:x@example.com",
        "http://a b.com",
        "http://example.com/\x01",
        "http://[::1]:8080/x?y=z",
        "/a b",
        "http://x.com/a b",
        "a b:x",
        ":x",
        "http://x.com?q=a b",
        "http://x.com#a b",
        "http://us er@x.com/",
        "http://u%zz@x.com/",
        "http://x.com:8a/",
        "http://[::1/",
        "ht tp://x.com",
        "http://x.com/%zz",
        "http://x.com/%4",
        "http://%41.com/",
        "http://%25.com/",
        "http://x.com/?%zz",
        "HTTP://X.COM/é",
        "http://é.com/",
        "1http://x.com/",
    ),
    "uuid": (
        "",
        "123E4567E89B12D3A456426614174000",
        "123e4567-e89b-12d3-a456-42661417400",
        "g23e4567-e89b-12d3-a456-426614174000",
    ),
    "byte": ("", "aGVsbG8h", "aGVsbA==", "aGVsbA=", "a GVsbA==", "aGVsbA==\n"),
    "date": (
        "2024-02-29",
        "2023-02-29",
        "2000-02-29",
        "1900-02-29",
        "2021-13-01",
        "2021-00-10",
        "2021-1-01",
        "21-01-01",
        "2021-04-31",
        "0000-01-01",
    ),
    "datetime": (
        "2021-01-01t00:00:00z",
        "2021-01-01T24:00:00Z",
        "2021-01-01T23:59:60Z",
        "2021-01-01T12:00:00.123+05:30",
        "2021-01-01T12:00:00",
        "2021-01-01",
        "2021-01-01T12:00:00Zjunk",
        "2021-01-01T12:00:00Z\n",
        "2021-01-01 12:00:00Z",
    ),
}


def _quoted(text: str) -> str:
    return (
        '"'
        + text.replace("\\", "\\\\")
        .replace('"', '\\"')
        .replace("\n", "\\n")
        .replace("\x01", "\\x01")
        + '"'
    )


FORMAT_EXPRESSIONS: tuple[str, ...] = (
    *(
        f"format.{name}().validate({_quoted(text)})"
        for name, inputs in FORMAT_INPUTS.items()
        for text in inputs
    ),
    *(f'format.named("{name}").value().validate("a-b")' for name in FORMAT_INPUTS),
    *(f"isURL({_quoted(text)})" for text in FORMAT_INPUTS["uri"]),
    *(
        f'url("http://x.com{path}").getEscapedPath()'
        for path in (
            "/with space/",
            "/a%20b",
            "/a(b)!*'",
            "/[x]",
            "/é",
            "/a%41 b",
            "/$&+,:;=@",
            "/~_.-",
        )
    ),
    'format.named("DNS1123Label")',
    'format.named("uri") == format.named("uri")',
    "format.uri() == format.uuid()",
    "type(format.uri())",
    'format.labelValue().validate("a b").orValue([]).size()',
)

TYPE_EXPRESSIONS: tuple[str, ...] = (
    "net.IP",
    "net.CIDR",
    "net",
    "net.Address",
    "type(net.IP)",
    "int == string",
    "type(1) == string",
    'type(cidr("10.0.0.0/8")) == net.IP',
    'type(ip("::1")) == net.IP',
    "[net.IP, net.CIDR]",
    "string(net.IP)",
    "kubernetes.Quantity",
)

QUANTITY_TEXTS: tuple[str, ...] = (
    "1e-10",
    "1.5e-9",
    "-1e-10",
    "0.0000000001",
    "1.5",
    "0.1",
    "1.50",
    "007",
    "+5",
    "1e-3",
    "100e-3",
    "5e-7",
    "1e3",
    "1E3",
    "12e6",
    "1e100",
    "1e21",
    "1000E",
    "1.1k",
    "1000",
    "1000000",
    "3000m",
    "1.000001",
    "1234567890123456789",
    "12345678901234567890",
    "1.5Gi",
    "-1.5Gi",
    "1024Ki",
    "0.5Mi",
    "0.5Ki",
    "8Ki",
    "16Ki",
    "1025Ki",
    "1.0001Gi",
    "10Ei",
    "1Ti",
    "1023",
)

QUANTITY_EXPRESSIONS: tuple[str, ...] = (
    *(f'quantity("{text}")' for text in QUANTITY_TEXTS),
    'quantity("1Gi").add(quantity("1.5"))',
    'quantity("0").add(quantity("1Ki"))',
    'quantity("1e3").sub(1)',
    'quantity("1Ki").add(1024)',
    'quantity("1.5").sub(quantity("1.5"))',
)
"""Quantities as values: Go prints them canonically unless the input already was."""

DURATION_EXPRESSIONS: tuple[str, ...] = (
    *(
        f'duration("{text}")'
        for text in (
            "1d",
            "1h30m",
            ".5s",
            "5.s",
            "-1.5h",
            "+2m",
            "0",
            "1",
            "",
            "1us",
            "1\u00b5s",
            "3ns",
            "1h1d",
            "1.5.5s",
        )
    ),
    *(f'["{text}"].map(d, duration(d))' for text in ("1d", "1h", "-0", "x")),
)
"""Durations as Go's time.ParseDuration reads them: no days, a unit on every number."""

FORMAT_VERB_EXPRESSIONS: tuple[str, ...] = (
    "'%e'.format([3.14])",
    "'%e'.format([0.00123])",
    "'%e'.format([-1234.5])",
    "'%.2e'.format([3.14159])",
    "'%e'.format([1e300])",
    "'%e'.format([1])",
    "'%s'.format([duration('1m')])",
    "'%s'.format([duration('1.5s')])",
    "'%s'.format([duration('-90m')])",
    "'%s'.format([timestamp('2000-01-01T00:00:00.000Z')])",
    "'%s'.format([timestamp('2000-01-01T00:00:00.5+01:00')])",
    "'%s'.format([])",
    "'%d'.format(['a'])",
    "'%s %s'.format(['a'])",
    "'%x'.format([1.5])",
    "'%.1f'.format([1])",
    "'%b'.format([true])",
    "'%o'.format([8])",
)
"""`string.format` verbs: %e as cel-go prints it (x/text), %s of durations and timestamps."""

OPTIONAL_ENTRY_EXPRESSIONS: tuple[str, ...] = (
    "[?optional.of(1), 2]",
    "[?optional.none(), 2]",
    "[1, ?optional.none()]",
    "[?optional.none()]",
    "[?1]",
    "['a', ?optional.of(1)]",
    "[[?optional.none()], [1]]",
    "{?'a': optional.of(1), 'b': 2}",
    "{?'a': optional.none()}",
    "{?'a': 1}",
    "{'a': true ? 1 : 2, ?'b': optional.of(3)}",
    "true ? [?optional.of(1)] : []",
    "[?{'a': 1}.?a, ?{'a': 1}.?b]",
    "[?[1][?0], ?[1][?5]]",
    "['?', ?optional.of('?')]",
    "{?'k': optional.ofNonZeroValue('')}.size()",
    "[?optional.of(1)].all(x, x > 0)",
    "[[], [1]]",
    "[[1], []]",
    "[{}, {1: 2}]",
)
"""Optional entries in list and map literals (`[?x]`, `{?k: x}`), kept when present."""
