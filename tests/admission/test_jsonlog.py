"""The review line: written without a LogRecord, byte for byte what the formatter writes."""

from __future__ import annotations

import ast
import io
import json
import logging
import random
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from webhook.admission import jsonlog
from webhook.admission.jsonlog import JsonFormatter, info_line

FIELDS = {"uid": "u-1", "name": "p", "allowed": True, "duration_ms": 0.25, "tenant": "名前"}


@pytest.fixture
def stream() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    parent = logging.getLogger("jsonlog-test")
    text = io.StringIO()
    handler = logging.StreamHandler(text)
    handler.setFormatter(JsonFormatter())
    parent.addHandler(handler)
    parent.setLevel(logging.INFO)
    parent.propagate = False
    yield logging.getLogger("jsonlog-test.review"), text
    parent.removeHandler(handler)


def _lines(text: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.getvalue().splitlines()]


def test_same_line_as_the_formatter(stream: tuple[logging.Logger, io.StringIO]) -> None:
    logger, text = stream
    info_line(logger, "review", FIELDS)
    logger.info("review", extra={"fields": FIELDS})
    fast, slow = _lines(text)
    assert fast.pop("ts") and slow.pop("ts")
    assert list(fast.items()) == list(slow.items())
    assert text.getvalue().count("\n") == 2


@pytest.mark.parametrize(
    ("setup", "written"),
    [
        ("filtered", 0),
        ("other-handler", 1),
        ("warning-level", 0),
    ],
    ids=["filter", "other-handler", "level"],
)
def test_anything_else_takes_the_ordinary_way(
    stream: tuple[logging.Logger, io.StringIO], setup: str, written: int
) -> None:
    logger, text = stream
    seen: list[logging.LogRecord] = []
    other = logging.Handler()
    other.emit = seen.append  # type: ignore[method-assign]
    if setup == "filtered":
        logger.addFilter(lambda record: False)
    elif setup == "other-handler":
        logger.addHandler(other)
    else:
        logger.setLevel(logging.WARNING)
    try:
        info_line(logger, "review", FIELDS)
    finally:
        logger.filters.clear()
        logger.removeHandler(other)
        logger.setLevel(logging.NOTSET)
    assert len(seen) == written == len(_lines(text))


@pytest.mark.parametrize("seed", range(2), ids=["seed-0", "seed-1"])
def test_the_timestamp_is_datetime_s_within_one_second_and_across(seed: int) -> None:
    """The date and time of a second is remembered; every line still gets its own instant."""
    rng = random.Random(seed)
    start = rng.uniform(0, 2e9)
    instants = [0.0, 1.9995, 59.9999996, start, *(start + rng.uniform(0, 3) for _ in range(500))]
    for created in instants:
        expected = datetime.fromtimestamp(created, UTC).isoformat(timespec="milliseconds")
        assert jsonlog._timestamp(created) == expected, created


class _Opaque:
    def __str__(self) -> str:
        return "opaque!"


@pytest.mark.parametrize(
    ("entry", "read_back"),
    [
        (
            {"a": "名前", "b": True, "c": None, "d": 0.25},
            {"a": "名前", "b": True, "c": None, "d": 0.25},
        ),
        ({"big": 2**70}, {"big": 2**70}),  # past orjson's 64 bits: the stdlib encoder
        ({"o": _Opaque()}, {"o": "opaque!"}),
        ({1: "int key"}, {"1": "int key"}),
        ({"nan": float("nan")}, {"nan": None}),
        ({"t": (1, 2)}, {"t": [1, 2]}),
    ],
    ids=["plain", "big-int", "str-of-object", "int-key", "nan-is-null", "tuple"],
)
def test_a_line_is_json_whatever_the_values(
    entry: dict[Any, Any], read_back: dict[str, Any]
) -> None:
    line = jsonlog.encode(entry)
    assert "\n" not in line
    assert json.loads(line) == read_back


GUNICORN_LOGGER = "gunicorn.error"


def test_every_logger_of_the_package_writes_json_lines() -> None:
    """`configure` gives only the `dragate` logger its JSON handler: a module logging under
    another name (`__name__` is `webhook.…`) would reach the root logger, whose last-resort
    handler prints warnings as plain text and drops the info lines (the keepers' "applied",
    "re-created")."""
    package = Path(jsonlog.__file__).resolve().parents[1]
    names = {
        f"{path.relative_to(package.parent)}:{node.lineno}": node.args[0]
        for path in package.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "getLogger"
    }
    assert len(names) >= 10
    for where, argument in names.items():
        if isinstance(argument, ast.Name) and argument.id == "LOGGER_NAME":
            continue  # `configure` itself
        assert isinstance(argument, ast.Constant), f"{where}: a logger named at run time"
        name = str(argument.value)
        if name == GUNICORN_LOGGER and where.startswith("webhook/admission/server.py"):
            continue  # gunicorn's own lines, given the JSON formatter there
        assert name == jsonlog.LOGGER_NAME or name.startswith(jsonlog.LOGGER_NAME + "."), where
