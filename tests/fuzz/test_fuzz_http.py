"""Fuzzing /validate and /mutate: real pipeline, example policies, Flask test client.

Whatever arrives, the answer is a valid AdmissionReview for the request (uid echoed, `allowed`
a bool, a patch that applies) or a 400 with a JSON message; never a 5xx, never a traceback in
the log, never longer than the review's own time budget.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from fuzz.fuzz_support import (
    Errors,
    Poster,
    check_answer,
    deep_json,
    dra_objects,
    drop_removed,
    fuzz_settings,
    json_values,
    mutated,
    review_of,
    reviews,
)
from hypothesis import given
from hypothesis import strategies as st

ENDPOINTS = ("/validate", "/mutate")
MAX_SECONDS = 10.0  # the default budget; every answer must come well inside it
MIB = 1024 * 1024


def post_and_check(http: Poster, errors: Errors, path: str, document: Any) -> dict[str, Any] | None:
    data = json.dumps(document).encode()
    started = time.monotonic()
    status, body = http(path, data)
    assert time.monotonic() - started < MAX_SECONDS
    logged = errors.take()
    assert not logged, "\n".join(logged)
    sent = document if isinstance(document, dict) else {}
    if status == 200:
        assert isinstance(sent.get("request"), dict)
    return check_answer(status, body, sent, mutate=path == "/mutate")


@fuzz_settings(300)
@given(review=reviews(), path=st.sampled_from(ENDPOINTS))
def test_random_reviews(http: Poster, errors: Errors, review: dict[str, Any], path: str) -> None:
    post_and_check(http, errors, path, review)


@fuzz_settings(400)
@given(data=st.data(), path=st.sampled_from(ENDPOINTS))
def test_mutated_reviews(http: Poster, errors: Errors, data: st.DataObject, path: str) -> None:
    review = data.draw(reviews())
    document = drop_removed(data.draw(mutated(review)))
    post_and_check(http, errors, path, document)


@fuzz_settings(200)
@given(document=json_values, path=st.sampled_from(ENDPOINTS))
def test_arbitrary_json(http: Poster, errors: Errors, document: Any, path: str) -> None:
    post_and_check(http, errors, path, document)


@fuzz_settings(200)
@given(data=st.binary(max_size=300), path=st.sampled_from(ENDPOINTS))
def test_arbitrary_bytes(http: Poster, errors: Errors, data: bytes, path: str) -> None:
    status, body = http(path, data)
    assert errors.take() == []
    check_answer(status, body, {}, mutate=path == "/mutate")


@fuzz_settings(100)
@given(obj=dra_objects, text=st.text(min_size=1, max_size=200), path=st.sampled_from(ENDPOINTS))
def test_unicode_everywhere(
    http: Poster, errors: Errors, obj: dict[str, Any], text: str, path: str
) -> None:
    """Any text as names, namespaces, labels and the uid."""
    obj = {**obj, "metadata": {**obj["metadata"], "name": text, "labels": {text: text}}}
    review = review_of(obj, uid=text)
    review["request"]["namespace"] = text
    post_and_check(http, errors, path, review)


# --------------------------------------------------------------------------- fixed edge cases


def claim_with(parameters_json: str) -> bytes:
    """A v1 ResourceClaim review whose opaque config parameters are `parameters_json` (text)."""
    obj = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "deep", "namespace": "ml-research"},
        "spec": {"devices": {
            "requests": [{"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com"}}],
            "config": [{"opaque": {"driver": "gpu.nvidia.com", "parameters": "@@"}}],
        }},
    }  # fmt: skip
    text = json.dumps(review_of(obj, uid="deep-uid"))
    return text.replace('"@@"', parameters_json).encode()


@pytest.mark.parametrize("depth", [100, 500, 700, 900, 980, 10_000])
@pytest.mark.parametrize("path", ENDPOINTS)
def test_deep_nesting(http: Poster, errors: Errors, depth: int, path: str) -> None:
    """JSON 10k levels deep is a 400; anything the decoder accepts gets a real answer."""
    data = claim_with(deep_json(depth))
    status, body = http(path, data)
    assert errors.take() == []
    assert status in (200, 400), body[:300]
    if status == 200:
        response = json.loads(body)["response"]
        assert response["uid"] == "deep-uid" and isinstance(response["allowed"], bool)
    if depth >= 10_000:
        assert status == 400


@pytest.mark.parametrize("path", ENDPOINTS)
def test_deep_pod(http: Poster, errors: Errors, path: str) -> None:
    """A Pod nested ~600 levels deep is answered, not 500.

    /mutate copies only the parts of a Pod its rewrite changes (`rewrite.podedits`), so a
    deep `env` does not stop it; whatever reads the whole object recursively (the general
    rewrite of other kinds, a CEL rule reading `object`) may still meet Python's recursion
    limit, which depends on the process. Either way the answer is valid, and a skipped
    rewrite says why.
    """
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ml-research"},
        "spec": {"containers": [{"name": "c", "image": "i", "env": "@@",
                                 "resources": {"limits": {"nvidia.com/gpu": 1}}}]},
    }  # fmt: skip
    text = json.dumps(review_of(pod, uid="u")).replace('"@@"', deep_json(600))
    status, body = http(path, text.encode())
    assert errors.take() == []
    sent = json.loads(text)
    response = check_answer(status, body, sent, mutate=path == "/mutate")
    assert response is not None
    if path == "/mutate" and "patch" not in response:  # fails open, unchanged, says why
        assert response["allowed"] is True
        assert "nests too deeply" in response["warnings"][0]


def test_body_at_the_limit_is_judged(http: Poster, errors: Errors) -> None:
    """Exactly 3 MiB (the apiserver's own cap) is a normal review."""
    review = review_of(
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "inference",
         "annotations": {"big": "@@"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}},
        uid="big-uid",
    )  # fmt: skip
    text = json.dumps(review)
    text = text.replace("@@", "x" * (3 * MIB - len(text) + 2))
    assert len(text.encode()) == 3 * MIB
    for path in ENDPOINTS:
        status, body = http(path, text.encode())
        assert status == 200 and json.loads(body)["response"]["uid"] == "big-uid"
    assert errors.take() == []


@pytest.mark.parametrize("size", [3 * MIB + 1, 8 * MIB])
def test_body_over_the_limit_is_413(http: Poster, errors: Errors, size: int) -> None:
    status, body = http("/validate", b" " * size)
    assert status == 413 and "limit" in json.loads(body)["message"]
    assert errors.take() == []


@pytest.mark.parametrize(
    "document",
    [
        {"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview", "request": {}},
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"},
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": {}},
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": 7}},
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": []},
        {"apiVersion": "x" * 100_000, "kind": "\x1b[31m\n"},
        [],
        "AdmissionReview",
        None,
    ],
    ids=["v1beta1", "no-request", "response-only", "uid-int", "request-list", "huge-version",
         "list", "string", "null"],
)  # fmt: skip
def test_old_and_broken_shapes(http: Poster, errors: Errors, document: Any) -> None:
    for path in ENDPOINTS:
        status, body = http(path, json.dumps(document).encode())
        assert status == 400, body[:300]
        assert len(json.loads(body)["message"]) <= 2048
    assert errors.take() == []


@pytest.mark.parametrize(
    "text",
    ["NaN", "Infinity", "-Infinity", "1e400", "9" * 5000, '"\\ud800"'],
)
def test_odd_numbers_in_count(http: Poster, errors: Errors, text: str) -> None:
    """Numbers Python's json accepts but Kubernetes never sends, where the engine reads them."""
    field = b'"deviceClassName": "gpu.nvidia.com"'
    data = claim_with("{}").replace(field, field + b', "count": ' + text.encode())
    for path in ENDPOINTS:
        status, body = http(path, data)
        sent = json.loads(data) if status == 200 else {}
        check_answer(status, body, sent, mutate=path == "/mutate")
    assert errors.take() == []
