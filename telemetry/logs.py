"""Structured logs for every drakit program: one JSON object (or key=value line) per event.

The fields of a line are the record's stdlib ``extra`` attributes, so a plain
``logging.getLogger(__name__).info("Watch expired", extra={"cause": ...})`` (how ``kubeapi``
logs) and the keyword style of :class:`StructuredLogger` print the same way::

    log = get_logger(__name__).bind(request_id=call.request_id)
    log.info("Prepared claim", claim_uid=uid, devices=3)

:func:`configure` installs the formatter on the root logger once, at start-up.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Mapping
from typing import Any, TextIO

__all__ = [
    "LOG_FORMATS",
    "LOG_LEVELS",
    "JsonFormatter",
    "StructuredLogger",
    "TextFormatter",
    "configure",
    "get_logger",
]

LOG_FORMATS = ("json", "text")
LOG_LEVELS = ("debug", "info", "warning", "error")

# Attributes every LogRecord has; anything else on a record came in through ``extra``.
_STANDARD = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "taskName"}


def _safe_key(key: str) -> str:
    # ``extra`` may not overwrite a LogRecord attribute (``name``, ``msg``...): logging raises
    # KeyError. A field of that name keeps its value under ``<key>_`` instead.
    return f"{key}_" if key in _STANDARD else key


class StructuredLogger:
    """A stdlib logger plus fixed fields, logged as ``extra``; thread-safe, cheap to create."""

    def __init__(self, logger: logging.Logger, fields: Mapping[str, Any] | None = None) -> None:
        self._logger = logger
        self._fields = dict(fields or {})

    def bind(self, **fields: Any) -> StructuredLogger:
        """A logger that adds ``fields`` to every line (later keywords win)."""
        return StructuredLogger(self._logger, {**self._fields, **fields})

    def _log(self, level: int, msg: str, exc_info: bool, fields: Mapping[str, Any]) -> None:
        if self._logger.isEnabledFor(level):
            extra = {_safe_key(k): v for k, v in {**self._fields, **fields}.items()}
            self._logger.log(level, msg, exc_info=exc_info, extra=extra, stacklevel=3)

    def debug(self, msg: str, **fields: Any) -> None:
        self._log(logging.DEBUG, msg, False, fields)

    def info(self, msg: str, **fields: Any) -> None:
        self._log(logging.INFO, msg, False, fields)

    def warning(self, msg: str, **fields: Any) -> None:
        self._log(logging.WARNING, msg, False, fields)

    def error(self, msg: str, **fields: Any) -> None:
        self._log(logging.ERROR, msg, False, fields)

    def exception(self, msg: str, **fields: Any) -> None:
        """Log at ERROR with the current exception's traceback."""
        self._log(logging.ERROR, msg, True, fields)


def get_logger(name: str) -> StructuredLogger:
    return StructuredLogger(logging.getLogger(name))


def record_fields(record: logging.LogRecord) -> dict[str, Any]:
    """The ``extra`` fields of ``record``, in the order they were given."""
    return {k: v for k, v in record.__dict__.items() if k not in _STANDARD}


def _timestamp(record: logging.LogRecord) -> str:
    seconds = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
    return f"{seconds}.{int(record.msecs):03d}Z"


class JsonFormatter(logging.Formatter):
    """``{"ts", "level", "logger", "msg", ...fields, "traceback"?}`` on one line."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": _timestamp(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        entry.update(record_fields(record))
        if record.exc_info:
            entry["traceback"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    """``ts level logger "msg" key=value ...`` for humans at a terminal."""

    def format(self, record: logging.LogRecord) -> str:
        parts = [
            _timestamp(record),
            record.levelname.lower(),
            record.name,
            json.dumps(record.getMessage()),
        ]
        for key, value in record_fields(record).items():
            plain = isinstance(value, str) and value and " " not in value
            parts.append(f"{key}={value if plain else json.dumps(value, default=str)}")
        line = " ".join(parts)
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def configure(fmt: str = "json", level: str = "info", stream: TextIO | None = None) -> None:
    """Send all logging to ``stream`` (stderr) in ``fmt`` ("json" or "text") at ``level``."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # The Kubernetes client logs every HTTP request at DEBUG; keep it to warnings.
    logging.getLogger("urllib3").setLevel(logging.WARNING)
    logging.getLogger("kubernetes").setLevel(logging.WARNING)
