"""The declared `request` is exactly what the engine builds, field for field and type for type."""

from __future__ import annotations

from typing import Any

from webhook.engine.cel import compile_expression
from webhook.engine.rules import request_view
from webhook.engine.ruletypes import REQUEST_FIELDS, USER_INFO_FIELDS
from webhook.types import AllocationMode, DeviceRequest

_PYTHON = {"string": str, "int": int, "bool": bool, ("list", "string"): list}


def test_request_fields_are_the_fields_the_engine_builds() -> None:
    view = request_view(
        DeviceRequest("gpu", "gpu.nvidia.com", 2, AllocationMode.EXACT_COUNT, True, ("a",))
    )
    assert set(view) == set(REQUEST_FIELDS)
    for name, value in view.items():
        assert isinstance(value, _PYTHON[REQUEST_FIELDS[name]]), name  # type: ignore[index]


def test_every_declared_request_field_reads_at_run_time() -> None:
    view: dict[str, Any] = request_view(DeviceRequest("gpu", "gpu.nvidia.com"))
    every = " && ".join(f"has(request.{name})" for name in REQUEST_FIELDS)
    program = compile_expression(every, variables=["request"])
    assert program.evaluate({"request": view}).value is True


def test_user_info_is_kubernetes_user_info() -> None:
    assert set(USER_INFO_FIELDS) == {"username", "uid", "groups", "extra"}
