"""Fuzzing `dragate migrate`'s skip rule: generated workloads, written in many YAML styles.

Whatever the object (valid, or mutated into nonsense), the style (block, flow, every scalar
quoted) and whether its GPU names are renamed away, migrating the text with the skip rule gives
what migrating it without the rule gives, and every body the rule skips loads in ruamel and is
left alone by the rewriter.
"""

from __future__ import annotations

from typing import Any

import yaml
from fuzz.fuzz_support import drop_removed, fuzz_settings, mutated, workload
from hypothesis import given
from hypothesis import strategies as st
from migrate_cases import assert_unchanged, outcome, renamed, skipped_bodies

from webhook.cli.migrate import skip_rule
from webhook.policy.loading import default_mappings

SKIP = skip_rule(default_mappings())
styles = st.fixed_dictionaries(
    {
        "default_flow_style": st.sampled_from([False, True, None]),
        "default_style": st.sampled_from([None, '"', "'"]),
        "indent": st.sampled_from([2, 4]),
    }
)


def as_yaml(obj: Any, style: dict[str, Any], rename: bool) -> str:
    text = yaml.safe_dump(obj, sort_keys=False, allow_unicode=True, width=4096, **style)
    return renamed(text) if rename else text


@fuzz_settings(120)
@given(
    objects=st.lists(workload(valid=True), min_size=1, max_size=3),
    style=styles,
    rename=st.lists(st.booleans(), min_size=3, max_size=3),
)
def test_valid_workloads(
    objects: list[dict[str, Any]], style: dict[str, Any], rename: list[bool]
) -> None:
    text = "---\n".join(as_yaml(o, style, r) for o, r in zip(objects, rename, strict=False))
    check(text)


@fuzz_settings(120)
@given(data=st.data(), style=styles, rename=st.booleans())
def test_mutated_workloads(data: st.DataObject, style: dict[str, Any], rename: bool) -> None:
    obj = drop_removed(data.draw(mutated(data.draw(workload()), huge=False)))
    check(as_yaml(obj, style, rename))


def check(text: str) -> None:
    assert SKIP is not None
    for body in skipped_bodies(text, SKIP):
        assert_unchanged(body)
    assert outcome(text, skip=True) == outcome(text, skip=False)
