"""One logging path: kubeapi's stdlib ``extra`` fields and bound fields print the same way."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from drakit.kubeapi.errors import Conflict
from drakit.kubeapi.retry import Backoff, retry_on_conflict
from drakit.telemetry.logs import configure, get_logger


@pytest.fixture
def log_stream() -> Iterator[io.StringIO]:
    """The node plugin's log configuration (``drakit node-plugin`` calls ``configure``)."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    flags = logging.logThreads, logging.logProcesses, logging.logMultiprocessing
    stream = io.StringIO()
    configure("json", "debug", stream)
    yield stream
    root.handlers[:] = handlers
    root.setLevel(level)
    logging.logThreads, logging.logProcesses, logging.logMultiprocessing = flags


def lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_kubeapi_retry_line_shows_its_attempt_in_the_node_plugin_logs(
    log_stream: io.StringIO,
) -> None:
    calls = []

    def write() -> str:
        calls.append(1)
        if len(calls) == 1:
            raise Conflict("stale resourceVersion", code=409)
        return "written"

    assert retry_on_conflict(write, backoff=Backoff(initial=0, jitter=0)) == "written"
    retry = next(e for e in lines(log_stream) if e["msg"] == "Write conflict, retrying")
    assert retry["attempt"] == 1
    assert retry["logger"] == "drakit.kubeapi.retry"


def test_bound_and_call_fields_are_both_in_the_line(log_stream: io.StringIO) -> None:
    get_logger("drakit.test").bind(request_id="7").info("Prepared claim", claim_uid="u1")
    (entry,) = lines(log_stream)
    assert entry["request_id"] == "7" and entry["claim_uid"] == "u1"


def test_a_field_named_like_a_record_attribute_is_kept_not_a_crash(
    log_stream: io.StringIO,
) -> None:
    get_logger("drakit.test").info("Named thing", name="gpu-0")
    (entry,) = lines(log_stream)
    assert entry["name_"] == "gpu-0" and entry["logger"] == "drakit.test"


def test_a_warning_carries_the_traceback_only_when_asked(log_stream: io.StringIO) -> None:
    log = get_logger("drakit.test")
    try:
        raise KeyError("gpu-9")
    except KeyError:
        log.warning("Sync failed, will retry", exc_info=True, key="ns/a")
        log.warning("Sync failed, will retry", key="ns/b")
    with_traceback, without = lines(log_stream)
    assert with_traceback["key"] == "ns/a" and "KeyError: 'gpu-9'" in with_traceback["traceback"]
    assert without["key"] == "ns/b" and "traceback" not in without


def test_a_keyword_field_and_the_same_stdlib_extra_field_print_the_same_line(
    log_stream: io.StringIO,
) -> None:
    logging.getLogger("drakit.kubeapi.events").info("Event recorded", extra={"reason": "Ok"})
    get_logger("drakit.kubeapi.events").info("Event recorded", reason="Ok")
    stdlib, keyword = lines(log_stream)
    assert {**stdlib, "ts": ""} == {**keyword, "ts": ""}


def test_text_format_prints_the_extra_fields_as_key_value() -> None:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    stream = io.StringIO()
    try:
        configure("text", "info", stream)
        logging.getLogger("drakit.kubeapi.informer").info("Watch expired", extra={"cause": "410"})
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
    assert '"Watch expired" cause=410' in stream.getvalue()


def _descend(claim: dict[str, object], depth: int) -> None:
    """A recursive walk over a deep claim that fails at the bottom (two alternating frames,
    so Python's repeated-line folding does not shorten the traceback)."""
    if depth == 0:
        raise ValueError(f"bad claim: {json.dumps(claim)[:50_000]}")
    _descend_more(claim, depth - 1)


def _descend_more(claim: dict[str, object], depth: int) -> None:
    _descend(claim, depth)


def _deep_claim(depth: int) -> dict[str, object]:
    claim: dict[str, object] = {"name": "leaf"}
    for i in range(depth):
        claim = {"name": f"level-{i}", "child": claim}
    return claim


@pytest.mark.parametrize("fmt", ["json", "text"])
def test_a_handler_failure_on_a_deep_claim_logs_a_bounded_line_saying_what_was_cut(
    fmt: str,
) -> None:
    """Issue 30: one failure on a deep claim logged a single line of about 200 KB."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    stream = io.StringIO()
    configure(fmt, "debug", stream)
    try:
        claim = _deep_claim(100)
        try:
            _descend(claim, 200)
        except ValueError:
            get_logger("drakit.test").exception(
                "Handler failed: " + "x" * 50_000,
                claim=claim,
                note="y" * 50_000,
                **{f"field{i}": "z" * 900 for i in range(20)},
            )
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
    text = stream.getvalue()
    assert len(text) <= 16 * 1024
    assert "characters cut]" in text
    assert "outer frames cut]" in text
    assert "bad claim" in text  # the innermost frames and the error itself are kept
    if fmt == "json":
        (line,) = lines(stream)
        assert line["msg"].startswith("Handler failed: xxx")  # type: ignore[union-attr]
        assert line["fields_cut"] > 0  # type: ignore[operator]
        assert "_descend" in line["traceback"]  # type: ignore[operator]


def test_small_lines_are_written_whole(log_stream: io.StringIO) -> None:
    get_logger("drakit.test").info("Prepared claim", claim={"name": "c"}, devices=3)
    (line,) = lines(log_stream)
    assert line["msg"] == "Prepared claim"
    assert line["claim"] == {"name": "c"}
    assert line["devices"] == 3


def test_configured_records_skip_the_thread_and_process_lookups_no_line_shows(
    log_stream: io.StringIO,
) -> None:
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    keep = Keep()
    logging.getLogger().addHandler(keep)
    logging.getLogger("drakit.controller.scheduler").info("Bound pod", extra={"node": "n1"})
    assert records and records[0].threadName is None and records[0].process is None
    assert lines(log_stream)[-1]["node"] == "n1"


HOSTILE_LOG_TEXT = "c\x1b]0;owned\x07\x9b2J\u202egnp\x85\x7f\U000e0041\ud800\r\nfake line"


def _raw_controls(text: str) -> list[str]:
    import unicodedata  # noqa: PLC0415

    return [
        hex(ord(c))
        for c in text
        if c != "\n" and unicodedata.category(c) in ("Cc", "Cf", "Cs", "Zl", "Zp")
    ]


def test_a_json_line_shows_no_control_character_and_keeps_the_value(
    log_stream: io.StringIO,
) -> None:
    """Claim names, messages and errors from the API reach `kubectl logs`: C1 controls, DEL,
    bidi overrides, tags and lone surrogates are escaped like JSON escapes C0, and the line
    still decodes to exactly what was logged."""
    get_logger("drakit.test").warning(HOSTILE_LOG_TEXT, claim=HOSTILE_LOG_TEXT)
    text = log_stream.getvalue()
    assert _raw_controls(text) == []
    assert text.count("\n") == 1
    (entry,) = lines(log_stream)
    assert entry["msg"] == entry["claim"] == HOSTILE_LOG_TEXT


def test_a_text_line_shows_no_control_character() -> None:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    stream = io.StringIO()
    configure("text", "debug", stream)
    try:
        log = get_logger("drakit.test")
        log.warning(HOSTILE_LOG_TEXT, claim=HOSTILE_LOG_TEXT.replace(" ", "-"))
        try:
            raise ValueError(HOSTILE_LOG_TEXT)
        except ValueError:
            log.exception("failed")
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
    assert _raw_controls(stream.getvalue()) == []
