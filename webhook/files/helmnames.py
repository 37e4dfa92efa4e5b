"""Per-release names for the ResourceClaimTemplates `dragate migrate` adds to a Helm template.

The rewriter names a template from (class, count, selectors) alone. Two releases of one chart in
one namespace would both own `dragate-gpu-nvidia-com-2`, and Helm refuses to install the second
(the object belongs to the first release). So in a Helm template an added template's name starts
with the release name, and the Pod's `resourceClaims` reference that name. The release name is
unique in a namespace, which a chart's fullname helper is not once `fullnameOverride` is set;
`$.Release.Name` is the root context's, so it renders the same inside `with` and `range`.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from webhook.files.gotemplates import Masked
from webhook.types import RewriteResult

RELEASE = "{{ $.Release.Name }}"
_HELM_OBJECTS = re.compile(r"\.(?:Release|Values|Chart|Capabilities|Files)\b")


def release_token(masked: Masked | None, file: str) -> str | None:
    """The token standing for the release name in a Helm template (None: not one)."""
    if masked is None or not is_helm(masked, file):
        return None
    return masked.token(RELEASE)


def is_helm(masked: Masked, file: str) -> bool:
    """A Go template that Helm renders: one using Helm's objects, or in a chart's templates/."""
    originals = [*masked.originals.values(), *(a.original for a in masked.actions)]
    if any(_HELM_OBJECTS.search(o) for o in originals):
        return True
    folder = Path(file).parent
    return folder.name == "templates" and (folder.parent / "Chart.yaml").is_file()


def per_release(result: RewriteResult, token: str, kept: Collection[str]) -> RewriteResult:
    """`result` with each template it adds named `<token>-<name>` (`token` stands for the
    release name) and the Pod's references renamed; templates named in `kept` (the file
    already holds them) keep their names."""
    names = {}
    for template in result.templates:
        name = str((template.get("metadata") or {}).get("name") or "")
        if name and name not in kept:
            names[name] = f"{token}-{name}"
    if not names:
        return result
    templates = tuple(_renamed(t, names) for t in result.templates)
    return dataclasses.replace(
        result, object=_references(result.object, names), templates=templates
    )


def _renamed(template: Any, names: dict[str, str]) -> dict[str, Any]:
    meta = dict(template.get("metadata") or {})
    meta["name"] = names.get(str(meta.get("name")), meta.get("name"))
    return {**template, "metadata": meta}


def _references(node: Any, names: dict[str, str]) -> Any:
    """`node` with every `resourceClaimTemplateName` in `names` renamed."""
    if isinstance(node, Mapping):
        return {
            key: names.get(value, value)
            if key == "resourceClaimTemplateName" and isinstance(value, str)
            else _references(value, names)
            for key, value in node.items()
        }
    if isinstance(node, list):
        return [_references(item, names) for item in node]
    return node
