"""Manifests still asking the NVIDIA device plugin for GPUs: `dragate migrate` turns them into
DRA claims, so lint points there (a warning: they still work wherever the plugin runs).

A name a known DeviceClass declares as its `extendedResourceName` is no finding: Kubernetes
maps it to DRA devices itself (KEP-5004), and dragate's default action keeps it."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from webhook.lint.findings import WARNING, Finding, Path
from webhook.lint.registry import Known, RuleInfo, register_known

LEGACY = RuleInfo(
    "legacy-gpu-request",
    WARNING,
    "`nvidia.com/gpu` / `nvidia.com/mig-*` in resources: a device-plugin request, not DRA",
)
SECTIONS = ("limits", "requests")


def legacy_name(name: str) -> bool:
    return name == "nvidia.com/gpu" or name.startswith("nvidia.com/mig-")


@register_known(LEGACY)
def check_legacy_requests(obj: Mapping[str, Any], known: Known) -> Iterator[Finding]:
    for path, name in _legacy(obj, ()):
        if name in known.extended_names:
            continue
        yield Finding(
            LEGACY.id,
            WARNING,
            path,
            f"`{name}` is requested from the device plugin, not through a DRA claim "
            "(no known DeviceClass maps it)",
            "run `dragate migrate --diff` on this file to see the claim that replaces it "
            "(`--write` applies it)",
        )


def _legacy(node: Any, path: Path) -> Iterator[tuple[Path, str]]:
    """(path, name) of each legacy name under a `limits`/`requests` mapping, anywhere."""
    if isinstance(node, list):
        for index, item in enumerate(node):
            yield from _legacy(item, (*path, index))
    elif isinstance(node, Mapping):
        for key, value in node.items():
            if key in SECTIONS and isinstance(value, Mapping):
                yield from (((*path, key, str(n)), str(n)) for n in value if legacy_name(str(n)))
            else:
                yield from _legacy(value, (*path, key))
