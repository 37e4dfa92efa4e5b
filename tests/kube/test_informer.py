"""What a watch cache keeps of an object: everything but `metadata.managedFields`."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.kube.informer import without_managed_fields

MANAGED = [{"manager": "kubectl", "operation": "Apply", "fieldsV1": {"f:spec": {}}}]


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        (
            {"kind": "ResourceClaim", "metadata": {"name": "a", "managedFields": MANAGED}},
            {"kind": "ResourceClaim", "metadata": {"name": "a"}},
        ),
        ({"metadata": {"name": "a", "uid": "u"}}, {"metadata": {"name": "a", "uid": "u"}}),
        ({"metadata": None}, {"metadata": None}),
        ({"spec": {}}, {"spec": {}}),
    ],
    ids=["managed-fields-dropped", "nothing-to-drop", "null-metadata", "no-metadata"],
)
def test_a_cached_object_leaves_out_managed_fields(given: Any, kept: Any) -> None:
    assert without_managed_fields(given) == kept


def test_the_object_sent_is_left_as_it_was() -> None:
    sent = {"metadata": {"name": "a", "managedFields": MANAGED}, "spec": {"x": 1}}
    kept = without_managed_fields(sent)
    assert sent["metadata"]["managedFields"] == MANAGED
    assert kept["spec"] is sent["spec"]  # a shallow copy: nothing but the metadata is copied
    clean = {"metadata": {"name": "a"}}
    assert without_managed_fields(clean) is clean
