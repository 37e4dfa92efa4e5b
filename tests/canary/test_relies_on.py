"""The "Relies on" sections of the modules and the canary tables list the same internals."""

from __future__ import annotations

from importlib import metadata

import pytest
from canary import test_celpy, test_jsonpatch, test_kubernetes, test_ruamel
from canary.canary_support import Internal, relied_on_by_module, verify

TABLES = (test_celpy, test_ruamel, test_kubernetes, test_jsonpatch)
CHECKED = {i.key: i for table in TABLES for i in table.INTERNALS}
LISTED = {name for names in relied_on_by_module().values() for name in names}


def test_every_listed_internal_has_a_canary() -> None:
    assert sorted(LISTED - set(CHECKED)) == []


def test_every_canary_names_a_module_that_relies_on_it() -> None:
    assert sorted(set(CHECKED) - LISTED) == []


@pytest.mark.parametrize(
    ("module", "distribution"),
    [
        pytest.param("webhook/engine/cel/transpile.py", "cel-python", id="transpile"),
        pytest.param("webhook/engine/cel/program.py", "cel-python", id="program"),
    ],
)
def test_module_lists_what_it_relies_on(module: str, distribution: str) -> None:
    names = relied_on_by_module().get(module, [])
    assert names and all(CHECKED[n].distribution == distribution for n in names), names


def test_a_moved_internal_fails_naming_release_internal_and_user() -> None:
    def moved() -> None:
        raise AttributeError("module 'celpy.evaluation' has no attribute 'result'")

    name = "celpy.evaluation.result"
    with pytest.raises(pytest.fail.Exception) as failure:
        verify(Internal("cel-python", f"{name}(activation, cel_expr)", moved))
    assert str(failure.value).startswith(
        f"cel-python {metadata.version('cel-python')} moved {name}: "
        "webhook/engine/cel/program.py relies on it (AttributeError: "
    )
