"""Structured logs for every drakit program: one JSON object (or key=value line) per event.

drakit logs in one style, the keyword style of :class:`StructuredLogger`: a message that
names the event, and the event's facts as keyword fields; :meth:`StructuredLogger.bind`
fixes the fields every line of a component or a request carries::

    log = get_logger(__name__).bind(request_id=call.request_id)
    log.info("Prepared claim", claim_uid=uid, devices=3)

The fields travel as the stdlib record's ``extra`` attributes, so a stdlib logger of some
other library prints through the same formatters. Inside drakit, :func:`get_logger` is the
only way to a logger (tests/unit/telemetry/test_one_logging_style.py keeps it so; driver
authors get it as ``drakit.plugin.get_logger``). :func:`configure` installs the formatter
on the root logger once, at start-up.
"""

from __future__ import annotations

import json
import logging
import reprlib
import sys
import time
import traceback
from collections.abc import Mapping
from types import TracebackType
from typing import Any, Final, TextIO

from drakit.telemetry.safetext import clean_lines, escape_json, is_clean

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

#: A line's parts are bounded so that one event cannot flood the log (a deeply nested claim
#: once made a single line of 200 KB): the message, each field, all fields together, and the
#: traceback (its innermost frames). Counted in characters; a line stays near 16 KiB.
MAX_MESSAGE: Final = 4096
MAX_FIELD: Final = 1024
MAX_FIELDS: Final = 3072
MAX_TRACEBACK: Final = 8192
MAX_FRAMES: Final = 20

ExcInfo = tuple[type[BaseException], BaseException, TracebackType | None]

# Attributes every LogRecord has; anything else on a record came in through ``extra``.
_STANDARD = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "taskName"}


def _safe_key(key: str) -> str:
    # ``extra`` may not overwrite a LogRecord attribute (``name``, ``msg``...): logging raises
    # KeyError. A field of that name keeps its value under ``<key>_`` instead.
    return f"{key}_" if key in _STANDARD else key


class StructuredLogger:
    """A stdlib logger plus fixed fields, logged as ``extra``; thread-safe, cheap to create.

    Each method takes the message and the line's fields as keywords (``log.info("Created
    claim", claim="ns/name")``); a field whose name is a Python keyword goes in as
    ``**{"class": name}``. A field named like a stdlib record attribute (``name``, ``msg``,
    ...) is printed as ``<name>_`` (the record keeps its own).
    """

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

    def warning(self, msg: str, *, exc_info: bool = False, **fields: Any) -> None:
        """Log at WARNING; with ``exc_info``, with the current exception's traceback (for a
        failure that is retried, so not an error yet)."""
        self._log(logging.WARNING, msg, exc_info, fields)

    def error(self, msg: str, **fields: Any) -> None:
        self._log(logging.ERROR, msg, False, fields)

    def exception(self, msg: str, **fields: Any) -> None:
        """Log at ERROR with the current exception's traceback."""
        self._log(logging.ERROR, msg, True, fields)


def get_logger(name: str) -> StructuredLogger:
    """The logger called ``name`` (by convention the module's ``__name__``), with no fields
    bound; its lines go wherever :func:`configure` sent logging."""
    return StructuredLogger(logging.getLogger(name))


def record_fields(record: logging.LogRecord) -> dict[str, Any]:
    """The ``extra`` fields of ``record``, in the order they were given."""
    return {k: v for k, v in record.__dict__.items() if k not in _STANDARD}


def clip(text: str, limit: int) -> str:
    """``text``, or its head and tail around a marker saying how many characters were cut
    when it is longer than ``limit``."""
    if len(text) <= limit:
        return text
    marker_room = 40
    keep = max(limit - marker_room, 0)
    head, tail = keep // 4, keep - keep // 4
    cut = len(text) - head - tail
    return f"{text[:head]}...[{cut} characters cut]...{text[len(text) - tail :]}"


def bounded_fields(record: logging.LogRecord) -> dict[str, Any]:
    """:func:`record_fields` with each value within :data:`MAX_FIELD` characters (as JSON;
    a longer one becomes its clipped text) and all within :data:`MAX_FIELDS`: the fields
    past that are left out and counted in ``fields_cut``."""
    out: dict[str, Any] = {}
    used = cut = 0
    for key, value in record_fields(record).items():
        if isinstance(value, str):
            bounded: Any = clip(value, MAX_FIELD)
            size = len(bounded)
        elif value is None or isinstance(value, (bool, int, float)):
            bounded, size = value, 8
        else:
            text, is_json = _json_text(value)
            bounded = value if is_json and len(text) <= MAX_FIELD else clip(text, MAX_FIELD)
            size = min(len(text), MAX_FIELD)
        if used + size + len(key) > MAX_FIELDS:
            cut += 1
            continue
        used += size + len(key)
        out[key] = bounded
    if cut:
        out["fields_cut"] = cut
    return out


def _json_text(value: Any) -> tuple[str, bool]:
    """``value`` as JSON and True, or (nested too deep, circular) its repr and False."""
    try:
        return json.dumps(value, default=str, ensure_ascii=False), True
    except (RecursionError, ValueError):
        return reprlib.repr(value), False


def bounded_traceback(exc_info: ExcInfo) -> str:
    """The traceback's innermost :data:`MAX_FRAMES` frames of each exception in the chain,
    within :data:`MAX_TRACEBACK` characters, saying how many frames were left out."""
    kind, value, tb = exc_info
    frames = sum(1 for _ in traceback.walk_tb(tb))
    text = "".join(traceback.format_exception(kind, value, tb, limit=-MAX_FRAMES))
    if frames > MAX_FRAMES:
        text = f"[{frames - MAX_FRAMES} outer frames cut]\n{text}"
    return clip(text.rstrip("\n"), MAX_TRACEBACK)


def _exc_info(record: logging.LogRecord) -> ExcInfo | None:
    info = record.exc_info
    if not info or info[0] is None or info[1] is None:
        return None
    return info[0], info[1], info[2]


def _timestamp(record: logging.LogRecord) -> str:
    seconds = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
    return f"{seconds}.{int(record.msecs):03d}Z"


class JsonFormatter(logging.Formatter):
    """``{"ts", "level", "logger", "msg", ...fields, "traceback"?}`` on one line, each part
    bounded (:data:`MAX_MESSAGE`, :func:`bounded_fields`, :func:`bounded_traceback`)."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": _timestamp(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": clip(record.getMessage(), MAX_MESSAGE),
        }
        entry.update(bounded_fields(record))
        exc_info = _exc_info(record)
        if exc_info is not None:
            entry["traceback"] = bounded_traceback(exc_info)
        # Names and messages from the API reach an admin's terminal through `kubectl logs`:
        # no control character, bidi override or lone surrogate leaves here raw.
        return escape_json(json.dumps(entry, default=str, ensure_ascii=False))


class TextFormatter(logging.Formatter):
    """``ts level logger "msg" key=value ...`` for humans at a terminal (bounded as
    :class:`JsonFormatter` bounds its lines)."""

    def format(self, record: logging.LogRecord) -> str:
        parts = [
            _timestamp(record),
            record.levelname.lower(),
            record.name,
            json.dumps(clip(record.getMessage(), MAX_MESSAGE)),
        ]
        for key, value in bounded_fields(record).items():
            plain = isinstance(value, str) and value and " " not in value and is_clean(value)
            parts.append(f"{key}={value if plain else json.dumps(value, default=str)}")
        line = " ".join(parts)
        exc_info = _exc_info(record)
        if exc_info is not None:
            line += "\n" + clean_lines(bounded_traceback(exc_info))
        return line


def configure(fmt: str = "json", level: str = "info", stream: TextIO | None = None) -> None:
    """Send all logging to ``stream`` (stderr) in ``fmt`` ("json" or "text") at ``level``."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # No line shows the thread or the process, so records need not look them up (the
    # logging HOWTO's "Optimization" flags): a third of a record's cost, measured, in the
    # controller, which logs a few lines for every pod it schedules.
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    # The Kubernetes client logs every HTTP request at DEBUG; keep it to warnings.
    logging.getLogger("urllib3").setLevel(logging.WARNING)
    logging.getLogger("kubernetes").setLevel(logging.WARNING)
