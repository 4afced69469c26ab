"""The reference run's verdict: specs read from ginkgo's JUnit report, failures named in
the exclusion file do not fail the run, everything else does."""

from __future__ import annotations

from pathlib import Path

import pytest
import suite_report
from suite_report import FAILED, PASSED, SKIPPED, ReportError, SpecResult

# The shape ginkgo v2's --junit-report writes (trimmed).
JUNIT = """<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="4" disabled="0" errors="0" failures="1" time="100">
  <testsuite name="E2E Suite" tests="4" failures="1" errors="0" time="100">
    <testcase name="[BeforeSuite]" classname="E2E Suite" status="passed" time="0.1"></testcase>
    <testcase name="[It] Test GPU allocation should allocate 1 distinct GPU per pod"
              classname="E2E Suite" status="passed" time="21.5"></testcase>
    <testcase name="[It] Test GPU allocation should reject invalid opaque config"
              classname="E2E Suite" status="failed" time="180">
      <failure message="Failed to install helm release dra-x/dra-y&#10;more"
               type="failed">long</failure>
    </testcase>
    <testcase name="[It] Test GPU allocation should be skipped" classname="E2E Suite"
              status="skipped" time="0"><skipped message="skipped"/></testcase>
  </testsuite>
</testsuites>
"""


def _junit(tmp_path: Path) -> Path:
    path = tmp_path / "junit.xml"
    path.write_text(JUNIT)
    return path


def test_the_table_lists_specs_by_name_whatever_order_they_finished_in(tmp_path: Path) -> None:
    table, _ = suite_report.render(suite_report.read_junit(_junit(tmp_path)), [])
    rows = table.splitlines()[1:-1]
    assert [row.split("  ")[0] for row in rows] == [
        "Test GPU allocation should allocate 1 distinct GPU per pod",
        "Test GPU allocation should be skipped",
        "Test GPU allocation should reject invalid opaque config",
    ]


def test_specs_are_read_with_their_status_and_suite_nodes_that_passed_are_left_out(
    tmp_path: Path,
) -> None:
    results = suite_report.read_junit(_junit(tmp_path))
    assert [(r.name, r.status) for r in results] == [
        ("Test GPU allocation should allocate 1 distinct GPU per pod", PASSED),
        ("Test GPU allocation should reject invalid opaque config", FAILED),
        ("Test GPU allocation should be skipped", SKIPPED),
    ]
    assert results[1].message.startswith("Failed to install helm release")


def test_a_failed_before_suite_is_listed_as_a_failure(tmp_path: Path) -> None:
    junit = tmp_path / "junit.xml"
    junit.write_text(
        JUNIT.replace(
            'name="[BeforeSuite]" classname="E2E Suite" status="passed"',
            'name="[BeforeSuite]" classname="E2E Suite" status="failed"',
        )
    )
    names = [r.name for r in suite_report.read_junit(junit) if r.status == FAILED]
    assert names[0] == "[BeforeSuite]"


def test_an_unexcluded_failure_fails_the_run_and_shows_its_first_line(tmp_path: Path) -> None:
    table, code = suite_report.render(suite_report.read_junit(_junit(tmp_path)), [])
    assert code == 1
    assert "Failed to install helm release dra-x/dra-y" in table
    failed_row = next(line for line in table.splitlines() if " failed " in line)
    assert failed_row.endswith("Failed to install helm release dra-x/dra-y")
    assert table.splitlines()[-1] == "TOTAL 3: 1 passed, 1 failed (0 excluded), 1 skipped"


def test_an_excluded_failure_passes_the_run_and_shows_the_reason(tmp_path: Path) -> None:
    exclude = tmp_path / "exclude.txt"
    exclude.write_text("# why\n\nreject invalid opaque config | no cert-manager on this node\n")
    results = suite_report.read_junit(_junit(tmp_path))
    table, code = suite_report.render(results, suite_report.read_exclusions(exclude))
    assert code == 0
    assert "excluded: no cert-manager on this node" in table
    assert "(1 excluded)" in table


def test_no_results_fail_the_run() -> None:
    assert suite_report.render([], [])[1] == 1


def test_an_exclusion_line_without_a_reason_is_refused_with_its_line_number(
    tmp_path: Path,
) -> None:
    exclude = tmp_path / "exclude.txt"
    exclude.write_text("# comment\nshould allocate 1 distinct GPU per pod\n")
    with pytest.raises(ReportError, match=r"exclude.txt, line 2: expected 'SPEC TEXT \| REASON'"):
        suite_report.read_exclusions(exclude)


def test_an_unreadable_report_names_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "junit.xml"
    bad.write_text("<testsuites")
    with pytest.raises(ReportError, match=r"junit\.xml"):
        suite_report.read_junit(bad)


def test_an_exclusion_matches_any_part_of_the_spec_name() -> None:
    spec = SpecResult("Test GPU allocation should do X [Serial]", FAILED, 1.0)
    exclusions = [suite_report.Exclusion("do X", "reason")]
    assert suite_report.excluded_reason(spec, exclusions) == "reason"
    assert suite_report.excluded_reason(spec, [suite_report.Exclusion("do Y", "r")]) is None
