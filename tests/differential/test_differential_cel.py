"""Generated CEL cases (``cel_cases.py``): drakit must answer every one like the Kubernetes
1.37 reference allocator, on the outcome class, on whether a CEL error is a compile or a
runtime error, and on the results."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cel_cases import FAMILIES, cel_cases
from differential_harness import Oracle, PythonRunner, difference, run_python

CASES = dict(cel_cases())


def cel_error_class(answer: dict[str, object]) -> str | None:
    """'compile' or 'runtime' for a CEL error outcome, else None."""
    text = str(answer.get("error", ""))
    if answer.get("outcome") != "error":
        return None
    if "CEL compile error" in text:
        return "compile"
    if "CEL runtime error" in text:
        return "runtime"
    return "other"


@pytest.mark.parametrize("family", list(FAMILIES))
def test_generated_cel_cases_match_reference(
    family: str, oracle: Oracle, run_scenario: PythonRunner
) -> None:
    labels = [label for label in CASES if label.split("#")[0] == family]
    references = oracle.run_batch([CASES[label] for label in labels])
    problems = []
    for label, reference in zip(labels, references, strict=True):
        python = run_python(run_scenario, CASES[label])
        expression = CASES[label]["claims"][0]["spec"]["devices"]["requests"][0]["exactly"][
            "selectors"
        ][0]["cel"]["expression"]
        reason = difference(reference, python)
        classes = (cel_error_class(reference), cel_error_class(python))
        if reason is None and classes[0] != classes[1]:
            reason = f"error class: reference {classes[0]}, python {classes[1]}"
        if reason is not None:
            problems.append(
                f"{label}: {expression[:120]}\n  {reason}\n"
                f"  reference: {str(reference.get('error', ''))[:300]}\n"
                f"  python:    {str(python.get('error', ''))[:300]}"
            )
    assert not problems, f"{len(problems)} of {len(labels)} differ:\n" + "\n".join(problems)


CASES_DIR = Path(__file__).parent / "cases"


def test_format_with_a_string_for_a_decimal_clause_fails_the_allocation_like_kubernetes(
    oracle: Oracle, run_scenario: PythonRunner
) -> None:
    """Issue 30: ``"%s-%d".format([model, index])`` with a string ``index`` is a runtime
    error in Kubernetes, which fails the allocation; drakit used to format it anyway."""
    scenario = json.loads((CASES_DIR / "cel-format-decimal.json").read_text())
    (reference,) = oracle.run_batch([scenario])
    python = run_python(run_scenario, scenario)
    assert cel_error_class(reference) == "runtime"
    assert difference(reference, python) is None
    assert cel_error_class(python) == "runtime"
    assert "decimal clause can only be used on integers, was given string" in python["error"]
