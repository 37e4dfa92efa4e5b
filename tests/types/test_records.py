"""`record` classes behave exactly as `dataclass(frozen=True)` ones, only built faster.

Every per-review value made a record is compared with a frozen dataclass of the very same
fields: the values stored for every default and factory, equality, hash, repr, the refusal
to change a field and `dataclasses.replace`. Classes a record cannot build are refused.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from webhook.admission.handler import Outcome
from webhook.admission.routes import Reply
from webhook.engine.evaluate import JudgedClaim
from webhook.rewrite.podedits import PodRewrite
from webhook.rewrite.podspec import Options
from webhook.types import (
    AdmissionRequest,
    Deadline,
    Decision,
    Facts,
    Operation,
    Reservation,
    RewriteResult,
    Verdict,
)
from webhook.types.records import record

RECORDS = [AdmissionRequest, Decision, Verdict, RewriteResult, Facts, Reservation, Deadline,
           JudgedClaim, Outcome, Reply, Options, PodRewrite]  # fmt: skip


def twin(cls: type[Any]) -> type[Any]:
    """A frozen dataclass with `cls`'s fields, defaults, factories and whether each is
    compared and shown: the reference."""
    spec = [
        (
            f.name,
            f.type,
            dataclasses.field(
                default=f.default,
                default_factory=f.default_factory,
                compare=f.compare,
                repr=f.repr,
            ),
        )
        for f in dataclasses.fields(cls)
    ]
    return dataclasses.make_dataclass(cls.__name__, spec, frozen=True)


def required(cls: type[Any]) -> dict[str, Any]:
    """A distinct stand-in for every field without a default."""
    missing = dataclasses.MISSING
    fields = dataclasses.fields(cls)
    return {
        f.name: f"value-of-{f.name}"
        for f in fields
        if f.default is missing and f.default_factory is missing
    }


def fields_of(value: Any) -> dict[str, Any]:
    return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}


@pytest.mark.parametrize("cls", RECORDS, ids=[c.__qualname__ for c in RECORDS])
def test_a_record_stores_what_a_frozen_dataclass_stores(cls: type[Any]) -> None:
    reference = twin(cls)
    given = required(cls)
    built, expected = cls(**given), reference(**given)
    assert fields_of(built) == fields_of(expected)
    assert repr(built).split("(", 1)[1] == repr(expected).split("(", 1)[1]
    assert built == cls(**given) and hash(_hashable(built)) == hash(_hashable(cls(**given)))
    every = {f.name: f"other-{f.name}" for f in dataclasses.fields(cls)}
    assert fields_of(cls(**every)) == every == fields_of(cls(*every.values()))


@pytest.mark.parametrize("cls", RECORDS, ids=[c.__qualname__ for c in RECORDS])
def test_a_record_cannot_be_changed_and_is_replaced_as_a_dataclass(cls: type[Any]) -> None:
    built = cls(**required(cls))
    name = dataclasses.fields(cls)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(built, name, "changed")
    with pytest.raises(dataclasses.FrozenInstanceError):
        delattr(built, name)
    assert getattr(dataclasses.replace(built, **{name: "changed"}), name) == "changed"
    assert getattr(built, name) != "changed"


def test_default_factories_give_each_record_its_own_value() -> None:
    first = AdmissionRequest("u", "Pod", "", "v1", "pods", Operation.CREATE)
    second = AdmissionRequest("u", "Pod", "", "v1", "pods", Operation.CREATE)
    assert first.user_info == {} and first.user_info is not second.user_info
    assert Decision().reasons == () and Decision().allowed is True


def test_a_missing_argument_fails_as_a_dataclass_does() -> None:
    with pytest.raises(TypeError, match="uid"):
        AdmissionRequest()  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unexpected keyword"):
        Reply(200, b"", extra=1)  # type: ignore[call-arg]


def _hashable(value: Any) -> Any:
    """Records holding dicts are unhashable, as the frozen dataclasses were: compare fields."""
    try:
        hash(value)
    except TypeError:
        return repr(value)
    return value


class _Slots:
    __slots__ = ("a",)
    a: int


class _KeywordOnly:
    a: int = dataclasses.field(kw_only=True)


class _NotInit:
    a: int = dataclasses.field(default=0, init=False)


class _PostInit:
    a: int

    def __post_init__(self) -> None:
        pass


REFUSED: list[type[Any]] = [_Slots, _KeywordOnly, _NotInit, _PostInit]


@pytest.mark.parametrize("cls", REFUSED, ids=["slots", "keyword-only", "not-init", "post-init"])
def test_what_a_record_cannot_build_is_refused_when_decorated(cls: type[Any]) -> None:
    with pytest.raises(TypeError, match="only plain fields"):
        record(cls)


@pytest.mark.parametrize(("cls", "method", "field_name"), [
    (Facts, "with_usage", "usage"),
    (Facts, "with_templates", "templates"),
    (AdmissionRequest, "with_object", "object"),
], ids=["facts-usage", "facts-templates", "request-object"])  # fmt: skip
def test_a_with_method_is_replace_of_its_one_field(
    cls: type[Any], method: str, field_name: str
) -> None:
    """Every other field kept, whatever is added to the class later."""
    every = {f.name: f"other-{f.name}" for f in dataclasses.fields(cls)}
    value = cls(**every)
    changed = getattr(value, method)("changed")
    assert changed == dataclasses.replace(value, **{field_name: "changed"})
