"""Manifests still asking the NVIDIA device plugin for GPUs: `dragate migrate` turns them into
DRA claims, so lint points there (a warning: they still work wherever the plugin runs)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from webhook.lint.findings import WARNING, Finding, Path
from webhook.lint.registry import RuleInfo, register

LEGACY = RuleInfo(
    "legacy-gpu-request",
    WARNING,
    "`nvidia.com/gpu` / `nvidia.com/mig-*` in resources: a device-plugin request, not DRA",
)
SECTIONS = ("limits", "requests")


def legacy_name(name: str) -> bool:
    return name == "nvidia.com/gpu" or name.startswith("nvidia.com/mig-")


@register(LEGACY)
def check_legacy_requests(obj: Mapping[str, Any]) -> Iterator[Finding]:
    for path, name in _legacy(obj, ()):
        yield Finding(
            LEGACY.id,
            WARNING,
            path,
            f"`{name}` is requested from the device plugin, not through a DRA claim",
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
