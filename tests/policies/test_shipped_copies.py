"""`policies/` is the one source of the shipped policies; the package and the chart carry copies.

`pip install` needs the files inside the package (`webhook/defaults/policies`, also the built-in
legacy mapping) and `helm install` inside the chart (`charts/dragate/files/policies`); neither
can reach the repository's `policies/`. These tests keep the copies byte-identical to it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from webhook.policy.loading import default_mappings, load_policies

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "policies"
COPIES = [
    REPO / "webhook" / "defaults" / "policies",
    REPO / "charts" / "dragate" / "files" / "policies",
]


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*.yaml"))}


@pytest.mark.parametrize("copy", COPIES, ids=["package", "chart"])
def test_copy_equals_policies(copy: Path) -> None:
    source, copied = _files(SOURCE), _files(copy)
    assert sorted(copied) == sorted(source), "copy with: cp policies/*.yaml " + str(copy)
    stale = [name for name in source if copied[name] != source[name]]
    assert not stale, f"{copy} differs from policies/ in {stale}: cp policies/*.yaml {copy}"


def test_the_builtin_mapping_is_the_shipped_one() -> None:
    def essence(mappings: Any) -> list[tuple[Any, ...]]:  # all but where each was read from
        return [(m.name, m.action, m.resources) for m in mappings]

    assert essence(default_mappings()) == essence(load_policies([str(SOURCE)]).mappings)
    resources = {
        r.resource_name or r.resource_name_prefix for m in default_mappings() for r in m.resources
    }
    assert resources == {"nvidia.com/gpu", "nvidia.com/mig-"}
