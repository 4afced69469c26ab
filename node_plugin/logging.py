"""Structured logs for the node plugin: one JSON object (or key=value line) per event.

Use :func:`get_logger` and pass fields as keywords; ``bind`` fixes fields
(for example ``request_id``) for everything logged through the result::

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

_FIELDS_ATTR = "drakit_fields"


class StructuredLogger:
    """A stdlib logger plus fixed fields; thread-safe, cheap to create."""

    def __init__(self, logger: logging.Logger, fields: Mapping[str, Any] | None = None) -> None:
        self._logger = logger
        self._fields = dict(fields or {})

    def bind(self, **fields: Any) -> StructuredLogger:
        return StructuredLogger(self._logger, {**self._fields, **fields})

    def _log(self, level: int, msg: str, exc_info: bool, fields: Mapping[str, Any]) -> None:
        if self._logger.isEnabledFor(level):
            extra = {_FIELDS_ATTR: {**self._fields, **fields}}
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


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    fields = getattr(record, _FIELDS_ATTR, None)
    return dict(fields) if isinstance(fields, dict) else {}


def _timestamp(record: logging.LogRecord) -> str:
    seconds = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
    return f"{seconds}.{int(record.msecs):03d}Z"


class JsonFormatter(logging.Formatter):
    """``{"ts", "level", "logger", "msg", ...fields, "error"?}`` on one line."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": _timestamp(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        entry.update(_fields(record))
        if record.exc_info:
            entry["traceback"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str, ensure_ascii=False)


class KeyValueFormatter(logging.Formatter):
    """``ts level logger "msg" key=value ...`` for humans at a terminal."""

    def format(self, record: logging.LogRecord) -> str:
        parts = [
            _timestamp(record),
            record.levelname.lower(),
            record.name,
            json.dumps(record.getMessage()),
        ]
        for key, value in _fields(record).items():
            text = (
                value
                if isinstance(value, str) and value and " " not in value
                else json.dumps(value, default=str)
            )
            parts.append(f"{key}={text}")
        line = " ".join(parts)
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def configure(level: str = "info", fmt: str = "json", stream: TextIO | None = None) -> None:
    """Send all logging to ``stream`` (stderr) in ``fmt`` ("json" or "text")."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else KeyValueFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    # The Kubernetes client logs every HTTP request at DEBUG; keep it quieter.
    logging.getLogger("urllib3").setLevel(max(root.level, logging.INFO))
