"""The baselines of the benchmarks: the no-op allows everything; the patching no-op answers
each Pod on /mutate with the patch it was given, and nothing else; both are served with
dragate's own gunicorn settings."""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from flask import Flask

sys.path.insert(0, str(Path(__file__).resolve().parent))

import noop_server

from webhook.admission.config import ServeConfig, TlsFiles
from webhook.admission.server import DragateServer

PATCH = [{"op": "add", "path": "/metadata/annotations", "value": {"a": "b"}}]


def _call(app: Flask, path: str, kind: str) -> dict[str, Any]:
    body = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": "u-1", "kind": {"group": "", "version": "v1", "kind": kind}},
    }
    reply = app.test_client().post(path + "?timeout=10s", data=json.dumps(body))
    assert reply.status_code == 200
    response: dict[str, Any] = reply.get_json()["response"]
    return response


@pytest.mark.parametrize(
    ("patch", "path", "kind", "patched"),
    [
        (None, "/mutate", "Pod", False),
        (PATCH, "/mutate", "Pod", True),
        (PATCH, "/validate", "Pod", False),
        (PATCH, "/mutate", "ResourceClaim", False),
    ],
    ids=["no-op", "patching a Pod", "validating", "mutating a claim"],
)
def test_only_a_pod_on_mutate_is_patched(
    patch: list[dict[str, Any]] | None, path: str, kind: str, patched: bool
) -> None:
    response = _call(noop_server.noop_app(patch), path, kind)
    assert response["uid"] == "u-1" and response["allowed"] is True
    if patched:
        assert response["patchType"] == "JSONPatch"
        assert json.loads(base64.b64decode(response["patch"])) == PATCH
    else:
        assert "patch" not in response and "patchType" not in response


@pytest.mark.parametrize("path", ["/healthz", "/readyz"])
def test_probes_answer_ok(path: str) -> None:
    assert noop_server.noop_app().test_client().get(path).get_json() == {"status": "ok"}


def test_the_noop_is_given_exactly_dragates_gunicorn_settings(tmp_path: Path) -> None:
    config = ServeConfig(policy_dir=None, tls=TlsFiles(tmp_path / "c", tmp_path / "k"))
    noop, dragate = noop_server.NoopServer(config), DragateServer(config)
    names = ("worker_class_str", "workers", "worker_connections", "keepalive", "certfile", "bind")
    for name in names:
        assert getattr(noop.cfg, name) == getattr(dragate.cfg, name), name
    assert noop.cfg.worker_class_str == "gevent" and noop.cfg.workers == 1
