"""Structured logs: one JSON object per line (or ``key=value`` text), with the ``extra``
fields every drakit module passes to the standard ``logging`` calls.

The JSON keys (``ts``, ``level``, ``logger``, ``msg``, ``traceback``) are the node
plugin's too, so one log pipeline reads both components."""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

__all__ = ["configure_logging"]

_STANDARD = set(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "taskName"}


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    return {k: v for k, v in record.__dict__.items() if k not in _STANDARD}


def _timestamp(record: logging.LogRecord) -> str:
    seconds = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
    return f"{seconds}.{int(record.msecs):03d}Z"


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": _timestamp(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
            **_fields(record),
        }
        if record.exc_info:
            entry["traceback"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        fields = " ".join(f"{k}={json.dumps(v, default=str)}" for k, v in _fields(record).items())
        line = f"{_timestamp(record)} {record.levelname[0]} {record.name}: {record.getMessage()}"
        line = f"{line} {fields}" if fields else line
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def configure_logging(fmt: str = "json", level: str = "info") -> None:
    """Send every log record to stderr in ``fmt`` (json or text) at ``level`` and above."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # The Kubernetes client logs every request at debug level; keep it to warnings.
    logging.getLogger("urllib3").setLevel(logging.WARNING)
    logging.getLogger("kubernetes").setLevel(logging.WARNING)
