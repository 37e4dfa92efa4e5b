"""The AdmissionReview wire format: bytes in, `AdmissionRequest` out; `Verdict` in, dict out.

Everything the apiserver would reject or silently drop is fixed here, once: warnings are
bounded (each <= 120 characters, a bounded number), audit annotation keys are made valid
qualified names (the apiserver stores them as `<webhook-name>/<key>`, so the key itself may
hold no `/`), patches travel only from /mutate and only when non-empty, and a denial always
carries `status.code` 403 with a message naming policy, tenant, class and numbers.
"""

from __future__ import annotations

import base64
import functools
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from webhook.types import AdmissionRequest, Operation, Reason, Verdict

API_VERSION = "admission.k8s.io/v1"
KIND = "AdmissionReview"
MAX_WARNING_CHARS = 120
MAX_AUDIT_KEY_CHARS = 63
MAX_AUDIT_VALUE_CHARS = 1024
MAX_REASONS = 10
ELLIPSIS = "…"
_AUDIT_KEY = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_AUDIT_BAD_CHARS = re.compile(r"[^-A-Za-z0-9_.]+")
_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]+")
"""C0 and C1 controls (ANSI escapes start with one), line and paragraph separators and
bidirectional overrides: none may reach a terminal from a name a user chose."""
MAX_REASON_CHARS = 1024


class BadReview(ValueError):
    """The body is not an AdmissionReview we can answer; the caller replies HTTP 400."""

    def __init__(self, message: str, uid: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.uid = uid


# --------------------------------------------------------------------------- parsing


def parse_review(body: bytes, content_type: str | None) -> AdmissionRequest:
    """Decode and check an admission.k8s.io/v1 AdmissionReview; raise BadReview on anything off."""
    _require_json_content_type(content_type)
    document = _decode(body)
    if document.get("apiVersion") != API_VERSION or document.get("kind") != KIND:
        raise BadReview(
            f"expected apiVersion {API_VERSION} kind {KIND}, got "
            f"{_shown(document.get('apiVersion'))} {_shown(document.get('kind'))}"
        )
    request = document.get("request")
    if not isinstance(request, dict):
        raise BadReview("missing request")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise BadReview("missing request.uid")
    try:
        return _request(uid, request)
    except BadReview as err:
        raise BadReview(err.message, uid) from None


def _require_json_content_type(content_type: str | None) -> None:
    media = (content_type or "").split(";", 1)[0].strip().lower()
    if media != "application/json":
        raise BadReview(f"Content-Type must be application/json, got {content_type or 'none'!r}")


_DIGITS_AS_ZEROS = bytes.maketrans(b"0123456789[", b"0000000000{")
_LONG_NUMBER = b"0" * 19
"""19 digits in a row (after every digit became 0) may be an integer outside 64 bits, which
orjson reads as a float. (A translate and a find cost a tenth of a regular expression; the
same translate makes every `[` a `{`, so one count finds both kinds of container.)"""
FAST_CONTAINERS = 500
"""At most this many `{` and `[` in the body: it nests less deeply than `json` can read, so
`json` would read it too (orjson reads documents nested far deeper than `json` refuses)."""


def _decode(body: bytes) -> dict[str, Any]:
    """JSON of any shape to a dict; deep nesting and giant numbers are user errors too.

    orjson reads a review in half the time of `json`, and whatever it reads, it reads as
    `json` does, except integers outside 64 bits and nesting deeper than `json` allows (a body
    that may hold either goes to `json`). What orjson refuses goes to `json` too, so NaN, lone
    surrogates, a BOM and every error message are exactly `json`'s.
    """
    if _fast(body):
        try:
            document = orjson.loads(body)
        except orjson.JSONDecodeError:
            document = _decode_slowly(body)
    else:
        document = _decode_slowly(body)
    if not isinstance(document, dict):
        raise BadReview("body must be a JSON object")
    return document


def _fast(body: bytes) -> bool:
    """Whether orjson reads `body` exactly as `json` would."""
    shape = body.translate(_DIGITS_AS_ZEROS)
    return shape.count(b"{") <= FAST_CONTAINERS and _LONG_NUMBER not in shape


def _decode_slowly(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, RecursionError) as err:  # JSONDecodeError and UnicodeDecodeError too
        raise BadReview(f"body is not valid JSON: {_short(str(err), 200)}") from None


def _request(uid: str, raw: Mapping[str, Any]) -> AdmissionRequest:
    found = _usual_request(uid, raw)
    return found if found is not None else _checked_request(uid, raw)


def _usual_request(uid: str, raw: Mapping[str, Any]) -> AdmissionRequest | None:
    """The request when every field has the exact type an API server sends (an absent
    optional field is None), in one pass; None otherwise: `_checked_request` then reads it
    field by field and says what is wrong. Both give the same request for what this accepts."""
    kind, resource, op = raw.get("kind"), raw.get("resource"), raw.get("operation")
    if type(kind) is not dict or type(resource) is not dict or type(op) is not str:
        return None
    texts = (
        kind.get("group"), kind.get("version"), raw.get("namespace"), raw.get("name"),
        raw.get("subResource"),
    )  # fmt: skip
    for text in texts:
        if text is not None and type(text) is not str:
            return None
    maps = (raw.get("object"), raw.get("oldObject"), raw.get("userInfo"))
    for value in maps:
        if value is not None and type(value) is not dict:
            return None
    name, plural, dry_run = kind.get("kind"), resource.get("resource"), raw.get("dryRun")
    if type(name) is not str or type(plural) is not str or not name or not plural:
        return None
    operation = _OPERATIONS.get(op)
    if operation is None or (dry_run is not None and type(dry_run) is not bool):
        return None
    group, version, namespace, object_name, sub_resource = texts
    return AdmissionRequest(
        uid=uid, kind=name, group=group or "", version=version or "", resource=plural,
        operation=operation, namespace=namespace or "", name=object_name or "",
        sub_resource=sub_resource or "", object=maps[0], old_object=maps[1],
        dry_run=dry_run is True, user_info=maps[2] or {},
    )  # fmt: skip


def _checked_request(uid: str, raw: Mapping[str, Any]) -> AdmissionRequest:
    kind = _mapping(raw, "kind", required=True) or {}
    resource = _mapping(raw, "resource", required=True) or {}
    return AdmissionRequest(
        uid=uid,
        kind=_string(kind, "kind", "request.kind.kind", required=True),
        group=_string(kind, "group", "request.kind.group"),
        version=_string(kind, "version", "request.kind.version"),
        resource=_string(resource, "resource", "request.resource.resource", required=True),
        operation=_operation(raw.get("operation")),
        namespace=_string(raw, "namespace", "request.namespace"),
        name=_string(raw, "name", "request.name"),
        sub_resource=_string(raw, "subResource", "request.subResource"),
        object=_mapping(raw, "object"),
        old_object=_mapping(raw, "oldObject"),
        dry_run=_flag(raw, "dryRun"),
        user_info=_mapping(raw, "userInfo") or {},
    )


def _mapping(raw: Mapping[str, Any], key: str, *, required: bool = False) -> dict[str, Any] | None:
    value = raw.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, dict):
        raise BadReview(f"request.{key} must be an object")
    return value


def _string(raw: Mapping[str, Any], key: str, path: str, *, required: bool = False) -> str:
    value = raw.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value):
        raise BadReview(
            f"{path} must be a non-empty string" if required else f"{path} must be a string"
        )
    return value


def _flag(raw: Mapping[str, Any], key: str) -> bool:
    value = raw.get(key)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise BadReview(f"request.{key} must be a boolean")
    return value


_OPERATIONS = {op.value: op for op in Operation}
"""Each operation by its wire name: one lookup instead of Enum's call machinery."""


def _operation(value: object) -> Operation:
    found = _OPERATIONS.get(value) if type(value) is str else None
    if found is not None:
        return found
    if isinstance(value, str) and value in Operation.__members__.values():
        return Operation(value)  # a str subclass (not from JSON): as before
    allowed = ", ".join(op.value for op in Operation)
    raise BadReview(f"request.operation must be one of {allowed}, got {_shown(value)}")


def _shown(value: object) -> str:
    """A sent value quoted in a 400 message (and its log line): escaped and bounded."""
    return _short(repr(value), 100)


# --------------------------------------------------------------------------- rendering


def render_response(
    uid: str, verdict: Verdict, *, mutate: bool, max_warnings: int = 20
) -> dict[str, Any]:
    """The AdmissionReview reply for `verdict`; `mutate` is True only on /mutate."""
    decision = verdict.decision
    response: dict[str, Any] = {"uid": uid, "allowed": decision.allowed}
    warnings = bound_warnings(_warning_texts(verdict), max_warnings)
    if warnings:
        response["warnings"] = warnings
    response["auditAnnotations"] = audit_annotations({**decision.audit, **decision_audit(verdict)})
    if not decision.allowed:
        response["status"] = {
            "code": 403,
            "reason": "Forbidden",
            "message": denial_message(decision.reasons),
        }
    elif mutate and verdict.patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = encode_patch(verdict.patch)
    return {"apiVersion": API_VERSION, "kind": KIND, "response": response}


_REPLY_OPTIONS = orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE


def encode_review(reply: Mapping[str, Any]) -> bytes:
    """The reply's bytes: compact UTF-8 JSON, sorted keys, newline-terminated."""
    return orjson.dumps(reply, option=_REPLY_OPTIONS)


def decision_audit(verdict: Verdict) -> dict[str, str]:
    """What every answer records in the audit log: decision, tenant, exemption, denying policies.

    The apiserver stores each key as `<webhook-name>/<key>`, e.g. `validate.dragate.io/decision`.
    """
    decision = verdict.decision
    audit = {"decision": "allowed" if decision.allowed else "denied"}
    if decision.tenant:
        audit["tenant"] = decision.tenant
    if verdict.exempt:
        audit["exempt"] = verdict.exempt
    if not decision.allowed:
        audit["policies"] = ",".join(dict.fromkeys(r.policy for r in decision.reasons))
    return audit


def encode_patch(patch: Iterable[Mapping[str, Any]]) -> str:
    """RFC 6902 operations as the base64 JSON the apiserver expects."""
    operations = list(patch)
    try:
        data = orjson.dumps(operations)
    except orjson.JSONEncodeError:  # nested deeper than orjson's 255 levels
        data = json.dumps(operations, separators=(",", ":")).encode()
    return base64.b64encode(data).decode("ascii")


def _warning_texts(verdict: Verdict) -> list[str]:
    """The decision's warnings (the rewriter's notes among them on /mutate), once each."""
    return list(dict.fromkeys(verdict.decision.warnings))


def bound_warnings(warnings: Iterable[str], limit: int = 20) -> list[str]:
    """Each warning one clean line of at most 120 characters; at most `limit` of them."""
    cleaned = [w for w in (short_warning(_one_line(w)) for w in warnings) if w]
    if len(cleaned) <= limit:
        return cleaned
    kept = cleaned[: max(limit - 1, 0)]
    return [*kept, f"{len(cleaned) - len(kept)} more warnings not shown"]


def audit_annotations(audit: Mapping[str, str]) -> dict[str, str]:
    """Keys made valid qualified names (first one wins on a clash); values one bounded line."""
    annotations: dict[str, str] = {}
    for key, value in audit.items():
        valid = audit_key(key)
        if valid and valid not in annotations:
            annotations[valid] = _short(_one_line(str(value)), MAX_AUDIT_VALUE_CHARS)
    return annotations


@functools.lru_cache(maxsize=256)
def audit_key(key: str) -> str:
    """`dragate.io/tenant` -> `dragate.io-tenant`; "" when nothing valid is left.

    Keys come from the code (`decision`, `tenant`, `audit-0`, ...), so the few seen are
    remembered rather than cleaned by two regular expressions on every reply."""
    candidate = _AUDIT_BAD_CHARS.sub("-", key)[:MAX_AUDIT_KEY_CHARS].strip("-_.")
    return candidate if _AUDIT_KEY.match(candidate) else ""


def denial_message(reasons: Iterable[Reason]) -> str:
    """One reason per sentence, each naming policy, tenant, class and the numbers."""
    listed = list(reasons)
    if not listed:
        return "denied by dragate"
    parts = [_short(_one_line(format_reason(r)), MAX_REASON_CHARS) for r in listed[:MAX_REASONS]]
    if len(listed) > MAX_REASONS:
        parts.append(f"and {len(listed) - MAX_REASONS} more reasons")
    return "; ".join(parts)


def format_reason(reason: Reason) -> str:
    """`[policy] message (tenant t, class c, used 6 / limit 8 / requested 4, held by ...)`."""
    details = [
        f"{label} {value}"
        for label, value in (("tenant", reason.tenant), ("class", reason.device_class))
        if value and not _mentions(reason.message, value)
    ]
    numbers = [
        f"{label} {value}"
        for label, value in (
            ("used", reason.used),
            ("limit", reason.limit),
            ("requested", reason.requested),
        )
        if value is not None
    ]
    if numbers and not all(_mentions(reason.message, n) for n in numbers):
        details.append(" / ".join(numbers))
    if reason.holders and not _mentions(reason.message, reason.holders[0]):
        details.append("held by " + ", ".join(reason.holders[:5]))
    return f"{reason}" + (f" ({', '.join(details)})" if details else "")


def _mentions(text: str, value: str) -> bool:
    return re.search(rf"(?<![\w.-]){re.escape(value)}(?![\w-])", text) is not None


def _one_line(text: str) -> str:
    if text.isprintable():  # every character _CONTROL_CHARS matches is unprintable
        return text.strip()
    return _CONTROL_CHARS.sub(" ", text).strip()


def short_warning(text: str, limit: int = MAX_WARNING_CHARS) -> str:
    """At most `limit` code points, cut after the last whole clause (`; `) or word that fits,
    ending in … when cut: a warning states its decisive fact first, and that fact is never
    cut mid-word. Text with no break in its second half is cut as `_short` cuts it."""
    if len(text) <= limit:
        return text
    head = text[: limit - 2]
    clause = head.rfind("; ")
    if clause >= limit // 2:
        return f"{head[: clause + 1]} {ELLIPSIS}"
    word = head.rstrip().rfind(" ")
    if word >= limit // 2:
        return f"{head[:word].rstrip()} {ELLIPSIS}"
    return _short(text, limit)


def _short(text: str, limit: int) -> str:
    """At most `limit` code points (never a broken UTF-8 sequence), ending in … when cut."""
    return text if len(text) <= limit else text[: limit - 1].rstrip() + ELLIPSIS
