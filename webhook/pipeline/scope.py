"""What is reviewed at all: one pure decision, made once per request, before any fact is read.

The webhook's /validate and /mutate, `dragate check` and `dragate test` all reach it through
`webhook.pipeline.review`, so a request is exempt (or not) for the same reason everywhere:
- deployment facts: the webhook's own namespace and service account always pass, or a broken
  webhook could never be fixed (deadlock);
- operations and subresources that carry nothing dragate judges (DELETE, CONNECT, status, ...);
- policy: `Settings.exemptNamespaces` and `exemptServiceAccounts`;
- what each endpoint judges: /mutate rewrites Pod CREATEs; /validate judges the creation of
  claims, claim templates and Pods, predicts whether a workload's Pods fit, guards the
  admin-access label of Namespaces, and checks dragate.io policy objects as the policy loader
  would. Everything else is answered "allowed", unread.
"""

from __future__ import annotations

from dataclasses import dataclass

from webhook.engine.evaluate import CLAIM_KINDS
from webhook.engine.gangs import GANG_ONLY_KINDS
from webhook.engine.prediction import PREDICTED_KINDS
from webhook.types import POLICY_GROUP, POLICY_KINDS, AdmissionRequest, Operation, Settings

SUBRESOURCE_REASONS = {
    "status": "status writes come from controllers, the scheduler and DRA drivers",
    "ephemeralcontainers": "ephemeral containers (kubectl debug) cannot hold device claims",
    "resize": "in-place resize changes CPU and memory only, never devices or claims",
}
SETTINGS_EXEMPT = "namespace or service account is exempt"


@dataclass(frozen=True)
class Identity:
    """The webhook's own namespace and service account (empty outside a cluster)."""

    namespace: str = ""
    service_account: str = ""

    @property
    def user(self) -> str:
        """The username the API server reports for the service account."""
        name = self.service_account
        if not name or name.startswith("system:serviceaccount:"):
            return name
        return f"system:serviceaccount:{self.namespace or 'default'}:{name}"


@dataclass(frozen=True)
class Handling:
    """Whether a request is reviewed; when not, why (the answer's `exempt` audit annotation)."""

    exempt: str = ""

    @property
    def reviewed(self) -> bool:
        return not self.exempt


REVIEWED = Handling()
NOBODY = Identity()


def handles(
    request: AdmissionRequest, settings: Settings, own: Identity = NOBODY, *, mutate: bool
) -> Handling:
    """Whether `request` is reviewed (on /mutate when `mutate`), from the request alone."""
    reason = _passes(request, settings, own) or (
        _not_rewritten(request) if mutate else _not_judged(request)
    )
    return Handling(reason) if reason else REVIEWED


def _passes(request: AdmissionRequest, settings: Settings, own: Identity) -> str:
    """Why a request passes on both endpoints, or ""."""
    return _carries_nothing(request) or _whose(request, settings, own)


def _carries_nothing(request: AdmissionRequest) -> str:
    """Operations and subresources that never admit anything dragate judges."""
    if request.operation is Operation.DELETE:
        return "DELETE: nothing is admitted; quota is released by the ledger, not by this call"
    if request.operation is Operation.CONNECT:
        return "CONNECT (exec, attach, port-forward) changes no object"
    if request.sub_resource:
        default = f"subresource {request.sub_resource!r} is not evaluated"
        return SUBRESOURCE_REASONS.get(request.sub_resource, default)
    return ""


def _whose(request: AdmissionRequest, settings: Settings, own: Identity) -> str:
    """The webhook's own requests, and those Settings exempt."""
    if own.namespace and request.namespace == own.namespace:
        return f"the webhook's own namespace {own.namespace!r} always passes"
    user = str(request.user_info.get("username", ""))
    if own.user and user == own.user:
        return "the webhook's own service account always passes"
    if request.namespace in settings.exempt_namespaces:
        return SETTINGS_EXEMPT
    return SETTINGS_EXEMPT if user in settings.exempt_service_accounts else ""


def _not_rewritten(request: AdmissionRequest) -> str:
    pod_create = request.kind == "Pod" and request.operation is Operation.CREATE
    return "" if pod_create and request.object is not None else "only Pod creations are rewritten"


def is_policy_object(request: AdmissionRequest) -> bool:
    """A dragate.io policy object being created or changed: judged by the policy loader."""
    return (
        request.group == POLICY_GROUP
        and request.kind in POLICY_KINDS
        and request.operation in (Operation.CREATE, Operation.UPDATE)
    )


def _not_judged(request: AdmissionRequest) -> str:
    """Namespaces: the admin-access label guard; other kinds need an object to judge."""
    if request.kind == "Namespace":
        return ""
    if request.object is None:
        return "no object to review"
    if request.kind in CLAIM_KINDS and request.operation is Operation.CREATE:
        return ""
    if is_policy_object(request):
        return ""
    if (request.group, request.kind) in PREDICTED_KINDS | GANG_ONLY_KINDS:
        return ""
    return f"{request.operation.value} of a {request.kind}: nothing dragate judges changes"
