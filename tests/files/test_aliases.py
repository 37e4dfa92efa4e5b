"""YAML aliases: ordinary use loads, expansion beyond MAX_ALIAS_GROWTH is refused as invalid."""

from __future__ import annotations

import pytest

from webhook.files.aliases import LONG_STRING, MAX_ALIAS_GROWTH
from webhook.files.yamlio import YamlError, parse_documents
from webhook.policy.loading import PolicyError, parse_policies


def laughs(levels: int, width: int = 10) -> str:
    """`levels` anchors, each a list of `width` aliases of the one before: width^levels."""
    lines = ["l0: &l0 [" + ", ".join(["lol"] * width) + "]"]
    for level in range(1, levels):
        lines.append(f"l{level}: &l{level} [" + ", ".join([f"*l{level - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


def long_string_aliased(copies: int) -> str:
    return f"s: &s '{'x' * 64 * LONG_STRING}'\nl: [" + ", ".join(["*s"] * copies) + "]\n"


ACCEPTED = {
    "shared-block": "base: &b {cpu: 1, mem: 2}\nx: *b\ny: *b\n",
    "merge-key": "base: &b {cpu: 1, mem: 2}\nx:\n  <<: *b\n  cpu: 3\n",
    "scalar-aliases": "v: &v gpu\nl: [" + ", ".join(["*v"] * 12_000) + "]\n",
    "many-equal-scalars": "l: [" + ", ".join(["true"] * 12_000) + "]\n",
    "just-under-the-bound": laughs(3, 20),  # 20^3 = 8,000 lol
    "long-string-once": long_string_aliased(1),
}
REFUSED = {
    "million-laughs": laughs(6),
    "hundred-thousand": laughs(5),
    "long-string-copied": long_string_aliased(200),  # 200 x 64 KiB
}


@pytest.mark.parametrize("text", ACCEPTED.values(), ids=ACCEPTED.keys())
def test_ordinary_aliases_load(text: str) -> None:
    assert parse_documents(text, "ok.yaml")


@pytest.mark.parametrize("text", REFUSED.values(), ids=REFUSED.keys())
def test_alias_expansion_beyond_the_bound_is_refused(text: str) -> None:
    with pytest.raises(YamlError) as refused:
        parse_documents(text, "bomb.yaml")
    assert f"at most {MAX_ALIAS_GROWTH}" in str(refused.value)
    assert str(refused.value).startswith("bomb.yaml")


def test_an_alias_bomb_is_an_invalid_policy() -> None:
    text = (
        "apiVersion: dragate.io/v1alpha1\nkind: Tenant\nmetadata:\n  name: t\n"
        "  annotations: {bomb: x}\nspec: {namespaces: [t]}\n---\n" + laughs(6)
    )
    with pytest.raises(PolicyError) as refused:
        parse_policies(text, "policies.yaml")
    assert any("aliases expand" in str(p) for p in refused.value.problems)
