"""Namespace rule: the admin-access label key that moved in Kubernetes 1.34."""

from __future__ import annotations

import pytest
from lint.dra_objects import found

from webhook.lint import ERROR, WARNING


def namespace(labels: dict[str, str], api_version: str = "v1") -> dict[str, object]:
    return {
        "apiVersion": api_version,
        "kind": "Namespace",
        "metadata": {"name": "monitoring", "labels": labels},
    }


CASES = [
    ("pre-1.34-key", {"resource.k8s.io/admin-access": "true"}, [ERROR]),
    (
        "both-keys",
        {"resource.k8s.io/admin-access": "true", "resource.kubernetes.io/admin-access": "true"},
        [ERROR],
    ),
    ("value-not-true", {"resource.kubernetes.io/admin-access": "yes"}, [WARNING]),
    ("good", {"resource.kubernetes.io/admin-access": "true"}, []),
    ("good-unrelated", {"team": "a"}, []),
]


@pytest.mark.parametrize(
    ("labels", "severities"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_admin_access_label(labels: dict[str, str], severities: list[str]) -> None:
    hits = found(namespace(labels), "admin-access-label")
    assert [h.severity for h in hits] == severities
    if severities == [ERROR]:
        assert hits[0].path == ("metadata", "labels", "resource.k8s.io/admin-access")
        assert 'resource.kubernetes.io/admin-access: "true"' in hits[0].fix


def test_only_core_namespaces() -> None:
    obj = namespace({"resource.k8s.io/admin-access": "true"}, api_version="example.com/v1")
    assert found(obj, "admin-access-label") == []
