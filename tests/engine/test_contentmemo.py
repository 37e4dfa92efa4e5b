"""Remembered template and claim specs are exactly what normalizing gives, whatever came before.

Every answer is compared with the uncached function: for one object alone, after a look-alike
was remembered (values `==` conflates, values JSON text conflates), after the object changed
in place, and for a randomized corpus of valid and broken objects.
"""

from __future__ import annotations

import copy
import math
import random
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from builders import V1, V1BETA1, exact, first_available, request, template

from webhook.engine import normalize
from webhook.engine.contentmemo import (
    CLAIM_SPECS,
    MAX_CONTENT_BYTES,
    MAX_ENTRIES,
    ContentMemo,
)
from webhook.engine.contentmemo import claim_spec as _claim_spec
from webhook.engine.contentmemo import remembered as _remembered
from webhook.engine.contentmemo import template_spec as _template_spec
from webhook.engine.normalize import ObjectError, template_claim_spec
from webhook.types import ClaimSpec, Object
from webhook.types.memos import Memos

MEMOS = Memos()  # the tables of one policy set, shared by this module's tests


def template_spec(template: Object, label: str) -> ClaimSpec:
    return _template_spec(template, label, MEMOS)


def claim_spec(claim: Object, label: str) -> ClaimSpec:
    return _claim_spec(claim, label, MEMOS)


def remembered() -> int:
    return _remembered(MEMOS)


@pytest.fixture(autouse=True)
def _empty() -> Iterator[None]:
    MEMOS.forget()
    yield
    MEMOS.forget()


class Text(str):
    """A str subclass: JSON text would hide it, so it is never remembered."""


def _answer(compute: Callable[[Object, str], Any], obj: Object, label: str) -> Any:
    """What a call gives: the spec, or the exception's type and text."""
    try:
        return compute(obj, label)
    except Exception as error:  # the memo must raise exactly what normalizing raises
        return (type(error).__name__, str(error))


def _with_count(count: Any) -> Object:
    return template(request(exact(count=None) | {"count": count}))


def _devices(requests: Any) -> Object:
    return {"apiVersion": V1, "spec": {"spec": {"devices": {"requests": requests}}}}


SHAPES: dict[str, Object] = {
    "v1": template(request(exact(count=2, selectors=("device.driver == 'x'",)))),
    "v1beta1-flat": template(request(exact(count=3), V1BETA1), version=V1BETA1),
    "v1beta1-shape-in-v1": template(request(exact(count=3), V1BETA1)),
    "first-available": template(first_available("gpu", exact("a", count=2), exact("b"))),
    "all-mode": template(request(exact(count=None, mode="All"))),
    "admin": template(request(exact(admin=True))),
    "admin-one": template(request(exact() | {"adminAccess": 1})),
    "constraints": {
        "apiVersion": V1,
        "spec": {
            "spec": {
                "devices": {
                    "requests": [request(exact())],
                    "constraints": [{"matchAttribute": "x/y", "requests": ["gpu"]}],
                }
            }
        },
    },
    "count-float": _with_count(1.0),
    "count-true": _with_count(True),
    "count-nan": _with_count(math.nan),
    "count-inf": _with_count(math.inf),
    "count-none": _with_count(None),
    "count-text": _with_count("2"),
    "count-huge": _with_count(2**70),
    "mode-list": template(request(exact() | {"allocationMode": ["All"]})),
    "mode-unknown": template(request(exact(mode="Some"))),
    "no-spec": {"apiVersion": V1, "kind": "ResourceClaimTemplate"},
    "spec-list": {"apiVersion": V1, "spec": []},
    "spec-spec-text": {"apiVersion": V1, "spec": {"spec": "x"}},
    "requests-text": _devices("nope"),
    "requests-tuple": _devices((request(exact()),)),
    "request-not-map": _devices([1]),
    "no-name": _devices([{"exactly": {"deviceClassName": "x"}}]),
    "name-subclass": _devices([{"name": Text("gpu"), "exactly": {"deviceClassName": "x"}}]),
    "int-keys": {"apiVersion": V1, "spec": {1: {}}},
    "api-version-none": {"apiVersion": None, "spec": {"spec": {"devices": {}}}},
    "api-version-int": {"apiVersion": 1, "spec": {"spec": {"devices": {}}}},
    "no-api-version": {"spec": {"spec": {"devices": {"requests": [request(exact())]}}}},
    "deep": {"apiVersion": V1, "spec": {"spec": {"devices": {"requests": [[[[[[]]]]]]}}}},
}


@pytest.mark.parametrize("name", SHAPES, ids=list(SHAPES))
def test_the_answer_is_normalizing_s_first_and_again(name: str) -> None:
    obj = SHAPES[name]
    expected = _answer(template_claim_spec, obj, "pod claim 'c'")
    assert _answer(template_spec, obj, "pod claim 'c'") == expected
    assert _answer(template_spec, copy.deepcopy(obj), "pod claim 'c'") == expected


def _as_claim(template: Object) -> Object:
    """The template's claim spec as a ResourceClaim's `spec`."""
    outer = template.get("spec")
    inner = outer.get("spec") if isinstance(outer, dict) else outer
    return {**template, "kind": "ResourceClaim", "spec": inner}


CLAIM_SHAPES = {name: _as_claim(obj) for name, obj in SHAPES.items()}


@pytest.mark.parametrize("name", CLAIM_SHAPES, ids=list(CLAIM_SHAPES))
def test_a_claim_s_answer_is_normalizing_s_first_and_again(name: str) -> None:
    obj = CLAIM_SHAPES[name]
    expected = _answer(normalize.claim_spec, obj, "the claim")
    assert _answer(claim_spec, obj, "the claim") == expected
    assert _answer(claim_spec, copy.deepcopy(obj), "the claim") == expected


def test_a_claim_and_a_template_of_one_spec_answer_each_as_normalizing() -> None:
    template = SHAPES["v1"]
    assert template_spec(template, "c") == template_claim_spec(template, "c")
    assert claim_spec(_as_claim(template), "c") == normalize.claim_spec(_as_claim(template), "c")
    assert _remembered(MEMOS) == 1 and _remembered(MEMOS, CLAIM_SPECS) == 1


LOOKALIKES = [
    ("count-1-then-float", _with_count(1), _with_count(1.0)),
    ("count-1-then-true", _with_count(1), _with_count(True)),
    ("count-true-then-1", _with_count(True), _with_count(1)),
    ("count-none-then-nan", _with_count(None), _with_count(math.nan)),
    ("count-nan-then-none", _with_count(math.nan), _with_count(None)),
    ("count-inf-then-none", _with_count(math.inf), _with_count(None)),
    ("admin-true-then-one", SHAPES["admin"], SHAPES["admin-one"]),
    ("tuple-then-list", SHAPES["requests-tuple"], _devices([request(exact())])),
    ("list-then-tuple", _devices([request(exact())]), SHAPES["requests-tuple"]),
    ("v1-then-v1beta1", SHAPES["v1beta1-shape-in-v1"], SHAPES["v1beta1-flat"]),
    ("text-then-subclass", _devices([request(exact())]), SHAPES["name-subclass"]),
    (
        "selector-changed",
        template(request(exact(selectors=("a",)))),
        template(request(exact(selectors=("b",)))),
    ),
]


@pytest.mark.parametrize(
    ("first", "second"), [(a, b) for _, a, b in LOOKALIKES], ids=[n for n, _, _ in LOOKALIKES]
)
def test_a_look_alike_remembered_before_does_not_answer(first: Object, second: Object) -> None:
    _answer(template_spec, first, "c")
    assert _answer(template_spec, second, "c") == _answer(template_claim_spec, second, "c")


def test_the_label_is_the_callers() -> None:
    obj = SHAPES["v1"]
    assert template_spec(obj, "pod claim 'a'").label == "pod claim 'a'"
    assert template_spec(obj, "pod claim 'b'").label == "pod claim 'b'"


def test_identity_is_not_part_of_the_key() -> None:
    """Templates of different names, uids and resourceVersions with one spec share an entry."""
    for i in range(5):
        obj = copy.deepcopy(SHAPES["v1"])
        obj["metadata"] |= {"name": f"t{i}", "uid": f"u{i}", "resourceVersion": str(i)}
        assert template_spec(obj, "c") == template_claim_spec(obj, "c")
    assert remembered() == 1


def test_a_template_changed_in_place_is_normalized_again() -> None:
    obj = copy.deepcopy(SHAPES["v1"])
    template_spec(obj, "c")
    obj["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] = 7
    assert template_spec(obj, "c").requests[0].count == 7
    obj["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] = 2
    assert template_spec(obj, "c").requests[0].count == 2


def test_a_template_changed_in_place_into_a_look_alike_is_normalized_again() -> None:
    """NaN and None read alike as JSON text; the remembered copy is private, so it still
    holds None when the caller's object now holds NaN."""
    obj = _with_count(None)
    _answer(template_spec, obj, "c")
    obj["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] = math.nan
    assert _answer(template_spec, obj, "c") == _answer(template_claim_spec, obj, "c")


def test_what_json_text_would_disguise_is_not_remembered() -> None:
    for name in ("name-subclass", "int-keys", "count-huge", "api-version-none"):
        _answer(template_spec, SHAPES[name], "c")
    assert remembered() == 0


def test_an_error_is_raised_anew_each_time() -> None:
    obj = SHAPES["count-text"]
    errors = []
    for _ in range(2):
        with pytest.raises(ObjectError) as caught:
            template_spec(obj, "c")
        errors.append(caught.value)
    assert errors[0] is not errors[1]
    assert (errors[0].path, errors[0].message) == (errors[1].path, errors[1].message)


def test_the_tables_stay_bounded() -> None:
    for i in range(MAX_ENTRIES + 50):
        template_spec(_with_count(i), "c")
        assert remembered() <= MAX_ENTRIES
    big = template(request(exact(selectors=("x" * MAX_CONTENT_BYTES,))))
    before = remembered()
    assert template_spec(big, "c") == template_claim_spec(big, "c")
    assert remembered() == before


def test_a_table_keeps_at_most_its_bytes() -> None:
    memo: ContentMemo[int] = ContentMemo(max_bytes=1000)
    for i in range(100):
        content = {"n": i, "pad": "x" * 100}
        assert memo.get(None, content, lambda i=i: i) == i  # type: ignore[misc]
        assert len(memo) <= 1000 // 200


# ---------------------------------------------------------------------- randomized corpus

VALUES: list[Any] = [
    None,
    0,
    1,
    2,
    1.0,
    True,
    False,
    math.nan,
    "",
    "x",
    "All",
    "ExactCount",
    [],
    {},
    (),
    [1],
]


def _mutated(rng: random.Random, obj: Any) -> Any:
    """`obj` with one value somewhere replaced by a value of another shape, or unchanged."""
    if rng.random() < 0.2:
        return rng.choice(VALUES)
    if isinstance(obj, dict) and obj:
        key = rng.choice(sorted(obj, key=str))
        return {**obj, key: _mutated(rng, obj[key])}
    if isinstance(obj, list) and obj:
        index = rng.randrange(len(obj))
        return [*obj[:index], _mutated(rng, obj[index]), *obj[index + 1 :]]
    return obj


def _corpus(seed: int, size: int) -> list[Object]:
    rng = random.Random(seed)
    bases = [s for s in SHAPES.values() if isinstance(s.get("spec"), dict)]
    return [
        {**base, "spec": _mutated(rng, base["spec"])}
        for base in (rng.choice(bases) for _ in range(size))
    ]


@pytest.mark.parametrize("seed", range(4), ids=[f"seed-{s}" for s in range(4)])
def test_a_randomized_corpus_answers_as_normalizing_does(seed: int) -> None:
    corpus = _corpus(seed, 300)
    rng = random.Random(seed)
    for obj in corpus + rng.sample(corpus, len(corpus)):  # cold, then warm in another order
        label = rng.choice(["pod claim 'a'", "pod claim 'b'"])
        assert _answer(template_spec, obj, label) == _answer(template_claim_spec, obj, label)


@pytest.mark.parametrize("seed", range(2), ids=[f"seed-{s}" for s in range(2)])
def test_a_randomized_corpus_of_claims_answers_as_normalizing_does(seed: int) -> None:
    corpus = [_as_claim(obj) for obj in _corpus(seed + 100, 300)]
    rng = random.Random(seed)
    for obj in corpus + rng.sample(corpus, len(corpus)):
        assert _answer(claim_spec, obj, "the claim") == _answer(
            normalize.claim_spec, obj, "the claim"
        )


def test_threads_sharing_the_table_agree_with_normalizing() -> None:
    corpus = _corpus(9, 200)
    expected = [_answer(template_claim_spec, obj, "c") for obj in corpus]
    wrong: list[int] = []

    def work() -> None:
        for _ in range(3):
            wrong.extend(
                i for i, obj in enumerate(corpus) if _answer(template_spec, obj, "c") != expected[i]
            )

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not wrong
