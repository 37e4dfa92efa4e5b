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
from webhook.files.plainyaml import read_document
from webhook.files.roundtrip import split_documents
from webhook.files.rtyaml import load_rt
from webhook.files.yamlio import to_plain
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
    for _, body, _ in split_documents(text):
        plain = read_document(body)
        if plain is not None:
            assert plain.data == to_plain(load_rt(body))
    assert outcome(text, skip=True) == outcome(text, skip=False)


WORDS = [
    "yes",
    "Yes",
    "no",
    "NO",
    "on",
    "On",
    "off",
    "OFF",
    "y",
    "Y",
    "n",
    "N",
    "true",
    "True",
    "TRUE",
    "false",
    "False",
    "null",
    "Null",
    "NULL",
    "~",
]
SCALAR_TEXT = st.one_of(
    st.sampled_from(WORDS),
    st.from_regex(
        r"[-+.]?[0-9]{1,3}(\.[0-9]{0,3})?([eE][-+]?[0-9]|[_:x][0-9a-f]{1,2})?", fullmatch=True
    ),
    st.text(alphabet="01239aeEfFlnNorstuxyY.+-_:~ '\"|>\n", max_size=12),
)


@fuzz_settings(400)
@given(value=SCALAR_TEXT, nested=st.booleans())
def test_scalars_read_by_libyaml_are_ruamels(value: str, nested: bool) -> None:
    """Whatever a scalar's text, libyaml's reading is given only where it is ruamel's."""
    body = f"spec:\n  k: {value}\n" if nested else f"k: {value}\n"
    plain = read_document(body)
    if plain is not None:
        assert plain.data == to_plain(load_rt(body))
