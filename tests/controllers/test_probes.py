"""The controller's probes over plain HTTP: /healthz always, /readyz as its readiness says
(503 when not ready), /metrics as exposed, anything else 404."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from webhook.controllers import probes


@pytest.fixture
def ready() -> dict[str, bool]:
    return {"ok": True}


@pytest.fixture
def base(ready: dict[str, bool]) -> Iterator[str]:
    server = probes.bind("127.0.0.1", 0, probes.Probes(
        lambda: (ready["ok"], {"status": "ok" if ready["ok"] else "unready"}),
        lambda: (b"dragate_leader 1.0\n", "text/plain; version=0.0.4"),
    ))  # fmt: skip
    probes.serve(server)
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return int(response.status), bytes(response.read())
    except urllib.error.HTTPError as err:
        return err.code, err.read()


@pytest.mark.parametrize(
    ("path", "ok", "code", "body"),
    [
        pytest.param("/healthz", False, 200, b'{"status": "ok"}', id="healthz-even-unready"),
        pytest.param("/readyz", True, 200, b'{"status": "ok"}', id="readyz-ready"),
        pytest.param("/readyz", False, 503, b'{"status": "unready"}', id="readyz-unready"),
        pytest.param("/metrics", True, 200, b"dragate_leader 1.0\n", id="metrics"),
        pytest.param("/validate", True, 404, b'{"status": "not found"}', id="no-reviews-here"),
    ],
)
def test_probe_answers(
    base: str, ready: dict[str, bool], path: str, ok: bool, code: int, *, body: bytes
) -> None:
    ready["ok"] = ok
    got_code, got_body = _get(base + path)
    assert (got_code, json.loads(got_body) if path != "/metrics" else got_body) == (
        code, json.loads(body) if path != "/metrics" else body,
    )  # fmt: skip
