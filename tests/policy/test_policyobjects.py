"""Policy objects of the cluster beside policy files: each object loads or is left out alone,
clashes reject the newcomer, and admission asks the same question before an object is stored."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.policy.policyobjects import check_object, load_combined, policy_body
from webhook.policy.schema import PolicyError
from webhook.types import ObjectVerdict

GPU = "gpu.nvidia.com"
FILE_TENANT = f"""\
apiVersion: dragate.io/v1alpha1
kind: Tenant
metadata: {{name: from-file}}
spec:
  namespaces: [file-ns]
  quota: [{{deviceClassName: {GPU}, maxDevices: 2}}]
"""


def tenant(name: str, *namespaces: str, created: str = "", **spec: Any) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "uid": f"uid-{name}", "generation": 3,
                                "resourceVersion": "41", "managedFields": [{}]}  # fmt: skip
    if created:
        metadata["creationTimestamp"] = created
    body = {"namespaces": list(namespaces) or [name], **spec}
    body.setdefault("quota", [{"deviceClassName": GPU, "maxDevices": 4}])
    return {"apiVersion": "dragate.io/v1alpha1", "kind": "Tenant", "metadata": metadata,
            "spec": body, "status": {"conditions": []}}  # fmt: skip


def settings(name: str, created: str) -> dict[str, Any]:
    return {"apiVersion": "dragate.io/v1alpha1", "kind": "Settings",
            "metadata": {"name": name, "creationTimestamp": created}, "spec": {}}  # fmt: skip


def verdicts(objects: list[dict[str, Any]], files: str = "") -> dict[str, str]:
    texts = [("policies/t.yaml", files)] if files else []
    loaded = load_combined(texts, objects)
    return {f"{v.kind}/{v.name}": v.message for v in loaded.objects}


def test_server_fields_are_not_the_schema_s_business() -> None:
    body = policy_body(tenant("a"))
    assert body["metadata"] == {"name": "a"}  # type: ignore[index]
    assert "status" not in body  # type: ignore[operator]


def test_an_object_is_enforced_like_the_same_file() -> None:
    from_object = load_combined([], [tenant("team-a", "ns-a")])
    assert [t.name for t in from_object.tenants] == ["team-a"]
    assert from_object.tenants[0].namespaces == frozenset({"ns-a"})
    assert from_object.objects == (ObjectVerdict("Tenant", "team-a", 3),)


CASES = [
    pytest.param(
        [tenant("a"), tenant("b", quotas=[])],
        {"Tenant/a": "", "Tenant/b": 'spec.quotas: unknown field (did you mean "quota"?)'},
        id="unknown-field-left-out-alone",
    ),
    pytest.param(
        [
            tenant("new", "x", created="2026-02-01T00:00:00Z"),
            tenant("old", "x", created="2026-01-01T00:00:00Z"),
        ],
        {
            "Tenant/old": "",
            "Tenant/new": 'spec.namespaces[0]: namespace "x" is already in tenant "old" '
            "(Tenant/old)",
        },
        id="namespace-clash-rejects-the-newer",
    ),
    pytest.param(
        [settings("one", "2026-01-01T00:00:00Z"), settings("two", "2026-01-02T00:00:00Z")],
        {
            "Settings/one": "",
            "Settings/two": "kind: only one Settings document is allowed; "
            'the first is "one" at Settings/one',
        },
        id="second-settings-rejected",
    ),
    pytest.param(
        [tenant("a", quota=[{"deviceClassName": GPU}])],
        {"Tenant/a": "spec.quota[0]: a quota entry needs maxDevices, maxDevicesPerClaim or both"},
        id="rule-across-fields",
    ),
]


@pytest.mark.parametrize(("objects", "expected"), CASES)
def test_which_objects_are_enforced(
    objects: list[dict[str, Any]], expected: dict[str, str]
) -> None:
    assert verdicts(objects) == expected


def test_a_file_wins_a_name_clash_and_keeps_its_namespaces() -> None:
    found = verdicts([tenant("from-file", "other"), tenant("b", "file-ns")], FILE_TENANT)
    assert 'Tenant "from-file" is already defined at policies/t.yaml:3' in found["Tenant/from-file"]
    assert 'namespace "file-ns" is already in tenant "from-file"' in found["Tenant/b"]
    assert [t.name for t in load_combined([("policies/t.yaml", FILE_TENANT)], []).tenants] == [
        "from-file"
    ]


def test_a_broken_file_fails_the_whole_load_as_offline() -> None:
    with pytest.raises(PolicyError, match=r"t\.yaml:5: spec\.namespace: unknown field"):
        load_combined([("t.yaml", FILE_TENANT.replace("namespaces", "namespace"))], [tenant("a")])


def test_the_digest_follows_policy_content_not_status() -> None:
    first = load_combined([], [tenant("a")]).digest
    restatused = {**tenant("a"), "status": {"conditions": [{"type": "Ready"}]}}
    assert load_combined([], [restatused]).digest == first
    assert (
        load_combined([], [tenant("a", quota=[{"deviceClassName": GPU, "maxDevices": 5}])]).digest
        != first
    )


ADMISSION = [
    pytest.param(tenant("a", quotas=[]), [], "spec.quotas", id="unknown-field"),
    pytest.param(
        tenant("new", "x"),
        [tenant("old", "x", created="2026-01-01T00:00:00Z")],
        'namespace "x" is already in tenant "old"',
        id="create-clashing",
    ),
    pytest.param(
        tenant(
            "old",
            "x",
            created="2026-01-01T00:00:00Z",
            quota=[{"deviceClassName": GPU, "maxDevices": 9}],
        ),
        [
            tenant("old", "x", created="2026-01-01T00:00:00Z"),
            tenant("new", "x", created="2026-02-01T00:00:00Z"),
        ],
        "",
        id="update-of-the-older-keeps-its-place",
    ),
    pytest.param(tenant("a"), [tenant("a", quotas=[])], "", id="fixing-a-rejected-object"),
]


@pytest.mark.parametrize(("obj", "current", "problem"), ADMISSION)
def test_admission_asks_the_loader(
    obj: dict[str, Any], current: list[dict[str, Any]], problem: str
) -> None:
    found = " ".join(f"{p.path}: {p.message}" for p in check_object(obj, current))
    assert (problem in found) if problem else found == ""
