"""From a parsed request to an AdmissionReview reply: deadline, metrics, one log line.

Kept apart from Flask so the decision of what to answer (and what to count and log) reads
top to bottom in one place: `Admitter.admit`. The review runs here, in the request's thread,
with its deadline passed down (`webhook.types.Deadline`); a review that runs out of time
raises DeadlineExceeded before any step that would change state, and is answered as a timeout.
Whether a request is reviewed at all is the pipeline's decision (`webhook.pipeline.handles`);
an exempt verdict is counted as such. The counting and the log line are handed back with the
reply (`Admitted.account`) and run once it has been sent (`routes.ReviewRoutes`).
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from webhook.admission import jsonlog, metrics
from webhook.admission.config import AdmissionOptions, TimeoutOutcome
from webhook.admission.review import render_response
from webhook.pipeline import Context
from webhook.types import AdmissionRequest, Deadline, DeadlineExceeded, Decision, Reason, Verdict
from webhook.types.adapters import no_pause
from webhook.types.records import record

log = logging.getLogger("dragate.admission")
KNOWN_KINDS = frozenset({"Pod", "ResourceClaim", "ResourceClaimTemplate", "Namespace"})
Reviewer = Callable[..., Verdict]
"""`webhook.pipeline.review(request, context, *, mutate, deadline)` or a test double with that
shape; it raises DeadlineExceeded when the deadline passes before it is done."""


@record
class Admitted:
    """A review's reply, and its accounting: run after the reply is sent (the client is not
    kept waiting for a counter and a log line), always, once."""

    reply: dict[str, Any]
    account: Callable[[], None]


@record
class Outcome:
    """A verdict and the label it is counted under: allowed, denied, exempt or timeout."""

    verdict: Verdict
    result: str


class Admitter:
    """Answers one review; shared by the threads of a worker (it holds no per-request state)."""

    def __init__(
        self,
        context: Context,
        options: AdmissionOptions,
        reviewer: Reviewer,
        clock: Callable[[], float] = time.monotonic,
        pause: Callable[[], None] = no_pause,
    ) -> None:
        """`pause`: what a review's checkpoints call every couple of milliseconds of its work,
        to let the server's other reviews run (`Deadline.checkpoint`)."""
        self.context = context
        self.options = options
        self._reviewer = reviewer
        self._clock = clock
        self._pause = pause

    def admit(
        self, request: AdmissionRequest, *, mutate: bool, budget: float, spent: float = 0.0
    ) -> Admitted:
        """The reply body, and its accounting (metrics, the log line) to run once it is sent;
        exceptions from the pipeline propagate (the caller answers 500). `spent`: how much
        of `budget` went before the review began (reading and parsing its body)."""
        started = time.perf_counter()
        endpoint = "mutate" if mutate else "validate"
        outcome = self._outcome(request, mutate=mutate, budget=budget, spent=spent)
        elapsed = time.perf_counter() - started
        reply = render_response(
            request.uid, outcome.verdict, mutate=mutate, max_warnings=self.options.max_warnings
        )
        return Admitted(reply, functools.partial(account, request, endpoint, outcome, elapsed))

    def _outcome(
        self, request: AdmissionRequest, *, mutate: bool, budget: float, spent: float
    ) -> Outcome:
        deadline = Deadline.after(max(budget - spent, 0.0), self._clock, self._pause)
        try:
            verdict = self._reviewer(request, self.context, mutate=mutate, deadline=deadline)
        except DeadlineExceeded:
            verdict = self._timeout_verdict(mutate, budget)
            audit = {"timeout": f"review exceeded {budget:.1f}s"}
            decision = replace(verdict.decision, audit=audit)
            return Outcome(replace(verdict, decision=decision), "timeout")
        if verdict.exempt:
            return Outcome(verdict, "exempt")
        return Outcome(verdict, "allowed" if verdict.allowed else "denied")

    def _timeout_verdict(self, mutate: bool, budget: float) -> Verdict:
        """Mutation fails open (validation still runs); validation follows --on-timeout."""
        if mutate:
            note = f"dragate: mutation skipped, review exceeded {budget:.1f}s"
            return Verdict(Decision(allowed=True, warnings=(note,)))
        if self.options.on_timeout is TimeoutOutcome.ALLOW:
            note = f"dragate: not checked, review exceeded {budget:.1f}s (--on-timeout=allow)"
            return Verdict(Decision(allowed=True, warnings=(note,)))
        reason = Reason(
            policy="dragate-timeout",
            message=f"dragate could not finish the review within {budget:.1f}s; retry, and if "
            "it persists ask the cluster admins (denied because --on-timeout=deny)",
        )
        return Verdict(Decision(allowed=False, reasons=(reason,)))


def account(request: AdmissionRequest, endpoint: str, outcome: Outcome, elapsed: float) -> None:
    """What a review is counted and logged as (`elapsed`: the review's own time)."""
    _count(request, endpoint, outcome, elapsed)
    _log(request, endpoint, outcome, elapsed)


def _count(request: AdmissionRequest, endpoint: str, outcome: Outcome, elapsed: float) -> None:
    kind = request.kind if request.kind in KNOWN_KINDS else "other"  # bounded label values
    metrics.request_counter(request.operation.value, kind, endpoint, outcome.result).inc()
    metrics.duration(endpoint).observe(elapsed)
    decision = outcome.verdict.decision
    for reason in decision.reasons if not decision.allowed else ():
        metrics.DENIALS.labels(reason.tenant or decision.tenant, reason.policy).inc()
    for violation in decision.violations:
        tenant = violation.reason.tenant or decision.tenant
        mode = violation.mode.value.lower()
        metrics.VIOLATIONS.labels(violation.policy_name, violation.policy_kind, tenant, mode).inc()


def _log(request: AdmissionRequest, endpoint: str, outcome: Outcome, elapsed: float) -> None:
    decision = outcome.verdict.decision
    jsonlog.info_line(
        log,
        "review",
        {
            "uid": request.uid,
            "endpoint": endpoint,
            "kind": request.kind,
            "namespace": request.namespace,
            "name": request.name,
            "operation": request.operation.value,
            "dry_run": request.dry_run,
            "tenant": decision.tenant,
            "allowed": decision.allowed,
            "result": outcome.result,
            "duration_ms": round(elapsed * 1000, 3),
        },
    )
