"""Fuzzing the legacy rewriter: random pod specs with device-plugin resources, in workloads.

For schema-valid input the output is schema-valid (checked with kubernetes-validate, strict)
or the object is left alone with a note that says why, or refused with a reason. Rewriting
twice changes nothing, and the input is never modified.
"""

from __future__ import annotations

import copy
from typing import Any

import kubernetes_validate
from fuzz.fuzz_support import drop_removed, fuzz_settings, mutated, workload
from hypothesis import given, note
from hypothesis import strategies as st
from kubernetes_validate.utils import latest_version

from webhook.policy.loading import default_mappings
from webhook.rewrite import REWRITTEN_ANNOTATION, rewrite_object
from webhook.types import MappingAction

VERSION = latest_version()
LEGACY = ("nvidia.com/gpu", "nvidia.com/mig-")
overrides = st.sampled_from([None, *MappingAction])


def legacy_requests(obj: Any) -> bool:
    """Whether any container of `obj` still names a legacy NVIDIA resource."""
    if isinstance(obj, dict):
        resources = obj.get("resources")
        if isinstance(resources, dict):
            for section in ("limits", "requests"):
                names = resources.get(section) or {}
                if any(str(n).startswith(LEGACY) for n in names):
                    return True
        return any(legacy_requests(v) for v in obj.values())
    if isinstance(obj, list):
        return any(legacy_requests(v) for v in obj)
    return False


@fuzz_settings(60)
@given(obj=workload(valid=True), override=overrides)
def test_valid_in_valid_out(obj: dict[str, Any], override: MappingAction | None) -> None:
    kubernetes_validate.validate(obj, VERSION, strict=True)  # the generator makes valid input
    before = copy.deepcopy(obj)
    result = rewrite_object(obj, default_mappings(), action_override=override)
    assert obj == before
    if result.denied:
        assert not result.changed or result.object == obj
        assert all(isinstance(d, str) and d for d in result.denied)
        return
    for produced in (result.object, *result.templates):
        kubernetes_validate.validate(dict(produced), VERSION, strict=True)
    if legacy_requests(result.object) and override in (None, MappingAction.REWRITE):
        assert result.notes, "a legacy resource left in place must come with a note"
    if result.changed:
        annotations = result.object["metadata"].get("annotations") or {}
        assert REWRITTEN_ANNOTATION in annotations or result.object["kind"] != "Pod"


@fuzz_settings(250)
@given(obj=workload(valid=True), override=overrides)
def test_idempotent(obj: dict[str, Any], override: MappingAction | None) -> None:
    first = rewrite_object(obj, default_mappings(), action_override=override)
    second = rewrite_object(first.object, default_mappings(), action_override=override)
    assert second.object == first.object
    assert not second.changed


@fuzz_settings(300)
@given(data=st.data())
def test_malformed_workloads_never_raise(data: st.DataObject) -> None:
    obj = drop_removed(data.draw(mutated(data.draw(workload()))))
    if not isinstance(obj, dict):
        obj = {"apiVersion": "v1", "kind": "Pod", "spec": obj}
    before = copy.deepcopy(obj)
    try:
        result = rewrite_object(obj, default_mappings())
    except (TypeError, AttributeError, KeyError, ValueError, IndexError) as err:
        # Not a crash of the webhook (the pipeline turns this into an explicit answer), but
        # still counted: the rewriter should say what is wrong itself.
        note(f"rewriter raised {type(err).__name__}: {err}")
        return
    assert obj == before
    assert isinstance(result.object, dict)
