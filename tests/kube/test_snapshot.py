"""The offline stand-in for a cluster: a snapshot file of the kinds the watch caches hold."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from builders import namespace

from webhook.files.yamlio import YamlError
from webhook.kube.snapshot import SnapshotState, load_state

NAMED_CLASS = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
               "metadata": {"name": "gpu"}}  # fmt: skip
POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}
NAMELESS = {"apiVersion": "v1", "kind": "Namespace", "metadata": {}}


@pytest.mark.parametrize(
    ("documents", "problem"),
    [
        pytest.param([namespace("a"), NAMED_CLASS], None, id="state-kinds"),
        pytest.param([POD], "holds only", id="other-kind"),
        pytest.param([NAMELESS], "without metadata.name", id="no-name"),
    ],
)  # fmt: skip
def test_load_state(
    tmp_path: Path, documents: list[dict[str, object]], problem: str | None
) -> None:
    path = tmp_path / "state.yaml"
    path.write_text(yaml.safe_dump_all(documents))
    if problem is None:
        state = load_state(str(path))
        assert [n["metadata"]["name"] for n in state.namespaces()] == ["a"]
        assert list(state.device_classes()) == ["gpu"]
        return
    with pytest.raises(YamlError, match=problem):
        load_state(str(path))


def test_added_objects_of_other_kinds_are_ignored() -> None:
    state = SnapshotState()
    state.add({"kind": "Pod", "metadata": {"name": "p", "namespace": "a"}})
    state.add(namespace("a"))
    assert state.namespace("a") is not None
    assert state.claims() == []
