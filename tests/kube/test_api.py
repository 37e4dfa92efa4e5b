"""API client pieces the real API server cannot be made to exercise on demand.

Chunk boundaries in a watch stream are the network's choice, and backoff timing is ours;
both are tested here at our own adapter boundary (the urllib3 response we read from).
"""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import urllib3

from webhook.kube.api import ApiError, Backoff, KubeApi, Unreachable, WatchStream, list_pages


class Response:
    """The part of urllib3's HTTPResponse that WatchStream uses."""

    def __init__(self, chunks: list[bytes], error: Exception | None = None) -> None:
        self.chunks, self.error = chunks, error
        self.released = False

    def stream(self, decode_content: bool = True) -> Iterator[bytes]:
        yield from self.chunks
        if self.error is not None:
            raise self.error

    def release_conn(self) -> None:
        self.released = True

    def shutdown(self) -> None:
        pass


def test_events_split_across_chunks_are_joined() -> None:
    response = Response([b'{"type": "ADD', b'ED", "object": {}}\n{"type":', b' "DELETED"}\n\n'])
    events = list(WatchStream(response, "/x"))
    assert [e["type"] for e in events] == ["ADDED", "DELETED"]
    assert response.released


def test_a_dropped_connection_is_unreachable_unless_we_closed_it() -> None:
    dropped = Response([b'{"type": "ADDED"}\n'], urllib3.exceptions.ProtocolError("reset"))
    with pytest.raises(Unreachable, match="reset"):
        list(WatchStream(dropped, "/x"))
    closed = WatchStream(Response([], urllib3.exceptions.ProtocolError("reset")), "/x")
    closed.close()
    assert list(closed) == []


def test_backoff_doubles_to_a_ceiling_and_resets() -> None:
    backoff = Backoff(first=1.0, ceiling=4.0)
    delays = [backoff.next() for _ in range(5)]
    assert [0.5 <= d <= 1.0 for d in delays[:1]] == [True]
    assert all(d <= 4.0 for d in delays) and delays[-1] >= 2.0
    backoff.reset()
    assert backoff.next() <= 1.0


def _serve_one_event_per_watch(ended: bool) -> Any:
    """A local chunked HTTP server sending one watch event, then ending the stream when
    `ended`, else holding it open until `server.release` is set."""

    class Watch(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # chunked, as the API server streams a watch

        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            event = b'{"type": "ADDED", "object": {}}\n'
            self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
            self.wfile.flush()
            if not ended:
                self.server.release.wait(5)  # type: ignore[attr-defined]
            self.wfile.write(b"0\r\n\r\n")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Watch)
    server.release = threading.Event()  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.mark.parametrize("ended", [False, True], ids=["open", "ended-by-server"])
def test_closing_a_real_stream_is_idempotent(ended: bool) -> None:
    """stop() and the watch thread may both close one stream, also after the server ended it;
    urllib3 raises on those `shutdown()` calls, which must not escape (it failed CI once)."""
    server = _serve_one_event_per_watch(ended)
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/watch"
        response = urllib3.PoolManager().request("GET", url, preload_content=False)
        stream = WatchStream(response, "/watch")
        events = iter(stream)
        assert next(events)["type"] == "ADDED"
        if ended:
            assert list(events) == []
        started = time.monotonic()
        stream.close()
        stream.close()
        assert list(events) == [] and time.monotonic() - started < 4  # ended by close
    finally:
        server.release.set()  # type: ignore[attr-defined]
        server.shutdown()


KUBECONFIG = """
apiVersion: v1
kind: Config
current-context: plain
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {token: t}}]
contexts:
- {name: plain, context: {cluster: c, user: u}}
- {name: team, context: {cluster: c, user: u, namespace: team-a}}
"""


@pytest.mark.parametrize(
    ("context", "namespace"),
    [(None, "default"), ("plain", "default"), ("team", "team-a")],
    ids=["current-without-one", "named-without-one", "named-with-one"],
)
def test_kubeconfig_namespace_is_the_contexts_as_kubectl_takes_it(
    tmp_path: Path, context: str | None, namespace: str
) -> None:
    path = tmp_path / "config"
    path.write_text(KUBECONFIG)
    assert KubeApi.kubeconfig_namespace(str(path), context) == namespace


EXPIRED = {
    "kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Expired", "code": 410,
    "message": "The provided continue parameter is too old to display a consistent list "
    "result. You can start a new list without the continue parameter, or use the continue "
    "token in this response to retrieve the remainder of the results. Continuing with the "
    "provided token results in an inconsistent list - objects that were created, modified, "
    "or deleted between the time the first chunk was returned and now may show up in the list.",
}  # fmt: skip
"""The API server's 410 for a continue token etcd compacted past (apiserver's etcd3 store:
`inconsistentContinue`, the Status's `metadata.continue` set to a token at the latest state)."""

PAGES = {
    "": ({"items": [{"n": 1}, {"n": 2}], "metadata": {"continue": "t1"}}, 200),
    "t1": ({**EXPIRED, "metadata": {"continue": "t1-latest"}}, 410),
    "t1-latest": ({"items": [{"n": 3}], "metadata": {"continue": "t2"}}, 200),
    "t2": ({"items": [{"n": 4}], "metadata": {}}, 200),
    "stale": ({**EXPIRED, "metadata": {"continue": "stale"}}, 410),
}


def _serve_pages(pages: dict[str, tuple[dict[str, Any], int]]) -> Any:
    """A local API server answering a paginated list by its `continue` parameter."""
    import json
    from urllib.parse import parse_qs, urlparse

    class Lists(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            token = parse_qs(urlparse(self.path).query).get("continue", [""])[0]
            self.server.asked.append(token)  # type: ignore[attr-defined]
            body, status = pages[token]
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Lists)
    server.asked = []  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _plain_api(tmp_path: Path, port: int) -> KubeApi:
    config = tmp_path / "kubeconfig"
    config.write_text(KUBECONFIG.replace("https://127.0.0.1:6443", f"http://127.0.0.1:{port}"))
    return KubeApi.from_kubeconfig(str(config))


@pytest.mark.parametrize(
    ("pages", "resume", "items", "asked", "refused"),
    [
        pytest.param(PAGES, True, [1, 2, 3, 4], ["", "t1", "t1-latest", "t2"], None,
                     id="resumed-from-the-token-sent-with-the-410"),
        pytest.param(PAGES, False, [1, 2], ["", "t1"], "t1-latest", id="not-asked-to-resume"),
        pytest.param({**PAGES, "t1": (EXPIRED, 410)}, True, [1, 2], ["", "t1"], "",
                     id="a-410-without-a-token"),
        pytest.param({**PAGES, "t1": PAGES["stale"]}, True, [1, 2], ["", "t1", "stale"],
                     "stale", id="the-same-token-again-is-not-followed-twice"),
    ],
)  # fmt: skip
def test_a_list_whose_continue_token_expired_resumes_only_when_asked(
    tmp_path: Path,
    *,
    pages: dict[str, tuple[dict[str, Any], int]],
    resume: bool,
    items: list[int],
    asked: list[str],
    refused: str | None,
) -> None:
    server = _serve_pages(pages)
    try:
        api = _plain_api(tmp_path, server.server_address[1])
        found: list[int] = []
        listed = list_pages(api, "/api/v1/pods", page=2, resume_expired=resume)
        if refused is None:
            found = [item["n"] for item in listed]
        else:
            with pytest.raises(ApiError) as raised:
                found.extend(item["n"] for item in listed)
            assert (raised.value.status, raised.value.continue_token) == (410, refused)
        assert (found, server.asked) == (items, asked)
    finally:
        server.shutdown()
