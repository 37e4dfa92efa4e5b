"""One JSON object per log line, so log pipelines need no parsing rules.

Review lines carry identifiers and the outcome only (uid, kind, namespace, name, operation,
tenant, allowed, duration_ms) and never the object: Pods can hold secrets in env values.
Pass them as `extra={"fields": {...}}`; that also allows keys LogRecord reserves, like `name`.
"""

from __future__ import annotations

import functools
import json
import logging
import sys
import time
from typing import Any

import orjson

LOGGER_NAME = "dragate"
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}
_NOT_EXTRA = _STANDARD | {"fields"}
_ENCODER = json.JSONEncoder(default=str, ensure_ascii=False)
"""`json.dumps(entry, default=str, ensure_ascii=False)`, built once: for what orjson refuses."""
_ORJSON_OPTIONS = orjson.OPT_NON_STR_KEYS


def encode(entry: dict[str, Any]) -> str:
    """One line of JSON: orjson (a seventh of the stdlib encoder's cost, on every review's
    line), compact, UTF-8 as is, anything it cannot write as `str()`; the stdlib encoder
    for what orjson refuses (integers past 64 bits). NaN and infinities are written `null`,
    where the stdlib wrote `NaN`, which is not JSON."""
    try:
        return orjson.dumps(entry, default=str, option=_ORJSON_OPTIONS).decode()
    except (TypeError, OverflowError):
        return _ENCODER.encode(entry)


class JsonFormatter(logging.Formatter):
    """`{"ts", "level", "logger", "msg", ...extra fields}`; exceptions as one string field."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": _timestamp(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        entry.update({k: v for k, v in vars(record).items() if k not in _NOT_EXTRA})
        entry.update(getattr(record, "fields", None) or {})  # may hold reserved names: "name"
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return encode(entry)


def info_line(logger: logging.Logger, msg: str, fields: dict[str, Any]) -> None:
    """`logger.info(msg, extra={"fields": fields})`, the same bytes, without a LogRecord.

    Every review writes one such line; making and formatting a LogRecord for it cost three
    times the line itself. When the records could reach anything but our JSON stream handlers
    (a filter, another handler: tests capturing records), it is logged the ordinary way.
    """
    if not logger.isEnabledFor(logging.INFO):
        return
    handlers = _json_streams(logger)
    if handlers is None:
        logger.info(msg, extra={"fields": fields})
        return
    entry = {"ts": _timestamp(time.time()), "level": "info", "logger": logger.name, "msg": msg}
    line = encode({**entry, **fields}) + "\n"
    for handler in handlers:
        with handler.lock:  # type: ignore[union-attr]  # a StreamHandler always has one
            handler.stream.write(line)
            handler.stream.flush()


def _json_streams(logger: logging.Logger) -> list[logging.StreamHandler[Any]] | None:
    """The handlers an INFO record of `logger` reaches, if all are ours and nothing filters."""
    found: list[logging.StreamHandler[Any]] = []
    current: logging.Logger | None = logger
    while current is not None:
        if current.filters:
            return None
        for handler in current.handlers:
            if not isinstance(handler, logging.StreamHandler):
                return None
            if not isinstance(handler.formatter, JsonFormatter) or handler.filters:
                return None
            if handler.level > logging.INFO:
                return None
            found.append(handler)
        current = current.parent if current.propagate else None
    return found


def _timestamp(created: float) -> str:
    """`datetime.fromtimestamp(created, UTC).isoformat(timespec="milliseconds")`, cheaper."""
    seconds = int(created)
    micros = round((created - seconds) * 1e6)  # as datetime rounds, then truncate to ms
    seconds, micros = (seconds + 1, 0) if micros == 1_000_000 else (seconds, micros)
    millis = micros // 1000
    return _second(seconds) + f".{millis:03d}+00:00"


@functools.lru_cache(maxsize=4)
def _second(seconds: int) -> str:
    """The date and time of one second: every line written within it shares the text."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))


def configure(level: str = "info") -> None:
    """Send the `dragate` logger's records to stderr as JSON lines (idempotent).

    Every review logs a line, so record fields no line shows are not gathered (the logging
    HOWTO's "Optimization": caller frame, thread and process name; gunicorn's own lines use
    none of them, the pid is kept): a fifth less per line.
    """
    logging._srcfile = None  # no sys._getframe walk per record
    logging.logThreads = logging.logMultiprocessing = False  # gunicorn's lines show the pid
    logger = logging.getLogger(LOGGER_NAME)
    logger.setLevel(level.upper())
    logger.propagate = False
    if not any(isinstance(h.formatter, JsonFormatter) for h in logger.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(JsonFormatter())
        logger.addHandler(handler)
