"""The admin-access label guard: only named users and groups may grant admin access."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.engine.adminlabel import admin_label_reasons
from webhook.types import AdmissionRequest, Operation, Settings

SETTINGS = Settings(admin_access_editors=frozenset({"alice", "group:platform-admins"}))
KEY = "resource.kubernetes.io/admin-access"


def ns(**labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n", "labels": labels}}


def request(
    new: dict[str, Any], old: dict[str, Any] | None, user: str, *groups: str
) -> AdmissionRequest:
    return AdmissionRequest(
        uid="u",
        kind="Namespace",
        group="",
        version="v1",
        resource="namespaces",
        operation=Operation.UPDATE if old else Operation.CREATE,
        name="n",
        object=new,
        old_object=old,
        user_info={"username": user, "groups": list(groups)},
    )


@pytest.mark.parametrize(
    ("new", "old", "user", "groups", "denied"),
    [
        (ns(**{KEY: "true"}), ns(), "mallory", (), True),
        (ns(**{KEY: "true"}), None, "mallory", (), True),
        (ns(), ns(**{KEY: "true"}), "mallory", (), True),
        (ns(**{"resource.k8s.io/admin-access": "true"}), ns(), "mallory", (), True),
        (ns(**{KEY: "true"}), ns(), "alice", (), False),
        (ns(**{KEY: "true"}), ns(), "bob", ("platform-admins",), False),
        (ns(team="a"), ns(), "mallory", (), False),
        (ns(**{KEY: "true"}, team="a"), ns(**{KEY: "true"}), "mallory", (), False),
    ],
    ids=[
        "add",
        "create-with",
        "remove",
        "old-key",
        "named-user",
        "named-group",
        "other-label",
        "unchanged",
    ],
)
def test_guard(
    new: dict[str, Any],
    old: dict[str, Any] | None,
    user: str,
    groups: tuple[str, ...],
    denied: bool,
) -> None:
    reasons = admin_label_reasons(request(new, old, user, *groups), SETTINGS)
    assert bool(reasons) is denied
    if denied:
        assert f"user {user!r} may not set or change" in reasons[0].message
        assert "alice, group:platform-admins" in reasons[0].message
