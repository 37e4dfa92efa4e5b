"""The Flask app through its test client: the bad-input matrix and the response contract."""

from __future__ import annotations

import base64
import io
import json
import logging
import time
from typing import Any

import pytest
from admission.admission_support import encode, pod, review_body

from webhook import pipeline
from webhook.admission.app import create_app
from webhook.admission.config import AdmissionOptions, TimeoutOutcome
from webhook.admission.reload import PolicyHolder
from webhook.admission.routes import Sent
from webhook.kube.snapshot import SnapshotState
from webhook.ledger.memory import MemoryLedger
from webhook.pipeline import Context, review
from webhook.types import Decision, FactsUnavailable, ObjectVerdict, PolicySet, Verdict

JSON = "application/json"


def _without(key: str) -> dict[str, Any]:
    body = review_body()
    del body["request"][key]
    return body


BAD_INPUTS = [
    pytest.param(b"{not json", JSON, "not valid JSON", id="malformed-json"),
    pytest.param(b"", JSON, "not valid JSON", id="empty-body"),
    pytest.param(b"\xff\xfe\x00", JSON, "not valid JSON", id="not-utf8"),
    pytest.param(b"[" * 100_000 + b"]" * 100_000, JSON, "JSON", id="deeply-nested"),
    pytest.param(b"1" * 5000, JSON, "JSON", id="huge-integer"),
    pytest.param(b"[]", JSON, "JSON object", id="array-body"),
    pytest.param(encode(review_body()), "text/plain", "Content-Type", id="text-plain"),
    pytest.param(encode(review_body()), None, "Content-Type", id="no-content-type"),
    pytest.param(
        encode({**review_body(), "apiVersion": "admission.k8s.io/v1beta1"}),
        JSON,
        "apiVersion",
        id="v1beta1",
    ),
    pytest.param(encode({**review_body(), "kind": "Pod"}), JSON, "kind", id="wrong-kind"),
    pytest.param(
        encode({k: v for k, v in review_body().items() if k != "request"}),
        JSON,
        "missing request",
        id="no-request",
    ),
    pytest.param(
        encode({**review_body(), "request": "x"}), JSON, "missing request", id="request-not-object"
    ),
    pytest.param(encode(_without("uid")), JSON, "uid", id="no-uid"),
    pytest.param(encode(review_body(uid="")), JSON, "uid", id="empty-uid"),
    pytest.param(encode(review_body(uid=7)), JSON, "uid", id="uid-not-string"),
    pytest.param(encode(_without("kind")), JSON, "request.kind", id="no-kind"),
    pytest.param(encode(review_body(kind={"version": "v1"})), JSON, "kind.kind", id="kind-empty"),
    pytest.param(encode(_without("resource")), JSON, "request.resource", id="no-resource"),
    pytest.param(encode(review_body(operation="PATCH")), JSON, "operation", id="bad-operation"),
    pytest.param(encode(review_body(operation=None)), JSON, "operation", id="no-operation"),
    pytest.param(encode(review_body(object=[1])), JSON, "request.object", id="object-list"),
    pytest.param(encode(review_body(dryRun="yes")), JSON, "dryRun", id="dryrun-string"),
    pytest.param(encode(review_body(namespace=3)), JSON, "namespace", id="namespace-int"),
    pytest.param(encode(review_body(userInfo="root")), JSON, "userInfo", id="userinfo-string"),
]


@pytest.mark.parametrize("endpoint", ["/validate", "/mutate"])
@pytest.mark.parametrize(("body", "content_type", "expected"), BAD_INPUTS)
def test_bad_input_is_400_with_json_message(
    client: Any, endpoint: str, body: bytes, content_type: str | None, expected: str
) -> None:
    headers = {"Content-Type": content_type} if content_type else {}
    response = client.post(endpoint, data=body, headers=headers)
    assert response.status_code == 400
    assert response.is_json
    assert expected in response.get_json()["message"]


def test_uid_is_echoed_in_400_when_known(client: Any) -> None:
    response = client.post(
        "/validate", data=encode(review_body(operation="PATCH")), content_type=JSON
    )
    assert response.get_json()["uid"] == "705ab4f5-6393-11e8-b7cc-42010a800002"


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
def test_body_over_limit_is_413(make_app: Any, declared: bool) -> None:
    client = make_app(max_body_bytes=2048).test_client()
    body = encode(review_body(pod(filler="x" * 60)) | {"pad": "y" * 4096})
    if declared:
        response = client.post("/validate", data=body, content_type=JSON)
    else:
        response = client.post(
            "/validate",
            input_stream=io.BytesIO(body),
            content_type=JSON,
            headers={"Transfer-Encoding": "chunked"},
            environ_overrides={"wsgi.input_terminated": True, "CONTENT_LENGTH": ""},
        )
    assert response.status_code == 413
    assert "limit" in response.get_json()["message"]


@pytest.mark.parametrize(
    ("method", "path", "code"),
    [
        ("GET", "/validate", 405),
        ("PUT", "/mutate", 405),
        ("OPTIONS", "/validate", 405),
        ("GET", "/nope", 404),
    ],
    ids=["get-validate", "put-mutate", "options-validate", "unknown-path"],
)
def test_routing_errors_are_json_not_500(client: Any, method: str, path: str, code: int) -> None:
    response = client.open(path, method=method)
    assert response.status_code == code
    assert response.get_json()["code"] == code


def test_allow_echoes_uid_and_envelope(client: Any) -> None:
    body = client.post("/validate", json=review_body()).get_json()
    assert body["apiVersion"] == "admission.k8s.io/v1"
    assert body["kind"] == "AdmissionReview"
    response = body["response"]
    assert response["uid"] == "705ab4f5-6393-11e8-b7cc-42010a800002"
    assert response["allowed"] is True
    assert "patch" not in response and "patchType" not in response
    assert response["auditAnnotations"] == {
        "dragate.io-tenant": "team-a",
        "decision": "allowed",
        "tenant": "team-a",
    }


def test_denial_has_403_and_a_message_with_the_numbers(client: Any) -> None:
    response = client.post("/validate", json=review_body(pod(deny="yes"))).get_json()["response"]
    assert response["allowed"] is False
    assert response["status"]["code"] == 403
    message = response["status"]["message"]
    for part in (
        "[quota]",
        "team-a",
        "gpu.nvidia.com",
        "used 6",
        "limit 8",
        "requested 4",
        "team-a/train-1",
    ):
        assert part in message


def test_mutate_sends_base64_jsonpatch(client: Any) -> None:
    response = client.post("/mutate", json=review_body()).get_json()["response"]
    assert response["patchType"] == "JSONPatch"
    patch = json.loads(base64.b64decode(response["patch"]))
    assert patch == [{"op": "add", "path": "/metadata/labels/dragate.io~1seen", "value": "yes"}]
    assert "labelled dragate.io/seen" in response["warnings"]


def test_validate_never_sends_a_patch(make_app: Any) -> None:
    def patching(*_: Any, **__: Any) -> Verdict:
        return Verdict(Decision(), patch=({"op": "add", "path": "/x", "value": 1},))

    client = make_app(reviewer=patching).test_client()
    response = client.post("/validate", json=review_body()).get_json()["response"]
    assert "patch" not in response and "patchType" not in response


def test_empty_patch_is_not_sent(make_app: Any) -> None:
    client = make_app(reviewer=lambda *_, **__: Verdict(Decision(), patch=()))
    response = client.test_client().post("/mutate", json=review_body()).get_json()["response"]
    assert "patch" not in response and "patchType" not in response


def test_dry_run_reaches_the_pipeline(client: Any) -> None:
    response = client.post("/validate", json=review_body(dryRun=True)).get_json()["response"]
    assert response["warnings"] == ["dry run: nothing reserved"]


UNREADABLE_CLAIM = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaim",
    "metadata": {"name": "c", "namespace": "team-a"},
    "spec": {"devices": {"requests": "not a list"}},
}
CLAIM_KIND = {"group": "resource.k8s.io", "version": "v1", "kind": "ResourceClaim"}


@pytest.mark.parametrize(
    ("request_fields", "options"),
    [
        ({}, {}),
        ({"operation": "DELETE", "object": None}, {}),
        ({"operation": "CONNECT"}, {}),
        ({"subResource": "status", "operation": "UPDATE"}, {}),
        ({"subResource": "ephemeralcontainers", "operation": "UPDATE"}, {}),
        ({"subResource": "resize", "operation": "UPDATE"}, {}),
        ({"namespace": "team-a"}, {"own_namespace": "team-a"}),
        (
            {"userInfo": {"username": "system:serviceaccount:dragate-system:dragate"}},
            {"own_namespace": "dragate-system", "own_service_account": "dragate"},
        ),
    ],
    ids=[
        "reviewed",
        "delete",
        "connect",
        "status",
        "ephemeral",
        "resize",
        "own-namespace",
        "own-sa",
    ],
)
def test_exempt_requests_pass_unevaluated(
    make_app: Any, request_fields: dict[str, Any], options: dict[str, Any]
) -> None:
    """Through the real pipeline: reviewed, the claim is denied and the Pod's tenant read."""
    client = make_app(reviewer=pipeline.review, **options).test_client()
    claim_fields = {"kind": CLAIM_KIND, "resource": {**CLAIM_KIND, "resource": "resourceclaims"}}
    validated = client.post("/validate", json=review_body(
        UNREADABLE_CLAIM, **{**claim_fields, **request_fields}
    )).get_json()["response"]  # fmt: skip
    mutated = client.post("/mutate", json=review_body(pod(), **request_fields))
    mutation = mutated.get_json()["response"]
    exempt = bool(request_fields or options)
    assert validated["allowed"] is exempt and "patch" not in mutation
    for response in (validated, mutation):
        assert ("exempt" in response["auditAnnotations"]) is exempt
        assert ("tenant" in response["auditAnnotations"]) is not exempt  # no facts read


@pytest.mark.parametrize(
    ("endpoint", "options", "allowed"),
    [
        ("/validate", {}, False),
        ("/validate", {"on_timeout": "allow"}, True),
        ("/mutate", {}, True),
    ],
    ids=["validate-deny", "validate-allow", "mutate-fails-open"],
)
def test_timeout_parameter_is_respected(
    make_app: Any, endpoint: str, options: dict[str, Any], allowed: bool
) -> None:
    if "on_timeout" in options:
        options = {"on_timeout": TimeoutOutcome(options["on_timeout"])}
    client = make_app(timeout_margin=0.1, **options).test_client()
    started = time.monotonic()
    response = client.post(f"{endpoint}?timeout=1s", json=review_body(pod(sleep="2")))
    assert time.monotonic() - started < 2.0  # the 0.9 s budget ended it, not the 2 s of work
    body = response.get_json()["response"]
    assert body["allowed"] is allowed
    if allowed:
        assert "exceeded" in body["warnings"][0]
        assert "patch" not in body
    else:
        assert body["status"]["code"] == 403
        assert "could not finish" in body["status"]["message"]


def test_internal_bug_is_500_with_uid(client: Any, caplog: Any) -> None:
    response = client.post("/validate", json=review_body(pod(crash="yes")))
    assert response.status_code == 500
    assert response.get_json()["uid"] == "705ab4f5-6393-11e8-b7cc-42010a800002"


def test_health_and_readiness(client: Any) -> None:
    assert client.get("/healthz").status_code == 200
    ready = client.get("/readyz")
    assert ready.status_code == 200
    assert ready.get_json()["policies"] == {
        "state": "current",
        "digest": "d1",
        "loadedAt": ready.get_json()["policies"]["loadedAt"],
        "errors": [],
        "objects": 0,
        "notEnforced": [],
    }


def _review_counts(client: Any) -> str:
    text: str = client.get("/metrics").get_data(as_text=True)
    return "\n".join(line for line in text.splitlines() if "dragate_admission_requests" in line)


def test_a_review_is_counted_and_logged_once_its_reply_is_sent(
    client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """As a WSGI server does, the test client closes the response after sending it: only then
    are the review's metrics and log line written, once, however often it is closed."""
    before = _review_counts(client)
    with caplog.at_level(logging.INFO, logger="dragate"):
        response = client.post("/validate", json=review_body(pod(), operation="UPDATE"))
        assert response.status_code == 200 and _review_counts(client) == before
        assert not [r for r in caplog.records if r.getMessage() == "review"]
        response.close()
        response.close()
    counted = _review_counts(client)
    assert counted != before and 'operation="UPDATE",result="allowed"} 1.0' in counted
    assert len([r for r in caplog.records if r.getMessage() == "review"]) == 1


def test_accounting_that_fails_is_logged_never_raised(caplog: pytest.LogCaptureFixture) -> None:
    def broken() -> None:
        raise RuntimeError("a full disk")

    sent = Sent([b"{}"], broken)
    with caplog.at_level(logging.ERROR, logger="dragate"):
        sent.close()
    assert [r.getMessage() for r in caplog.records] == ["accounting a sent reply failed"]


def test_metrics_count_reviews(client: Any) -> None:
    client.post("/validate", json=review_body(pod(deny="yes"), operation="UPDATE")).close()
    text = client.get("/metrics").get_data(as_text=True)
    assert (
        'dragate_admission_requests_total{endpoint="validate",kind="Pod",'
        'operation="UPDATE",result="denied"}' in text
    )
    assert 'dragate_denials_total{policy="quota",tenant="team-a"}' in text
    assert "dragate_admission_duration_seconds_bucket" in text and 'le="0.0005"' in text
    assert "dragate_policy_reload_success 1.0" in text


def _unlisted(paths: object) -> PolicySet:
    raise FactsUnavailable("Tenant objects not listed yet")


def _with_objects(paths: object) -> PolicySet:
    left_out = ObjectVerdict("Tenant", "b", 2, 'spec.quotas: unknown field (did you mean "quota"?)')
    return PolicySet(digest="d9", objects=(ObjectVerdict("Tenant", "a", 1), left_out))


@pytest.mark.parametrize(
    ("loader", "status", "policies"),
    [
        pytest.param(_unlisted, 503, {"state": "unloaded",
                     "errors": ["Tenant objects not listed yet"]}, id="objects-not-listed"),
        pytest.param(_with_objects, 200, {"state": "current", "objects": 2, "notEnforced": [
            'Tenant/b: spec.quotas: unknown field (did you mean "quota"?)'],
            "note": "nothing to enforce: no Tenant or DeviceClassPolicy is loaded"},
            id="one-object-left-out"),
    ],
)  # fmt: skip
def test_readiness_says_which_policy_objects_are_enforced(
    loader: Any, status: int, policies: dict[str, Any]
) -> None:
    holder = PolicyHolder([], loader)
    context = Context(policies=holder.get, state=SnapshotState.empty(), ledger=MemoryLedger())
    ready = create_app(context, holder, AdmissionOptions(), review).test_client().get("/readyz")
    assert ready.status_code == status
    body = ready.get_json()["policies"]
    assert {k: body[k] for k in policies} == policies


def test_the_webhook_shows_no_controller_state() -> None:
    """The Lease and the reconciler are the controller role's, shown on its probe port
    (tests/admission/test_controlprocess.py); a webhook's /readyz and /metrics never claim
    or deny them."""
    holder = PolicyHolder([], lambda _paths: PolicySet())
    holder.get()
    context = Context(policies=holder.get, state=SnapshotState.empty(), ledger=MemoryLedger())
    app = create_app(context, holder, AdmissionOptions(), review)
    ready = app.test_client().get("/readyz")
    assert ready.status_code == 200
    assert "controller" not in ready.get_json()
    text = app.test_client().get("/metrics").get_data(as_text=True)
    assert "dragate_leader" not in text and "dragate_reconcile_" not in text


BAD_SPEC = 'spec.quotas: unknown field (did you mean "quota"?)'


@pytest.mark.parametrize(
    ("objects", "shown"),
    [
        pytest.param((ObjectVerdict("Tenant", "a", 1),), 0.0, id="all-enforced"),
        pytest.param((ObjectVerdict("Tenant", "a", 1), ObjectVerdict("Tenant", "b", 2, BAD_SPEC)),
                     1.0, id="one-left-out"),
    ],
)  # fmt: skip
def test_metrics_count_the_policy_objects_left_out(
    objects: tuple[ObjectVerdict, ...], shown: float
) -> None:
    holder = PolicyHolder([], lambda _paths: PolicySet(objects=objects))
    context = Context(policies=holder.get, state=SnapshotState.empty(), ledger=MemoryLedger())
    text = create_app(context, holder, AdmissionOptions(), review).test_client().get("/metrics")
    assert f"dragate_policy_objects_not_enforced {shown}" in text.get_data(as_text=True)


@pytest.mark.parametrize(("seconds", "fresh"), [(60.0, False), (0.0, True)], ids=["held", "fresh"])
def test_metrics_are_rendered_at_most_once_per_window(seconds: float, fresh: bool) -> None:
    """A client asking for /metrics on every request gets the same rendering within the
    window (a review answered meanwhile shows at the next one), not a rendering each."""
    holder = PolicyHolder([], lambda _paths: PolicySet())
    context = Context(policies=holder.get, state=SnapshotState.empty(), ledger=MemoryLedger())
    app = create_app(context, holder, AdmissionOptions(), review, metrics_seconds=seconds)
    client = app.test_client()
    first = client.get("/metrics").get_data(as_text=True)
    client.post("/validate", json=review_body(pod(), operation="DELETE")).close()
    second = client.get("/metrics").get_data(as_text=True)
    assert (second != first) is fresh
