"""Every contract case gives the outcome (and devices) Kubernetes 1.37 gives."""

from __future__ import annotations

from typing import Any

import pytest
from alloc_contract_check import mismatches
from contract_cases import CASES

from drakit.allocator.scenario import run_scenario


def test_contract_table_has_at_least_150_named_cases() -> None:
    assert len(CASES) >= 150
    assert len({c["name"] for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_contract_case(case: dict[str, Any]) -> None:
    output = run_scenario(case)
    assert mismatches(case, output) == []


def test_error_outcome_carries_a_message() -> None:
    errors = [c for c in CASES if c["expect"]["outcome"] == "error"]
    for case in errors:
        output = run_scenario(case)
        assert output["error"], case["name"]
