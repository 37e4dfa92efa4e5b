"""The baselines of the benchmarks: the no-op allows everything; the patching no-op answers
each Pod on /mutate with the patch it was given, and nothing else."""

from __future__ import annotations

import base64
import io
import json
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import noop_server

PATCH = [{"op": "add", "path": "/metadata/annotations", "value": {"a": "b"}}]


def _call(app: Callable[..., Iterable[bytes]], path: str, kind: str) -> dict[str, Any]:
    body = json.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {"uid": "u-1", "kind": {"group": "", "version": "v1", "kind": kind}},
        }
    ).encode()
    environ = {"PATH_INFO": path, "CONTENT_LENGTH": str(len(body)), "wsgi.input": io.BytesIO(body)}
    reply = json.loads(b"".join(app(environ, lambda status, headers: None)))
    response: dict[str, Any] = reply["response"]
    return response


@pytest.mark.parametrize(
    ("app", "path", "kind", "patched"),
    [
        (noop_server.noop_app, "/mutate", "Pod", False),
        (noop_server.patching_app(PATCH), "/mutate", "Pod", True),
        (noop_server.patching_app(PATCH), "/validate", "Pod", False),
        (noop_server.patching_app(PATCH), "/mutate", "ResourceClaim", False),
    ],
    ids=["no-op", "patching a Pod", "validating", "mutating a claim"],
)
def test_only_a_pod_on_mutate_is_patched(
    app: Callable[..., Iterable[bytes]], path: str, kind: str, patched: bool
) -> None:
    response = _call(app, path, kind)
    assert response["uid"] == "u-1" and response["allowed"] is True
    if patched:
        assert response["patchType"] == "JSONPatch"
        assert json.loads(base64.b64decode(response["patch"])) == PATCH
    else:
        assert "patch" not in response and "patchType" not in response
