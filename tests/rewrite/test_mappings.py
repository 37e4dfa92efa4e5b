"""Which mapping governs a legacy resource, and the per-mapping-set memo of that answer.

`find_match` is asked for every resource name of every container of every reviewed Pod; its
answers are remembered per mapping set (by identity: a loaded set is an immutable tuple) and
name. Remembered or not, the answer is the search's.
"""

from __future__ import annotations

import threading

import pytest

from webhook.policy.loading import default_mappings
from webhook.rewrite import mappings as mapping_module
from webhook.rewrite.mappings import (
    MAX_REMEMBERED_NAMES,
    MAX_REMEMBERED_SETS,
    any_match,
    find_match,
)
from webhook.types import LegacyResourceMapping, ResourceMapping


def mapping_set(*entries: ResourceMapping, name: str = "m") -> tuple[LegacyResourceMapping, ...]:
    return (LegacyResourceMapping(name=name, resources=entries),)


SETS = {
    "default": default_mappings(),
    "exact-beats-prefix": (
        *mapping_set(ResourceMapping("mig.nvidia.com", resource_name_prefix="nvidia.com/")),
        *mapping_set(ResourceMapping("gpu.nvidia.com", resource_name="nvidia.com/gpu"), name="n"),
    ),
    "empty-prefix": mapping_set(ResourceMapping("any.example.com", resource_name_prefix="")),
    "none": (),
}
NAMES = ("nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "nvidia.com/mig-", "cpu", "memory", "", "x")


def searched(resource: str, mappings: tuple[LegacyResourceMapping, ...]) -> object:
    return mapping_module._search(resource, mappings)


@pytest.mark.parametrize("mappings", SETS.values(), ids=SETS.keys())
def test_remembered_answers_are_the_searchs(mappings: tuple[LegacyResourceMapping, ...]) -> None:
    for _ in range(2):  # computed, then remembered
        assert [find_match(n, mappings) for n in NAMES] == [searched(n, mappings) for n in NAMES]


@pytest.mark.parametrize("mappings", SETS.values(), ids=SETS.keys())
@pytest.mark.parametrize("kind", [tuple, list], ids=["remembered", "searched"])
def test_any_match_is_whether_some_name_has_a_match(
    mappings: tuple[LegacyResourceMapping, ...], kind: type
) -> None:
    groups = [NAMES[i : i + 2] for i in range(len(NAMES))] + [(), ("cpu", "memory")]
    for names in groups * 2:  # computed, then remembered
        limits = dict.fromkeys(names, "1")
        expected = any(searched(n, mappings) is not None for n in names)
        assert any_match(limits, kind(mappings)) is expected, (names, limits)


def test_exact_names_win_over_prefixes() -> None:
    found = find_match("nvidia.com/gpu", SETS["exact-beats-prefix"])
    assert found is not None and found.entry.device_class == "gpu.nvidia.com"


def test_a_list_of_mappings_is_searched_every_time() -> None:
    """A list can change after the call: its answers are never remembered."""
    mappings = list(default_mappings())
    assert find_match("nvidia.com/gpu", mappings) is not None
    mappings.clear()
    assert find_match("nvidia.com/gpu", mappings) is None


def test_an_equal_set_loaded_again_gets_answers_of_its_own() -> None:
    one = mapping_set(ResourceMapping("gpu.nvidia.com", resource_name="nvidia.com/gpu"))
    two = mapping_set(ResourceMapping("gpu.nvidia.com", resource_name="nvidia.com/gpu"))
    first, second = find_match("nvidia.com/gpu", one), find_match("nvidia.com/gpu", two)
    assert first is not None and second is not None
    assert first.policy is one[0] and second.policy is two[0]


def test_names_and_sets_remembered_are_bounded() -> None:
    mappings = mapping_set(ResourceMapping("any.example.com", resource_name_prefix=""))
    for i in range(MAX_REMEMBERED_NAMES + 50):
        assert find_match(f"r{i}", mappings) is not None
    known = mapping_module._matches_of(mappings)
    assert known is not None and len(known) == MAX_REMEMBERED_NAMES
    for i in range(MAX_REMEMBERED_SETS + 5):
        find_match("cpu", mapping_set(name=f"set-{i}"))
    assert len(mapping_module._known) == MAX_REMEMBERED_SETS


def test_threads_get_the_searchs_answers() -> None:
    sets = [mapping_set(ResourceMapping("c", resource_name=f"r{i}")) for i in range(20)]
    failures: list[str] = []

    def work(offset: int) -> None:
        for n in range(200):
            mappings = sets[(n + offset) % len(sets)]
            for name in ("r1", "r5", f"r{n % 20}", "cpu"):
                if find_match(name, mappings) != searched(name, mappings):
                    failures.append(name)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures
