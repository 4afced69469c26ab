"""The reference suite's result: per-spec outcomes from ginkgo's JUnit report, the
exclusion file, the table printed at the end and the exit code.

Exclusion file (``REFERENCE_EXCLUDE=FILE``): one spec a line, ``SPEC TEXT | REASON``.
SPEC TEXT is a part of the spec's full name (``Test GPU allocation should ...``); a
failed spec it matches does not fail the run, and the table shows the reason. Blank
lines and lines starting with ``#`` are ignored; a line without a reason is an error.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

PASSED, FAILED, SKIPPED = "passed", "failed", "skipped"


class ReportError(ValueError):
    """The JUnit report or the exclusion file cannot be used; the message says where."""


@dataclass(frozen=True)
class SpecResult:
    """One spec (or a failed suite node such as ``[BeforeSuite]``)."""

    name: str
    status: str  # PASSED, FAILED or SKIPPED
    seconds: float
    message: str = ""


@dataclass(frozen=True)
class Exclusion:
    text: str
    reason: str


def read_junit(path: Path) -> list[SpecResult]:
    """The specs of ginkgo's JUnit report, in report order.

    ``[It]`` test cases are the specs; other nodes (``[BeforeSuite]``, ...) are listed
    only when they failed, since then no spec result can be trusted.
    """
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as err:
        raise ReportError(f"JUnit report {path}: {err}") from err
    results = []
    for case in root.iter("testcase"):
        status = _status_of(case)
        name = case.get("name", "").strip()
        if not name.startswith("[It]") and status != FAILED:
            continue
        results.append(
            SpecResult(
                name=name.removeprefix("[It]").strip(),
                status=status,
                seconds=float(case.get("time") or 0.0),
                message=_failure_message(case),
            )
        )
    return results


def _status_of(case: ET.Element) -> str:
    # ginkgo writes status="passed|failed|skipped|pending|panicked|interrupted|timedout|aborted".
    status = case.get("status", "")
    if status == PASSED:
        return PASSED
    if status in ("skipped", "pending"):
        return SKIPPED
    if status:
        return FAILED
    if case.find("failure") is not None or case.find("error") is not None:
        return FAILED
    return SKIPPED if case.find("skipped") is not None else PASSED


def _failure_message(case: ET.Element) -> str:
    for tag in ("failure", "error"):
        found = case.find(tag)
        if found is not None:
            return (found.get("message") or found.text or "").strip()
    return ""


def read_exclusions(path: Path) -> list[Exclusion]:
    """The entries of an exclusion file (format in the module docstring)."""
    try:
        lines = path.read_text().splitlines()
    except OSError as err:
        raise ReportError(f"exclusion file {path}: {err.strerror}") from err
    entries = []
    for number, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        text, sep, reason = line.partition("|")
        if not sep or not text.strip() or not reason.strip():
            raise ReportError(
                f"exclusion file {path}, line {number}: expected 'SPEC TEXT | REASON', got {line!r}"
            )
        entries.append(Exclusion(text.strip(), reason.strip()))
    return entries


def excluded_reason(spec: SpecResult, exclusions: list[Exclusion]) -> str | None:
    """The reason of the first exclusion whose text is part of the spec's name."""
    return next((e.reason for e in exclusions if e.text in spec.name), None)


def render(results: list[SpecResult], exclusions: list[Exclusion]) -> tuple[str, int]:
    """The table (spec, result, seconds, note; specs sorted by name, so that two runs
    line up whatever order the parallel processes finished in) with a total line, and
    the exit code: 1 when a spec failed that no exclusion names, or when there are no
    results."""
    width = max([len(r.name) for r in results] + [4])
    lines = [f"{'SPEC':<{width}}  {'RESULT':<8} {'SECONDS':>8}  NOTE"]
    counts = {PASSED: 0, FAILED: 0, SKIPPED: 0}
    unexcused = 0
    for r in sorted(results, key=lambda r: r.name):
        counts[r.status] += 1
        note = ""
        if r.status == FAILED:
            reason = excluded_reason(r, exclusions)
            if reason is None:
                unexcused += 1
                note = _first_line(r.message)
            else:
                note = f"excluded: {reason}"
        lines.append(f"{r.name:<{width}}  {r.status:<8} {r.seconds:>8.1f}  {note}".rstrip())
    excused = counts[FAILED] - unexcused
    lines.append(
        f"TOTAL {len(results)}: {counts[PASSED]} passed, {counts[FAILED]} failed "
        f"({excused} excluded), {counts[SKIPPED]} skipped"
    )
    return "\n".join(lines), 1 if unexcused or not results else 0


def _first_line(text: str, limit: int = 100) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."
