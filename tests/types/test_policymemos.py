"""What the engine and the rewriter remember belongs to one compiled policy set: a reload (a
new set, however it is made) starts with empty tables, and the old set keeps its own."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from builders import claim, exact, request, template

from webhook.engine import claimshapes, contentmemo, podshapes, rules
from webhook.engine.heldmemo import HeldMemo
from webhook.engine.normalize import template_claim_spec
from webhook.engine.podshapes import Findings, PodShape
from webhook.policy.loading import default_mappings, parse_policies
from webhook.rewrite import podedits
from webhook.types import PolicySet
from webhook.types.memos import Memos, Slot

TEMPLATE = template(request(exact(count=2)))
CLAIM = claim(request(exact(count=2)))
POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p", "namespace": "team-a"},
    "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 1}}}]},
}
SHAPE = PodShape(claims=(), notes=(), findings=Findings((), ()))
HELD = (object(), object(), object())


def _template_spec(policies: PolicySet) -> int:
    contentmemo.template_spec(TEMPLATE, "c", policies.memos)
    return contentmemo.remembered(policies.memos)


def _claim_spec(policies: PolicySet) -> int:
    contentmemo.claim_spec(CLAIM, "c", policies.memos)
    return contentmemo.remembered(policies.memos, contentmemo.CLAIM_SPECS)


def _claim_shape(policies: PolicySet) -> int:
    policies.memos.of(claimshapes.SHAPES).put("key", HELD, Findings((), ()))
    return claimshapes.remembered(policies.memos)


def _pod_shape(policies: PolicySet) -> int:
    policies.memos.of(podshapes.SHAPES).put("key", HELD, SHAPE)
    return podshapes.remembered(policies.memos)


def _rule_results(policies: PolicySet) -> int:
    spec = template_claim_spec(TEMPLATE, "c")
    rules.results_of(policies.memos, spec.requests[0], "team-a", "CREATE")
    return len(policies.memos.of(rules.RESULTS))


def _pod_spec_edits(policies: PolicySet) -> int:
    podedits.rewrite_pod(POD, policies.mappings, memos=policies.memos)
    return len(policies.memos.of(podedits.EDITS))


TABLES: dict[str, tuple[Slot[Any], Callable[[PolicySet], int]]] = {
    "template-specs": (contentmemo.TEMPLATE_SPECS, _template_spec),
    "claim-specs": (contentmemo.CLAIM_SPECS, _claim_spec),
    "pod-shapes": (podshapes.SHAPES, _pod_shape),
    "claim-shapes": (claimshapes.SHAPES, _claim_shape),
    "rule-results": (rules.RESULTS, _rule_results),
    "pod-spec-edits": (podedits.EDITS, _pod_spec_edits),
}
POLICY_TEXT = """
apiVersion: dragate.io/v1alpha1
kind: Tenant
metadata: {name: team-a}
spec: {namespaces: [team-a]}
"""
RELOADS: dict[str, Callable[[PolicySet], PolicySet]] = {
    "parsed-again": lambda old: replace(parse_policies(POLICY_TEXT), mappings=old.mappings),
    "replaced": lambda old: replace(old, digest="next"),
    "replaced-unchanged": replace,
    "deep-copied": copy.deepcopy,
}


def _loaded() -> PolicySet:
    return replace(parse_policies(POLICY_TEXT), mappings=default_mappings())


@pytest.mark.parametrize("table", TABLES, ids=list(TABLES))
@pytest.mark.parametrize("reload", RELOADS, ids=list(RELOADS))
def test_a_reloaded_set_does_not_see_the_old_sets_entries(table: str, reload: str) -> None:
    slot, fill = TABLES[table]
    old = _loaded()
    assert fill(old) == 1
    new = RELOADS[reload](old)
    assert new.memos is not old.memos
    assert slot.name not in new.memos.made()
    assert len(new.memos.of(slot)) == 0
    assert len(old.memos.of(slot)) == 1  # reviews in flight under the old set keep theirs
    assert fill(new) == 1


def test_the_memos_do_not_make_two_sets_differ() -> None:
    old = _loaded()
    _template_spec(old)
    assert replace(old) == old and hash(replace(old)) == hash(old)


def test_a_table_is_made_once_per_set() -> None:
    memos = Memos()
    slot: Slot[HeldMemo[int]] = Slot("numbers", HeldMemo[int])
    assert memos.of(slot) is memos.of(slot)
    assert memos.made() == ("numbers",)
    memos.forget()
    assert memos.made() == ()
