"""CEL selector rules: domains, typed comparisons, stale and optional NVIDIA attributes.

Facts about the NVIDIA driver (`gpu.nvidia.com`) come from `cmd/gpu-kubelet-plugin/deviceinfo.go`
and `partitions.go` of NVIDIA/k8s-dra-driver-gpu (now kubernetes-sigs/dra-driver-nvidia-gpu):
`driverVersion`, `cudaDriverVersion` and `cudaComputeCapability` are published as `version`
attributes (semver); `index` and `minor` were dropped in v25.8.0 and `pcieBusID` became the
standard `resource.kubernetes.io/pciBusID` in v25.12.0; MIG devices alone carry `profile` and
`parentUUID`, and `pcieRoot`, `addressingMode`, Fabric Manager attributes appear only when known.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from webhook.lint import celtext
from webhook.lint.celtext import Access
from webhook.lint.findings import ERROR, WARNING, Finding, Severity
from webhook.lint.objects import CelSite, cel_sites
from webhook.lint.registry import RuleInfo, register

NVIDIA = "gpu.nvidia.com"
STANDARD = "resource.kubernetes.io"
STANDARD_ATTRIBUTES = frozenset({"pcieRoot", "pciBusID"})
NVIDIA_VERSIONS = frozenset({"driverVersion", "cudaDriverVersion", "cudaComputeCapability"})
_VERSION_LIKE = re.compile(r"[Vv]ersion$")

STALE: Mapping[str, str] = {
    "index": "`index` is no longer published (removed in NVIDIA DRA driver v25.8.0); "
    "select a GPU by `device.attributes['gpu.nvidia.com'].uuid`, or by "
    "`device.attributes['resource.kubernetes.io'].pciBusID`",
    "minor": "`minor` is no longer published (removed in NVIDIA DRA driver v25.8.0); the minor "
    "number survives only in the device name `gpu-<minor>`; select by `uuid` or "
    "`device.attributes['resource.kubernetes.io'].pciBusID` instead",
    "parentIndex": "`parentIndex` is no longer published (removed with `index` in v25.8.0); "
    "use `device.attributes['gpu.nvidia.com'].parentUUID`",
    "pcieBusID": "`pcieBusID` was renamed in NVIDIA DRA driver v25.12.0: use "
    "`device.attributes['resource.kubernetes.io'].pciBusID` (to align devices on one PCIe "
    "root, use `resource.kubernetes.io/pcieRoot` in a matchAttribute constraint)",
}

MIG_ONLY = frozenset({"profile", "parentUUID"})
VFIO_ONLY = frozenset({"deviceID", "vendorID", "iommuFDEnabled"})
SOMETIMES = frozenset({"addressingMode", "gpuModuleId"})
_PARTITION = re.compile(r"partition\d+$")
CLASS_TYPES: Mapping[str, str] = {"mig.nvidia.com": "mig", "vfio.gpu.nvidia.com": "vfio"}

DOMAIN = RuleInfo("cel-domain", ERROR, "attribute/capacity lookup without a `.`-qualified domain")
VERSION = RuleInfo(
    "cel-version-compare", ERROR, "version attribute compared as a string or with <, >"
)
QUANTITY = RuleInfo(
    "cel-quantity-compare", ERROR, "capacity compared with a number, string or <, >"
)
STALE_RULE = RuleInfo("stale-attribute", ERROR, "NVIDIA attribute no longer published")
UNGUARDED = RuleInfo("cel-unguarded-attribute", WARNING, "optional attribute read without a guard")
COMPILE = RuleInfo(
    "cel-compile", ERROR, "selector the API server refuses at create time (type, overload, cost)"
)

SelectorCompiler = Callable[[str], "str | None"]
"""A selector's text -> why Kubernetes' checker refuses it, or None."""
_COMPILER: list[SelectorCompiler] = []


def use_selector_compiler(compiler: SelectorCompiler) -> None:
    """Give lint the CEL checker (injected by the CLI: lint itself stays free of the engine)."""
    _COMPILER[:] = [compiler]


@register(DOMAIN, VERSION, QUANTITY, STALE_RULE, UNGUARDED, COMPILE)
def check_cel(obj: Mapping[str, Any]) -> Iterator[Finding]:
    for site in cel_sites(obj):
        yield from _compiled(site)
        yield from lint_expression(site)


def _compiled(site: CelSite) -> Iterator[Finding]:
    if not site.device_selector or not _COMPILER:
        return
    error = _COMPILER[0](site.expression)
    if error is not None:
        message = f"the API server refuses this selector: {error}"
        yield Finding(COMPILE.id, ERROR, site.path, message)


def lint_expression(site: CelSite) -> Iterator[Finding]:
    """Every CEL finding for one expression."""
    expression = site.expression
    for access in celtext.accesses(expression):
        domain = _domain_for(access, site)
        yield from _domain(site, access, domain)
        yield from _typed_comparison(site, access, domain)
        yield from _stale(site, access, domain)
        yield from _unguarded(site, access)


def _domain_for(access: Access, site: CelSite) -> str:
    """The domain a lookup should read: its own, or the best guess for a domain-less one."""
    if access.qualified:
        return access.domain
    if access.domain:  # written `device.attributes['gpu.nvidia.com/productName']`
        return access.domain
    if access.name in STANDARD_ATTRIBUTES:
        return STANDARD
    if site.domain:
        return site.domain
    drivers = celtext.drivers_named(site.expression)
    if drivers:
        return drivers[0]
    others = [a.domain for a in celtext.accesses(site.expression) if a.qualified]
    return next((d for d in others if d != STANDARD), others[0] if others else "")


def _domain(site: CelSite, access: Access, domain: str) -> Iterator[Finding]:
    if access.qualified:
        return
    shown = domain or "<driver domain>"
    if "/" in access.key:
        message = (
            f"`{access.text}` indexes device.{access.field} with a qualified name; the map is "
            f"keyed by domain, and the name is a field of it"
        )
    else:
        message = (
            f"`{access.text}` has no domain: device.{access.field} is keyed by domain "
            f"(e.g. 'gpu.nvidia.com'), so this lookup finds nothing"
        )
    fix = f"use `{access.rewritten(shown)}`"
    if not domain:
        fix += " with the driver's name as the domain"
    yield Finding(DOMAIN.id, ERROR, site.path, message, fix)


def _typed_comparison(site: CelSite, access: Access, domain: str) -> Iterator[Finding]:
    name = access.name
    if name is None:
        return
    fixed = access.rewritten(domain or "<driver domain>")
    if access.field == "capacity":
        yield from _quantity(site, access, fixed)
        return
    if name in NVIDIA_VERSIONS and domain in (NVIDIA, ""):
        severity: Severity = ERROR
    elif _VERSION_LIKE.search(name):
        severity = WARNING
    else:
        return
    yield from _version(site, access, fixed, severity)


def _version(site: CelSite, access: Access, fixed: str, severity: Severity) -> Iterator[Finding]:
    name = access.name
    cmp = celtext.comparison(site.expression, access)
    if cmp is not None:
        operand = cmp.operand.strip()
        if operand.startswith("semver") and cmp.op in ("==", "!="):
            return
        literal = celtext.literal_value(operand)
        if cmp.op in ("==", "!=") and not celtext.is_string_literal(operand) and literal is None:
            return  # compared with another value of unknown type: give the author the doubt
        version = celtext.normalize_version(literal) if literal is not None else "X.Y.Z"
        how = "as a string" if celtext.is_string_literal(operand) else f"with `{cmp.op}`"
        yield Finding(
            VERSION.id,
            severity,
            site.path,
            f"`{cmp.text}` compares the version attribute `{name}` {how}; version attributes "
            f"are semver values and only compare with semver()",
            f"use `{fixed}.compareTo(semver('{version}')) {cmp.op} 0`"
            + (f" (or `.isGreaterThan(semver('{version}'))`)" if cmp.op == ">" else ""),
        )
        return
    call = celtext.string_call(site.expression, access)
    if call is not None:
        literal = celtext.literal_value(call.arg) if call.arg else None
        if call.method == "startsWith" and literal and literal.isdigit():
            fix = f"use `{fixed}.major() == {literal}`"
        else:
            fix = f"use `{fixed}.compareTo(semver('X.Y.Z'))` or `.major()`/`.minor()`"
        yield Finding(
            VERSION.id,
            severity,
            site.path,
            f"`{call.text}...` calls the string function {call.method}() on the version "
            f"attribute `{name}`, which is a semver value",
            fix,
        )


def _quantity(site: CelSite, access: Access, fixed: str) -> Iterator[Finding]:
    cmp = celtext.comparison(site.expression, access)
    if cmp is None:
        return
    operand = cmp.operand.strip()
    is_quantity = operand.startswith("quantity")
    if cmp.op in ("==", "!=") and (is_quantity or celtext.literal_value(operand) is None):
        return
    literal = celtext.literal_value(operand)
    amount = literal if literal is not None else "40Gi"
    yield Finding(
        QUANTITY.id,
        ERROR,
        site.path,
        f"`{cmp.text}`: capacity `{access.name}` is a Quantity, which has no "
        f"{'`' + cmp.op + '`' if is_quantity else 'comparison with a plain ' + _kind(operand)}",
        f"use `{fixed}.compareTo(quantity('{amount}')) {cmp.op} 0`"
        + (f" (or `.isGreaterThan(quantity('{amount}'))`)" if cmp.op == ">" else ""),
    )


def _kind(operand: str) -> str:
    return "string" if celtext.is_string_literal(operand) else "number"


def _stale(site: CelSite, access: Access, domain: str) -> Iterator[Finding]:
    name = access.name
    if access.field != "attributes" or domain != NVIDIA or name is None or name not in STALE:
        return
    yield Finding(
        STALE_RULE.id,
        ERROR,
        site.path,
        f"`{access.text}`: the NVIDIA DRA driver no longer publishes `{name}`; the lookup "
        f"fails at allocation time",
        STALE[name],
    )


def _unguarded(site: CelSite, access: Access) -> Iterator[Finding]:
    name = access.name
    if access.field != "attributes" or not access.qualified or name is None:
        return
    domain = access.domain
    if not _optional(domain, name, site):
        return
    if celtext.has_guard(site.expression, domain, name):
        return
    yield Finding(
        UNGUARDED.id,
        WARNING,
        site.path,
        f"`{access.text}` reads an attribute that not every device of '{domain}' has; on a "
        f"device without it the expression fails and allocation stops",
        f"guard it: `'{name}' in device.attributes['{domain}'] && {access.text} ...` "
        f"(or `has(device.attributes['{domain}'].{name})`)",
    )


def _optional(domain: str, name: str, site: CelSite) -> bool:
    if domain == STANDARD:
        return name == "pcieRoot"
    if domain != NVIDIA:
        return False
    for only, device_type in ((MIG_ONLY, "mig"), (VFIO_ONLY, "vfio")):
        if name in only:
            typed = CLASS_TYPES.get(site.device_class) == device_type
            return not (typed or celtext.has_type_guard(site.expression, device_type))
    return name in SOMETIMES or bool(_PARTITION.match(name))
