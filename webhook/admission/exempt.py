"""Requests the webhook answers "allowed" without evaluating, each for a stated reason.

These are deployment facts, not policy: the webhook's own namespace and service account must
pass or a broken webhook could never be fixed (deadlock), and some operations and subresources
carry nothing dragate judges. Policy-level exemptions live in `Settings` and the pipeline.
"""

from __future__ import annotations

from webhook.admission.config import AdmissionOptions
from webhook.types import AdmissionRequest, Operation

SUBRESOURCE_REASONS = {
    "status": "status writes come from controllers, the scheduler and DRA drivers",
    "ephemeralcontainers": "ephemeral containers (kubectl debug) cannot hold device claims",
    "resize": "in-place resize changes CPU and memory only, never devices or claims",
}


def exemption(request: AdmissionRequest, options: AdmissionOptions) -> str | None:
    """Why `request` passes unevaluated, or None when it must be reviewed."""
    if request.operation is Operation.DELETE:
        return "DELETE: nothing is admitted; quota is released by the ledger, not by this call"
    if request.operation is Operation.CONNECT:
        return "CONNECT (exec, attach, port-forward) changes no object"
    if request.sub_resource:
        default = f"subresource {request.sub_resource!r} is not evaluated"
        return SUBRESOURCE_REASONS.get(request.sub_resource, default)
    if options.own_namespace and request.namespace == options.own_namespace:
        return f"the webhook's own namespace {options.own_namespace!r} always passes"
    if _is_own_service_account(request, options):
        return "the webhook's own service account always passes"
    return None


def _is_own_service_account(request: AdmissionRequest, options: AdmissionOptions) -> bool:
    if not options.own_service_account:
        return False
    name = options.own_service_account
    if not name.startswith("system:serviceaccount:"):
        name = f"system:serviceaccount:{options.own_namespace or 'default'}:{name}"
    return request.user_info.get("username") == name
