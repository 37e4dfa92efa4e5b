"""The one way through: request -> is it reviewed -> facts gathered once -> pure evaluation.

The webhook's `/validate` and `/mutate`, `dragate check` and `dragate test` all call `review`,
so the cluster and CI can never disagree. The pipeline is the only place that combines the
pure layers (engine, rewrite) with the adapters (cluster state, ledger): `scope` decides
whether a request is reviewed at all, `facts` reads what the engine needs once, `validation`
judges and on an allowed CREATE asks the ledger to hold the devices atomically, `mutation`
rewrites legacy Pods.
"""

from __future__ import annotations

from dataclasses import dataclass

from webhook.pipeline.context import Context, TemplateSink
from webhook.pipeline.facts import gather
from webhook.pipeline.limits import refusal
from webhook.pipeline.mutation import mutate as _mutate
from webhook.pipeline.offline import request_from_object
from webhook.pipeline.scope import Handling, Identity, handles
from webhook.pipeline.validation import unavailable
from webhook.pipeline.validation import validate as _validate
from webhook.types import (
    AdmissionRequest,
    Deadline,
    Decision,
    FactsUnavailable,
    Object,
    Reason,
    Settings,
    Verdict,
)

__all__ = [
    "UNREADABLE",
    "Applied",
    "Context",
    "Handling",
    "Identity",
    "TemplateSink",
    "admit",
    "gather",
    "handles",
    "request_from_object",
    "review",
]


def review(
    request: AdmissionRequest,
    context: Context,
    *,
    mutate: bool = False,
    deadline: Deadline | None = None,
) -> Verdict:
    """Judge (or, with `mutate`, rewrite) one admission request.

    Runs in the caller's thread. An object Kubernetes would refuse anyway is denied first,
    unread (`limits`). `deadline` is handed to every step that may block, checked before every
    step that changes state and inside long work: past it, DeadlineExceeded is raised and
    nothing has been reserved or created (the webhook answers its timeout verdict).
    """
    refused = refusal(request)
    if refused is not None:
        return refused
    try:
        policies = context.policies()
    except FactsUnavailable as err:  # policy objects not listed yet: nothing to judge with
        return _without_policies(request, context, err, mutate=mutate)
    handling = handles(request, policies.settings, context.own, mutate=mutate)
    if not handling.reviewed:
        return Verdict(Decision(), exempt=handling.exempt)
    deadline = deadline or Deadline.never()
    try:
        if mutate:
            return _mutate(request, policies, context, deadline)
        return _validate(request, policies, context, deadline)
    except UNREADABLE as err:
        return Verdict(_unreadable(err, mutate=mutate))


def _without_policies(
    request: AdmissionRequest, context: Context, err: FactsUnavailable, *, mutate: bool
) -> Verdict:
    """Before any policy set is loaded, requests are judged by the built-in Settings: what
    passes by scope passes, /mutate leaves the object alone, /validate fails closed."""
    handling = handles(request, Settings(), context.own, mutate=mutate)
    if not handling.reviewed:
        return Verdict(Decision(), exempt=handling.exempt)
    if mutate:
        return Verdict(Decision(warnings=(f"dragate: object not rewritten: {err}",)))
    return Verdict(unavailable(Settings(), err))


UNREADABLE = (TypeError, AttributeError, KeyError, ValueError, IndexError, RecursionError)
"""What a malformed object (a list where a map belongs, 900 levels of nesting, ...) provokes in
code that reads it. Such an object gets an explicit answer, not an HTTP 500: under
`failurePolicy: Ignore` a 500 would admit it unchecked."""


def _unreadable(err: Exception, *, mutate: bool) -> Decision:
    """Validation denies what it could not read; mutation leaves it unchanged and says so."""
    what = (
        "it nests too deeply"
        if isinstance(err, RecursionError)
        else f"{type(err).__name__}: {str(err)[:200]}"
    )
    if mutate:
        return Decision(warnings=(f"dragate: object not rewritten, it could not be read ({what})",))
    reason = Reason(
        policy="dragate/unreadable-object",
        message=f"the object could not be checked ({what}); denied rather than admitted unchecked",
    )
    return Decision(allowed=False, reasons=(reason,))


@dataclass(frozen=True)
class Applied:
    """What `kubectl apply` would meet: the mutation, then validation of the mutated object."""

    mutation: Verdict
    validation: Verdict | None
    final: Object

    @property
    def decision(self) -> Decision:
        return self.validation.decision if self.validation else self.mutation.decision

    @property
    def warnings(self) -> tuple[str, ...]:
        later = self.validation.decision.warnings if self.validation else ()
        return (*self.mutation.decision.warnings, *later)


def admit(request: AdmissionRequest, context: Context) -> Applied:
    """Mutate, then validate the mutated object, as the API server chains the two webhooks."""
    mutation = review(request, context, mutate=True)
    final = mutation.patched if mutation.patched is not None else (request.object or {})
    if not mutation.allowed:
        return Applied(mutation, None, final)
    return Applied(mutation, review(request.with_object(final), context), final)
