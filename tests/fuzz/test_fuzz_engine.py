"""Fuzzing the pipeline directly: random DRA objects in v1, v1beta2 and v1beta1 shapes.

`pipeline.review` never raises: every object, however malformed, gets a Verdict whose
denials carry reasons and whose patch (on mutation) turns the object into `patched`.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import jsonpatch
from fuzz.conftest import example_context
from fuzz.fuzz_support import (
    claim_template,
    dns_label,
    dra_objects,
    drop_removed,
    fuzz_settings,
    mutated,
    namespace_objects,
)
from hypothesis import given
from hypothesis import strategies as st

from webhook import pipeline
from webhook.kube.snapshot import SnapshotState
from webhook.ledger.memory import MemoryLedger
from webhook.pipeline import Context, request_from_object
from webhook.types import AdmissionRequest, Operation, Verdict


def check_verdict(verdict: Verdict, obj: dict[str, Any], *, mutate: bool) -> None:
    decision = verdict.decision
    assert isinstance(decision.allowed, bool)
    if not decision.allowed:
        assert decision.reasons and all(str(r.message) for r in decision.reasons)
    assert all(isinstance(w, str) for w in decision.warnings)
    if mutate and verdict.patch:
        assert verdict.patched is not None
        assert jsonpatch.apply_patch(copy.deepcopy(obj), list(verdict.patch)) == verdict.patched
    for holder, devices in decision.holds.items():
        assert isinstance(holder, str) and all(n >= 0 for n in devices.values())


@fuzz_settings(500)
@given(obj=dra_objects, operation=st.sampled_from(list(Operation)), dry_run=st.booleans())
def test_review_never_raises(
    context: Context, obj: dict[str, Any], operation: Operation, dry_run: bool
) -> None:
    before = copy.deepcopy(obj)
    request = request_from_object(obj, operation=operation, dry_run=dry_run)
    for mutate in (False, True):
        check_verdict(pipeline.review(request, context, mutate=mutate), obj, mutate=mutate)
    assert obj == before  # inputs are never changed


@fuzz_settings(300)
@given(data=st.data())
def test_mutated_objects(context: Context, data: st.DataObject) -> None:
    obj = drop_removed(data.draw(mutated(data.draw(dra_objects))))
    if not isinstance(obj, dict):
        obj = {"kind": "Pod", "spec": obj}
    kind = obj.get("kind") if isinstance(obj.get("kind"), str) else "Pod"
    request = AdmissionRequest(
        uid="u", kind=kind, group="", version="v1", resource="pods",
        operation=Operation.CREATE, namespace="ml-research", name="x", object=obj,
    )  # fmt: skip
    for mutate in (False, True):
        check_verdict(pipeline.review(request, context, mutate=mutate), obj, mutate=mutate)


@fuzz_settings(200)
@given(obj=dra_objects)
def test_admit_chain(context: Context, obj: dict[str, Any]) -> None:
    """Mutate then validate, as the apiserver chains them; the final object is the patched one."""
    applied = pipeline.admit(request_from_object(obj, dry_run=True), context)
    assert isinstance(applied.decision.allowed, bool)
    if applied.mutation.patched is not None:
        assert applied.final == applied.mutation.patched


# ------------------------------------------------------------------ memos: warm == cold

_WARM = example_context()[1]  # its policies, and the process-wide memos, stay warm


def _with_templates(context: Context, templates: list[dict[str, Any]]) -> Context:
    """`context` on the namespaces and exactly these templates, with a fresh ledger."""
    state = SnapshotState([*namespace_objects(), *copy.deepcopy(templates)])
    return replace(context, state=state, ledger=MemoryLedger())


def _cold(templates: list[dict[str, Any]]) -> Context:
    return _with_templates(example_context()[1], templates)  # new policies: empty memos


@st.composite
def pod_with_templates(draw: st.DrawFn) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A Pod naming some of a few templates, valid or broken; names repeat across examples,
    so a warm memo meets changed templates under a remembered name."""
    templates = []
    for i, drawn in enumerate(draw(st.lists(claim_template(), min_size=1, max_size=3))):
        broken = draw(st.integers(0, 3)) == 0
        template = drop_removed(draw(mutated(drawn, huge=False))) if broken else drawn
        if isinstance(template, dict):
            templates.append({**template, "metadata": {"name": f"t{i}", "namespace": NS}})
    names = draw(st.lists(st.sampled_from([f"t{i}" for i in range(4)]), min_size=1, max_size=3))
    claims = [{"name": f"c{i}", "resourceClaimTemplateName": n} for i, n in enumerate(names)]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": draw(dns_label), "namespace": NS, "uid": "u-1"},
        "spec": {"containers": [{"name": "main", "image": "busybox"}], "resourceClaims": claims},
    }
    return pod, templates


NS = "ml-research"


@fuzz_settings(200)
@given(case=pod_with_templates())
def test_warm_memos_answer_as_cold_ones(case: tuple[dict[str, Any], list[Any]]) -> None:
    pod, templates = case
    request = request_from_object(pod)
    for mutate in (False, True):
        warm = pipeline.review(request, _with_templates(_WARM, templates), mutate=mutate)
        assert warm == pipeline.review(request, _cold(templates), mutate=mutate)
