"""Node labels that pinned a GPU model, carried over as CEL selectors on the device requests.

With the device plugin a Pod chose its GPU by node label (GPU feature discovery's
`nvidia.com/gpu.product` and friends). With DRA the devices carry attributes themselves, so a
faithful label becomes a selector and the label can go; anything we cannot translate exactly
stays on the Pod, with a warning that says why. Attribute names are those the NVIDIA DRA driver
publishes (`cmd/gpu-kubelet-plugin/deviceinfo.go`): `productName` is NVML's device name
("NVIDIA A100-SXM4-80GB") and GFD's label is that name with spaces as dashes, so the selector
compares `productName.replace(' ', '-')` exactly rather than guessing the spaces back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

GPU_CLASS = "gpu.nvidia.com"
MIG_CLASS = "mig.nvidia.com"
BOTH = frozenset({GPU_CLASS, MIG_CLASS})
GPU_ONLY = frozenset({GPU_CLASS})
ATTR = "device.attributes['gpu.nvidia.com']"
CAP = "device.capacity['gpu.nvidia.com']"
NVIDIA = "nvidia.com/"
FAMILIES = frozenset(
    {
        "kepler",
        "maxwell",
        "pascal",
        "volta",
        "turing",
        "ampere",
        "ada-lovelace",
        "hopper",
        "blackwell",
    }
)
NODE_SELECTOR = "nodeSelector"
AFFINITY = "affinity"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


@dataclass(frozen=True)
class LabelRule:
    """One node label requirement and the selector that replaces it (None: implied by a claim)."""

    key: str
    value: str | None  # None for `Exists`
    where: str  # NODE_SELECTOR or AFFINITY
    expression: str | None
    classes: frozenset[str]


@dataclass(frozen=True)
class Translation:
    rules: tuple[LabelRule, ...] = ()
    warnings: tuple[str, ...] = ()


Translated = tuple[str | None, frozenset[str]] | str | None
"""(expression, classes) when faithful; a warning string when not; None: keep silently."""


def translate(spec: dict[str, Any]) -> Translation:
    """Every `nvidia.com/*` node requirement of the Pod, translated or explained."""
    rules: list[LabelRule] = []
    warnings: list[str] = []
    for key, value, where in _requirements(spec, warnings):
        result = translate_label(key, value)
        if isinstance(result, tuple):
            rules.append(LabelRule(key, value, where, result[0], result[1]))
        elif isinstance(result, str):
            warnings.append(result)
    return Translation(tuple(rules), tuple(warnings))


def mig_single_reason(spec: dict[str, Any]) -> str | None:
    """Why `nvidia.com/gpu` may mean a MIG slice here (GFD's MIG "single" strategy), if it may."""
    for key, value, _ in _requirements(spec, []):
        if key == "nvidia.com/mig.strategy" and value == "single":
            return "node label nvidia.com/mig.strategy=single"
        if key == "nvidia.com/gpu.product" and value and "-MIG-" in value:
            return f"MIG product label {value}"
    return None


Requirement = tuple[str, str | None, str]
"""(label key, value or None for `Exists`, where it was found)."""


def _requirements(spec: dict[str, Any], warnings: list[str]) -> Iterator[Requirement]:
    selector = spec.get(NODE_SELECTOR)
    if isinstance(selector, dict):
        for key, value in selector.items():
            if str(key).startswith(NVIDIA):
                yield str(key), str(value), NODE_SELECTOR
    yield from _affinity_requirements(spec, warnings)


def _affinity_requirements(spec: dict[str, Any], warnings: list[str]) -> Iterator[Requirement]:
    terms = _terms(spec)
    nvidia = [e for t in terms for e in _expressions(t) if str(e.get("key", "")).startswith(NVIDIA)]
    if len(terms) > 1 and nvidia:
        warnings.append("dragate: node affinity has several terms (OR); nvidia.com labels kept")
        return
    for expr in nvidia:
        key, op, values = str(expr["key"]), expr.get("operator"), expr.get("values") or []
        if op == "In" and len(values) == 1:
            yield key, str(values[0]), AFFINITY
        elif op == "Exists":
            yield key, None, AFFINITY
        else:
            warnings.append(f"dragate: node affinity {key} {op} {values} kept: not translatable")


def _terms(spec: dict[str, Any]) -> list[dict[str, Any]]:
    required = _dig(spec, AFFINITY, "nodeAffinity", REQUIRED)
    terms = required.get("nodeSelectorTerms") if isinstance(required, dict) else None
    return [t for t in terms if isinstance(t, dict)] if isinstance(terms, list) else []


def _expressions(term: dict[str, Any]) -> list[dict[str, Any]]:
    exprs = term.get("matchExpressions")
    return [e for e in exprs if isinstance(e, dict)] if isinstance(exprs, list) else []


def _dig(node: Any, *keys: str) -> Any:
    for key in keys:
        node = node.get(key) if isinstance(node, dict) else None
    return node


def translate_label(key: str, value: str | None) -> Translated:
    """The CEL selector for one GFD label, when one says exactly the same thing."""
    name = key[len(NVIDIA) :]
    if name in ("gpu.present", "gpu.product", "gpu.memory", "gpu.family") and value is None:
        return None, BOTH  # `Exists`: any GPU claim implies it
    handler = _HANDLERS.get(name)
    if handler is not None:
        return handler(value or "")
    semver = _SEMVER_LABELS.get(name)
    if semver is not None:
        return _semver_part(key, value, *semver)
    full = _FULL_VERSION_LABELS.get(name)
    if full is not None:
        return _full_version(key, value, *full)
    if name == "mig.strategy":
        return None  # a fact about the node's MIG setup, not a GPU model: kept, harmless
    return f"dragate: node label {key} kept: no DRA device attribute says the same"


def _product(value: str) -> Translated:
    if "-MIG-" in value or value.endswith("-SHARED"):
        return f"dragate: node label nvidia.com/gpu.product={value} kept: MIG/shared product name"
    return f"{ATTR}.productName.replace(' ', '-') == {_quote(value)}", BOTH


def _memory(value: str) -> Translated:
    """GFD's label is total memory in MiB, rounded down; match exactly that MiB window."""
    if not value.isdigit():
        return f"dragate: node label nvidia.com/gpu.memory={value} kept: not a MiB count"
    low, high = int(value), int(value) + 1
    mem = f"{CAP}.memory"
    expr = f"{mem}.compareTo(quantity('{low}Mi')) >= 0 && {mem}.compareTo(quantity('{high}Mi')) < 0"
    return expr, GPU_ONLY


def _family(value: str) -> Translated:
    if value.lower() not in FAMILIES:
        return f"dragate: node label nvidia.com/gpu.family={value} kept: unknown family"
    arch = f"{ATTR}.architecture.lowerAscii().replace(' ', '-')"
    return f"{arch} == {_quote(value.lower())}", BOTH


def _present(value: str) -> Translated:
    if value == "true":
        return None, BOTH
    return f"dragate: node label nvidia.com/gpu.present={value} kept"


_HANDLERS: dict[str, Callable[[str], Translated]] = {
    "gpu.product": _product,
    "gpu.memory": _memory,
    "gpu.family": _family,
    "gpu.present": _present,
}

_SEMVER_LABELS: dict[str, tuple[str, str]] = {
    # GFD: compute capability of the GPU (9.0 for H100); the DRA driver's cudaComputeCapability.
    "gpu.compute.major": ("cudaComputeCapability", "major"),
    "gpu.compute.minor": ("cudaComputeCapability", "minor"),
    # GFD: the NVIDIA *driver* version (550.90.07), old and new spellings; the DRA driver
    # publishes the same NVML value as driverVersion (semver, so "07" is patch 7).
    "cuda.driver.major": ("driverVersion", "major"),
    "cuda.driver.minor": ("driverVersion", "minor"),
    "cuda.driver.rev": ("driverVersion", "patch"),
    "cuda.driver-version.major": ("driverVersion", "major"),
    "cuda.driver-version.minor": ("driverVersion", "minor"),
    "cuda.driver-version.revision": ("driverVersion", "patch"),
    # GFD: the highest CUDA version the driver supports (12.4); NVML's cudaDriverVersion.
    "cuda.runtime.major": ("cudaDriverVersion", "major"),
    "cuda.runtime.minor": ("cudaDriverVersion", "minor"),
    "cuda.runtime-version.major": ("cudaDriverVersion", "major"),
    "cuda.runtime-version.minor": ("cudaDriverVersion", "minor"),
}
"""GFD label -> (DRA driver attribute, semver part). Checked against GFD's labelers and the
DRA driver's `deviceinfo.go`: both read the same NVML calls (SystemGetDriverVersion,
SystemGetCudaDriverVersion, the device's compute capability), for GPUs and MIG devices alike."""

_FULL_VERSION_LABELS: dict[str, tuple[str, int]] = {
    "cuda.driver-version.full": ("driverVersion", 3),  # 550.90.07
    "cuda.runtime-version.full": ("cudaDriverVersion", 2),  # 12.4
}
_PARTS = ("major", "minor", "patch")


def _semver_part(key: str, value: str | None, attribute: str, part: str) -> Translated:
    if value is None or not value.isdigit():
        return f"dragate: node label {key}={value} kept: not a number"
    return f"{ATTR}.{attribute}.{part}() == {int(value)}", BOTH


def _full_version(key: str, value: str | None, attribute: str, length: int) -> Translated:
    """`550.90.07` -> major, minor and patch all equal (semver drops the leading zero)."""
    numbers = (value or "").split(".")
    if len(numbers) != length or not all(n.isdigit() for n in numbers):
        return f"dragate: node label {key}={value} kept: not a {length}-part version"
    parts = zip(_PARTS[:length], numbers, strict=True)
    checks = [f"{ATTR}.{attribute}.{p}() == {int(n)}" for p, n in parts]
    return " && ".join(checks), BOTH


def _quote(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def remove_rules(spec: dict[str, Any], rules: list[LabelRule]) -> None:
    """Drop the translated requirements, and any selector or affinity left empty."""
    selector = spec.get(NODE_SELECTOR)
    for rule in rules:
        if rule.where == NODE_SELECTOR and isinstance(selector, dict):
            selector.pop(rule.key, None)
    if isinstance(selector, dict) and not selector:
        del spec[NODE_SELECTOR]
    gone = {r.key for r in rules if r.where == AFFINITY}
    if gone:
        _remove_affinity(spec, gone)


def _remove_affinity(spec: dict[str, Any], keys: set[str]) -> None:
    term = _terms(spec)[0]
    term["matchExpressions"] = [e for e in _expressions(term) if e.get("key") not in keys]
    chain = [spec, spec[AFFINITY], spec[AFFINITY]["nodeAffinity"]]
    names = [AFFINITY, "nodeAffinity", REQUIRED]
    required = chain[-1][names[-1]]
    if not term["matchExpressions"]:
        del term["matchExpressions"]
    if not term:
        required["nodeSelectorTerms"].remove(term)
    if not required["nodeSelectorTerms"]:
        del required["nodeSelectorTerms"]
    for parent, name in reversed(list(zip(chain, names, strict=True))):
        if parent[name] == {}:
            del parent[name]
