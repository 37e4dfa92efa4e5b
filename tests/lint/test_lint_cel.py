"""CEL selector rules, table-driven: each case is an expression, a class, and what it should say."""

from __future__ import annotations

from typing import Any

import pytest
from lint.dra_objects import GPU, claim, exactly, found, selector

from webhook.engine.cel import selector_error
from webhook.lint import ERROR, WARNING, lint_object
from webhook.lint.celtext import accesses, normalize_version, string_spans
from webhook.lint.rules.cel import use_selector_compiler

A = "device.attributes['gpu.nvidia.com']"
C = "device.capacity['gpu.nvidia.com']"

# (id, expression, device class, expected fix substring or None for "no finding")
DOMAIN_CASES = [
    # the article classic
    (
        "capacity-memory",
        "device.capacity['memory'] >= quantity('40Gi')",
        GPU,
        "device.capacity['gpu.nvidia.com'].memory",
    ),
    (
        "attributes-productName",
        "device.attributes['productName'] == 'NVIDIA A100'",
        GPU,
        "device.attributes['gpu.nvidia.com'].productName",
    ),
    (
        "double-quotes",
        'device.attributes["productName"] == "A100"',
        GPU,
        "device.attributes['gpu.nvidia.com'].productName",
    ),
    (
        "mig-class-maps-to-gpu-domain",
        "device.attributes['profile'] == '1g.5gb'",
        "mig.nvidia.com",
        "device.attributes['gpu.nvidia.com'].profile",
    ),
    (
        "qualified-name-as-key",
        "device.attributes['gpu.nvidia.com/productName'] == 'x'",
        "other",
        "device.attributes['gpu.nvidia.com'].productName",
    ),
    (
        "standard-attribute",
        "device.attributes['pcieRoot'] == 'pci0000:00'",
        GPU,
        "device.attributes['resource.kubernetes.io'].pcieRoot",
    ),
    (
        "domain-from-driver",
        "device.driver == 'tpu.google.com' && device.attributes['tpuGen'] == 'v5'",
        "tpu-class",
        "device.attributes['tpu.google.com'].tpuGen",
    ),
    (
        "domain-from-sibling",
        f"{A}.brand == 'x' && device.capacity['memory'].compareTo(quantity('1Gi')) > 0",
        "custom",
        "device.capacity['gpu.nvidia.com'].memory",
    ),
    (
        "domain-unknown",
        "device.attributes['model'] == 'x'",
        "custom",
        "device.attributes['<driver domain>'].model",
    ),
    ("good-qualified", f"{C}.memory.compareTo(quantity('40Gi')) >= 0", GPU, None),
    ("good-guard-on-domain", f"'brand' in {A} && {A}.brand == 'x'", GPU, None),
    (
        "good-in-string-literal",
        "request.selectors.all(s, !s.contains(\"device.capacity['memory']\"))",
        GPU,
        None,
    ),
    ("good-driver-only", "device.driver == 'gpu.nvidia.com'", GPU, None),
]


@pytest.mark.parametrize(
    ("expression", "device_class", "fix"),
    [c[1:] for c in DOMAIN_CASES],
    ids=[c[0] for c in DOMAIN_CASES],
)
def test_cel_domain(expression: str, device_class: str, fix: str | None) -> None:
    hits = found(selector(expression, device_class), "cel-domain")
    if fix is None:
        assert hits == []
    else:
        assert len(hits) == 1 and hits[0].severity == ERROR
        assert fix in hits[0].fix
        assert hits[0].path == (
            "spec",
            "devices",
            "requests",
            0,
            "exactly",
            "selectors",
            0,
            "cel",
            "expression",
        )


VERSION_CASES = [
    # (id, expression, expected fix or None, severity)
    (
        "ge-string-550",
        f"{A}.driverVersion >= '550'",
        f"{A}.driverVersion.compareTo(semver('550.0.0')) >= 0",
        ERROR,
    ),
    (
        "ge-double-quoted",
        f'{A}.driverVersion >= "550"',
        f"{A}.driverVersion.compareTo(semver('550.0.0')) >= 0",
        ERROR,
    ),
    (
        "eq-full-string",
        f"{A}.driverVersion == '550.54.15'",
        f"{A}.driverVersion.compareTo(semver('550.54.15')) == 0",
        ERROR,
    ),
    (
        "ne-string",
        f"{A}.cudaDriverVersion != '12.4'",
        f"{A}.cudaDriverVersion.compareTo(semver('12.4.0')) != 0",
        ERROR,
    ),
    (
        "compute-capability-gt",
        f"{A}.cudaComputeCapability > '8.0'",
        f"{A}.cudaComputeCapability.compareTo(semver('8.0.0')) > 0",
        ERROR,
    ),
    (
        "reversed-operands",
        f"'550' <= {A}.driverVersion",
        f"{A}.driverVersion.compareTo(semver('550.0.0')) >= 0",
        ERROR,
    ),
    (
        "number-operand",
        f"{A}.driverVersion >= 550",
        f"{A}.driverVersion.compareTo(semver('550.0.0')) >= 0",
        ERROR,
    ),
    (
        "semver-with-lt",
        f"{A}.driverVersion < semver('560.0.0')",
        f"{A}.driverVersion.compareTo(semver('560.0.0')) < 0",
        ERROR,
    ),
    (
        "bracket-ident",
        f"{A}['driverVersion'] >= '550'",
        "driverVersion.compareTo(semver('550.0.0')) >= 0",
        ERROR,
    ),
    (
        "domainless-version",
        "device.attributes['driverVersion'] >= '550'",
        f"{A}.driverVersion.compareTo(semver('550.0.0')) >= 0",
        ERROR,
    ),
    (
        "startsWith",
        f"{A}.driverVersion.startsWith('550')",
        f"{A}.driverVersion.major() == 550",
        ERROR,
    ),
    (
        "other-driver-version-like",
        "device.attributes['nic.example.com'].firmwareVersion >= '2.1'",
        "firmwareVersion.compareTo(semver('2.1.0')) >= 0",
        WARNING,
    ),
    ("good-compareTo", f"{A}.driverVersion.compareTo(semver('550.0.0')) >= 0", None, ERROR),
    ("good-isGreaterThan", f"{A}.driverVersion.isGreaterThan(semver('550.0.0'))", None, ERROR),
    ("good-eq-semver", f"{A}.driverVersion == semver('550.54.15')", None, ERROR),
    ("good-major", f"{A}.driverVersion.major() >= 550", None, ERROR),
    ("good-string-attr", f"{A}.productName == 'NVIDIA A100'", None, ERROR),
    ("good-architecture", f"{A}.architecture == 'Hopper'", None, ERROR),
]


@pytest.mark.parametrize(
    ("expression", "fix", "severity"),
    [c[1:] for c in VERSION_CASES],
    ids=[c[0] for c in VERSION_CASES],
)
def test_cel_version_compare(expression: str, fix: str | None, severity: str) -> None:
    hits = found(selector(expression), "cel-version-compare")
    if fix is None:
        assert hits == []
    else:
        assert len(hits) == 1
        assert fix in hits[0].fix
        assert hits[0].severity == severity


QUANTITY_CASES = [
    (
        "quantity-ge",
        f"{C}.memory >= quantity('40Gi')",
        f"{C}.memory.compareTo(quantity('40Gi')) >= 0",
    ),
    ("string-ge", f"{C}.memory >= '40Gi'", f"{C}.memory.compareTo(quantity('40Gi')) >= 0"),
    (
        "number-gt",
        f"{C}.memory > 42949672960",
        f"{C}.memory.compareTo(quantity('42949672960')) > 0",
    ),
    (
        "domainless",
        "device.capacity['memory'] >= quantity('40Gi')",
        f"{C}.memory.compareTo(quantity('40Gi')) >= 0",
    ),
    ("eq-string", f"{C}.memory == '80Gi'", f"{C}.memory.compareTo(quantity('80Gi')) == 0"),
    ("good-compareTo", f"{C}.memory.compareTo(quantity('40Gi')) >= 0", None),
    ("good-isGreaterThan", f"{C}.memory.isGreaterThan(quantity('40Gi'))", None),
    ("good-eq-quantity", f"{C}.memory == quantity('80Gi')", None),
]


@pytest.mark.parametrize(
    ("expression", "fix"), [c[1:] for c in QUANTITY_CASES], ids=[c[0] for c in QUANTITY_CASES]
)
def test_cel_quantity_compare(expression: str, fix: str | None) -> None:
    hits = found(selector(expression), "cel-quantity-compare")
    assert [fix in h.fix for h in hits] == ([] if fix is None else [True])


STALE_CASES = [
    ("index", f"{A}.index == 0", "uuid"),
    ("minor", f"{A}.minor == 1", "gpu-<minor>"),
    ("pcieBusID", f"{A}.pcieBusID == '0000:3b:00.0'", "resource.kubernetes.io'].pciBusID"),
    ("parentIndex", f"{A}.parentIndex == 0", "parentUUID"),
    ("domainless-index-gpu-class", "device.attributes['index'] == 0", "uuid"),
    ("good-uuid", f"{A}.uuid == 'GPU-123'", None),
    (
        "good-pciBusID",
        "device.attributes['resource.kubernetes.io'].pciBusID == '0000:3b:00.0'",
        None,
    ),
    ("good-tpu-index", "device.attributes['tpu.google.com'].index == 0", None),
]


@pytest.mark.parametrize(
    ("expression", "fix"), [c[1:] for c in STALE_CASES], ids=[c[0] for c in STALE_CASES]
)
def test_stale_attribute(expression: str, fix: str | None) -> None:
    hits = found(selector(expression), "stale-attribute")
    assert [fix in h.fix for h in hits] == ([] if fix is None else [True])


UNGUARDED_CASES = [
    ("mig-profile-gpu-class", f"{A}.profile == '1g.5gb'", GPU, True),
    ("parentUUID-gpu-class", f"{A}.parentUUID == 'GPU-1'", GPU, True),
    ("addressingMode", f"{A}.addressingMode == 'ATS'", GPU, True),
    ("pcieRoot", "device.attributes['resource.kubernetes.io'].pcieRoot == 'pci0000:00'", GPU, True),
    ("fabric-partition", f"{A}.partition4 == 1", GPU, True),
    ("vfio-deviceID", f"{A}.deviceID == '0x2330'", GPU, True),
    ("good-guard-in", f"'profile' in {A} && {A}.profile == '1g.5gb'", GPU, False),
    ("good-guard-has", f"has({A}.profile) && {A}.profile == '1g.5gb'", GPU, False),
    ("good-mig-class", f"{A}.profile == '1g.5gb'", "mig.nvidia.com", False),
    ("good-type-guard", f"{A}.type == 'mig' && {A}.profile == '1g.5gb'", GPU, False),
    ("good-vfio-class", f"{A}.deviceID == '0x2330'", "vfio.gpu.nvidia.com", False),
    ("good-always-there", f"{A}.productName == 'x' && {A}.uuid != ''", GPU, False),
]


@pytest.mark.parametrize(
    ("expression", "device_class", "expected"),
    [c[1:] for c in UNGUARDED_CASES],
    ids=[c[0] for c in UNGUARDED_CASES],
)
def test_cel_unguarded_attribute(expression: str, device_class: str, expected: bool) -> None:
    hits = found(selector(expression, device_class), "cel-unguarded-attribute")
    assert len(hits) == (1 if expected else 0)
    if hits:
        assert hits[0].severity == WARNING
        assert "in device.attributes" in hits[0].fix


def test_cel_rules_cover_every_place_a_selector_lives() -> None:
    bad = {"cel": {"expression": "device.capacity['memory'] >= quantity('1Gi')"}}
    device_class = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": GPU},
        "spec": {"selectors": [bad]},
    }
    sub = claim(
        {"name": "g", "firstAvailable": [{"name": "a", "deviceClassName": GPU, "selectors": [bad]}]}
    )
    flat = claim({"name": "g", "deviceClassName": GPU, "selectors": [bad]}, version="v1beta1")
    for obj in (device_class, sub, flat):
        assert len(found(obj, "cel-domain")) == 1, obj["kind"]
        assert "gpu.nvidia.com" in found(obj, "cel-domain")[0].fix


POLICY_CASES: list[tuple[str, dict[str, Any], list[str]]] = [
    (
        "mapping-selector-version",
        {
            "kind": "LegacyResourceMapping",
            "spec": {
                "resources": [
                    {
                        "resourceName": "nvidia.com/gpu",
                        "deviceClassName": GPU,
                        "selector": f"{A}.driverVersion >= '550'",
                    }
                ]
            },
        },
        ["cel-version-compare"],
    ),
    (
        "mapping-selector-mig-default",
        {
            "kind": "LegacyResourceMapping",
            "spec": {
                "resources": [
                    {
                        "resourceNamePrefix": "nvidia.com/mig-",
                        "deviceClassName": "mig.nvidia.com",
                        "selector": f"{A}.profile == '{{suffix}}'",
                    }
                ]
            },
        },
        [],
    ),
    (
        "validation-domainless",
        {
            "kind": "DeviceClassPolicy",
            "spec": {
                "deviceClassNames": [GPU],
                "validations": [
                    {"expression": "device.capacity['memory'] == quantity('1Gi')", "message": "m"}
                ],
            },
        },
        ["cel-domain"],
    ),
    (
        "validation-searching-selectors",
        {
            "kind": "DeviceClassPolicy",
            "spec": {
                "validations": [
                    {"expression": "request.selectors.all(s, !s.contains('uuid'))", "message": "m"}
                ]
            },
        },
        [],
    ),
]


@pytest.mark.parametrize(
    ("doc", "expected"), [c[1:] for c in POLICY_CASES], ids=[c[0] for c in POLICY_CASES]
)
def test_cel_rules_in_policies(doc: dict[str, Any], expected: list[str]) -> None:
    policy = {"apiVersion": "dragate.io/v1alpha1", "metadata": {"name": "p"}, **doc}
    assert [f.rule for f in lint_object(policy)] == expected


def test_one_expression_with_several_mistakes_reports_each() -> None:
    expression = (
        "device.capacity['memory'] >= quantity('40Gi') && "
        f"{A}.driverVersion >= '550' && {A}.index == 0"
    )
    use_selector_compiler(selector_error)
    assert sorted(f.rule for f in lint_object(selector(expression))) == [
        "cel-compile",
        "cel-domain",
        "cel-quantity-compare",
        "cel-version-compare",
        "stale-attribute",
    ]


def test_string_spans_handle_escapes_triple_and_raw_strings() -> None:
    text = r"""'a\'b' + "c" + '''d'e''' + r'f\'"""
    spans = [text[a:b] for a, b in string_spans(text)]
    assert spans == [r"'a\'b'", '"c"', "'''d'e'''", r"'f\'"]


def test_accesses_skip_string_literals_and_method_calls() -> None:
    text = "'device.attributes[\"x\"]' == s && device.capacity['memory'].compareTo(quantity('1'))"
    (only,) = accesses(text)
    assert (only.field, only.key, only.ident, only.name) == ("capacity", "memory", None, "memory")


@pytest.mark.parametrize(
    ("raw", "normalized"),
    [
        ("550", "550.0.0"),
        ("550.54", "550.54.0"),
        ("550.54.15", "550.54.15"),
        ("v12.4", "12.4.0"),
        ("8.0", "8.0.0"),
        ("latest", "latest"),
        ("1.2.3.4", "1.2.3.4"),
    ],
    ids=["major", "major-minor", "full", "v-prefix", "compute-capability", "word", "four-parts"],
)
def test_normalize_version(raw: str, normalized: str) -> None:
    assert normalize_version(raw) == normalized


def test_no_findings_for_a_well_written_selector() -> None:
    expression = (
        f"device.driver == 'gpu.nvidia.com' && {A}.productName.startsWith('NVIDIA H100') && "
        f"{C}.memory.compareTo(quantity('80Gi')) >= 0 && "
        f"{A}.driverVersion.compareTo(semver('550.0.0')) >= 0 && "
        f"'pcieRoot' in device.attributes['resource.kubernetes.io'] && "
        "device.attributes['resource.kubernetes.io'].pcieRoot != ''"
    )
    assert lint_object(claim(exactly(selectors=[{"cel": {"expression": expression}}]))) == []


# (id, selector, message class the API server gives, or None: it accepts the selector)
COMPILE_CASES = [
    ("quantity-gt", f"{C}.memory > quantity('1Gi')", "found no matching overload for '_>_'"),
    (
        "compareTo-int",
        f"{C}.memory.compareTo(40) > 0",
        "found no matching overload for 'compareTo'",
    ),
    ("quantity-eq-int", "quantity('5') == 5", "found no matching overload for '_==_'"),
    ("semver-eq-string", "semver('1.2.3') == '1.2.3'", "found no matching overload for '_==_'"),
    ("ternary-mixed", "(true ? 1 : 'a') == 1", "found no matching overload for '_?_:_'"),
    ("mixed-list", "[1, 'a'].size() == 2", "expected type 'int' but found 'string'"),
    ("bad-regex", f"{A}.productName.matches('[')", "invalid matches argument"),
    ("bad-duration", "duration('1x') > duration('1s')", "invalid duration argument"),
    ("not-bool", f"{C}.memory", "must evaluate to bool or the unknown type, not kubernetes.Q"),
    ("unknown-field", "device.unknownField == 'x'", "undefined field 'unknownField'"),
    ("dyn-result", f"dyn({A}.index == 0)", "must evaluate to bool or the unknown type, not dyn"),
    ("fine-attribute-result", f"{A}['bool']", None),
    (
        "too-costly",
        "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(a, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all("
        "b, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(c, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(d, [1, 2, 3, "  # noqa: E501
        "4, 5, 6, 7, 8, 9, 10].all(e, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(f, e + f > 0))))))",
        "too complex, exceeds cost limit",
    ),
    ("fine-compareTo", f"{C}.memory.compareTo(quantity('40Gi')) >= 0", None),
    ("fine-optional", f"{A}.?profile.orValue('') == '1g.10gb'", None),
    ("fine-two-variable", f"{A}.all(k, v, k.size() > 0)", None),
]


@pytest.mark.parametrize(
    ("expression", "message"), [c[1:] for c in COMPILE_CASES], ids=[c[0] for c in COMPILE_CASES]
)
def test_cel_compile_refusals_are_errors(expression: str, message: str | None) -> None:
    """`dragate lint` refuses what the API server refuses when the claim is created."""
    use_selector_compiler(selector_error)
    hits = found(selector(expression, GPU), "cel-compile")
    if message is None:
        assert hits == []
        return
    assert len(hits) == 1 and hits[0].severity == ERROR
    assert message in hits[0].message
